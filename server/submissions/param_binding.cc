#include "server/submissions/param_binding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "server/submissions/abi_flags.h"
#include "server/submissions/source_rules.h"

namespace kerneleval::server::submissions {
namespace {

enum class ParamKind { kPointer, kInteger, kFloat, kAbi, kStruct, kNone };

ParamKind KindOf(v1::ParamSource source) {
  switch (source) {
    case v1::PARAM_SOURCE_HIDDEN_STATES:
    case v1::PARAM_SOURCE_RESIDUAL:
    case v1::PARAM_SOURCE_WEIGHT:
    case v1::PARAM_SOURCE_OUTPUT:
    case v1::PARAM_SOURCE_RESIDUAL_OUT:
    case v1::PARAM_SOURCE_SCRATCH:
    case v1::PARAM_SOURCE_PLAN_SCRATCH:
    case v1::PARAM_SOURCE_NULL:
      return ParamKind::kPointer;
    case v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE:
    case v1::PARAM_SOURCE_RESIDUAL_STRIDE:
    case v1::PARAM_SOURCE_OUTPUT_STRIDE:
    case v1::PARAM_SOURCE_RESIDUAL_OUT_STRIDE:
    case v1::PARAM_SOURCE_BATCH:
    case v1::PARAM_SOURCE_HIDDEN:
    case v1::PARAM_SOURCE_SM_COUNT:
    case v1::PARAM_SOURCE_INT:
      return ParamKind::kInteger;
    case v1::PARAM_SOURCE_EPS:
    case v1::PARAM_SOURCE_INV_HIDDEN:
    case v1::PARAM_SOURCE_FLOAT:
      return ParamKind::kFloat;
    case v1::PARAM_SOURCE_ABI_PARAMS:
      return ParamKind::kAbi;
    case v1::PARAM_SOURCE_STRUCT:
      return ParamKind::kStruct;
    default:
      return ParamKind::kNone;
  }
}

bool FitsInt32(std::int64_t v) {
  return v >= std::numeric_limits<std::int32_t>::min() &&
         v <= std::numeric_limits<std::int32_t>::max();
}

// "hidden", "scratch", ...: the contract's printed name (common/enum_names.h).
std::string SourceName(v1::ParamSource source) {
  return EnumShortName(*v1::ParamSource_descriptor(), source);
}

// "field.params[3] (n_cols)": where a parameter is, and its author's name where given.
std::string ParamField(const std::string& field, int j, const v1::KernelParam& p) {
  std::string at = absl::StrCat(field, ".params[", j, "]");
  if (!p.name().empty()) absl::StrAppend(&at, " (", Quote(p.name(), 64), ")");
  return at;
}

absl::Status CheckName(const std::string& name, const std::string& at) {
  if (name.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(at, ".name: at most 64 characters"));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".name: letters, digits and _ only (got ", Quote(name), ")"));
    }
  }
  return absl::OkStatus();
}

// The constants of a parameter or a struct field (`what`): int_value only where the source
// is int, float_value only where it is float, and finite.
template <typename Bound>
absl::Status CheckConstants(const Bound& b, const char* what, const std::string& at) {
  const v1::ParamSource source = b.source();
  if (source != v1::PARAM_SOURCE_INT && b.int_value() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(at, ".int_value: only an int ", what,
                                                   " takes one (source ", SourceName(source), ")"));
  }
  if (source != v1::PARAM_SOURCE_FLOAT && b.float_value() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(at, ".float_value: only a float ", what,
                                                   " takes one (source ", SourceName(source), ")"));
  }
  if (source == v1::PARAM_SOURCE_FLOAT && !std::isfinite(b.float_value())) {
    return absl::InvalidArgumentError(absl::StrCat(at, ".float_value: not a finite number"));
  }
  return absl::OkStatus();
}

