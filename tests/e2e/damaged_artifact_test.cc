// End-to-end: damaged artifacts in the cache. A DONE entry whose artifact was
// cut to half its size, had 64 bytes flipped in the middle, or was emptied
// must never be loaded (before model.done recorded size and SHA-256, these
// gave SIGBUS, SIGILL or an error in the training program): the training
// program finishes, the entry is compiled again and its artifact matches its
// record afterwards, the log names the entry and why; `npc scan` reports it
// DAMAGED; `npc compile` recompiles it; a read-only cache is never written.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "npc/cache.h"
#include "support/test_support.h"
#include "util/digest.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

std::map<std::string, std::string> CleanEnv(std::map<std::string, std::string> extra = {}) {
  for (const char* name : {"NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL", "NEURON_EXTRACT_GRAPHS_ONLY",
                           "NEURON_PARALLEL_COMPILE", "NPC_COMPILER_VERSION"}) {
    extra.emplace(name, "<unset>");
  }
  return extra;
}

// DONE entries of the cache, from `npc scan --json`: entry dir -> state.
std::map<std::string, std::string> ScanStates(const std::string& cache) {
  auto scan = RunCommand({NPC_TOOL, "scan", "--cache", cache, "--json"}, CleanEnv());
  EXPECT_EQ(scan.exit_status, 0) << scan.output;
  std::map<std::string, std::string> states;
  size_t brace = scan.output.find('{');
  if (brace == std::string::npos) return states;
  auto j = nlohmann::json::parse(scan.output.substr(brace), nullptr, false);
  if (!j.is_object() || !j.contains("entries")) return states;
  for (const auto& e : j["entries"]) states[e["entry"].get<std::string>()] = e["state"].get<std::string>();
  return states;
}

int Number(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) {
    ADD_FAILURE() << "no match for /" << pattern << "/ in:\n" << text;
    return -1;
  }
  return std::stoi(m[1].str());
}

std::string RegexQuote(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::strchr(".^$|()[]{}*+?\\", c) != nullptr) out += '\\';
    out += c;
  }
  return out;
}

enum class Damage { kCutInHalf, kFlip64Bytes, kEmptied };

void Apply(Damage damage, const std::string& path) {
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 256u) << path;
  switch (damage) {
    case Damage::kCutInHalf: bytes.resize(bytes.size() / 2); break;
    case Damage::kFlip64Bytes:
      for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] = static_cast<char>(~bytes[i]);
      break;
    case Damage::kEmptied: bytes.clear(); break;
  }
  // In place, as a disk or a careless copy would do it (same inode, no done file change).
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  fs::resize_file(path, bytes.size());
}

// The artifact matches the size and SHA-256 model.done records.
void ExpectMatchesRecord(const std::string& entry_path) {
  auto record = cache::ParseDoneFile(ReadFile(entry_path + "/model.done"), entry_path);
  ASSERT_TRUE(record.ok() && record->has_value()) << entry_path;
  auto digest = util::Sha256File(entry_path + "/model.so");
  ASSERT_TRUE(digest.ok()) << digest.error().message;
  EXPECT_EQ(digest->size, (*record)->size) << entry_path;
  EXPECT_EQ(digest->sha256, (*record)->sha256) << entry_path;
}

class DamagedArtifactTest : public ::testing::TestWithParam<Damage> {
 protected:
  // One precompiled cache for the whole suite; each test damages a copy.
  static void SetUpTestSuite() {
    golden_ = new TempDir("npc-damaged-golden");
    auto r = RunCommand({NPC_CLI, "--cache_dir", golden_->Sub("cache"), NPC_MLP_TRAIN, "--steps", "2"}, CleanEnv());
    ASSERT_EQ(r.exit_status, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete golden_;
    golden_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(golden_, nullptr);
    cache_ = tmp_.Sub("cache");
    fs::copy(golden_->Sub("cache"), cache_, fs::copy_options::recursive);
    // The golden run's build directory (build.ninja, records) names the golden paths: not copied.
    for (const auto& d : fs::directory_iterator(cache_)) fs::remove_all(d.path() / ".npc-build");
    for (const auto& [entry, state] : ScanStates(cache_)) {
      ASSERT_EQ(state, "DONE") << entry;
      entries_.push_back(entry);
    }
    ASSERT_GE(entries_.size(), 2u);
  }
  // Damages every entry's artifact; the run uses all of them.
  void DamageAll() {
    for (const auto& e : entries_) Apply(GetParam(), cache_ + "/" + e + "/model.so");
  }
  CommandResult Train(const std::string& cache, const std::vector<std::string>& prefix = {}) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), {NPC_MLP_TRAIN, "--steps", "20"});
    return RunCommand(argv, CleanEnv({{"NEURON_COMPILE_CACHE_URL", cache}}));
  }

  static TempDir* golden_;
  TempDir tmp_{"npc-damaged"};
  std::string cache_;
  std::vector<std::string> entries_;
};
TempDir* DamagedArtifactTest::golden_ = nullptr;

