#include "common/preferred_sol.h"

namespace kerneleval {

const v1::SolFigure* PreferredSol(
    const google::protobuf::RepeatedPtrField<v1::SolFigure>& figures) {
  for (const v1::SolFigure& figure : figures) {
    if (figure.source() == v1::PEAK_SOURCE_DEVICE_ATTRIBUTES) return &figure;
  }
  return figures.empty() ? nullptr : &figures[0];
}

}  // namespace kerneleval
