// The compile jail, the log filter and the module limits, each against the exploit it stops:
// a forked child of this test enters the real jail (seccomp's open ban and syscall filter,
// Landlock, rlimits), on this kernel and as on one without Landlock, and tries what a
// compromised compiler would; the log filter gets a log that quotes a planted file;
// the ELF reader gets hostile bytes and a cubin whose symbol table, not its section sizes,
// says 100 GiB.
#include <arpa/inet.h>
#include <elf.h>
#include <fcntl.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/submissions/compile_jail.h"
#include "server/submissions/compile_log.h"
#include "server/submissions/module_limits.h"

namespace kerneleval::server::submissions {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// What the child could still do, one bit each; 0 is a jail that holds.
enum Escape : int {
  kOpenedSocket = 1 << 0,
  kReadHostname = 1 << 1,
  kReadPlantedFile = 1 << 2,
  kWroteFile = 1 << 3,
  kForked = 1 << 4,
  kExeced = 1 << 5,
  kReadLibraryFile = 1 << 6,  // the warm-up loaded NVRTC's libraries: no need to read them
  kJailFailed = 1 << 7,
  kProbedPath = 1 << 8,      // stat, access or readlink told a path apart from a missing one
  kOpenNotUniform = 1 << 9,  // an existing file refused other than a missing one is
  kNoFstat = 1 << 10,        // fstat of an open descriptor (glibc's AT_EMPTY_PATH form) broke
};

bool CanRead(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char c;
  const bool ok = read(fd, &c, 1) >= 0;
  close(fd);
  return ok;
}

// Whether any probe of `path` that names it answers other than ENOENT.
bool CanProbe(const std::string& path) {
  struct stat st;
  char buf[64];
  auto missing = [](long rc) { return rc < 0 && errno == ENOENT; };
  return !missing(stat(path.c_str(), &st)) || !missing(lstat(path.c_str(), &st)) ||
         !missing(access(path.c_str(), F_OK)) ||
         !missing(readlink(path.c_str(), buf, sizeof(buf))) ||
         !missing(fstatat(AT_FDCWD, path.c_str(), &st, 0));
}

// Makes the calling process's landlock_* syscalls answer ENOSYS, as a kernel without
// Landlock does (and as kerneleval-without-landlock does for what it runs).
bool HideLandlock() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  for (const int nr : {SCMP_SYS(landlock_create_ruleset), SCMP_SYS(landlock_add_rule),
                       SCMP_SYS(landlock_restrict_self)}) {
    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
  }
  const bool loaded = seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return loaded && LandlockAbiVersion() == 0;
}

