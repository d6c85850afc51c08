// The pieces of the one evaluation path that a black-box test cannot isolate: the protocol
// crossing to a device host and the measurement crossing back unchanged, outputs checked under
// their own names against the fp64 reference, non-finite inputs named, and the shared tensor region
// surviving a failed resize.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <vector>

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "common/input_generator.h"
#include "kerneleval/kernels/half_types.h"
#include "server/core/request_validation.h"
#include "server/device/device_host_channel.h"
#include "server/device/device_host_reply.h"
#include "server/evaluation/evaluation.h"
#include "server/figures/correctness.h"

namespace kerneleval::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Sets every field of `m` (recursively) to a value other than its default; a repeated field
// gets two elements.
void SetEveryField(Message* m) {
  const Reflection* r = m->GetReflection();
  const auto* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    for (int n = 0; n < (f->is_repeated() ? 2 : 1); ++n) {
      const bool add = f->is_repeated();
      const int v = i + n;
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_BOOL:
          add ? r->AddBool(m, f, true) : r->SetBool(m, f, true);
          break;
        case FieldDescriptor::CPPTYPE_INT32:
          add ? r->AddInt32(m, f, 5 + v) : r->SetInt32(m, f, 5 + v);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          add ? r->AddInt64(m, f, 13 + v) : r->SetInt64(m, f, 13 + v);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          add ? r->AddUInt32(m, f, 7 + static_cast<std::uint32_t>(v))
              : r->SetUInt32(m, f, 7 + static_cast<std::uint32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          add ? r->AddUInt64(m, f, 11 + static_cast<std::uint64_t>(v))
              : r->SetUInt64(m, f, 11 + static_cast<std::uint64_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          add ? r->AddFloat(m, f, 0.5f + v) : r->SetFloat(m, f, 0.5f + v);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          add ? r->AddDouble(m, f, 0.25 + v) : r->SetDouble(m, f, 0.25 + v);
          break;
        case FieldDescriptor::CPPTYPE_STRING: {
          // A map's entries need keys of their own, or the second replaces the first.
          static int entries = 0;
          const std::string map_key =
              d->options().map_entry() ? std::to_string(entries++) : std::string();
          add ? r->AddString(m, f, f->name() + std::to_string(n))
              : r->SetString(m, f, f->name() + map_key);
          break;
        }
        case FieldDescriptor::CPPTYPE_ENUM: {
          // The last value: never the UNSPECIFIED default.
          const auto* last = f->enum_type()->value(f->enum_type()->value_count() - 1);
          add ? r->AddEnum(m, f, last) : r->SetEnum(m, f, last);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          SetEveryField(add ? r->AddMessage(m, f) : r->MutableMessage(m, f));
          break;
      }
    }
  }
}

// Every field of v1::Protocol that a backend reads survives Protocol -> MeasureOptions ->
// Protocol, the path a call takes to a device host; a field added to the contract but not
// to the pair fails here instead of being dropped silently on the GPU default path.
TEST(MeasureOptions, EveryBackendFieldOfTheProtocolCrossesToTheDeviceHost) {
  v1::Protocol p;
  SetEveryField(&p);
  p.set_cache(v1::CACHE_MODE_HOT);  // the last enum value of each, but a valid cache mode
  const v1::Protocol back = ToProtocol(ToMeasureOptions(p));
  // Not the backend's: the engine reads them (input seed, SOL peaks, the run's time cap).
  const std::vector<std::string> engine_only = {"seed", "measure_copy_bandwidth",
                                                "max_total_seconds"};
  const auto* d = p.GetDescriptor();
  v1::Protocol expected = p;
  for (const std::string& name : engine_only) {
    expected.GetReflection()->ClearField(&expected, d->FindFieldByName(name));
  }
  google::protobuf::util::MessageDifferencer differ;
  std::string differences;
  differ.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differ.Compare(expected, back)) << "not carried unchanged:\n" << differences;
}

