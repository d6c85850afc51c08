# The figures of a measurement, needing no RPC, no threads and no other room of the server:
# statistics, SOL, correctness, the kernel breakdown. Paths are relative to this file so that
# the list can be included from anywhere.
add_library(kerneleval_engine_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/statistics.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernel_breakdown.cc
  ${CMAKE_CURRENT_LIST_DIR}/sol.cc
  ${CMAKE_CURRENT_LIST_DIR}/correctness.cc)
target_include_directories(kerneleval_engine_core PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(kerneleval_engine_core
  PUBLIC kerneleval_common kerneleval_proto kerneleval_kernels absl::status absl::statusor
         absl::strings)