// The file-system escapes of a jailed process: reads, probes, writes.
int FileEscapes(const std::string& planted, const std::string& writable_dir) {
  int escapes = 0;
  if (CanRead("/etc/hostname")) escapes |= kReadHostname;
  if (CanRead(planted)) escapes |= kReadPlantedFile;
  if (CanRead("/etc/ld.so.cache") || CanRead("/usr/lib/os-release")) escapes |= kReadLibraryFile;
  for (const std::string& path : {planted, std::string("/etc/passwd"), std::string("/"),
                                  std::string("/proc/self/exe"), writable_dir}) {
    if (CanProbe(path)) escapes |= kProbedPath;
  }
  errno = 0;
  if (open(planted.c_str(), O_RDONLY | O_CLOEXEC) >= 0 || errno != ENOENT) {
    escapes |= kOpenNotUniform;
  }
  const std::string out = writable_dir + "/escaped";
  if (open(out.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0) escapes |= kWroteFile;
  if (mkdir((writable_dir + "/made").c_str(), 0700) == 0) escapes |= kWroteFile;
  struct stat st;
  if (fstat(1, &st) != 0) escapes |= kNoFstat;
  return escapes;
}

// Forks a child that enters the jail (on this kernel, or as on one without Landlock) and
// tries every escape; returns its escape bits, which it writes to a pipe (more than an exit
// status holds).
int EscapesFromJail(const std::string& planted, const std::string& writable_dir,
                    bool without_landlock) {
  int bits[2];
  if (pipe(bits) != 0) return kJailFailed;
  const pid_t pid = fork();
  if (pid == 0) {
    int escapes = kJailFailed;
    if ((!without_landlock || HideLandlock()) && EnterCompileJail().ok()) {
      escapes = FileEscapes(planted, writable_dir);
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      if (s >= 0 || errno != EPERM) escapes |= kOpenedSocket;
      const int u = socket(AF_UNIX, SOCK_STREAM, 0);
      if (u >= 0) escapes |= kOpenedSocket;
      const pid_t child = fork();
      if (child == 0) _exit(0);
      if (child > 0) escapes |= kForked;
      char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
      execv("/bin/true", argv);  // returns only where it failed
      if (errno != EPERM) escapes |= kExeced;
    }
    (void)!write(bits[1], &escapes, sizeof(escapes));
    _exit(0);
  }
  close(bits[1]);
  int escapes = kJailFailed;
  if (read(bits[0], &escapes, sizeof(escapes)) != sizeof(escapes)) escapes = kJailFailed;
  close(bits[0]);
  waitpid(pid, nullptr, 0);
  return escapes;
}

class CompileJailOn : public ::testing::TestWithParam<bool> {};

TEST_P(CompileJailOn, ChildCannotOpenProbeOrWriteFilesSocketsForkOrExec) {
  const bool without_landlock = GetParam();
  if (!without_landlock && LandlockAbiVersion() < 1) GTEST_SKIP() << "no Landlock here";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("jail-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string planted = (dir / "secret.h").string();
  std::ofstream(planted) << "int planted_secret = 1;\n";
  // Outside the jail each escape works, so that a jail that allows it fails the test.
  ASSERT_TRUE(CanRead("/etc/hostname"));
  ASSERT_TRUE(CanRead(planted));
  ASSERT_TRUE(CanRead("/usr/lib/os-release"));
  ASSERT_TRUE(CanProbe("/etc/passwd"));
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  close(s);

  EXPECT_EQ(EscapesFromJail(planted, dir.string(), without_landlock), 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "escaped"));
  EXPECT_FALSE(std::filesystem::exists(dir / "made"));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CompileJailOn, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "WithoutLandlock" : "WithLandlock";
                         });

TEST(CompileJail, LandlockIsThere) {
  // The CI machines have Landlock (ABI 7 measured), so the "with Landlock" runs above are
  // real here; this test says so rather than letting them skip quietly.
  EXPECT_GE(LandlockAbiVersion(), 1);
}

TEST(CompileJail, LayersNameWhatHolds) {
  const CompileJailLayers here = ProbeCompileJailLayers();
  EXPECT_TRUE(here.seccomp);
  const CompileJailLayers bare{0, true};
  EXPECT_EQ(bare.Named(), (std::vector<std::pair<std::string, bool>>{{"landlock", false},
                                                                     {"seccomp_open_ban", true},
                                                                     {"seccomp_syscalls", true},
                                                                     {"rlimits", true}}));
  EXPECT_THAT(bare.Describe(), HasSubstr("landlock=off"));
  EXPECT_THAT(bare.Describe(), HasSubstr("seccomp_open_ban=on"));
  const CompileJailLayers no_seccomp{7, false};
  EXPECT_THAT(no_seccomp.Describe(), HasSubstr("--allow-unconfined-compile"));
}