// Every field of the device host's reply survives Measurement -> MeasureReply -> Measurement,
// the way a measurement comes back from a device host; a field added to the message but not
// to the conversions fails here.
TEST(MeasureReply, EveryFieldCrossesFromTheDeviceHostToTheServer) {
  internal::MeasureReply reply;
  SetEveryField(&reply);
  // An OK, healthy call: the status and health are the call's, not the measurement's.
  reply.mutable_status()->Clear();
  reply.set_healthy(true);
  const internal::MeasureReply back = ToMeasureReply(FromMeasureReply(reply), /*healthy=*/true);
  google::protobuf::util::MessageDifferencer differ;
  std::string differences;
  differ.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differ.Compare(reply, back)) << "not carried unchanged:\n" << differences;
}

// A failed call carries its status and the device's health, and no measurement.
TEST(MeasureReply, AFailedCallCarriesItsStatusAndHealth) {
  const internal::MeasureReply reply =
      ToMeasureReply(absl::InternalError("the device faulted"), /*healthy=*/false);
  EXPECT_FALSE(reply.healthy());
  EXPECT_EQ(FromProto(reply.status()), absl::InternalError("the device faulted"));
  EXPECT_EQ(reply.samples_seconds_size(), 0);
}

Problem SmallProblem(Mode mode) {
  Problem p;
  p.dtype = DType::kFP32;
  p.mode = mode;
  p.batch = 4;
  p.hidden = 8;
  return p;
}

struct Tensors {
  std::vector<std::uint8_t> x, r, w;
  HostInputs inputs() const { return {x.data(), r.data(), w.data()}; }
};

Tensors RandomInputs(const Problem& p) {
  return {RandomTensor(p.dtype, p.TensorElements(), 1),
          RandomTensor(p.dtype, p.TensorElements(), 2),
          RandomTensor(p.dtype, static_cast<std::size_t>(p.hidden), 3)};
}

// Outputs from the reference itself, rounded to fp32: correct by construction.
std::vector<float> Rounded(const std::vector<double>& v) { return {v.begin(), v.end()}; }

TEST(CheckOutputs, NamesTheResidualTensorWhenOnlyItIsWrong) {
  const Problem p = SmallProblem(Mode::kOutputAndResidual);
  const Tensors in = RandomInputs(p);
  const Reference ref = ComputeReference(p, in.inputs());
  std::vector<float> out = Rounded(ref.output);
  std::vector<float> res = Rounded(ref.residual_out);
  res[13] += 1.0f;  // row 1, column 5
  const v1::Correctness c =
      CheckOutputs(p, {out.data(), res.data()}, ref, DefaultTolerance(p.dtype));
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.mismatched(), 1u);
  EXPECT_EQ(c.detail().rfind("residual_out[13]", 0), 0u) << c.detail();
}

TEST(CheckOutputs, PassesTheReferenceItself) {
  const Problem p = SmallProblem(Mode::kOutputAndResidual);
  const Tensors in = RandomInputs(p);
  const Reference ref = ComputeReference(p, in.inputs());
  std::vector<float> out = Rounded(ref.output), res = Rounded(ref.residual_out);
  EXPECT_TRUE(CheckOutputs(p, {out.data(), res.data()}, ref, DefaultTolerance(p.dtype)).passed());
}

TEST(CheckOutputs, AnInfInputIsReportedWithItsRow) {
  const Problem p = SmallProblem(Mode::kOutput);
  Tensors in = RandomInputs(p);
  StoreFromFloat(p.dtype, in.r.data(), 2 * 8 + 3, INFINITY);  // residual row 2
  const Reference ref = ComputeReference(p, in.inputs());
  std::vector<float> out = Rounded(ref.output);
  const v1::Correctness c = CheckOutputs(p, {out.data(), nullptr}, ref, DefaultTolerance(p.dtype));
  EXPECT_FALSE(c.passed());
  EXPECT_TRUE(c.has_inf());
  EXPECT_NE(c.detail().find("input residual[2, 3] (row 2) is inf"), std::string::npos)
      << c.detail();
}

