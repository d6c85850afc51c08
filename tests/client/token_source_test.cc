// Where the CLI's bearer token comes from: a file or variable in the server's token-file
// layout (the Secret a scheduled job mounts), trimmed, one owner's line.
#include "client/token_source.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace kerneleval::client {
namespace {

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/kerneleval-token-XXXXXX";
    int fd = ::mkstemp(name);
    EXPECT_GE(fd, 0);
    ::close(fd);
    path_ = name;
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(TokenSource, BareTokenWithTrailingNewlineIsTrimmed) {
  TempFile file("s3cret\n");
  absl::StatusOr<std::string> token = ResolveToken({.file = file.path()});
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
}

TEST(TokenSource, OwnerLineOfTheServersLayout) {
  TempFile file("# callers\nops:s3cret\r\n\nprometheus : scrape-token \n");
  absl::StatusOr<std::string> ops = ResolveToken({.file = file.path(), .owner = "ops"});
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(*ops, "s3cret");
  absl::StatusOr<std::string> prometheus =
      ResolveToken({.file = file.path(), .owner = "prometheus"});
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  EXPECT_EQ(*prometheus, "scrape-token");
}

TEST(TokenSource, TheOnlyLineNeedsNoOwner) {
  TempFile file("ops:s3cret\n");
  absl::StatusOr<std::string> token = ResolveToken({.file = file.path()});
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
}

TEST(TokenSource, TokenKeepsColonsAfterTheOwner) {
  absl::StatusOr<std::string> token = SelectToken("ops:a:b\n", "ops", "x");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "a:b");
}

TEST(TokenSource, BareTokenIsOwnerTokenAsOnTheServer) {
  absl::StatusOr<std::string> token = SelectToken("s3cret\nops:other\n", "token", "x");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
}

TEST(TokenSource, SeveralLinesWithoutOwnerNameTheFileAndOwners) {
  TempFile file("ops:s3cret\nprometheus:scrape\n");
  absl::StatusOr<std::string> token = ResolveToken({.file = file.path()});
  ASSERT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(token.status().message());
  EXPECT_NE(message.find(file.path()), std::string::npos) << message;
  EXPECT_NE(message.find("ops, prometheus"), std::string::npos) << message;
  EXPECT_NE(message.find("--owner"), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
}

TEST(TokenSource, UnknownOwnerNamesTheFile) {
  TempFile file("ops:s3cret\n");
  absl::StatusOr<std::string> token = ResolveToken({.file = file.path(), .owner = "benchmark"});
  ASSERT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(token.status().message());
  EXPECT_NE(message.find(file.path()), std::string::npos) << message;
  EXPECT_NE(message.find("benchmark"), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
}

TEST(TokenSource, EmptyOrUnreadableFileNamesTheFile) {
  TempFile empty("# nothing\n\n");
  absl::StatusOr<std::string> none = ResolveToken({.file = empty.path()});
  ASSERT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find(empty.path()), std::string::npos) << none.status();
  absl::StatusOr<std::string> missing = ResolveToken({.file = "/nonexistent/kerneleval/token"});
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/kerneleval/token"), std::string::npos);
}

TEST(TokenSource, UnsendableTokenIsRefusedNotSent) {
  absl::StatusOr<std::string> token = SelectToken("ops:s3c ret\n", "ops", "$KERNELEVAL_TOKEN");
  ASSERT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(token.status().message().find("$KERNELEVAL_TOKEN"), std::string::npos);
  EXPECT_EQ(token.status().message().find("s3c"), std::string::npos);
}

TEST(TokenSource, FlagWinsAndIsTrimmed) {
  TempFile file("ops:from-file\n");
  absl::StatusOr<std::string> token =
      ResolveToken({.flag = " from-flag\n", .file = file.path(), .environment = "from-env"});
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "from-flag");
  absl::StatusOr<std::string> file_over_env =
      ResolveToken({.file = file.path(), .environment = "from-env"});
  ASSERT_TRUE(file_over_env.ok());
  EXPECT_EQ(*file_over_env, "from-file");
}

TEST(TokenSource, NothingGivenIsNoToken) {
  absl::StatusOr<std::string> token = ResolveToken({});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "");
  EXPECT_EQ(ResolveToken({.owner = "ops"}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kerneleval::client
