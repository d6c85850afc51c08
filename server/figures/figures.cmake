# The figures of a measurement, needing no RPC, no threads and no other room of the server:
# statistics, SOL, correctness, the kernel breakdown. Paths are relative to this file so that
# the list can be included from anywhere.
add_library(kerneleval_engine_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/statistics.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernel_breakdown.cc
  ${CMAKE_CURRENT_LIST_DIR}/sol.cc
  ${CMAKE_CURRENT_LIST_DIR}/correctness.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernel_profile.cc
  ${CMAKE_CURRENT_LIST_DIR}/source_lines.cc)
target_include_directories(kerneleval_engine_core PUBLIC ${PROJECT_SOURCE_DIR})
# The toolkit's occupancy calculator, a header of host code: profiles' theoretical occupancy.
# Without the toolkit that figure is left unset (kernel_profile.cc).
find_path(KERNELEVAL_CUDA_OCCUPANCY_DIR cuda_occupancy.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
if(KERNELEVAL_CUDA_OCCUPANCY_DIR)
  target_include_directories(kerneleval_engine_core PRIVATE ${KERNELEVAL_CUDA_OCCUPANCY_DIR})
endif()
target_link_libraries(kerneleval_engine_core
  PUBLIC kerneleval_common kerneleval_proto kerneleval_kernels absl::status absl::statusor
         absl::strings)
