// Host-side bf16 / fp16 <-> fp32 conversion with round-to-nearest-even, bit-exact with the
// CUDA intrinsics __float2bfloat16_rn / __float2half_rn. NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kerneleval/kernels/fused_add_rmsnorm.h"

namespace kerneleval {

inline float Bf16ToFloat(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline std::uint16_t FloatToBf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float Fp16ToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline std::uint16_t FloatToFp16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs < 0x33000001u) return sign;             // < half the smallest subnormal
  std::int32_t exp = static_cast<std::int32_t>(abs >> 23) - 127 + 15;
  std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  int shift = 13;
  if (exp <= 0) {  // subnormal result
    shift = 14 - exp;
    exp = 0;
  }
  std::uint32_t rounded = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (rounded & 1u))) ++rounded;
  if (exp == 0) return sign | static_cast<std::uint16_t>(rounded);  // may carry into exp 1
  // rounded includes the implicit bit (0x400); a carry to 0x800 bumps the exponent.
  std::uint32_t result = (static_cast<std::uint32_t>(exp) << 10) + (rounded - 0x400u);
  return sign | static_cast<std::uint16_t>(result);
}

// Element i of a tensor of `dtype` as float.
inline float LoadAsFloat(DType dtype, const void* data, std::size_t i) {
  switch (dtype) {
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kFP16:
      return Fp16ToFloat(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kFP32:
      return static_cast<const float*>(data)[i];
  }
  return NAN;
}

inline void StoreFromFloat(DType dtype, void* data, std::size_t i, float v) {
  switch (dtype) {
    case DType::kBF16:
      static_cast<std::uint16_t*>(data)[i] = FloatToBf16(v);
      return;
    case DType::kFP16:
      static_cast<std::uint16_t*>(data)[i] = FloatToFp16(v);
      return;
    case DType::kFP32:
      static_cast<float*>(data)[i] = v;
      return;
  }
}

}  // namespace kerneleval
