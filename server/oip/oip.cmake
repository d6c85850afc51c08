# The Open Inference Protocol (KServe v2) front, over the core: it runs Runs through the same
# path as KernelEval (core/run_call.h). Paths are relative to this file.
add_library(kerneleval_oip STATIC
  ${CMAKE_CURRENT_LIST_DIR}/infer_translation.cc
  ${CMAKE_CURRENT_LIST_DIR}/oip_models.cc
  ${CMAKE_CURRENT_LIST_DIR}/oip_service.cc)
target_link_libraries(kerneleval_oip PUBLIC kerneleval_core)
