// End-to-end robustness: a compile killed with SIGKILL half-way leaves
// nothing half-done and nothing blocking; two `npc compile` at once on one
// cache compile every entry exactly once.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
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
// "<own pid> <parent pid>" to <dir>/started and appending it to <dir>/pids),
// sleeps 1 s when <dir>/delay exists, fails (exit 1) when <dir>/fail exists,
// else runs the real compiler.
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
      "  flock \"$D/count\" sh -c 'echo \"$2 $3\" >> \"$1\"' sh \"$D/pids\" $$ $PPID\n"
      "  sleep 300\n"
      "fi\n"
      "[ -e \"$D/delay\" ] && sleep 1\n"
      "if [ -e \"$D/fail\" ]; then echo 'cxx-wrapper: failing as asked' >&2; exit 1; fi\n"
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

// Whether no process of process group `pgid` is left (zombies included in
// "left" until reaped: kill(-pgid, 0) fails with ESRCH only when none is).
bool GroupGone(pid_t pgid) { return kill(-pgid, 0) != 0 && errno == ESRCH; }

// Waits up to `seconds` for `pred`.
template <typename Pred>
bool WaitFor(Pred pred, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Pairs "<pid> <parent pid>" of <dir>/pids (the wrapper's slow compiles).
std::vector<std::pair<pid_t, pid_t>> ReadPids(const std::string& path) {
  std::vector<std::pair<pid_t, pid_t>> out;
  if (!FileExists(path)) return out;
  std::istringstream in(ReadFile(path));
  pid_t a = 0, b = 0;
  while (in >> a >> b) out.emplace_back(a, b);
  return out;
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
  // Starts `argv` (with env_) in the background, leading its own process
  // group, output to `log_path`; returns its pid.
  pid_t Start(const std::vector<std::string>& argv, const std::string& log_path) {
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      // As a shell starts a foreground command, whatever this test inherited.
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      for (const auto& [k, v] : env_) {
        if (v == "<unset>") unsetenv(k.c_str());
        else setenv(k.c_str(), v.c_str(), 1);
      }
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    if (pid > 0) setpgid(pid, pid);
    return pid;
  }
  // Waits up to `seconds` for `pid`; its wait status, or -1 (then killed).
  int WaitExit(pid_t pid, double seconds) {
    int status = 0;
    if (WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, seconds)) return status;
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }

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

  // kill -9: npc and ninja are stopped first (so that an edge dying cannot
  // let them finish normally before their own SIGKILL lands), then the
  // per-edge process (so it cannot react), the compiler's process group, and
  // npc and ninja.
  kill(-cli, SIGSTOP);
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

// SIGTERM to `npc compile` (a job scheduler stopping it) while its compiles
// run: npc stops ninja, ninja stops the edges, each edge stops its compiler
// (its own process group) and releases its lock; nothing is recorded as a
// failure, and the next run compiles each entry once.
TEST_F(RobustnessTest, SigtermToCompileStopsEveryCompilerAndLeavesNoLock) {
  std::vector<std::string> entries;
  for (int n : {8, 16}) entries.push_back(testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(n)));
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("slow"), ""));
  const std::string log_path = tmp_.Sub("cli.log");
  pid_t cli = Start({NPC_TOOL, "compile", "--cache", cache_, "--num_parallel", "2"}, log_path);
  ASSERT_GT(cli, 0);
  ASSERT_TRUE(WaitFor([&] { return ReadPids(tmp_.Sub("pids")).size() == 2; }, 120)) << ReadFile(log_path);
  const auto compilers = ReadPids(tmp_.Sub("pids"));
  for (const auto& e : entries) EXPECT_EQ(State(e), EntryState::kLocked) << e;

  ASSERT_EQ(kill(cli, SIGTERM), 0);  // npc only, not its process group
  int status = WaitExit(cli, 60);
  ASSERT_NE(status, -1) << "npc compile did not stop within 60 s\n" << ReadFile(log_path);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status << "\n" << ReadFile(log_path);
  EXPECT_NE(ReadFile(log_path).find("Interrupted by"), std::string::npos) << ReadFile(log_path);
  // No compiler (the wrapper and its sleep: its process group), no edge, no
  // ninja (npc's group) is left.
  for (const auto& [compiler, edge] : compilers) {
    EXPECT_TRUE(WaitFor([&] { return GroupGone(compiler); }, 10)) << "compiler group " << compiler << " still runs";
    EXPECT_TRUE(WaitFor([&] { return GroupGone(edge); }, 10)) << "compile-entry " << edge << " still runs";
  }
  EXPECT_TRUE(WaitFor([&] { return GroupGone(cli); }, 10)) << "ninja still runs";
  for (const auto& e : entries) {
    EXPECT_EQ(State(e), EntryState::kTodo) << e;  // not LOCKED, not FAILED
    EXPECT_FALSE(FileExists(Path(e, "model.log"))) << e;
    EXPECT_FALSE(FileExists(Path(e, "model.done"))) << e;
  }

  fs::remove(tmp_.Sub("slow"));
  fs::remove(tmp_.Sub("count"));
  auto run = RunCommand({NPC_TOOL, "compile", "--cache", cache_}, env_);
  EXPECT_EQ(run.exit_status, 0) << run.output;
  for (const auto& e : entries) EXPECT_EQ(State(e), EntryState::kDone) << e;
  EXPECT_EQ(CountLines(tmp_.Sub("count")), 2) << ReadFile(tmp_.Sub("count"));
}