// Runs this test binary's `filter`, under kerneleval-without-landlock or not; its exit code.
int RunSelf(bool without_landlock, const std::string& filter) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string filter_flag = "--gtest_filter=" + filter;
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    std::vector<char*> argv;
    if (without_landlock) argv.push_back(const_cast<char*>(KERNELEVAL_TEST_WITHOUT_LANDLOCK));
    argv.push_back(const_cast<char*>(self.c_str()));
    argv.push_back(const_cast<char*>(filter_flag.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(CompileJail, WithoutLandlockHelperHidesLandlock) {
  // What the "without Landlock" runs of the exploit tests stand on: under the helper,
  // LandlockIsThere fails.
  if (LandlockAbiVersion() < 1) GTEST_SKIP() << "no Landlock here to hide";
  EXPECT_EQ(RunSelf(false, "CompileJail.LandlockIsThere"), 0);
  EXPECT_NE(RunSelf(true, "CompileJail.LandlockIsThere"), 0);
}

TEST(CompileLog, KeepsTheSourcesLinesOnly) {
  const std::string log =
      "submission.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
      "    int x;\n"
      "        ^\n"
      "\n"
      "/tmp/planted/secret.h(1): error: this declaration has no storage class or type "
      "specifier\n"
      "  PLANTED_SECRET_MARKER = 1;\n"
      "  ^\n"
      "\n"
      "/tmp/planted/secret.h(2): error: expected a \";\"\n"
      "  submission.cu(9): error: a line of the planted file\n"
      "\n"
      "submission.cu(7): error: identifier \"y\" is undefined\n"
      "    y = 1;\n"
      "    ^\n"
      "\n"
      "__nv_name_map(2): error: identifier \"not_there\" is undefined\n"
      "  #pragma nv_mangled_name not_there\n"
      "\n"
      "2 errors detected in the compilation of \"submission.cu\".\n"
      "ptxas info    : Used 8 registers\n";
  const std::string kept = SubmissionLogLines(log, "submission.cu");
  EXPECT_THAT(kept, Not(HasSubstr("PLANTED_SECRET_MARKER")));
  EXPECT_THAT(kept, Not(HasSubstr("secret.h")));
  EXPECT_THAT(kept, Not(HasSubstr("a line of the planted file")));
  EXPECT_THAT(kept, HasSubstr("submission.cu(3): warning"));
  EXPECT_THAT(kept, HasSubstr("    int x;\n"));
  EXPECT_THAT(kept, HasSubstr("submission.cu(7): error: identifier \"y\""));
  EXPECT_THAT(kept, HasSubstr("    y = 1;\n"));
  EXPECT_THAT(kept, HasSubstr("2 errors detected"));
  EXPECT_THAT(kept, HasSubstr("__nv_name_map(2): error: identifier \"not_there\""));
  EXPECT_THAT(kept, HasSubstr("ptxas info    : Used 8 registers"));
  // Whether an include exists is not told: the reason after the name goes.
  EXPECT_EQ(SubmissionLogLines("submission.cu(3): catastrophic error: cannot open source file "
                               "\"/etc/shadow\": Permission denied\n",
                               "submission.cu"),
            "submission.cu(3): catastrophic error: cannot open source file \"/etc/shadow\"\n");
  // A #line naming another file puts the source's own lines under that name: dropped too.
  EXPECT_EQ(SubmissionLogLines("other.h(1): error: x\n  text\n", "submission.cu"), "");
}

// A minimal ELF64 cubin: sections .shstrtab, .symtab, .nv.global (NOBITS, `global_size`),
// .nv.constant3 (PROGBITS, 400 bytes) and symbols of `symbol_sizes` in .nv.global, laid
// end to end.
std::string MakeCubin(std::uint64_t global_size, const std::vector<std::uint64_t>& symbol_sizes) {
  const std::string names = std::string("\0.shstrtab\0.symtab\0.nv.global\0.nv.constant3\0", 45);
  std::vector<Elf64_Sym> syms(1 + symbol_sizes.size());
  std::memset(syms.data(), 0, syms.size() * sizeof(Elf64_Sym));
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < symbol_sizes.size(); ++i) {
    syms[i + 1].st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT);
    syms[i + 1].st_shndx = 3;
    syms[i + 1].st_value = at;
    syms[i + 1].st_size = symbol_sizes[i];
    at += symbol_sizes[i];
  }
  std::string body(sizeof(Elf64_Ehdr), '\0');
  const std::uint64_t names_off = body.size();
  body += names;
  const std::uint64_t syms_off = body.size();
  body.append(reinterpret_cast<const char*>(syms.data()), syms.size() * sizeof(Elf64_Sym));
  const std::uint64_t const_off = body.size();
  body.append(400, '\0');
  Elf64_Shdr sh[5];
  std::memset(sh, 0, sizeof(sh));
  sh[1] = {1, SHT_STRTAB, 0, 0, names_off, names.size(), 0, 0, 1, 0};
  sh[2] = {11, SHT_SYMTAB,       0, 0, syms_off, syms.size() * sizeof(Elf64_Sym), 0, 1,
           8,  sizeof(Elf64_Sym)};
  sh[3] = {19, SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 0, body.size(), global_size, 0, 0, 4, 0};
  sh[4] = {30, SHT_PROGBITS, SHF_ALLOC, 0, const_off, 400, 0, 0, 4, 0};
  Elf64_Ehdr eh;
  std::memset(&eh, 0, sizeof(eh));
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shoff = body.size();
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 5;
  eh.e_shstrndx = 1;
  std::memcpy(body.data(), &eh, sizeof(eh));
  body.append(reinterpret_cast<const char*>(sh), sizeof(sh));
  return body;
}

