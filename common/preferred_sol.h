// Which SOL figure stands for a result when one number is shown (tables, CSV, history,
// the results store's sol_ratio, regression series): the one against the device-attribute
// peak when the server reports it, else the first. The Python client applies the same rule
// (client/python/src/kerneleval/_names.py preferred_sol).
#pragma once

#include "kerneleval/v1/kerneleval.pb.h"

namespace kerneleval {

// nullptr when there are no figures; the pointer is into `figures`.
const v1::SolFigure* PreferredSol(const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures);

}  // namespace kerneleval
