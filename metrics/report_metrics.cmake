# The metric schema of a benchmark report (report_metrics.h): one writer that the server's
# /metrics and the CLI's Pushgateway push share. Protobuf and prometheus-cpp core only, no
# gRPC and no server code, so that the client links it without the engine.
add_library(kerneleval_report_metrics STATIC ${CMAKE_CURRENT_LIST_DIR}/report_metrics.cc)
target_include_directories(kerneleval_report_metrics PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(kerneleval_report_metrics
  PUBLIC kerneleval_common kerneleval_proto prometheus-cpp::core
  PRIVATE absl::strings)