absl::Status CheckField(const v1::StructField& f, bool plan_scratch, const std::string& at) {
  const v1::ParamSource source = f.source();
  const ParamKind kind = KindOf(source);
  if (kind != ParamKind::kPointer && kind != ParamKind::kInteger && kind != ParamKind::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".source: ", kind == ParamKind::kNone ? std::to_string(source) : SourceName(source),
        " cannot be a struct's field; give a tensor's pointer, plan_scratch, null, an integer "
        "or a float"));
  }
  if (source == v1::PARAM_SOURCE_SCRATCH) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".source: scratch cannot be a struct's field; bind it as a parameter of its own"));
  }
  if (source == v1::PARAM_SOURCE_PLAN_SCRATCH && !plan_scratch) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".source: plan_scratch needs a plan with needs_scratch set"));
  }
  const bool pointer = kind == ParamKind::kPointer;
  if (pointer ? f.bytes() != 0 && f.bytes() != 8 : f.bytes() != 4 && f.bytes() != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".bytes: ", f.bytes(), "; ", SourceName(source), " takes ",
                     pointer                       ? "0 or 8 (a pointer)"
                     : kind == ParamKind::kInteger ? "4 (i32) or 8 (i64)"
                                                   : "4 (f32) or 8 (f64)"));
  }
  if (absl::Status s = CheckConstants(f, "field", at); !s.ok()) return s;
  if (source == v1::PARAM_SOURCE_INT && f.bytes() == 4 && !FitsInt32(f.int_value())) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".int_value: ", f.int_value(), " does not fit the 4-byte field"));
  }
  return absl::OkStatus();
}

absl::Status CheckStructFields(const v1::KernelParam& p, bool plan_scratch, const std::string& at) {
  if (p.fields().empty() || p.fields_size() > kMaxStructFields) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".fields: ", p.fields_size(), " fields; a struct has 1 to ", kMaxStructFields));
  }
  for (int f = 0; f < p.fields_size(); ++f) {
    const std::string field_at = absl::StrCat(at, ".fields[", f, "]");
    if (absl::Status s = CheckField(p.fields(f), plan_scratch, field_at); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckParam(const v1::KernelParam& p, bool plan_scratch, const std::string& at) {
  if (absl::Status s = CheckName(p.name(), at); !s.ok()) return s;
  const v1::ParamSource source = p.source();
  if (KindOf(source) == ParamKind::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".source: ", static_cast<int>(source),
                     " is no value the service supplies; give one of hidden_states, residual, "
                     "weight, output, residual_out, a *_stride, batch, hidden, eps, inv_hidden, "
                     "sm_count, scratch, plan_scratch, null, int, float, abi_params, "
                     "struct"));
  }
  if (absl::Status s = CheckConstants(p, "parameter", at); !s.ok()) return s;
  if (source == v1::PARAM_SOURCE_SCRATCH) {
    if (p.scratch_bytes() == 0 || p.scratch_bytes() > kMaxScratchParamBytes) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".scratch_bytes: ", p.scratch_bytes(),
                                                     " must be from 1 to ", kMaxScratchParamBytes,
                                                     " (64 MiB)"));
    }
  } else if (p.scratch_bytes() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".scratch_bytes: only a scratch parameter takes a size (source ",
                     SourceName(source), ")"));
  }
  if (source == v1::PARAM_SOURCE_PLAN_SCRATCH && !plan_scratch) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ".source: plan_scratch needs a plan with needs_scratch set"));
  }
  if (source == v1::PARAM_SOURCE_STRUCT) return CheckStructFields(p, plan_scratch, at);
  if (!p.fields().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".fields: only a struct parameter takes fields (source ", SourceName(source), ")"));
  }
  return absl::OkStatus();
}

// An integer into a 4- or 8-byte parameter; false where it does not fit.
bool PutInteger(std::int64_t value, std::size_t bytes, std::uint64_t* slot) {
  if (bytes == 4) {
    if (!FitsInt32(value)) return false;
    const std::int32_t v = static_cast<std::int32_t>(value);
    std::memcpy(slot, &v, sizeof v);
  } else {
    std::memcpy(slot, &value, sizeof value);
  }
  return true;
}

// A float into a 4-byte (fp32) or 8-byte (fp64) parameter; false where fp32 overflows.
bool PutFloat(double value, std::size_t bytes, std::uint64_t* slot) {
  if (bytes == 4) {
    const float v = static_cast<float>(value);
    if (!std::isfinite(v)) return false;
    std::memcpy(slot, &v, sizeof v);
  } else {
    std::memcpy(slot, &value, sizeof value);
  }
  return true;
}