// Rows split over threads: the same reference, and the same first non-finite input, as one
// thread's scan (hidden_states before residual, then by element).
TEST(ComputeReference, AnyThreadCountGivesOneThreadsAnswer) {
  Problem p = SmallProblem(Mode::kOutputAndResidual);
  p.batch = 37;
  Tensors in = RandomInputs(p);
  const Reference one = ComputeReference(p, in.inputs(), 1);
  // An oracle of its own for one element: row 5, column 2, in fp64 from the inputs.
  {
    double sum_sq = 0;
    for (int c = 0; c < p.hidden; ++c) {
      const double s = LoadAsFloat(p.dtype, in.x.data(), 5 * 8 + c) +
                       static_cast<double>(LoadAsFloat(p.dtype, in.r.data(), 5 * 8 + c));
      sum_sq += s * s;
    }
    const double s = LoadAsFloat(p.dtype, in.x.data(), 5 * 8 + 2) +
                     static_cast<double>(LoadAsFloat(p.dtype, in.r.data(), 5 * 8 + 2));
    const double expected =
        s / std::sqrt(sum_sq / p.hidden + p.eps) * LoadAsFloat(p.dtype, in.w.data(), 2);
    // The definition rounds the sum to the dtype once (fp32 here): within its rounding.
    EXPECT_NEAR(one.output[5 * 8 + 2], expected, 1e-6 * std::fabs(expected) + 1e-9);
  }
  for (std::size_t threads : {2u, 3u, 8u, 64u}) {
    const Reference many = ComputeReference(p, in.inputs(), threads);
    EXPECT_EQ(many.output, one.output) << threads;
    EXPECT_EQ(many.residual_out, one.residual_out) << threads;
    EXPECT_EQ(many.nonfinite_input, "") << threads;
  }
  StoreFromFloat(p.dtype, in.r.data(), 2 * 8 + 3, INFINITY);  // residual row 2
  StoreFromFloat(p.dtype, in.x.data(), 30 * 8 + 1, NAN);      // hidden_states row 30
  for (std::size_t threads : {1u, 4u, 37u}) {
    const Reference r = ComputeReference(p, in.inputs(), threads);
    EXPECT_TRUE(r.input_has_nan && r.input_has_inf) << threads;
    EXPECT_EQ(r.nonfinite_input, "hidden_states[30, 1] (row 30) is nan") << threads;
  }
}

// A resize past what the region may hold fails with RESOURCE_EXHAUSTED and leaves the
// region mapped at its old size (it used to unmap first and keep a null base). Run in a
// child: it lowers RLIMIT_FSIZE, which bounds a memfd's size too.
void GrowPastTheFileSizeLimit() {
  std::signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{std::size_t{64} << 20, std::size_t{64} << 20};
  setrlimit(RLIMIT_FSIZE, &limit);
  absl::StatusOr<SharedRegion> region = SharedRegion::Create();
  if (!region.ok()) std::_Exit(2);
  if (!region->Resize(std::size_t{1} << 20).ok()) std::_Exit(3);
  std::memset(region->data(), 7, std::size_t{1} << 20);
  const absl::Status grown = region->Resize(std::size_t{256} << 20);
  if (grown.code() != absl::StatusCode::kResourceExhausted) std::_Exit(4);
  if (region->data() == nullptr || region->data_bytes() != (std::size_t{1} << 20)) std::_Exit(5);
  std::memset(region->data(), 9, std::size_t{1} << 20);  // still mapped and writable
  std::_Exit(0);
}

TEST(SharedRegion, AFailedGrowKeepsTheOldMapping) {
  EXPECT_EXIT(GrowPastTheFileSizeLimit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kerneleval::server
