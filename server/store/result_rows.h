// Conversions between stored rows and messages, and the export formats. Internal to the
// store.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerneleval/v1/results.pb.h"

namespace kerneleval::server::store {

// Proto <-> JSON with proto field names (what the database keeps).
std::string ToJson(const google::protobuf::Message& message);
absl::Status FromJson(const std::string& json, google::protobuf::Message* message);

std::string SamplesToJson(const std::vector<double>& samples);
std::vector<double> SamplesFromJson(const std::string& json);

// The sample set a comparison uses: the raw samples, else the stored quantiles.
std::vector<double> ComparableSamples(const v1::StoredResult& r);

// The SOL ratio the store ranks by: against the device-attribute peak, else the first figure.
double PrimarySolRatio(const v1::WorkloadResult& r);

// Flat rows (one JSON object per line, or CSV with a header) and FlashInfer-Bench traces.
std::string ExportRows(const std::vector<v1::StoredResult>& results, v1::ExportFormat format);

}  // namespace kerneleval::server::store