// A parameter's or a struct field's value (both have source, int_value, float_value).
template <typename Bound>
std::int64_t IntegerOf(const Bound& p, const CallValues& call) {
  const FusedAddRmsNormArgs& a = *call.args;
  const bool residual_out = WritesResidual(a.mode);
  switch (p.source()) {
    case v1::PARAM_SOURCE_HIDDEN_STATES_STRIDE:
    case v1::PARAM_SOURCE_RESIDUAL_STRIDE:
    case v1::PARAM_SOURCE_OUTPUT_STRIDE:
      return a.hidden;  // rows are contiguous today, as the struct ABI's strides say
    case v1::PARAM_SOURCE_RESIDUAL_OUT_STRIDE:
      return residual_out ? a.hidden : 0;
    case v1::PARAM_SOURCE_BATCH:
      return a.batch;
    case v1::PARAM_SOURCE_HIDDEN:
      return a.hidden;
    case v1::PARAM_SOURCE_SM_COUNT:
      return call.sm_count;
    default:
      return p.int_value();
  }
}

template <typename Bound>
double FloatOf(const Bound& p, const CallValues& call) {
  switch (p.source()) {
    case v1::PARAM_SOURCE_EPS:
      return call.args->eps;
    case v1::PARAM_SOURCE_INV_HIDDEN:
      // As the built-in's launcher computes it (kernels/cuda/fused_add_rmsnorm.cu).
      return 1.0f / static_cast<float>(call.args->hidden);
    default:
      return p.float_value();
  }
}

// The pointer a pointer source stands for; `scratch` is the next scratch buffer's index.
template <typename Bound>
const void* PointerOf(const Bound& p, const CallValues& call, std::size_t* scratch) {
  const FusedAddRmsNormArgs& a = *call.args;
  switch (p.source()) {
    case v1::PARAM_SOURCE_HIDDEN_STATES:
      return a.hidden_states;
    case v1::PARAM_SOURCE_RESIDUAL:
      return a.residual;
    case v1::PARAM_SOURCE_WEIGHT:
      return a.weight;
    case v1::PARAM_SOURCE_OUTPUT:
      return a.output;
    case v1::PARAM_SOURCE_RESIDUAL_OUT:
      return WritesResidual(a.mode) ? a.residual_out : nullptr;
    case v1::PARAM_SOURCE_PLAN_SCRATCH:
      return call.plan_scratch;
    case v1::PARAM_SOURCE_SCRATCH: {
      const std::size_t i = (*scratch)++;
      return call.scratch_buffers != nullptr && i < call.scratch_buffers->size()
                 ? (*call.scratch_buffers)[i]
                 : nullptr;
    }
    default:
      return nullptr;
  }
}

// The fields of struct parameter `p` into `bytes`, laid out as LayoutOf says (computed here
// again, without allocating, since this runs for every launch); padding is zeroed so that the
// block is deterministic. False where a value does not fit its field or the struct is not
// `size` bytes.
bool PutStruct(const v1::KernelParam& p, const CallValues& call, std::size_t size,
               unsigned char* bytes) {
  std::memset(bytes, 0, size);
  std::size_t offset = 0;
  std::size_t align = 1;
  std::size_t no_scratch = 0;
  for (const v1::StructField& field : p.fields()) {
    const ParamKind kind = KindOf(field.source());
    const std::size_t field_bytes = kind == ParamKind::kPointer ? 8 : field.bytes();
    if (field_bytes != 4 && field_bytes != 8) return false;
    offset = (offset + field_bytes - 1) / field_bytes * field_bytes;
    if (offset + field_bytes > size) return false;
    std::uint64_t word = 0;
    bool ok = true;
    if (kind == ParamKind::kPointer) {
      const void* ptr = PointerOf(field, call, &no_scratch);
      std::memcpy(&word, &ptr, sizeof ptr);
    } else if (kind == ParamKind::kInteger) {
      ok = PutInteger(IntegerOf(field, call), field_bytes, &word);
    } else if (kind == ParamKind::kFloat) {
      ok = PutFloat(FloatOf(field, call), field_bytes, &word);
    } else {
      ok = false;
    }
    if (!ok) return false;
    std::memcpy(bytes + offset, &word, field_bytes);
    offset += field_bytes;
    align = std::max(align, field_bytes);
  }
  return (offset + align - 1) / align * align == size;
}

}  // namespace

