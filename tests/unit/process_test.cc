// RunProcess: exit statuses, output capture, environment, timeouts, and the
// errors of a program that cannot be started. Runs real /bin/sh children.
#include "compilers/process.h"

#include <sys/stat.h>

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

TEST(ShellQuote, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(ShellQuote("plain-word_1.x"), "plain-word_1.x");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellJoin({"echo", "a b", "$x"}), "echo 'a b' '$x'");
}

}  // namespace
}  // namespace npc
