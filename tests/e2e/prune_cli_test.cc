// End to end: `npc prune` on a real cache compiled by the real CLI (host
// backend): the least recently used entries go first, TODO entries and
// entries of other compiler directories are handled, nothing half-removed.
#include <sys/stat.h>
#include <utime.h>

#include <ctime>
#include <filesystem>

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::FileExists;
using testing::RunCommand;
using testing::TempDir;

class PruneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = tmp_.Sub("cache");
    dir_ = testing::HostCompilerDir();
    ASSERT_FALSE(dir_.empty());
    for (int n : {8, 16, 32}) entries_.push_back(testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(n)));
    auto compiled = Npc({"compile", "--cache_dir", cache_});
    ASSERT_EQ(compiled.exit_status, 0) << compiled.output;
    // Last use: entries_[0] 40 days ago, [1] 20 days ago, [2] now.
    Age(entries_[0], 40);
    Age(entries_[1], 20);
    todo_ = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(64));
    Age(todo_, 100);  // old, but never compiled: not pruned
  }
  void Age(const std::string& entry, int days) {
    const time_t t = time(nullptr) - days * 86400;
    struct utimbuf times {t, t};
    for (const auto& f : fs::directory_iterator(cache_ + "/" + entry)) {
      ASSERT_EQ(utime(f.path().c_str(), &times), 0) << f.path();
    }
  }
  int64_t EntryBytes(const std::string& entry) {
    int64_t total = 0;
    for (const auto& f : fs::directory_iterator(cache_ + "/" + entry)) {
      if (f.is_regular_file()) total += static_cast<int64_t>(f.file_size());
    }
    return total;
  }
  bool Present(const std::string& entry) { return fs::exists(cache_ + "/" + entry); }
  CommandResult Npc(std::vector<std::string> args) {
    args.insert(args.begin(), NPC_TOOL);
    return RunCommand(args, {{"NEURON_CC_FLAGS", "<unset>"}, {"NEURON_COMPILE_CACHE_URL", "<unset>"}});
  }
  TempDir tmp_;
  std::string cache_, dir_, todo_;
  std::vector<std::string> entries_;
};

TEST_F(PruneTest, MaxAgeRemovesEntriesUnusedForLongerAndKeepsTodo) {
  auto dry = Npc({"prune", "--cache_dir", cache_, "--max_age", "30d", "--dry_run"});
  EXPECT_EQ(dry.exit_status, 0) << dry.output;
  EXPECT_NE(dry.output.find("would remove " + cache_ + "/" + entries_[0]), std::string::npos) << dry.output;
  EXPECT_TRUE(Present(entries_[0]));

  auto r = Npc({"prune", "--cache_dir", cache_, "--max_age", "30d"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_FALSE(Present(entries_[0])) << r.output;
  EXPECT_TRUE(Present(entries_[1]));
  EXPECT_TRUE(Present(entries_[2]));
  EXPECT_TRUE(Present(todo_));
  EXPECT_NE(r.output.find("Removed 1 entries"), std::string::npos) << r.output;
}

TEST_F(PruneTest, MaxSizeRemovesLeastRecentlyUsedFirst) {
  // Room for the TODO entry and one compiled entry (the newest).
  const int64_t limit = EntryBytes(todo_) + EntryBytes(entries_[2]) + 10;
  auto r = Npc({"prune", "--cache_dir", cache_, "--max_size", std::to_string(limit)});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_FALSE(Present(entries_[0])) << r.output;
  EXPECT_FALSE(Present(entries_[1])) << r.output;
  EXPECT_TRUE(Present(entries_[2])) << r.output;
  EXPECT_TRUE(Present(todo_));
  EXPECT_TRUE(FileExists(cache_ + "/" + entries_[2] + "/model.done"));
}

TEST_F(PruneTest, ReadingAnArtifactMakesItRecentlyUsed) {
  // A cache hit reads the artifact: bump entries_[0]'s access time to now.
  const time_t now = time(nullptr);
  struct utimbuf times {now, now - 40 * 86400};
  ASSERT_EQ(utime((cache_ + "/" + entries_[0] + "/model.so").c_str(), &times), 0);
  auto r = Npc({"prune", "--cache_dir", cache_, "--max_age", "30d"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Present(entries_[0])) << r.output;
}

TEST_F(PruneTest, BadOptionsAreRefused) {
  auto none = Npc({"prune", "--cache_dir", cache_});
  EXPECT_EQ(none.exit_status, 2) << none.output;
  auto bad = Npc({"prune", "--cache_dir", cache_, "--max_size", "10X"});
  EXPECT_EQ(bad.exit_status, 2) << bad.output;
  EXPECT_NE(bad.output.find("'10X'"), std::string::npos) << bad.output;
  EXPECT_TRUE(Present(entries_[0]));
}

}  // namespace
}  // namespace npc