StructLayout LayoutOf(const v1::KernelParam& p) {
  StructLayout layout;
  std::size_t align = 1;
  for (const v1::StructField& f : p.fields()) {
    const std::size_t size = KindOf(f.source()) == ParamKind::kPointer ? 8 : f.bytes();
    if (size == 0) continue;  // refused by the validation; never laid out
    layout.bytes = (layout.bytes + size - 1) / size * size;
    layout.offsets.push_back(layout.bytes);
    layout.field_bytes.push_back(size);
    layout.bytes += size;
    align = std::max(align, size);
  }
  layout.bytes = (layout.bytes + align - 1) / align * align;
  return layout;
}

absl::Status ValidateParamBinding(const v1::LaunchPlan& plan, const std::string& field) {
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const v1::KernelLaunch& k = plan.kernels(i);
    const std::string at = absl::StrCat(field, ".kernels[", i, "]");
    if (k.params_size() > kMaxKernelParams) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".params: ", k.params_size(),
                                                     " parameters; at most ", kMaxKernelParams));
    }
    int abi = 0;
    int structs = 0;
    for (int j = 0; j < k.params_size(); ++j) {
      const std::string param_at = ParamField(at, j, k.params(j));
      if (absl::Status s = CheckParam(k.params(j), plan.needs_scratch(), param_at); !s.ok()) {
        return s;
      }
      if (k.params(j).source() == v1::PARAM_SOURCE_ABI_PARAMS && ++abi > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(param_at, ".source: abi_params may be bound once per kernel"));
      }
      if (k.params(j).source() == v1::PARAM_SOURCE_STRUCT && ++structs > kMaxStructParams) {
        return absl::InvalidArgumentError(absl::StrCat(
            param_at, ".source: at most ", kMaxStructParams, " struct parameters per kernel"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckParamSizes(const v1::KernelLaunch& kernel,
                             const std::vector<long long>& param_bytes, const std::string& field) {
  if (kernel.params().empty()) {
    const std::string at = absl::StrCat(field, ".entry");
    if (param_bytes.size() == 1 && OldAbiVersion(param_bytes[0]) != 0) {
      return absl::InvalidArgumentError(
          OldAbiRefusal(at, kernel.entry(), OldAbiVersion(param_bytes[0])));
    }
    if (param_bytes.size() != 1 || param_bytes[0] != KERNELEVAL_PARAMS_BYTES) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": ", Quote(kernel.entry()), " takes ", param_bytes.size(),
                       " parameter(s); the ABI passes exactly one, kerneleval_params by value (",
                       KERNELEVAL_PARAMS_BYTES,
                       " bytes), unless the plan lists the kernel's own parameters (params)"));
    }
    return absl::OkStatus();
  }
  if (static_cast<std::size_t>(kernel.params_size()) != param_bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".params: ", kernel.params_size(),
                                                   " bound; ", Quote(kernel.entry()), " takes ",
                                                   param_bytes.size(), " parameter(s)"));
  }
  for (int j = 0; j < kernel.params_size(); ++j) {
    const v1::KernelParam& p = kernel.params(j);
    const long long bytes = param_bytes[j];
    bool fits = false;
    std::string want;
    switch (KindOf(p.source())) {
      case ParamKind::kPointer:
        fits = bytes == 8;
        want = "a pointer, 8 bytes";
        break;
      case ParamKind::kInteger:
        fits = bytes == 4 || bytes == 8;
        want = "an integer, 4 or 8 bytes";
        break;
      case ParamKind::kFloat:
        fits = bytes == 4 || bytes == 8;
        want = "a float, 4 or 8 bytes";
        break;
      case ParamKind::kAbi:
        fits = bytes == KERNELEVAL_PARAMS_BYTES;
        want = absl::StrCat("kerneleval_params, ", KERNELEVAL_PARAMS_BYTES, " bytes");
        break;
      case ParamKind::kStruct: {
        const std::size_t struct_bytes = LayoutOf(p).bytes;
        fits = bytes >= 0 && static_cast<std::size_t>(bytes) == struct_bytes;
        want = absl::StrCat("a struct of ", p.fields_size(), " field(s), ", struct_bytes, " bytes");
        break;
      }
      case ParamKind::kNone:
        want = "a value the service supplies";
        break;
    }
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat(ParamField(field, j, p), ": bound to ", SourceName(p.source()), " (", want,
                       "), but the entry's parameter ", j, " has ", bytes, " bytes"));
    }
    if (p.source() == v1::PARAM_SOURCE_INT && bytes == 4 && !FitsInt32(p.int_value())) {
      return absl::InvalidArgumentError(absl::StrCat(ParamField(field, j, p),
                                                     ".int_value: ", p.int_value(),
                                                     " does not fit the 4-byte parameter"));
    }
  }
  return absl::OkStatus();
}