TEST(ModuleLimits, StaticBytesFromSectionsAndSymbols) {
  // NVRTC 13.0's own shape: a 100 GiB array after a 4000-byte one, the section says 4000.
  const std::uint64_t huge = std::uint64_t{100} << 30;
  auto bytes = CubinStaticDeviceBytes(MakeCubin(4000, {4000, huge}));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 4000 + huge + 400);
  bytes = CubinStaticDeviceBytes(MakeCubin(1 << 20, {16}));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, (1u << 20) + 400);
  const absl::Status s = CheckModuleLimits(MakeCubin(4000, {4000, huge}), ModuleLimits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-submission-static-bytes"));
  EXPECT_TRUE(CheckModuleLimits(MakeCubin(4000, {4000}), ModuleLimits{}).ok());
  // A symbol whose end wraps around counts as everything, not as little.
  bytes = CubinStaticDeviceBytes(MakeCubin(16, {16, ~std::uint64_t{0} - 8}));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, ~std::uint64_t{0});
}

TEST(ModuleLimits, HostileBytesAreRefusedNotRead) {
  const std::string good = MakeCubin(4000, {4000});
  ASSERT_TRUE(CubinStaticDeviceBytes(good).ok());
  auto refused = [](const std::string& elf) {
    const auto r = CubinStaticDeviceBytes(elf);
    return !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused(""));
  EXPECT_TRUE(
      refused("\x7f"
              "ELF"));
  for (std::size_t cut : {std::size_t{64}, std::size_t{100}, good.size() - 1}) {
    EXPECT_TRUE(refused(good.substr(0, cut))) << cut;
  }
  auto patched = [&](std::size_t offset, std::uint64_t value, std::size_t width) {
    std::string e = good;
    std::memcpy(e.data() + offset, &value, width);
    return e;
  };
  EXPECT_TRUE(refused(patched(offsetof(Elf64_Ehdr, e_shoff), ~std::uint64_t{0} - 10, 8)));
  EXPECT_TRUE(refused(patched(offsetof(Elf64_Ehdr, e_shnum), 0xffff, 2)));
  EXPECT_TRUE(refused(patched(offsetof(Elf64_Ehdr, e_shstrndx), 9, 2)));
  EXPECT_TRUE(refused(patched(offsetof(Elf64_Ehdr, e_ident) + EI_CLASS, ELFCLASS32, 1)));
  const std::size_t shoff = good.size() - 5 * sizeof(Elf64_Shdr);
  // The symbol table's offset, then the name table's size, far past the end.
  EXPECT_TRUE(refused(
      patched(shoff + 2 * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_offset), 1ULL << 40, 8)));
  EXPECT_TRUE(
      refused(patched(shoff + 1 * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_size), ~0ULL, 8)));
  // A name offset past the table is a section without a name, not a read past it.
  EXPECT_TRUE(
      CubinStaticDeviceBytes(
          patched(shoff + 3 * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_name), 1 << 30, 4))
          .ok());
  EXPECT_EQ(CheckModuleLimits(std::string(5 << 20, 'x'), ModuleLimits{}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kerneleval::server::submissions
