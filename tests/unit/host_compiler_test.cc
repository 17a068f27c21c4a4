// Unit tests of the host backend's compiler directory name
// (runtime/compilers/host_compiler.cc): the target triple is part of it, and
// the compiler's identity is asked once per compiler binary (memoized in a
// file), so creating a runtime runs no process.
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include <gtest/gtest.h>

#include "compilers/host_compiler.h"
#include "compilers/process.h"
#include "host/host_backend.h"
#include "support/test_support.h"

namespace npc {
namespace {

using testing::TempDir;

std::string RealCompiler() {
  std::string cxx = testing::GetEnv("CXX");
  if (cxx.empty()) cxx = FindInPath("c++");
  return cxx;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `f` in a forked child (a fresh process memo), returns its exit status.
int InChild(const std::function<int()>& f) {
  pid_t pid = fork();
  if (pid == 0) _exit(f());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(HostCompilerDir, NamesCompilerVersionAndTargetTriple) {
  const std::string cxx = RealCompiler();
  ASSERT_FALSE(cxx.empty());
  auto machine = RunProcess({cxx, "-dumpmachine"});
  ASSERT_TRUE(machine.ok() && machine->exit_status == 0);
  CompilerOptions options;
  options.program = cxx;
  auto dir = HostCompiler(options).CacheDirectoryName();
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  const std::string suffix = "-" + Trimmed(machine->output) + "-cg" + std::to_string(host::kCodegenVersion);
  EXPECT_EQ(dir->rfind("host-", 0), 0u) << *dir;
  ASSERT_GT(dir->size(), suffix.size());
  EXPECT_EQ(dir->substr(dir->size() - suffix.size()), suffix) << *dir;

  options.version_override = "9.9";
  struct utsname u;
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(*HostCompiler(options).CacheDirectoryName(),
            "host-9.9-" + std::string(u.machine) + "-cg" + std::to_string(host::kCodegenVersion));
}

TEST(HostCompilerDir, IdentityIsAskedOncePerCompilerBinary) {
  TempDir tmp;
  const std::string count = tmp.Sub("count");
  const std::string wrapper = tmp.Sub("c++-wrapper");
  ASSERT_TRUE(testing::WriteFile(wrapper, "#!/bin/sh\necho run >> " + ShellQuote(count) + "\nexec " +
                                              ShellQuote(RealCompiler()) + " \"$@\"\n"));
  chmod(wrapper.c_str(), 0755);
  setenv("XDG_CACHE_HOME", tmp.Sub("xdg").c_str(), 1);
  auto runs = [&] { return testing::FileExists(count) ? static_cast<int>(testing::ReadFile(count).size() / 4) : 0; };
  auto ask = [&] {
    CompilerOptions options;
    options.program = wrapper;
    auto dir = HostCompiler(options).CacheDirectoryName();
    return dir.ok() && dir->rfind("host-", 0) == 0 ? 0 : 1;
  };
  ASSERT_EQ(InChild(ask), 0);
  const int probe = runs();
  EXPECT_GE(probe, 3);  // --version, the version, -dumpmachine
  EXPECT_TRUE(testing::FileExists(tmp.Sub("xdg/npc/compiler-ids.json")));
  // Another process: the memo answers, the compiler does not run.
  ASSERT_EQ(InChild(ask), 0);
  EXPECT_EQ(runs(), probe);
  // The compiler binary changes: asked again.
  ASSERT_TRUE(testing::WriteFile(wrapper, testing::ReadFile(wrapper) + "# changed\n"));
  ASSERT_EQ(InChild(ask), 0);
  EXPECT_EQ(runs(), 2 * probe);
  unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace npc