kerneleval_params MakeParams(const FusedAddRmsNormArgs& a, void* scratch,
                             std::int64_t scratch_bytes, int sm_count, int index, int count) {
  kerneleval_params p = {};
  p.hidden_states = a.hidden_states;
  p.residual = a.residual;
  p.weight = a.weight;
  p.output = a.output;
  p.residual_out = WritesResidual(a.mode) ? a.residual_out : nullptr;
  p.scratch = scratch;
  p.batch = a.batch;
  p.hidden = a.hidden;
  // Tensors are contiguous rows today; the strides let that change without a new ABI.
  p.hidden_states_stride = a.hidden;
  p.residual_stride = a.hidden;
  p.output_stride = a.hidden;
  p.residual_out_stride = p.residual_out != nullptr ? a.hidden : 0;
  p.scratch_bytes = scratch != nullptr ? scratch_bytes : 0;
  p.eps = a.eps;
  // As the built-in's launcher computes it (kernels/cuda/fused_add_rmsnorm.cu).
  p.inv_hidden = 1.0f / static_cast<float>(a.hidden);
  p.dtype = static_cast<int>(a.dtype);  // DType and the ABI share 0, 1, 2
  p.mode = static_cast<int>(a.mode);
  p.sm_count = sm_count;
  p.kernel_index = index;
  p.num_kernels = count;
  p.flags = AbiFlags(a, scratch);
  p.abi_version = KERNELEVAL_ABI_VERSION;
  return p;
}

bool BindParams(const v1::KernelLaunch& kernel, const std::vector<std::size_t>& param_bytes,
                const CallValues& call, ParamBlock* block) {
  const auto abi = [&] {
    return MakeParams(*call.args, call.plan_scratch, call.plan_scratch_bytes, call.sm_count,
                      call.kernel_index, call.kernel_count);
  };
  if (kernel.params().empty()) {
    block->abi_ = abi();
    block->pointers_[0] = &block->abi_;
    return true;
  }
  if (static_cast<std::size_t>(kernel.params_size()) != param_bytes.size() ||
      kernel.params_size() > kMaxKernelParams) {
    return false;
  }
  std::size_t scratch = 0;
  std::size_t structs = 0;
  for (int j = 0; j < kernel.params_size(); ++j) {
    const v1::KernelParam& p = kernel.params(j);
    std::uint64_t* slot = &block->scalars_[j];
    *slot = 0;
    block->pointers_[j] = slot;
    bool ok = true;
    switch (KindOf(p.source())) {
      case ParamKind::kPointer: {
        const void* ptr = PointerOf(p, call, &scratch);
        std::memcpy(slot, &ptr, sizeof ptr);
        break;
      }
      case ParamKind::kInteger:
        ok = PutInteger(IntegerOf(p, call), param_bytes[j], slot);
        break;
      case ParamKind::kFloat:
        ok = PutFloat(FloatOf(p, call), param_bytes[j], slot);
        break;
      case ParamKind::kAbi:
        block->abi_ = abi();
        block->pointers_[j] = &block->abi_;
        break;
      case ParamKind::kStruct: {
        if (structs >= block->structs_.size()) return false;
        unsigned char* bytes = reinterpret_cast<unsigned char*>(block->structs_[structs++].data());
        ok = param_bytes[j] <= sizeof block->structs_[0] &&
             PutStruct(p, call, param_bytes[j], bytes);
        block->pointers_[j] = bytes;
        break;
      }
      case ParamKind::kNone:
        ok = false;
        break;
    }
    if (!ok) return false;
  }
  return true;
}

std::vector<std::uint64_t> ScratchParamBytes(const v1::KernelLaunch& kernel) {
  std::vector<std::uint64_t> sizes;
  for (const v1::KernelParam& p : kernel.params()) {
    if (p.source() == v1::PARAM_SOURCE_SCRATCH) sizes.push_back(p.scratch_bytes());
  }
  return sizes;
}

}  // namespace kerneleval::server::submissions