// Ctrl-C (SIGINT to the foreground process group) during `npc compile
// --manifest`: ninja runs in npc's group and gets it, stops its edges, each
// edge stops its compiler; npc exits 130 and nothing is left running.
TEST_F(RobustnessTest, CtrlCStopsCompileFromManifest) {
  const std::string entry = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string manifest = tmp_.Sub("npc.lock.json");
  auto made = RunCommand({NPC_TOOL, "manifest", "--cache", cache_, "-o", manifest}, env_);
  ASSERT_EQ(made.exit_status, 0) << made.output;
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("slow"), ""));
  const std::string log_path = tmp_.Sub("cli.log");
  pid_t cli = Start({NPC_TOOL, "compile", "--cache", cache_, "--manifest", manifest}, log_path);
  ASSERT_GT(cli, 0);
  ASSERT_TRUE(WaitFor([&] { return ReadPids(tmp_.Sub("pids")).size() == 1; }, 120)) << ReadFile(log_path);
  const auto [compiler, edge] = ReadPids(tmp_.Sub("pids"))[0];

  ASSERT_EQ(kill(-cli, SIGINT), 0);  // what the terminal does on Ctrl-C
  int status = WaitExit(cli, 60);
  ASSERT_NE(status, -1) << "npc compile --manifest did not stop within 60 s\n" << ReadFile(log_path);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT) << status << "\n" << ReadFile(log_path);
  EXPECT_TRUE(WaitFor([&] { return GroupGone(compiler); }, 10)) << "the compiler still runs";
  EXPECT_TRUE(WaitFor([&] { return GroupGone(edge); }, 10)) << "compile-entry still runs";
  EXPECT_TRUE(WaitFor([&] { return GroupGone(cli); }, 10)) << "ninja still runs";
  EXPECT_EQ(State(entry), EntryState::kTodo);
  EXPECT_FALSE(FileExists(Path(entry, "model.log")));
}

