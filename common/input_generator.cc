#include "common/input_generator.h"

#include <cmath>
#include <cstring>

#include "common/parallel_ranges.h"
#include "kerneleval/kernels/half_types.h"

namespace kerneleval {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
constexpr std::uint64_t Mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The k-th output of splitmix64 seeded with `seed`, without walking the k - 1 before it.
constexpr std::uint64_t SplitMix64At(std::uint64_t seed, std::uint64_t k) {
  return Mix64(seed + (k + 1) * kGolden);
}

// Rounds to float with round-to-odd: a float with 24 significant bits rounded to odd, then
// rounded to nearest even at <= 11 bits, equals the double rounded once to those bits, so
// bf16 and fp16 values are not double-rounded.
float ToFloatRoundToOdd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || !std::isfinite(f)) return f;
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  // f is nonzero here (the magnitude it rounded up to, or d's truncation); one step down in
  // the bit pattern is one step toward zero, whatever the sign.
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --bits;
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

template <typename Store>
void FillNormal(std::size_t begin, std::size_t end, std::uint64_t seed, Store store) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInv2Pow53 = 1.0 / 9007199254740992.0;
  // Pair p makes elements 2p (cosine) and 2p + 1 (sine) from splitmix64 outputs 2p and 2p + 1.
  for (std::uint64_t pair = begin / 2; 2 * pair < end; ++pair) {
    // u1 in (0, 1] keeps log() finite; u2 in [0, 1). 53 bits each: a double's mantissa.
    const double u1 = static_cast<double>((SplitMix64At(seed, 2 * pair) >> 11) + 1) * kInv2Pow53;
    const double u2 = static_cast<double>(SplitMix64At(seed, 2 * pair + 1) >> 11) * kInv2Pow53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = kTwoPi * u2;
    if (2 * pair >= begin) store(2 * pair, r * std::cos(theta));
    if (2 * pair + 1 < end) store(2 * pair + 1, r * std::sin(theta));
  }
}

}  // namespace

void FillRandom(DType dtype, std::size_t begin, std::size_t end, std::uint64_t seed, void* out) {
  auto* bytes = static_cast<std::uint8_t*>(out);
  switch (dtype) {
    case DType::kBF16:
      FillNormal(begin, end, seed, [bytes](std::size_t i, double v) {
        const std::uint16_t h = FloatToBf16(ToFloatRoundToOdd(v));
        std::memcpy(bytes + 2 * i, &h, 2);
      });
      break;
    case DType::kFP16:
      FillNormal(begin, end, seed, [bytes](std::size_t i, double v) {
        const std::uint16_t h = FloatToFp16(ToFloatRoundToOdd(v));
        std::memcpy(bytes + 2 * i, &h, 2);
      });
      break;
    case DType::kFP32:
      FillNormal(begin, end, seed, [bytes](std::size_t i, double v) {
        const float f = static_cast<float>(v);
        std::memcpy(bytes + 4 * i, &f, 4);
      });
      break;
  }
}

std::vector<std::uint8_t> RandomTensor(DType dtype, std::size_t elements, std::uint64_t seed) {
  std::vector<std::uint8_t> bytes(elements * ElementSize(dtype));
  FillRandom(dtype, 0, elements, seed, bytes.data());
  return bytes;
}

std::vector<std::uint8_t> ParallelRandomTensor(DType dtype, std::size_t elements,
                                               std::uint64_t seed, std::size_t threads) {
  std::vector<std::uint8_t> bytes(elements * ElementSize(dtype));
  // Even ranges: FillRandom draws elements in pairs (Box-Muller).
  ParallelRanges(elements, threads, 2, [&](std::size_t begin, std::size_t end) {
    FillRandom(dtype, begin, end, seed, bytes.data());
  });
  return bytes;
}

std::uint64_t DeriveSeed(std::uint64_t base, std::string_view tensor_name,
                         std::uint64_t workload_index) {
  // FNV-1a over the name, then mixed with the base and the index; each step goes through the
  // bijective mixer so that nearby inputs give unrelated seeds.
  std::uint64_t name_hash = 0xcbf29ce484222325ull;
  for (char c : tensor_name) {
    name_hash ^= static_cast<unsigned char>(c);
    name_hash *= 0x100000001b3ull;
  }
  std::uint64_t h = Mix64(base + kGolden);
  h = Mix64(h ^ name_hash);
  return Mix64(h ^ (workload_index * kGolden));
}

}  // namespace kerneleval
