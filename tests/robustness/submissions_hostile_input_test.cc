// The Submissions service's catalogue of hostile input, through a real server on loopback with
// submissions on, real kerneleval-compile processes and real gRPC clients: bodies that do not
// parse (raw bytes through gRPC's generic stub) answer INVALID_ARGUMENT naming the method;
// 10 KB values in every echoed field come back bounded with the field named; a compile log
// far past gRPC's 8 KiB metadata limit is cut in the status and whole in the response body
// when the request asks; a server without submissions and a mistyped method say what to do.
// After each case the server still serves a valid call.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kerneleval/v1/submissions.grpc.pb.h"
#include "raw_call.h"
#include "server/submissions/submissions_service.h"
#include "submissions_test_server.h"

namespace kerneleval::testing {
namespace {

// Every error must reach a client that keeps gRPC's default metadata limit; the service holds
// its messages to this.
constexpr std::size_t kMaxMessage = server::submissions::kMaxStatusMessageBytes;
// What one bounded echo of a 10 KB value may add to a message.
constexpr std::size_t kMaxEchoMessage = 512;
const std::string kLong(10240, 'x');

constexpr char kKernel[] =
    "#include <kerneleval/submission_abi.h>\n"
    "extern \"C\" __global__ void tiny(const kerneleval_params p) {\n"
    "  if (threadIdx.x == 0) static_cast<float*>(p.output)[blockIdx.x] = p.eps;\n"
    "}\n";

v1::SubmissionSpec Spec(const std::string& source = kKernel) {
  return OneKernelSpec("tiny", source, "tiny", v1::DTYPE_FP32, 32);
}

void ExpectServes(const SubmissionsServer& s) {
  v1::ListSubmissionsResponse list;
  const grpc::Status status = s.submissions->List(&list);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST(SubmissionsHostileInput, BodiesThatDoNotParseAreInvalidArgumentNamingTheMethod) {
  const SubmissionsServer s = StartSubmissionsServer();
  ExpectServes(s);
  int cases = 0;
  for (const char* method :
       {"RegisterSubmission", "ListSubmissions", "GetSubmission", "DeleteSubmission"}) {
    std::vector<std::string> bodies = MalformedBodies();
    // ListSubmissionsRequest's field 1 is a number (page_size): length-delimited bytes there
    // are an unknown field, skipped.
    if (std::string(method) != "ListSubmissions") bodies.push_back(BadUtf8InField1());
    for (const std::string& bytes : bodies) {
      SCOPED_TRACE(std::string(method) + ", " + std::to_string(bytes.size()) + " bytes");
      std::string reply;
      const grpc::Status status = RawCall(
          s.server.target(), std::string("/kerneleval.v1.Submissions/") + method, bytes, &reply);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
      EXPECT_NE(
          status.error_message().find(std::string(method) + ": the request body does not parse as "
                                                            "kerneleval.v1."),
          std::string::npos)
          << status.error_message();
      EXPECT_LT(status.error_message().size(), 300u);
      ++cases;
    }
    ExpectServes(s);
  }
  EXPECT_EQ(cases, 19);
}

struct EchoCase {
  const char* name;
  std::function<void(v1::SubmissionSpec*)> mutate;
  grpc::StatusCode code;
  const char* field;
};

// Each 10 KB value is quoted cut, with its length, in a message that names its field.
TEST(SubmissionsHostileInput, EchoedValuesAreBoundedAndNameTheirField) {
  const SubmissionsServer s = StartSubmissionsServer();
  const std::vector<EchoCase> cases = {
      {"name", [](v1::SubmissionSpec* x) { x->set_name(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.name: 'xxx"},
      {"description", [](v1::SubmissionSpec* x) { x->set_description(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.description: 10240 bytes"},
      {"target_arch", [](v1::SubmissionSpec* x) { x->set_target_arch(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.target_arch: 'xxx"},
      {"device", [](v1::SubmissionSpec* x) { x->set_device(kLong); }, grpc::StatusCode::NOT_FOUND,
       "submission.device: 'xxx"},
      {"entry",
       [](v1::SubmissionSpec* x) {
         x->mutable_launch_plan()->mutable_kernels(0)->set_entry(kLong);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.launch_plan.kernels[0].entry"},
      {"define name",
       [](v1::SubmissionSpec* x) { x->mutable_options()->add_defines()->set_name(kLong); },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.options.defines[0].name: 'xxx"},
      {"define value",
       [](v1::SubmissionSpec* x) {
         v1::Define* d = x->mutable_options()->add_defines();
         d->set_name("WIDTH");
         d->set_value(std::string(10240, '#'));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.options.defines[0].value"},
      {"include path",
       [](v1::SubmissionSpec* x) { x->set_source("#include <" + kLong + ">\n" + kKernel); },
       grpc::StatusCode::INVALID_ARGUMENT, "submission.source: line 1"},
  };
  for (const EchoCase& c : cases) {
    SCOPED_TRACE(c.name);
    v1::SubmissionSpec spec = Spec();
    c.mutate(&spec);
    v1::RegisterSubmissionResponse response;
    const grpc::Status status = s.submissions->Register(spec, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message().substr(0, 1024);
    EXPECT_NE(status.error_message().find(c.field), std::string::npos)
        << status.error_message().substr(0, 1024);
    EXPECT_LT(status.error_message().size(), kMaxEchoMessage)
        << status.error_message().substr(0, 1024);
    ExpectServes(s);
  }
  // Ids and names of submissions that do not exist.
  v1::GetSubmissionResponse got;
  grpc::Status status = s.submissions->Get(kLong, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("(10240 bytes)"), std::string::npos)
      << status.error_message().substr(0, 1024);
  EXPECT_LT(status.error_message().size(), kMaxEchoMessage);
  v1::DeleteSubmissionResponse deleted;
  status = s.submissions->Delete(kLong, &deleted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("(10240 bytes)"), std::string::npos)
      << status.error_message().substr(0, 1024);
  EXPECT_LT(status.error_message().size(), kMaxEchoMessage);
}

// A source whose NVRTC log is tens of KB (each error quotes its 3 KB line): the status carries
// the head of the log under the limit, and says where the rest is; asked for, the whole log
// comes back in the response body with the same code and message.
TEST(SubmissionsHostileInput, LongCompileLogsGoInTheBodyNotTheStatus) {
  const SubmissionsServer s = StartSubmissionsServer();
  std::string source = kKernel;
  for (int i = 0; i < 12; ++i) {
    source += "__device__ float f" + std::to_string(i) + "() { return " + std::string(3000, 'q') +
              std::to_string(i) + "; }\n";
  }
  const v1::SubmissionSpec spec = Spec(source);

  v1::RegisterSubmissionResponse response;
  const grpc::Status status = s.submissions->Register(spec, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message().substr(0, 1024);
  EXPECT_NE(status.error_message().find("submission.source: compilation failed"), std::string::npos)
      << status.error_message().substr(0, 1024);
  EXPECT_NE(status.error_message().find("submission.cu("), std::string::npos);  // the log's head
  EXPECT_NE(status.error_message().find("compile_error_in_response"), std::string::npos);
  EXPECT_LE(status.error_message().size(), kMaxMessage);

  auto stub = v1::Submissions::NewStub(s.channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::RegisterSubmissionRequest request;
  *request.mutable_submission() = spec;
  request.set_compile_error_in_response(true);
  v1::RegisterSubmissionResponse in_body;
  const grpc::Status ok = stub->RegisterSubmission(&context, request, &in_body);
  ASSERT_TRUE(ok.ok()) << ok.error_message().substr(0, 1024);
  ASSERT_TRUE(in_body.has_compile_error());
  EXPECT_FALSE(in_body.has_submission());
  const v1::CompileError& e = in_body.compile_error();
  EXPECT_EQ(e.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_NE(e.message().find("submission.source: compilation failed"), std::string::npos);
  EXPECT_GT(e.diagnostics().log().size(), 12u * 3000u);  // every error, each quoting its line
  EXPECT_NE(e.diagnostics().log().find("f11"), std::string::npos);
  EXPECT_EQ(e.diagnostics().target_arch(), "sm_90a");

  // The same flag on a source that compiles changes nothing.
  request.mutable_submission()->set_source(kKernel);
  grpc::ClientContext again;
  again.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::RegisterSubmissionResponse registered;
  const grpc::Status fine = stub->RegisterSubmission(&again, request, &registered);
  ASSERT_TRUE(fine.ok()) << fine.error_message().substr(0, 1024);
  EXPECT_FALSE(registered.has_compile_error());
  EXPECT_TRUE(registered.created());
  EXPECT_EQ(registered.submission().spec().name(), "tiny");
}

// Without --submissions every method says how to turn them on; a mistyped method says what
// the server serves.
TEST(SubmissionsHostileInput, OffOrMistypedSaysWhatToDo) {
  server::ServerOptions off = SubmissionOptions();
  off.submissions.enabled = false;
  const SubmissionsServer s = StartSubmissionsServer(off);
  for (const char* method :
       {"RegisterSubmission", "ListSubmissions", "GetSubmission", "DeleteSubmission"}) {
    SCOPED_TRACE(method);
    std::string reply;
    const grpc::Status status =
        RawCall(s.server.target(), std::string("/kerneleval.v1.Submissions/") + method,
                v1::GetSubmissionRequest().SerializeAsString(), &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("start kerneleval-server with --submissions"),
              std::string::npos)
        << status.error_message();
  }
  // A path past 8 KiB never reaches a server (gRPC refuses the request's headers).
  std::string reply;
  const grpc::Status typo =
      RawCall(s.server.target(),
              "/kerneleval.v1.Submissions/RegisterSubmision" + std::string(4000, 'x'), "", &reply);
  EXPECT_EQ(typo.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(typo.error_message().find("is not a method of this server"), std::string::npos)
      << typo.error_message();
  EXPECT_NE(typo.error_message().find("kerneleval.v1.Submissions"), std::string::npos);
  EXPECT_LT(typo.error_message().size(), kMaxEchoMessage);
}

}  // namespace
}  // namespace kerneleval::testing
