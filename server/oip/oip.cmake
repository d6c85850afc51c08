# The Open Inference Protocol (KServe v2) front: part of the server library, because the
# server registers it and it runs Runs through the same path (run_call.h).
target_sources(kerneleval_server_lib PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/infer_translation.cc
  ${CMAKE_CURRENT_LIST_DIR}/oip_models.cc
  ${CMAKE_CURRENT_LIST_DIR}/oip_service.cc)
