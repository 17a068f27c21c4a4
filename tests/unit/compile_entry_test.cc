// Unit tests of CompileEntry (runtime/api/compile_entry.cc) with a fake
// compiler: commit order, failure logs, retries, cached failures, locks; and
// with a fake remote store: artifacts kept when an upload fails.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include "npc/compiler.h"
#include "support/test_support.h"
#include "util/digest.h"

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

TEST_F(CompileEntryTest, ModelDoneRecordsTheArtifactsSizeAndDigest) {
  FakeCompiler compiler;
  ASSERT_TRUE(CompileEntry(store, compiler, entry, {}).ok());
  auto record = cache::ReadDoneFile(store, entry);
  ASSERT_TRUE(record.ok() && record->has_value()) << (record.ok() ? "empty model.done" : record.error().message);
  EXPECT_EQ((*record)->artifact, "model.bin");
  EXPECT_EQ((*record)->size, 8);
  EXPECT_EQ((*record)->sha256, util::Sha256Hex("ARTIFACT"));
}

TEST_F(CompileEntryTest, DamagedArtifactIsCompiledAgain) {
  FakeCompiler compiler;
  ASSERT_TRUE(CompileEntry(store, compiler, entry, {}).ok());
  // Same size, other bytes: only the digest tells.
  ASSERT_TRUE(npc::testing::WriteFile(*store.LocalPath(entry.file("model.bin")), "ARTIFACX"));
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kDone);
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, Outcome::kCompiled);
  EXPECT_NE(r->damage.find("SHA-256 of model.bin"), std::string::npos) << r->damage;
  EXPECT_EQ(compiler.calls, 2);
  EXPECT_EQ(*store.Read(entry.file("model.bin")), "ARTIFACT");
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin", cache::ArtifactCheck::kDigest), cache::EntryState::kDone);

  // Emptied and failing to compile again: no damaged artifact stays, the failure is cached.
  ASSERT_TRUE(npc::testing::WriteFile(*store.LocalPath(entry.file("model.bin")), ""));
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kDamaged);
  FakeCompiler failing(1);
  r = CompileEntry(store, failing, entry, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, Outcome::kFailed);
  EXPECT_FALSE(*store.Exists(entry.file("model.bin")));
  EXPECT_FALSE(*store.Exists(entry.file("model.done")));
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kFailed);
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

// A waiter that gets the lock after the holder's compile FAILED reports the
// cached failure: it does not compile again.
TEST_F(CompileEntryTest, WaiterFindingAFailureReportsItWithoutCompiling) {
  FakeCompiler compiler;
  auto held = store.TryLock(entry.dir());
  ASSERT_TRUE(held.ok() && *held);
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(store.WriteAtomic(entry.file("model.log"), "error: from the other process\n").ok());
    held->reset();
  });
  EntryCompileOptions wait;
  wait.wait_for_lock = true;
  auto r = CompileEntry(store, compiler, entry, wait);
  holder.join();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, Outcome::kCachedFailure);
  EXPECT_EQ(r->log, "error: from the other process\n");
  EXPECT_EQ(compiler.calls, 0);
}

// Another tool's held lock file (libneuronxla's model.hlo_module.pb.lock):
// LOCKED; reported or waited for, never compiled over.
TEST_F(CompileEntryTest, ForeignLockIsWaitedForNeverCompiledOver) {
  FakeCompiler compiler;
  const std::string foreign = dir.path() + "/" + entry.file("model.hlo_module.pb.lock");
  int fd = open(foreign.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);  // another open file: conflicts like another process
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kLocked);
  auto held = cache::IsFileLockHeld(foreign);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(*held);
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, Outcome::kLocked);
  EXPECT_EQ(compiler.calls, 0);
  EXPECT_FALSE(*store.Exists(entry.file("model.lock"))) << "npc's own lock is let go";

  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    close(fd);  // the lock file stays, unheld (as filelock leaves it)
  });
  EntryCompileOptions wait;
  wait.wait_for_lock = true;
  auto waited = CompileEntry(store, compiler, entry, wait);
  releaser.join();
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->status, Outcome::kCompiled);
  EXPECT_EQ(compiler.calls, 1);
  held = cache::IsFileLockHeld(foreign);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(*held);
  EXPECT_FALSE(*cache::IsFileLockHeld(foreign + ".absent"));
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

