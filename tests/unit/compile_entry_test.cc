// Unit tests of CompileEntry (runtime/api/compile_entry.cc) with a fake
// compiler: commit order, failure logs, retries, cached failures, locks.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "npc/compiler.h"
#include "support/test_support.h"

namespace npc {
namespace {

using npc::testing::FileExists;
using npc::testing::TempDir;
using Outcome = EntryCompileResult::Status;

// Fails the first `failures` compiles, then writes "ARTIFACT:<flags>".
class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(int failures = 0) : failures_(failures) {}
  std::string backend() const override { return "fake"; }
  Result<std::string> CacheDirectoryName() override { return std::string("fake-1"); }
  std::string ArtifactName() const override { return "model.bin"; }
  int64_t DefaultMemoryPerCompileBytes() const override { return 1; }
  CompileOutcome Compile(const CompileJob& job) override {
    ++calls;
    seen_flags = job.flags;
    CompileOutcome out;
    out.command = "fake-cc " + job.hlo_path;
    if (calls <= failures_) {
      out.exit_status = 3;
      out.output = "fake error: attempt " + std::to_string(calls.load()) + "\n";
      return out;
    }
    std::ofstream(job.artifact_path) << "ARTIFACT";
    out.ok = true;
    return out;
  }
  std::atomic<int> calls{0};
  std::vector<std::string> seen_flags;

 private:
  int failures_;
};

class CompileEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cache::PutEntryInputs(store, entry, "HLO", R"(["--flag", "-O1"])").ok());
  }
  TempDir dir;
  cache::LocalStore store{dir.path()};
  cache::EntryRef entry{"fake-1", "123", "abcdef01"};
};

TEST_F(CompileEntryTest, CompilesThenCommitsArtifactBeforeDone) {
  FakeCompiler compiler;
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, Outcome::kCompiled);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(compiler.seen_flags, (std::vector<std::string>{"--flag", "-O1"}));
  EXPECT_EQ(*store.Read(entry.file("model.bin")), "ARTIFACT");
  EXPECT_TRUE(*store.Exists(entry.file("model.done")));
  EXPECT_FALSE(*store.Exists(entry.file("model.lock")));
  // Nothing else is left in the entry (no work directories, no temporaries).
  EXPECT_EQ(*store.List(entry.dir()), (std::vector<std::string>{"compile_flags.json", "model.bin", "model.done",
                                                                 "model.hlo_module.pb"}));
  // A second call finds it done and does not compile.
  auto again = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, Outcome::kAlreadyDone);
  EXPECT_EQ(compiler.calls, 1);
}

TEST_F(CompileEntryTest, FailureWritesLogWithCommandStatusAndOutput) {
  FakeCompiler compiler(/*failures=*/100);
  EntryCompileOptions options;
  options.max_retries = 2;
  auto r = CompileEntry(store, compiler, entry, options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kFailed);
  EXPECT_EQ(r->attempts, 3);
  auto log = store.Read(entry.file("model.log"));
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("command: fake-cc "), std::string::npos) << *log;
  EXPECT_NE(log->find("exit status: 3"), std::string::npos);
  EXPECT_NE(log->find("attempts: 3"), std::string::npos);
  EXPECT_NE(log->find("fake error: attempt 3"), std::string::npos);
  EXPECT_FALSE(*store.Exists(entry.file("model.bin")));
  EXPECT_FALSE(*store.Exists(entry.file("model.done")));
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kFailed);

  // A cached failure is reported, not retried...
  auto cached = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->status, Outcome::kCachedFailure);
  EXPECT_EQ(compiler.calls, 3);
  EXPECT_NE(cached->log.find("fake error"), std::string::npos);
}

TEST_F(CompileEntryTest, RetriesSucceedAndRetryFailedRecompiles) {
  FakeCompiler flaky(/*failures=*/1);
  EntryCompileOptions options;
  options.max_retries = 1;
  auto r = CompileEntry(store, flaky, entry, options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kCompiled);
  EXPECT_EQ(r->attempts, 2);

  cache::EntryRef other{"fake-1", "456", "abcdef01"};
  ASSERT_TRUE(cache::PutEntryInputs(store, other, "HLO", "[]").ok());
  FakeCompiler fails_once(1);
  ASSERT_EQ(CompileEntry(store, fails_once, other, {})->status, Outcome::kFailed);
  EntryCompileOptions retry;
  retry.retry_failed_compilation = true;
  auto retried = CompileEntry(store, fails_once, other, retry);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried->status, Outcome::kCompiled);
  EXPECT_FALSE(*store.Exists(other.file("model.log")));  // the old failure is gone
  EXPECT_EQ(*cache::GetEntryState(store, other, "model.bin"), cache::EntryState::kDone);
}

TEST_F(CompileEntryTest, LockedEntryIsReportedOrWaitedFor) {
  FakeCompiler compiler;
  auto held = store.TryLock(entry.dir());
  ASSERT_TRUE(held.ok() && *held);
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kLocked);
  EXPECT_EQ(compiler.calls, 0);

  // With wait_for_lock, it compiles once the holder lets go.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    held->reset();
  });
  EntryCompileOptions wait;
  wait.wait_for_lock = true;
  auto waited = CompileEntry(store, compiler, entry, wait);
  releaser.join();
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->status, Outcome::kCompiled);
  EXPECT_EQ(compiler.calls, 1);
}

TEST_F(CompileEntryTest, LeftoversOfAKilledCompileAreCleanedAndIgnored) {
  // What a kill -9 leaves: a work directory with a partial artifact, and a
  // lock file nobody holds.
  ASSERT_TRUE(store.WriteAtomic(entry.file(".npc-work-999-abcdef/model.bin"), "PARTIAL").ok());
  ASSERT_TRUE(store.WriteAtomic(entry.file("model.lock"), "pid 999\n").ok());
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kTodo);
  FakeCompiler compiler;
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kCompiled);
  EXPECT_FALSE(*store.Exists(entry.file(".npc-work-999-abcdef")));
  EXPECT_EQ(*store.Read(entry.file("model.bin")), "ARTIFACT");
}

TEST_F(CompileEntryTest, BadCompileFlagsFileFailsNamingIt) {
  ASSERT_TRUE(store.WriteAtomic(entry.file("compile_flags.json"), "[not json").ok());
  FakeCompiler compiler;
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kFailed);
  EXPECT_EQ(compiler.calls, 0);
  EXPECT_NE(r->log.find(entry.file("compile_flags.json")), std::string::npos) << r->log;
}

TEST_F(CompileEntryTest, MissingHloIsReported) {
  cache::EntryRef empty{"fake-1", "789", "abcdef01"};
  ASSERT_TRUE(store.WriteAtomic(empty.file("compile_flags.json"), "[]").ok());
  FakeCompiler compiler;
  auto r = CompileEntry(store, compiler, empty, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kNoHlo);
}

}  // namespace
}  // namespace npc
