// What registration reads from a submission's text: the PTX module (comments are not code, a
// kernel's functions are those its calls reach) and the compile log (held to a size). Pure
// text, no NVRTC.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/submissions/bounded_log.h"
#include "server/submissions/ptx_code.h"

namespace kerneleval::server::submissions {
namespace {

using ::testing::HasSubstr;

TEST(PtxParams, SizesOfTheEntrysParameters) {
  const char* ptx =
      ".visible .entry k(\n\t.param .align 8 .b8 k_param_0[128]\n)\n{ ret; }\n"
      ".weak .entry _Z1tILi3EEv1Pi(\n\t.param .align 8 .b8 _Z1tILi3EEv1Pi_param_0[24],\n"
      "\t.param .u32 _Z1tILi3EEv1Pi_param_1\n)\n{ ret; }\n"
      ".visible .entry none()\n{ ret; }\n";
  EXPECT_EQ(PtxEntryParamBytes(ptx, "k"), std::vector<long long>({128}));
  EXPECT_EQ(PtxEntryParamBytes(ptx, "_Z1tILi3EEv1Pi"), std::vector<long long>({24, 4}));
  EXPECT_EQ(PtxEntryParamBytes(ptx, "none"), std::vector<long long>{});
  EXPECT_FALSE(PtxEntryParamBytes(ptx, "absent").has_value());
}

TEST(PtxParams, PointerAttributesAsTritonWritesThem) {
  // The head of an entry as Triton 3.9 emits it for sm_90a: pointers carry .ptr, a state
  // space and an alignment before the name.
  const char* ptx =
      ".visible .entry add_rmsnorm(\n"
      "\t.param .u64 .ptr .global .align 1 add_rmsnorm_param_0,\n"
      "\t.param .u32 add_rmsnorm_param_1,\n"
      "\t.param .f32 add_rmsnorm_param_2,\n"
      "\t.param .u64 .ptr .global .align 16 add_rmsnorm_param_3\n"
      ")\n{ ret; }\n";
  EXPECT_EQ(PtxEntryParamBytes(ptx, "add_rmsnorm"), std::vector<long long>({8, 4, 4, 8}));
}

TEST(PtxParams, AnEntryInACommentIsNoEntry) {
  // The red team's module: the ABI's parameter list written in comments before the real
  // entry, which takes two pointers.
  const char* ptx =
      "// .visible .entry k(.param .align 8 .b8 k_param_0[128])\n"
      "/* .visible .entry k(\n .param .align 8 .b8 k_param_0[128]\n) { ret; } */\n"
      ".visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)\n{ ret; }\n";
  EXPECT_EQ(PtxEntryParamBytes(ptx, "k"), std::vector<long long>({8, 8}));
  // Only in a comment: not there at all.
  EXPECT_FALSE(PtxEntryParamBytes("// .entry only(.param .b8 p[128]) { ret; }\n", "only"));
}

TEST(PtxParams, NamesMatchWhole) {
  // `k` is not `k_fake`, whichever comes first.
  const char* ptx =
      ".visible .entry k_fake(.param .align 8 .b8 p[128])\n{ ret; }\n"
      ".visible .entry k(.param .u32 q)\n{ ret; }\n";
  EXPECT_EQ(PtxEntryParamBytes(ptx, "k"), std::vector<long long>({4}));
  // A .func of the name is no entry.
  EXPECT_FALSE(PtxEntryParamBytes(".func f(.param .b8 p[128])\n{ ret; }\n", "f"));
}

TEST(PtxComments, StringsAreNoComments) {
  EXPECT_EQ(PtxWithoutComments(".file 1 \"/a//b/*c*/.cu\" // note\n"),
            ".file 1 \"/a//b/*c*/.cu\"        \n");
  EXPECT_EQ(PtxWithoutComments("a /* x\ny */ b"), "a     \n     b");
  EXPECT_EQ(PtxWithoutComments("\"esc \\\" // still\" // gone"), "\"esc \\\" // still\"        ");
  EXPECT_EQ(PtxWithoutComments("open /* never closed"), "open" + std::string(16, ' '));
}

constexpr char kWaiter[] = ".func waiter()\n{\n\tgriddepcontrol.wait;\n\tret;\n}\n";

bool Waits(const std::string& ptx) { return PtxEntryWaitsForGrid(ptx, "k").value_or(false); }

TEST(PtxWait, InTheEntrysOwnBody) {
  EXPECT_TRUE(Waits(".visible .entry k()\n{\n\tgriddepcontrol.wait;\n\tret;\n}\n"));
  EXPECT_TRUE(Waits(".visible .entry k()\n{\n$L1:\n\t@%p1 griddepcontrol.wait;\n\tret;\n}\n"));
  EXPECT_FALSE(Waits(".visible .entry k()\n{\n\tret;\n}\n"));
  EXPECT_FALSE(PtxEntryWaitsForGrid(kWaiter, "k").has_value());
}

// As NVRTC writes it with -lineinfo: .loc directives (no `;`) before instructions, the call
// spread over lines.
TEST(PtxWait, LineInfoAndCallsOverSeveralLines) {
  EXPECT_TRUE(
      Waits(".func _Z4Waitv()\n{\n\n\t.loc\t1 2 0\n\n\t.loc\t1 2 30\n"
            "\t// begin inline asm\n\tgriddepcontrol.wait;\n\t// end inline asm\n\tret;\n}\n"
            ".visible .entry k(\n\t.param .align 8 .b8 k_param_0[144]\n)\n{\n"
            "\t.reg .b64 \t%rd<7>;\n\t.loc\t1 3 0\n\tmov.b64 \t%rd1, k_param_0;\n"
            "\t.loc\t1 4 3\n\t{ // callseq 0, 0\n\t.reg .b32 temp_param_reg;\n"
            "\tcall.uni \n\t_Z4Waitv, \n\t(\n\t);\n\t} // callseq 0\n"
            "$L__BB1_2:\n\t.loc\t1 6 1\n\tret;\n}\n\t.file\t1 \"/tmp/s.cu\"\n"));
}

TEST(PtxWait, AWaitInACommentDoesNotCount) {
  EXPECT_FALSE(Waits(".visible .entry k()\n{\n\t// griddepcontrol.wait;\n\tret;\n}\n"));
  EXPECT_FALSE(Waits(".visible .entry k()\n{\n\t/* griddepcontrol.wait; */ ret;\n}\n"));
}

TEST(PtxWait, AFunctionNoCallReachesDoesNotCount) {
  // The red team's module: the wait in a .func that nothing calls.
  EXPECT_FALSE(Waits(std::string(kWaiter) + ".visible .entry k()\n{\n\tret;\n}\n"));
  // Named only in a comment, or called only from another entry.
  EXPECT_FALSE(Waits(std::string(kWaiter) +
                     ".visible .entry k()\n{\n\t// call.uni waiter, ();\n\tret;\n}\n"
                     ".visible .entry other()\n{\n\tcall.uni waiter, ();\n\tret;\n}\n"));
  // A function whose name merely begins like it.
  EXPECT_FALSE(Waits(std::string(kWaiter) + ".func waiter2()\n{\n\tret;\n}\n" +
                     ".visible .entry k()\n{\n\tcall.uni waiter2, ();\n\tret;\n}\n"));
}

TEST(PtxWait, CallsReachTransitively) {
  const std::string middle =
      ".func (.param .b32 r) middle(.param .b32 a)\n{\n"
      "\tcall.uni waiter, ();\n\tst.param.b32 [r], 0;\n\tret;\n}\n";
  EXPECT_TRUE(Waits(std::string(kWaiter) + middle +
                    ".visible .entry k()\n{\n\t.param .b32 r0;\n\t.param .b32 a0;\n"
                    "\t@%p1 call.uni (r0), middle, (a0);\n\tret;\n}\n"));
  // Recursion ends.
  EXPECT_FALSE(
      Waits(".func loop()\n{\n\tcall loop;\n\tret;\n}\n"
            ".visible .entry k()\n{\n\tcall loop;\n\tret;\n}\n"));
}

TEST(PtxWait, IndirectCallsReachFunctionsWhoseAddressIsTaken) {
  const std::string call_through_register =
      ".visible .entry k()\n{\n\t.reg .b64 %rd<2>;\n\tmov.u64 %rd1, waiter;\n"
      "\tcall %rd1, (), proto;\n\tret;\n}\n";
  EXPECT_TRUE(Waits(std::string(kWaiter) + call_through_register));
  // An indirect call, but the waiter's address is taken nowhere.
  EXPECT_FALSE(Waits(std::string(kWaiter) +
                     ".visible .entry k()\n{\n\t.reg .b64 %rd<2>;\n\tcall %rd1, (), proto;\n"
                     "\tret;\n}\n"));
  // The address taken, but no indirect call anywhere the entry reaches.
  EXPECT_FALSE(Waits(std::string(kWaiter) +
                     ".visible .entry k()\n{\n\t.reg .b64 %rd<2>;\n\tmov.u64 %rd1, waiter;\n"
                     "\tret;\n}\n"));
}

TEST(BoundedLog, ShortLogsStayWhole) {
  EXPECT_EQ(BoundedLog("", 1024), "");
  EXPECT_EQ(BoundedLog("one line\n", 1024), "one line\n");
  const std::string exact(1024, 'x');
  EXPECT_EQ(BoundedLog(exact, 1024), exact);
}

TEST(BoundedLog, LongLogsKeepHeadAndTailAndSayWhatWentMissing) {
  std::string log;
  for (int i = 0; i < 100000; ++i) {
    log += "submission.cu(" + std::to_string(i) + "): warning: variable \"x\" was declared\n";
  }
  const std::string bounded = BoundedLog(log, kMaxCompileLogBytes);
  EXPECT_LE(bounded.size(), kMaxCompileLogBytes);
  EXPECT_GT(bounded.size(), kMaxCompileLogBytes * 3 / 4);
  EXPECT_EQ(bounded.rfind("submission.cu(0): warning", 0), 0u) << "the head is kept";
  EXPECT_THAT(bounded, HasSubstr("submission.cu(99999): warning: variable \"x\" was declared\n"));
  // Whole lines on both sides of the note.
  const std::size_t note = bounded.find("... [");
  ASSERT_NE(note, std::string::npos);
  EXPECT_THAT(bounded.substr(note, bounded.find('\n', note) - note),
              ::testing::MatchesRegex("\\.\\.\\. \\[[0-9]+ bytes, [0-9]+ lines of the compile "
                                      "log left out\\] \\.\\.\\."));
  EXPECT_EQ(bounded[note - 1], '\n');
  EXPECT_EQ(bounded.substr(bounded.find('\n', note) + 1, 14), "submission.cu(");
}

TEST(BoundedLog, OneHugeLineIsCutAtCharacterBoundaries) {
  std::string line;
  while (line.size() < 10000) line += "\xc3\xa9";  // U+00E9, two bytes each
  const std::string bounded = BoundedLog(line, 1001);
  EXPECT_LE(bounded.size(), 1001u);
  const std::size_t note = bounded.find("\n... [");
  ASSERT_NE(note, std::string::npos);
  EXPECT_EQ(note % 2, 0u) << "the head ends between two characters";
  const std::string tail = bounded.substr(bounded.find("...\n", note + 5) + 4);
  EXPECT_EQ(tail.size() % 2, 0u) << "the tail starts at a character";
  EXPECT_EQ(tail.substr(0, 2), "\xc3\xa9");
}

}  // namespace
}  // namespace kerneleval::server::submissions
