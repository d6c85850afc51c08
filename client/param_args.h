// `kerneleval submit --arg [K:]NAME=VALUE`: a kernel's own parameter list written on the
// command line, one flag per parameter in order (KernelLaunch.params of the contract).
//
// VALUE is the name of a value the service supplies, as the contract's ParamSource spells it
// without its prefix (hidden_states, residual, weight, output, residual_out, *_stride, batch,
// hidden, eps, inv_hidden, sm_count, plan_scratch, null, abi_params), or a constant or buffer
// with its argument: int:N, float:X, scratch:BYTES; or a struct passed by value, its fields
// each a VALUE with its size: struct(hidden_states, batch:i32, hidden:i32,
// hidden_states_stride:i64) (how CuTe DSL passes a tensor). NAME is the kernel's own name for the
// parameter (kept for messages) and may be left out with its `=`. K, a kernel's index in
// the plan, binds the flag to that kernel only; without it, to every kernel.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/v1/submissions.pb.h"

namespace kerneleval::client {

struct ParsedParamArg {
  int kernel = -1;  // -1: every kernel of the plan
  v1::KernelParam param;
};

// One --arg value. INVALID_ARGUMENT naming --arg, the value (bounded) and what is accepted.
absl::StatusOr<ParsedParamArg> ParseParamArg(const std::string& text);

// The printed names of every ParamSource a caller may bind, for help and errors.
std::vector<std::string> ParamSourceNames();

// "x_ptr=hidden_states, n_cols=hidden, eps=eps, s=scratch:4096": a binding as --arg writes it.
std::string FormatParamBinding(const v1::KernelLaunch& kernel);

}  // namespace kerneleval::client