TEST_P(DamagedArtifactTest, TrainingProgramRecompilesAndFinishes) {
  DamageAll();
  // `npc scan` checks digests: every damaged entry is DAMAGED, not DONE.
  for (const auto& [entry, state] : ScanStates(cache_)) EXPECT_EQ(state, "DAMAGED") << entry;

  auto run = Train(cache_);
  ASSERT_EQ(run.exit_status, 0) << run.output;  // 128+N would be a signal
  EXPECT_EQ(Number(run.output, "npc cache: hits=(\\d+)"), 0) << run.output;
  EXPECT_EQ(Number(run.output, "compiles=(\\d+)"), static_cast<int>(entries_.size())) << run.output;
  for (const auto& e : entries_) {
    // The warning names the entry and says what differs.
    const std::regex why("Damaged artifact in " + RegexQuote(cache_ + "/" + e) +
                         ": (model.so is \\d+ bytes, model.done records \\d+|the SHA-256 of model.so is [0-9a-f]{64}, "
                         "model.done records [0-9a-f]{64}); not loaded");
    EXPECT_TRUE(std::regex_search(run.output, why)) << e << "\n" << run.output;
    ExpectMatchesRecord(cache_ + "/" + e);
  }
  for (const auto& [entry, state] : ScanStates(cache_)) EXPECT_EQ(state, "DONE") << entry;

  // Repaired: the next run only hits.
  auto again = Train(cache_);
  ASSERT_EQ(again.exit_status, 0) << again.output;
  EXPECT_EQ(Number(again.output, "misses=(\\d+)"), 0) << again.output;
}

TEST_P(DamagedArtifactTest, NpcCompileRecompilesDamagedEntries) {
  DamageAll();
  auto r = RunCommand({NPC_TOOL, "compile", "--cache", cache_}, CleanEnv());
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(Number(r.output, "Total successful compilations: (\\d+)"), static_cast<int>(entries_.size())) << r.output;
  for (const auto& e : entries_) ExpectMatchesRecord(cache_ + "/" + e);
  for (const auto& [entry, state] : ScanStates(cache_)) EXPECT_EQ(state, "DONE") << entry;
}

TEST_P(DamagedArtifactTest, ReadOnlyCacheIsReportedAndNeverWritten) {
  DamageAll();
  // The user `nobody` reads the cache but cannot write it (root ignores permission bits).
  ASSERT_EQ(chmod(tmp_.path().c_str(), 0755), 0);
  for (const auto& p : fs::recursive_directory_iterator(cache_)) {
    fs::permissions(p.path(), p.is_directory() ? fs::perms(0555) : fs::perms(0444));
  }
  fs::permissions(cache_, fs::perms(0555));
  std::map<std::string, std::string> before;
  for (const auto& e : entries_) before[e] = ReadFile(cache_ + "/" + e + "/model.so");

  std::vector<std::string> as_nobody;
  if (geteuid() == 0) as_nobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  auto run = Train(cache_, as_nobody);
  ASSERT_EQ(run.exit_status, 0) << run.output;
  EXPECT_EQ(Number(run.output, "compiles=(\\d+)"), static_cast<int>(entries_.size())) << run.output;
  EXPECT_NE(run.output.find("is not writable here"), std::string::npos) << run.output;
  for (const auto& e : entries_) {
    EXPECT_NE(run.output.find("Damaged artifact in " + cache_ + "/" + e), std::string::npos) << run.output;
    EXPECT_EQ(ReadFile(cache_ + "/" + e + "/model.so"), before[e]) << e << ": written";
  }
  for (const auto& p : fs::recursive_directory_iterator(cache_)) fs::permissions(p.path(), fs::perms(0755));
}

INSTANTIATE_TEST_SUITE_P(Damage, DamagedArtifactTest,
                         ::testing::Values(Damage::kCutInHalf, Damage::kFlip64Bytes, Damage::kEmptied),
                         [](const ::testing::TestParamInfo<Damage>& info) {
                           switch (info.param) {
                             case Damage::kCutInHalf: return std::string("CutInHalf");
                             case Damage::kFlip64Bytes: return std::string("Flip64Bytes");
                             case Damage::kEmptied: return std::string("Emptied");
                           }
                           return std::string("Unknown");
                         });

}  // namespace
}  // namespace npc
