// RunProcess: exit statuses, output capture, environment, timeouts, and the
// errors of a program that cannot be started. Runs real /bin/sh children.
#include "compilers/process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fstream>

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace npc {
namespace {

TEST(RunProcess, CapturesOutputAndExitStatus) {
  auto r = RunProcess({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_status, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_NE(r->output.find("out\n"), std::string::npos);
  EXPECT_NE(r->output.find("err\n"), std::string::npos);
}

TEST(RunProcess, KilledBySignalIs128PlusSignal) {
  auto r = RunProcess({"sh", "-c", "kill -9 $$"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_status, 128 + 9);
}

TEST(RunProcess, SetsAndUnsetsEnvironmentAndWorkingDirectory) {
  testing::TempDir dir;
  setenv("NPC_PROCESS_TEST_DROP", "x", 1);
  ProcessOptions o;
  o.cwd = dir.path();
  o.set_env["NPC_PROCESS_TEST_SET"] = "value 1";
  o.unset_env.push_back("NPC_PROCESS_TEST_DROP");
  auto r = RunProcess({"sh", "-c", "echo \"[$NPC_PROCESS_TEST_SET][${NPC_PROCESS_TEST_DROP-unset}]\"; pwd -P"}, o);
  unsetenv("NPC_PROCESS_TEST_DROP");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_status, 0);
  EXPECT_NE(r->output.find("[value 1][unset]"), std::string::npos) << r->output;
  char real[4096];
  ASSERT_NE(realpath(dir.path().c_str(), real), nullptr);
  EXPECT_NE(r->output.find(std::string(real) + "\n"), std::string::npos) << r->output;
}

TEST(RunProcess, TimeoutKillsTheWholeProcessTree) {
  testing::TempDir dir;
  std::string marker = dir.Sub("grandchild-survived");
  ProcessOptions o;
  o.timeout_seconds = 0.5;
  // The grandchild would write the marker after 2 s unless its group is killed.
  auto r = RunProcess({"sh", "-c", "(sleep 2; touch '" + marker + "') & sleep 30"}, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_status, -1);
  EXPECT_LT(r->seconds, 10);
  sleep(3);
  struct stat st;
  EXPECT_NE(stat(marker.c_str(), &st), 0) << "a grandchild outlived the timeout";
}

TEST(RunProcess, ForegroundChildInheritsOutputAndReportsStatus) {
  ProcessOptions o;
  o.capture_output = false;
  o.new_process_group = false;
  auto r = RunProcess({"sh", "-c", "exit 7"}, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->exit_status, 7);
  EXPECT_TRUE(r->output.empty());
}

TEST(RunProcess, ProgramNotFoundIsAnError) {
  auto r = RunProcess({"npc-no-such-program-xyz"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("npc-no-such-program-xyz"), std::string::npos) << r.error().message;
}

TEST(RunProcess, ExecFailureIsAnErrorNamingTheProgram) {
  testing::TempDir dir;
  // Executable bit set, but not a valid executable or script: execve fails with ENOEXEC.
  std::string bogus = dir.Sub("bogus");
  {
    std::ofstream f(bogus, std::ios::binary);
    f << std::string("\x7f" "ELF\x01\x02", 6);
  }
  ASSERT_EQ(chmod(bogus.c_str(), 0755), 0);
  auto r = RunProcess({bogus});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot execute " + bogus), std::string::npos) << r.error().message;
}

TEST(RunProcess, MissingWorkingDirectoryIsAnError) {
  testing::TempDir dir;
  ProcessOptions o;
  o.cwd = dir.Sub("absent");
  auto r = RunProcess({"true"}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot enter directory " + o.cwd), std::string::npos) << r.error().message;
}

bool WaitForFile(const std::string& path, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (!testing::FileExists(path) || testing::ReadFile(path).empty()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Gone or a zombie (a child of init that is not reaped yet).
bool ProcessEnded(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_text, name, state;
  stat >> pid_text >> name >> state;
  return state == "Z" || state == "X";
}

// A process that dies by SIGKILL (it cannot forward anything) takes its
// compiler with it: PR_SET_PDEATHSIG in the child.
TEST(RunProcess, ChildIsStoppedWhenItsParentDies) {
  testing::TempDir dir;
  const std::string pid_file = dir.Sub("child.pid");
  pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    (void)RunProcess({"sh", "-c", "echo $$ > '" + pid_file + "'; exec sleep 60"});
    _exit(0);
  }
  ASSERT_TRUE(WaitForFile(pid_file, 20));
  pid_t child = std::stoi(testing::ReadFile(pid_file));
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ProcessEnded(child) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ProcessEnded(child)) << "the child " << child << " outlived its parent";
  kill(child, SIGKILL);
}

// With InstallInterruptForwarding(defer), a SIGTERM to the process reaches
// the child's process group, RunProcess waits for it and reports its status,
// the signal is recorded, and no further child is started.
TEST(RunProcess, InterruptIsForwardedToTheChildAndWaitedFor) {
  testing::TempDir dir;
  const std::string pid_file = dir.Sub("child.pid");
  const std::string report = dir.Sub("report");
  pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    signal(SIGTERM, SIG_DFL);  // whatever the test runner left ignored
    InstallInterruptForwarding(/*defer=*/true);
    auto first = RunProcess({"sh", "-c",
                             "trap 'echo got-TERM; exit 7' TERM; echo $$ > '" + pid_file +
                                 "'; while :; do sleep 0.05; done"});
    auto second = RunProcess({"true"});
    std::ofstream out(report);
    out << (first.ok() ? first->exit_status : -1) << "\n"
        << (first.ok() ? first->output : first.error().message) << "\n"
        << (second.ok() ? "second started" : second.error().message) << "\n";
    out.close();
    _exit(InterruptSignal());
  }
  ASSERT_TRUE(WaitForFile(pid_file, 20));
  ASSERT_EQ(kill(parent, SIGTERM), 0);
  int status = 0;
  waitpid(parent, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), SIGTERM) << "the signal is recorded and the process was not killed by it";
  const std::string text = testing::ReadFile(report);
  EXPECT_EQ(text.rfind("7\n", 0), 0u) << text;
  EXPECT_NE(text.find("got-TERM"), std::string::npos) << text;
  EXPECT_NE(text.find("not started (interrupted by SIGTERM)"), std::string::npos) << text;
}

TEST(ShellQuote, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(ShellQuote("plain-word_1.x"), "plain-word_1.x");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellJoin({"echo", "a b", "$x"}), "echo 'a b' '$x'");
}

}  // namespace
}  // namespace npc