// Four `npc compile` at once on one cache whose module fails to compile: the
// compiler runs once; the runs that waited report the cached failure, and
// each run's summary reports its own edge (per-run result records).
TEST_F(RobustnessTest, FourConcurrentCompilesRunAFailingCompileOnce) {
  const std::string entry = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("fail"), ""));
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("delay"), ""));  // the others start while it compiles
  std::vector<CommandResult> results(4);
  std::vector<std::thread> runs;
  for (int i = 0; i < 4; ++i) {
    runs.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * i));
      results[i] = RunCommand({NPC_TOOL, "compile", "--cache", cache_}, env_);
    });
  }
  for (auto& t : runs) t.join();
  EXPECT_EQ(CountLines(tmp_.Sub("count")), 1) << ReadFile(tmp_.Sub("count"));
  EXPECT_EQ(State(entry), EntryState::kFailed);
  int compiled_here = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_status, 1) << r.output;
    EXPECT_NE(r.output.find("Total failed compilations: 1"), std::string::npos) << r.output;
    if (r.output.find("\"detail\": \"failed\"") != std::string::npos) {
      ++compiled_here;
    } else {
      EXPECT_NE(r.output.find("cached failure"), std::string::npos) << r.output;
    }
  }
  EXPECT_EQ(compiled_here, 1) << "exactly one run compiled (and failed) the module; its summary says so";
  // Each run moved its result records up and removed its run folder.
  const std::string results_dir = cache_ + "/" + dir_ + "/.npc-build/results";
  for (const auto& f : fs::directory_iterator(results_dir)) EXPECT_FALSE(f.is_directory()) << f.path();
  EXPECT_TRUE(FileExists(results_dir + "/" + entry.substr(entry.rfind('/') + 1) + ".json"));
}

// libneuronxla's lock: while another process holds model.hlo_module.pb.lock
// (flock), the entry is LOCKED: scan says so, compile waits and never
// compiles over it, clean leaves it, clear-locks leaves the live lock file.
TEST_F(RobustnessTest, HeldForeignLockIsNeverCompiledOver) {
  const std::string entry = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string foreign = Path(entry, "model.hlo_module.pb.lock");
  const std::string ready = tmp_.Sub("holder-ready");
  pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    int fd = open(foreign.c_str(), O_RDWR | O_CREAT, 0644);  // as Python's filelock does
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
    close(open(ready.c_str(), O_WRONLY | O_CREAT, 0644));
    pause();
    _exit(0);
  }
  ASSERT_TRUE(WaitFor([&] { return FileExists(ready); }, 10));

  auto scan = RunCommand({NPC_TOOL, "scan", "--cache", cache_}, env_);
  EXPECT_EQ(scan.exit_status, 0) << scan.output;
  EXPECT_NE(scan.output.find("LOCKED"), std::string::npos) << scan.output;
  EXPECT_EQ(State(entry), EntryState::kLocked);

  auto clear = RunCommand({NPC_TOOL, "clear-locks", "--cache", cache_}, env_);
  EXPECT_EQ(clear.exit_status, 0) << clear.output;
  EXPECT_TRUE(FileExists(foreign)) << clear.output;
  auto clean = RunCommand({NPC_TOOL, "clean", "--cache", cache_}, env_);
  EXPECT_EQ(clean.exit_status, 0) << clean.output;
  EXPECT_TRUE(FileExists(Path(entry, "model.hlo_module.pb"))) << clean.output;
  EXPECT_NE(clean.output.find("another tool"), std::string::npos) << clean.output;

  const std::string log_path = tmp_.Sub("cli.log");
  pid_t cli = Start({NPC_TOOL, "compile", "--cache", cache_}, log_path);
  ASSERT_GT(cli, 0);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(CountLines(tmp_.Sub("count")), 0) << "compiled while another tool held the lock\n" << ReadFile(log_path);
  EXPECT_EQ(State(entry), EntryState::kLocked);

  kill(holder, SIGKILL);  // the other tool ends: its flock goes with it
  waitpid(holder, nullptr, 0);
  int status = WaitExit(cli, 120);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(log_path);
  EXPECT_EQ(State(entry), EntryState::kDone);
  EXPECT_EQ(CountLines(tmp_.Sub("count")), 1);
}

}  // namespace
}  // namespace npc
