// End-to-end robustness: a compile killed with SIGKILL half-way leaves
// nothing half-done and nothing blocking; two `npc compile` at once on one
// cache compile every entry exactly once.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "compilers/process.h"
#include "npc/cache.h"
#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;
using cache::EntryState;
using testing::CommandResult;
using testing::FileExists;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

// A C++ compiler wrapper: version queries go straight to the real compiler
// (so the compiler directory is the real one's); a compile appends a line to
// <dir>/count under flock, sleeps while <dir>/slow exists (after writing
// "<own pid> <parent pid>" to <dir>/started), and sleeps 1 s when <dir>/delay
// exists, then runs the real compiler.
std::string MakeWrapper(const std::string& dir) {
  std::string real = testing::GetEnv("CXX");
  if (real.empty()) real = FindInPath("c++");
  if (real.empty()) real = FindInPath("g++");
  const std::string path = dir + "/cxx-wrapper";
  std::string script =
      "#!/bin/sh\n"
      "D=" + ShellQuote(dir) + "\n"
      "for a in \"$@\"; do case \"$a\" in --version|-dumpversion|-dumpfullversion|-dumpmachine) exec " + ShellQuote(real) +
      " \"$@\";; esac; done\n"
      "flock \"$D/count\" sh -c 'echo compile >> \"$1\"' sh \"$D/count\"\n"
      "if [ -e \"$D/slow\" ]; then\n"
      "  echo \"$$ $PPID\" > \"$D/started.tmp\" && mv \"$D/started.tmp\" \"$D/started\"\n"
      "  sleep 300\n"
      "fi\n"
      "[ -e \"$D/delay\" ] && sleep 1\n"
      "exec " + ShellQuote(real) + " \"$@\"\n";
  EXPECT_TRUE(testing::WriteFile(path, script));
  chmod(path.c_str(), 0755);
  return path;
}

int CountLines(const std::string& path) {
  if (!FileExists(path)) return 0;
  std::string text = ReadFile(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class RobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = tmp_.Sub("cache");
    wrapper_ = MakeWrapper(tmp_.path());
    dir_ = testing::HostCompilerDir(wrapper_);
    ASSERT_FALSE(dir_.empty());
    env_ = {{"NPC_COMPILER", wrapper_}, {"NEURON_CC_FLAGS", "<unset>"}, {"NEURON_COMPILE_CACHE_URL", "<unset>"}};
  }
  EntryState State(const std::string& entry) {
    cache::LocalStore store(cache_);
    auto ref = cache::ParseEntryDirName(dir_, entry.substr(entry.rfind('/') + 1));
    auto state = cache::GetEntryState(store, *ref, "model.so");
    EXPECT_TRUE(state.ok());
    return state.ok() ? *state : EntryState::kEmpty;
  }
  std::string Path(const std::string& entry, const std::string& file) { return cache_ + "/" + entry + "/" + file; }

  TempDir tmp_;
  std::string cache_, wrapper_, dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(RobustnessTest, KillDashNineHalfWayLeavesNothingHalfDone) {
  const std::string entry = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("slow"), ""));

  // `npc compile` in its own process group (ninja stays in it), output to a file.
  const std::string log_path = tmp_.Sub("cli.log");
  pid_t cli = fork();
  ASSERT_GE(cli, 0);
  if (cli == 0) {
    setpgid(0, 0);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    for (const auto& [k, v] : env_) {
      if (v == "<unset>") unsetenv(k.c_str());
      else setenv(k.c_str(), v.c_str(), 1);
    }
    execl(NPC_TOOL, NPC_TOOL, "compile", "--cache", cache_.c_str(), "--num_parallel", "1", (char*)nullptr);
    _exit(127);
  }
  setpgid(cli, cli);

  // Wait until the C++ compiler of the entry runs.
  const std::string started = tmp_.Sub("started");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!FileExists(started) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(FileExists(started)) << ReadFile(log_path);
  pid_t compiler_pid = 0, edge_pid = 0;
  std::istringstream(ReadFile(started)) >> compiler_pid >> edge_pid;
  ASSERT_GT(compiler_pid, 0);
  ASSERT_GT(edge_pid, 0);
  EXPECT_EQ(State(entry), EntryState::kLocked);

  // kill -9: the per-edge process first (so it cannot react), then the
  // compiler's process group, then npc and ninja.
  kill(edge_pid, SIGKILL);
  kill(-compiler_pid, SIGKILL);
  kill(-cli, SIGKILL);
  int status = 0;
  waitpid(cli, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));

  // The lock dies with its process (allow the kernel a moment to reap).
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (State(entry) == EntryState::kLocked && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(State(entry), EntryState::kTodo);
  EXPECT_FALSE(FileExists(Path(entry, "model.so")));
  EXPECT_FALSE(FileExists(Path(entry, "model.done")));
  EXPECT_FALSE(FileExists(Path(entry, "model.log")));

  // The next run compiles it, without anyone clearing locks.
  fs::remove(tmp_.Sub("slow"));
  std::map<std::string, std::string> env = env_;
  auto run = RunCommand({NPC_TOOL, "compile", "--cache", cache_}, env);
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_EQ(State(entry), EntryState::kDone);
  EXPECT_TRUE(FileExists(Path(entry, "model.so")));
  // No work directory of the killed compile is left behind.
  for (const auto& f : fs::directory_iterator(cache_ + "/" + entry)) {
    EXPECT_EQ(f.path().filename().string().rfind(".npc-work-", 0), std::string::npos) << f.path();
  }
}

TEST_F(RobustnessTest, TwoCompilesAtOnceCompileEachEntryOnce) {
  std::vector<std::string> entries;
  for (int n : {8, 16, 24}) entries.push_back(testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(n)));
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("delay"), ""));  // widen the overlap

  CommandResult r1, r2;
  std::thread t1([&] { r1 = RunCommand({NPC_TOOL, "compile", "--cache", cache_, "--num_parallel", "2"}, env_); });
  std::thread t2([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r2 = RunCommand({NPC_CLI, "--command", "compile", "--cache_dir", cache_, "--num_parallel", "2"}, env_);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(r1.exit_status, 0) << r1.output;
  EXPECT_EQ(r2.exit_status, 0) << r2.output;
  EXPECT_NE(r1.output.find("Total failed compilations: 0"), std::string::npos) << r1.output;
  EXPECT_NE(r2.output.find("Total failed compilations: 0"), std::string::npos) << r2.output;
  // Both planned the entries (both ninjas ran compile edges), so they really overlapped.
  EXPECT_NE(r1.output.find("] NPC "), std::string::npos) << r1.output;
  EXPECT_NE(r2.output.find("] NPC "), std::string::npos) << r2.output;
  for (const auto& e : entries) EXPECT_EQ(State(e), EntryState::kDone) << e;
  EXPECT_EQ(CountLines(tmp_.Sub("count")), static_cast<int>(entries.size())) << ReadFile(tmp_.Sub("count"));
}

}  // namespace
}  // namespace npc
