// kerneleval-without-landlock: runs a program as on a kernel without Landlock. Its
// landlock_* syscalls answer ENOSYS (what a kernel built without Landlock, or booted
// without lsm=landlock, answers), under a seccomp filter that exec and every child keep.
//
//   kerneleval-without-landlock PROGRAM [ARG...]
//
// Built twice: as this, and with KERNELEVAL_EXEC_PROGRAM set to the compile tool, as
// kerneleval-compile-without-landlock, which takes the compile tool's own arguments, so that
// a server can be given it as its compile tool unchanged.
#include <errno.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace {

struct SeccompDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

bool HideLandlock() {
  // An unprivileged filter needs it; the compile tool sets it again anyway.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  std::unique_ptr<void, SeccompDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (ctx == nullptr) return false;
  for (const int nr : {SCMP_SYS(landlock_create_ruleset), SCMP_SYS(landlock_add_rule),
                       SCMP_SYS(landlock_restrict_self)}) {
    if (seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), nr, 0) != 0) return false;
  }
  return seccomp_load(ctx.get()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
#ifdef KERNELEVAL_EXEC_PROGRAM
  char program[] = KERNELEVAL_EXEC_PROGRAM;
  args.push_back(program);
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
#else
  if (argc < 2) {
    std::fprintf(stderr, "usage: kerneleval-without-landlock PROGRAM [ARG...]\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
#endif
  args.push_back(nullptr);
  if (!HideLandlock()) {
    std::fprintf(stderr, "kerneleval-without-landlock: cannot load the filter: %s\n",
                 std::strerror(errno));
    return 2;
  }
  execv(args[0], args.data());
  std::fprintf(stderr, "kerneleval-without-landlock: %s: %s\n", args[0], std::strerror(errno));
  return 127;
}