// A remote store as CompileEntry sees one (no local paths, an s3:// URL),
// kept in a local directory; uploads of the named files fail while
// `unreachable` holds them, as when the server is gone.
class FakeRemoteStore : public cache::LocalStore {
 public:
  using cache::LocalStore::LocalStore;
  std::string url() const override { return "s3://fake-bucket/cache"; }
  std::optional<std::string> LocalPath(const std::string&) const override { return std::nullopt; }
  Status WriteAtomic(const std::string& path, std::string_view data) override {
    if (Refused(path)) return MakeError("PUT " + url() + "/" + path + ": Couldn't connect to server");
    return cache::LocalStore::WriteAtomic(path, data);
  }
  // Like S3Store: reads the local file and leaves it in place.
  Status PutFileAtomic(const std::string& path, const std::string& local_path) override {
    if (Refused(path)) return MakeError("PUT " + url() + "/" + path + ": Couldn't connect to server");
    return cache::LocalStore::WriteAtomic(path, testing::ReadFile(local_path));
  }
  std::vector<std::string> unreachable;  // file names ("model.bin") whose upload fails

 private:
  bool Refused(const std::string& path) const {
    for (const auto& name : unreachable) {
      if (path.size() >= name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0) return true;
    }
    return false;
  }
};

class RemoteCompileEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("NPC_LOCAL_CACHE_DIR");
    if (old != nullptr) old_local_root_ = old;
    setenv("NPC_LOCAL_CACHE_DIR", local.path().c_str(), 1);
    ASSERT_TRUE(cache::PutEntryInputs(store, entry, "HLO", "[]").ok());
  }
  void TearDown() override {
    if (old_local_root_) setenv("NPC_LOCAL_CACHE_DIR", old_local_root_->c_str(), 1);
    else unsetenv("NPC_LOCAL_CACHE_DIR");
  }
  std::string Kept() const { return local.path() + "/" + entry.dir() + "/model.bin.not-uploaded"; }

  TempDir remote;
  TempDir local;
  FakeRemoteStore store{remote.path()};
  cache::EntryRef entry{"fake-1", "123", "abcdef01"};
  std::optional<std::string> old_local_root_;
};

TEST_F(RemoteCompileEntryTest, FailedUploadKeepsTheArtifactAndTheNextCompileUploadsIt) {
  EXPECT_EQ(KeptArtifactPath(store.url(), entry, "model.bin"), Kept());
  FakeCompiler compiler;
  store.unreachable = {"model.bin"};
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("compiled, but not uploaded"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(Kept()), std::string::npos) << r.error().message;
  EXPECT_EQ(compiler.calls, 1);
  EXPECT_EQ(testing::ReadFile(Kept()), "ARTIFACT");
  // Nothing half-committed in the store, and the lock is released.
  EXPECT_EQ(*store.List(entry.dir()), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kTodo);

  // Still unreachable: the kept artifact stays, nothing is compiled again.
  auto still = CompileEntry(store, compiler, entry, {});
  ASSERT_FALSE(still.ok());
  EXPECT_NE(still.error().message.find("still not uploaded"), std::string::npos) << still.error().message;
  EXPECT_EQ(compiler.calls, 1);
  EXPECT_TRUE(FileExists(Kept()));

  // Reachable again: uploaded, not recompiled, then model.done.
  store.unreachable.clear();
  auto again = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->status, Outcome::kCompiled);
  EXPECT_TRUE(again->uploaded_kept_artifact);
  EXPECT_EQ(compiler.calls, 1);
  EXPECT_EQ(*store.Read(entry.file("model.bin")), "ARTIFACT");
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kDone);
  EXPECT_FALSE(FileExists(Kept()));
}

TEST_F(RemoteCompileEntryTest, FailedCommitPointKeepsTheArtifactToo) {
  FakeCompiler compiler;
  store.unreachable = {"model.done"};
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("compiled, but not uploaded"), std::string::npos) << r.error().message;
  EXPECT_TRUE(FileExists(Kept()));
  EXPECT_FALSE(*store.Exists(entry.file("model.done")));
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.bin"), cache::EntryState::kTodo);
}

TEST_F(RemoteCompileEntryTest, KeptArtifactIsDroppedWhenAnotherHostCompletedTheEntry) {
  ASSERT_TRUE(testing::WriteFile(Kept(), "OLD"));
  ASSERT_TRUE(store.WriteAtomic(entry.file("model.bin"), "ARTIFACT").ok());
  ASSERT_TRUE(store.WriteAtomic(entry.file("model.done"), "").ok());
  FakeCompiler compiler;
  auto r = CompileEntry(store, compiler, entry, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, Outcome::kAlreadyDone);
  EXPECT_FALSE(FileExists(Kept()));
  EXPECT_EQ(*store.Read(entry.file("model.bin")), "ARTIFACT");
}

}  // namespace
}  // namespace npc
