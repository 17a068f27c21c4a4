// Cache scan and build plan (generator/plan.h) on a fake cache directory.
#include "generator/plan.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace npc::tool {
namespace {

using cache::EntryState;
using npc::testing::TempDir;
using npc::testing::WriteFile;

constexpr char kDir[] = "host-test-cg1";

class PlanTest : public ::testing::Test {
 protected:
  std::string Entry(const std::string& name) { return tmp_.Sub(std::string(kDir) + "/" + name); }
  void Put(const std::string& entry, const std::string& file, const std::string& data = "") {
    ASSERT_TRUE(WriteFile(Entry(entry) + "/" + file, data));
  }
  std::vector<ScannedEntry> Scan() {
    cache::LocalStore store(tmp_.path());
    auto scan = ScanCompilerDir(store, kDir, "model.so");
    EXPECT_TRUE(scan.ok()) << (scan.ok() ? "" : scan.error().message);
    return scan.ok() ? *scan : std::vector<ScannedEntry>{};
  }
  const ScannedEntry* Find(const std::vector<ScannedEntry>& scan, const std::string& key) {
    for (const auto& e : scan) {
      if (e.ref.graph_key == key) return &e;
    }
    return nullptr;
  }
  TempDir tmp_;
};

TEST_F(PlanTest, DamagedEntriesAreCompiledAgain) {
  // Cut to half the size model.done records: the cheap (size) scan sees it.
  Put("MODULE_1+aaaaaaaa", "model.hlo_module.pb", "x");
  Put("MODULE_1+aaaaaaaa", "model.so", "ELF");
  Put("MODULE_1+aaaaaaaa", "model.done", cache::DoneFileText({"model.so", 6, std::string(64, '0')}));
  // Same size, other bytes: only a digest scan sees it.
  Put("MODULE_2+aaaaaaaa", "model.hlo_module.pb", "x");
  Put("MODULE_2+aaaaaaaa", "model.so", "ELF");
  Put("MODULE_2+aaaaaaaa", "model.done", cache::DoneFileText({"model.so", 3, std::string(64, '0')}));
  auto scan = Scan();
  ASSERT_EQ(scan.size(), 2u);
  EXPECT_EQ(Find(scan, "1")->state, EntryState::kDamaged);
  EXPECT_EQ(Find(scan, "2")->state, EntryState::kDone);
  cache::LocalStore store(tmp_.path());
  auto digest_scan = ScanCompilerDir(store, kDir, "model.so", cache::ArtifactCheck::kDigest);
  ASSERT_TRUE(digest_scan.ok());
  EXPECT_EQ(Find(*digest_scan, "2")->state, EntryState::kDamaged);
  BuildPlan plan = MakeBuildPlan(*digest_scan, PlanOptions{});
  EXPECT_EQ(plan.to_compile.size(), 2u);
  EXPECT_TRUE(plan.done.empty());
}

TEST_F(PlanTest, ClassifiesEntriesAndIgnoresUnknownFiles) {
  // TODO: HLO and flags only.
  Put("MODULE_1+aaaaaaaa", "model.hlo_module.pb", "0123456789");
  Put("MODULE_1+aaaaaaaa", "compile_flags.json", "[]");
  // DONE: artifact and model.done.
  Put("MODULE_2+aaaaaaaa", "model.hlo_module.pb", "x");
  Put("MODULE_2+aaaaaaaa", "model.so", "ELF");
  Put("MODULE_2+aaaaaaaa", "model.done");
  // FAILED: model.log without artifact.
  Put("MODULE_3+aaaaaaaa", "model.hlo_module.pb", "xy");
  Put("MODULE_3+aaaaaaaa", "model.log", "error: unsupported op");
  // LOCKED: a live lock (held by this process through another open file).
  Put("MODULE_4+aaaaaaaa", "model.hlo_module.pb", "xyz");
  Put("MODULE_4+aaaaaaaa", "model.lock");
  int fd = open((Entry("MODULE_4+aaaaaaaa") + "/model.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  // A stale lock file (nobody holds it): TODO.
  Put("MODULE_5+aaaaaaaa", "model.hlo_module.pb", "xyzw");
  Put("MODULE_5+aaaaaaaa", "model.lock", "pid 999999\n");
  // Legacy HLO name: TODO.
  Put("MODULE_6+aaaaaaaa", "model.hlo.pb", "12345");
  // Artifact without model.done (a torn write): not DONE; HLO present: TODO.
  Put("MODULE_7+aaaaaaaa", "model.hlo_module.pb", "1");
  Put("MODULE_7+aaaaaaaa", "model.so", "partial");
  // An entry directory with nothing npc understands: EMPTY.
  Put("MODULE_8+aaaaaaaa", "notes.txt", "hello");
  // Unknown things: ignored.
  ASSERT_TRUE(WriteFile(tmp_.Sub(std::string(kDir) + "/README"), "not an entry"));
  ASSERT_TRUE(WriteFile(tmp_.Sub(std::string(kDir) + "/MODULE_9+aaaaaaaa"), "a file, not a directory"));
  ASSERT_TRUE(WriteFile(tmp_.Sub(std::string(kDir) + "/MODULE_no_hash/model.hlo_module.pb"), "x"));
  ASSERT_TRUE(WriteFile(tmp_.Sub(std::string(kDir) + "/.npc-build/build.ninja"), "x"));

  auto scan = Scan();
  ASSERT_EQ(scan.size(), 8u);
  EXPECT_EQ(Find(scan, "1")->state, EntryState::kTodo);
  EXPECT_EQ(Find(scan, "1")->hlo_bytes, 10);
  EXPECT_EQ(Find(scan, "1")->hlo_file, "model.hlo_module.pb");
  EXPECT_EQ(Find(scan, "2")->state, EntryState::kDone);
  EXPECT_EQ(Find(scan, "3")->state, EntryState::kFailed);
  EXPECT_EQ(Find(scan, "4")->state, EntryState::kLocked);
  EXPECT_EQ(Find(scan, "5")->state, EntryState::kTodo);
  EXPECT_EQ(Find(scan, "6")->state, EntryState::kTodo);
  EXPECT_EQ(Find(scan, "6")->hlo_file, "model.hlo.pb");
  EXPECT_EQ(Find(scan, "6")->hlo_bytes, 5);
  EXPECT_EQ(Find(scan, "7")->state, EntryState::kTodo);
  EXPECT_EQ(Find(scan, "8")->state, EntryState::kEmpty);
  EXPECT_EQ(Find(scan, "9"), nullptr);

  BuildPlan plan = MakeBuildPlan(scan, PlanOptions{});
  std::vector<std::string> keys;
  for (const auto& e : plan.to_compile) keys.push_back(e.ref.graph_key);
  // Costliest (largest HLO) first: 1 (10 B), 6 (5), 5 (4), 4 (3), 7 (1).
  EXPECT_EQ(keys, (std::vector<std::string>{"1", "6", "5", "4", "7"}));
  ASSERT_EQ(plan.cached_failures.size(), 1u);
  EXPECT_EQ(plan.cached_failures[0].ref.graph_key, "3");
  ASSERT_EQ(plan.done.size(), 1u);
  EXPECT_EQ(plan.done[0].ref.graph_key, "2");

  BuildPlan retry = MakeBuildPlan(scan, PlanOptions{/*retry_failed_compilation=*/true});
  keys.clear();
  for (const auto& e : retry.to_compile) keys.push_back(e.ref.graph_key);
  EXPECT_EQ(keys, (std::vector<std::string>{"1", "6", "5", "4", "3", "7"}));
  EXPECT_TRUE(retry.cached_failures.empty());

  // Scanning never writes: the stale lock is still there, nothing new appeared.
  EXPECT_TRUE(npc::testing::FileExists(Entry("MODULE_5+aaaaaaaa") + "/model.lock"));
  close(fd);
}

// One stray directory with a name no tool makes (a line break in it) is
// skipped; the rest of the cache still scans.
TEST_F(PlanTest, MalformedEntryNamesAreSkipped) {
  Put("MODULE_1+aaaaaaaa", "model.hlo_module.pb", "x");
  Put("MODULE_1\n2+abc", "model.hlo_module.pb", "x");
  Put("MODULE_3|4+abc", "model.hlo_module.pb", "x");
  auto scan = Scan();
  ASSERT_EQ(scan.size(), 1u);
  EXPECT_EQ(scan[0].ref.graph_key, "1");
}

TEST_F(PlanTest, AbsentCompilerDirScansEmpty) {
  auto scan = Scan();
  EXPECT_TRUE(scan.empty());
  EXPECT_FALSE(npc::testing::FileExists(tmp_.Sub(kDir)));
}

TEST(PlanOrderTest, CostliestFirstThenByKey) {
  auto make = [](std::string key, std::string hash, int64_t bytes) {
    ScannedEntry e;
    e.ref = {"d", std::move(key), std::move(hash)};
    e.state = EntryState::kTodo;
    e.hlo_bytes = bytes;
    e.hlo_file = "model.hlo_module.pb";
    return e;
  };
  std::vector<ScannedEntry> scan = {make("5", "b", 100), make("3", "a", 700), make("5", "a", 100),
                                    make("1", "a", 100), make("9", "a", 1000)};
  BuildPlan plan = MakeBuildPlan(scan, {});
  std::vector<std::string> order;
  for (const auto& e : plan.to_compile) order.push_back(e.ref.graph_key + "+" + e.ref.flags_hash);
  EXPECT_EQ(order, (std::vector<std::string>{"9+a", "3+a", "1+a", "5+a", "5+b"}));
  // Independent of the input order.
  std::reverse(scan.begin(), scan.end());
  BuildPlan again = MakeBuildPlan(scan, {});
  std::vector<std::string> order2;
  for (const auto& e : again.to_compile) order2.push_back(e.ref.graph_key + "+" + e.ref.flags_hash);
  EXPECT_EQ(order, order2);
}

}  // namespace
}  // namespace npc::tool
