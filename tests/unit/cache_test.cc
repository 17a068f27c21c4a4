// Unit tests of runtime/cache: flags hash, compile_flags.json, NEURON_CC_FLAGS,
// cache URL resolution, the local store, entry locks and entry states.
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "npc/cache.h"
#include "util/digest.h"
#include "support/test_support.h"

namespace npc::cache {
namespace {

using npc::testing::TempDir;

TEST(FlagsHash, MatchesNeuronVectors) {
  EXPECT_EQ(FlagsHash(R"(["--target=trn1"])"), "e30acd3a");
  EXPECT_EQ(FlagsHash(""), "d41d8cd9");
  // The hash is of the exact text, whatever it holds.
  EXPECT_EQ(FlagsHash("--model-type=transformer"), "abb26765");
  EXPECT_EQ(FlagsHash(CompileFlagsJson({"--model-type=transformer"})), "cc298dfa");
  EXPECT_EQ(FlagsHash(CompileFlagsJson({"--target=trn1"})), "e30acd3a");
}

TEST(CompileFlagsJson, WritesPythonJsonDumpsForm) {
  EXPECT_EQ(CompileFlagsJson({}), "[]");
  EXPECT_EQ(CompileFlagsJson({"--a", "-O2"}), R"(["--a", "-O2"])");
  EXPECT_EQ(CompileFlagsJson({"say \"hi\"\\"}), R"(["say \"hi\"\\"])");
  EXPECT_EQ(CompileFlagsJson({"tab\tnl\n"}), R"(["tab\tnl\n"])");
  EXPECT_EQ(CompileFlagsJson({"\x01"}), R"(["\u0001"])");
  // Non-ASCII is escaped as Python's ensure_ascii does, astral planes as surrogate pairs.
  EXPECT_EQ(CompileFlagsJson({"caf\xc3\xa9"}), R"(["caf\u00e9"])");
  EXPECT_EQ(CompileFlagsJson({"\xf0\x9f\x98\x80"}), R"(["\ud83d\ude00"])");
}

TEST(CompileFlagsJson, ParsesBackAndRejectsBadText) {
  auto flags = ParseCompileFlagsJson(R"(["--a", "caf\u00e9"])", "f.json");
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(*flags, (std::vector<std::string>{"--a", "caf\xc3\xa9"}));
  auto bad = ParseCompileFlagsJson("[\"--a\"", "dir/compile_flags.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("dir/compile_flags.json"), std::string::npos);
  auto not_list = ParseCompileFlagsJson(R"({"a": 1})", "x.json");
  ASSERT_FALSE(not_list.ok());
  auto not_strings = ParseCompileFlagsJson(R"([1])", "x.json");
  ASSERT_FALSE(not_strings.ok());
}

TEST(NeuronCcFlags, SplitsCacheFlagsFromCompilerFlags) {
  auto flags = ParseNeuronCcFlags(
      "--model-type=transformer --cache_dir=/c --retry_failed_compilation -O1 --log_level INFO "
      "--no_cache --dump=/d --compile_workdir /w --cache_size=10 --cache_ttl 5 '--x=a b'");
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->cache_dir, "/c");
  EXPECT_TRUE(flags->retry_failed_compilation);
  EXPECT_TRUE(flags->no_cache);
  EXPECT_EQ(flags->log_level, "INFO");
  EXPECT_EQ(flags->dump, "/d");
  EXPECT_EQ(flags->compile_workdir, "/w");
  EXPECT_EQ(flags->cache_size, "10");
  EXPECT_EQ(flags->cache_ttl, "5");
  EXPECT_EQ(flags->compiler_flags, (std::vector<std::string>{"--model-type=transformer", "-O1", "--x=a b"}));
}

TEST(NeuronCcFlags, ErrorsOnUnterminatedQuoteAndMissingValue) {
  EXPECT_FALSE(ParseNeuronCcFlags("--a 'b").ok());
  EXPECT_FALSE(ParseNeuronCcFlags("--cache_dir").ok());
}

TEST(ResolveCacheUrl, FlagBeatsEnvironmentBeatsDefault) {
  CacheFlags with_dir;
  with_dir.cache_dir = "s3://bucket/prefix";
  EXPECT_EQ(ResolveCacheUrl(with_dir, "/env/cache"), "s3://bucket/prefix");
  EXPECT_EQ(ResolveCacheUrl(CacheFlags{}, "/env/cache"), "/env/cache");
  EXPECT_EQ(ResolveCacheUrl(CacheFlags{}, ""), "/var/tmp/neuron-compile-cache");
  EXPECT_EQ(ResolveCacheUrl(CacheFlags{}, nullptr), "/var/tmp/neuron-compile-cache");
}

TEST(EntryRef, DirectoryNamesRoundTrip) {
  EntryRef ref{"neuronxcc-2.16.372.0+4a9b2326", "1234567890", "e30acd3a"};
  EXPECT_EQ(ref.dir(), "neuronxcc-2.16.372.0+4a9b2326/MODULE_1234567890+e30acd3a");
  auto parsed = ParseEntryDirName(ref.compiler_dir, "MODULE_1234567890+e30acd3a");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->graph_key, "1234567890");
  EXPECT_EQ(parsed->flags_hash, "e30acd3a");
  EXPECT_FALSE(ParseEntryDirName("c", "MODULE_nohash").has_value());
  EXPECT_FALSE(ParseEntryDirName("c", "notes.txt").has_value());
  EXPECT_FALSE(ParseEntryDirName("c", "MODULE_+abc").has_value());
  // Names no tool makes and build.ninja cannot hold are not entries.
  EXPECT_FALSE(ParseEntryDirName("c", "MODULE_1\n2+abc").has_value());
  EXPECT_FALSE(ParseEntryDirName("c", "MODULE_1|2+abc").has_value());
  EXPECT_FALSE(ParseEntryDirName("c", "MODULE_1 2+abc").has_value());
  EXPECT_FALSE(ParseEntryDirName("c", "MODULE_12+ab$c").has_value());
  EXPECT_TRUE(ParseEntryDirName("c", "MODULE_Sync_1.x-2+d41d8cd9").has_value());
}

TEST(LocalStore, WritesAtomicallyAndLists) {
  TempDir dir;
  LocalStore store(dir.path());
  ASSERT_TRUE(store.WriteAtomic("a/b/file.txt", "hello").ok());
  auto data = store.Read("a/b/file.txt");
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, "hello");
  ASSERT_TRUE(store.WriteAtomic("a/b/file.txt", "replaced").ok());
  EXPECT_EQ(*store.Read("a/b/file.txt"), "replaced");
  // No temporary files are left beside it.
  auto names = store.List("a/b");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"file.txt"});
  EXPECT_TRUE(store.List("absent")->empty());
  EXPECT_FALSE(*store.Exists("a/b/nope"));
  EXPECT_FALSE(store.Read("a/b/nope").ok());
  ASSERT_TRUE(store.Remove("a/b/file.txt").ok());
  EXPECT_TRUE(store.Remove("a/b/file.txt").ok());  // absent is fine
}

TEST(LocalStore, PutFileAtomicMovesTheFileIn) {
  TempDir dir;
  LocalStore store(dir.Sub("cache"));
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("artifact.tmp"), "ARTIFACT"));
  ASSERT_TRUE(store.PutFileAtomic("x/model.so", dir.Sub("artifact.tmp")).ok());
  EXPECT_EQ(*store.Read("x/model.so"), "ARTIFACT");
}

TEST(LocalStore, LockIsExclusiveAndRemovedOnRelease) {
  TempDir dir;
  LocalStore store(dir.path());
  auto first = store.TryLock("e");
  ASSERT_TRUE(first.ok());
  ASSERT_NE(*first, nullptr);
  EXPECT_TRUE(*store.IsLocked("e"));
  EXPECT_TRUE(npc::testing::FileExists(dir.Sub("e/model.lock")));

  // flock locks belong to open file descriptions: a second TryLock, even in
  // this process, sees the lock held.
  auto second = store.TryLock("e");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, nullptr);

  first->reset();
  EXPECT_FALSE(npc::testing::FileExists(dir.Sub("e/model.lock")));
  EXPECT_FALSE(*store.IsLocked("e"));
  auto third = store.TryLock("e");
  ASSERT_TRUE(third.ok());
  EXPECT_NE(*third, nullptr);
}

TEST(LocalStore, LockFileOfADeadProcessIsTakenOver) {
  TempDir dir;
  LocalStore store(dir.path());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LocalStore child_store(dir.path());
    auto lock = child_store.TryLock("e");
    // Die holding the lock, without running destructors (like kill -9).
    _exit(lock.ok() && *lock ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The lock file is still there, but nobody holds it.
  EXPECT_TRUE(npc::testing::FileExists(dir.Sub("e/model.lock")));
  EXPECT_FALSE(*store.IsLocked("e"));
  auto lock = store.TryLock("e");
  ASSERT_TRUE(lock.ok());
  EXPECT_NE(*lock, nullptr);
}

class EntryStateTest : public ::testing::Test {
 protected:
  void Put(const std::string& name, const std::string& data = "x") {
    ASSERT_TRUE(store.WriteAtomic(entry.file(name), data).ok());
  }
  EntryState State() {
    auto s = GetEntryState(store, entry, "model.so");
    EXPECT_TRUE(s.ok());
    return s.ok() ? *s : EntryState::kEmpty;
  }
  TempDir dir;
  LocalStore store{dir.path()};
  EntryRef entry{"host-x", "42", "d41d8cd9"};
};

TEST_F(EntryStateTest, FollowsTheFilesOfTheEntry) {
  EXPECT_EQ(State(), EntryState::kEmpty);
  Put("notes.txt");  // unknown files are ignored
  EXPECT_EQ(State(), EntryState::kEmpty);
  Put("model.hlo.pb");  // the older HLO name counts
  EXPECT_EQ(State(), EntryState::kTodo);
  Put("model.log");
  EXPECT_EQ(State(), EntryState::kFailed);
  Put("model.so");
  EXPECT_EQ(State(), EntryState::kTodo);  // artifact without model.done: not committed
  Put("model.done", "");
  EXPECT_EQ(State(), EntryState::kDone);
}

TEST_F(EntryStateTest, LockedOnlyWhileALiveProcessHoldsTheLock) {
  Put("model.hlo_module.pb");
  {
    auto lock = store.TryLock(entry.dir());
    ASSERT_TRUE(lock.ok() && *lock);
    EXPECT_EQ(State(), EntryState::kLocked);
  }
  EXPECT_EQ(State(), EntryState::kTodo);
  // A lock file nobody holds (left by a crash) does not make it LOCKED.
  Put("model.lock", "pid 1\n");
  EXPECT_EQ(State(), EntryState::kTodo);
}

TEST_F(EntryStateTest, LookupsWorkOnAReadOnlyCache) {
  Put("model.hlo_module.pb");
  Put("model.so");
  Put("model.done", "");
  Put("model.lock", "pid 1\n");  // a stale lock file: the lookup must not need to write to see past it
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  for (const std::string& d : {std::string("host-x"), entry.dir()}) {
    ASSERT_EQ(chmod(store.LocalPath(d)->c_str(), 0555), 0);
  }
  // Look up in a child that cannot write: as root, it drops to user nobody
  // (root ignores permission bits).
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
    if (access(store.LocalPath(entry.dir())->c_str(), W_OK) == 0) _exit(11);  // really read-only
    LocalStore reader(dir.path());
    auto state = GetEntryState(reader, entry, "model.so");
    _exit(state.ok() && *state == EntryState::kDone ? 0 : 12);
  }
  int status = 0;
  waitpid(child, &status, 0);
  for (const std::string& d : {std::string("host-x"), entry.dir()}) chmod(store.LocalPath(d)->c_str(), 0755);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: cannot drop privileges, 11: directory writable, 12: lookup failed";
}

TEST_F(EntryStateTest, PutEntryInputsKeepsExistingFiles) {
  ASSERT_TRUE(PutEntryInputs(store, entry, "HLO1", "[]").ok());
  ASSERT_TRUE(PutEntryInputs(store, entry, "HLO2", "[\"x\"]").ok());
  EXPECT_EQ(*store.Read(entry.file("model.hlo_module.pb")), "HLO1");
  EXPECT_EQ(*store.Read(entry.file("compile_flags.json")), "[]");
  auto hlo = FindHloFile(store, entry);
  ASSERT_TRUE(hlo.ok());
  EXPECT_EQ(hlo->value_or(""), "model.hlo_module.pb");
}

// A local store that records the order of its atomic writes.
class RecordingStore : public LocalStore {
 public:
  using LocalStore::LocalStore;
  Status WriteAtomic(const std::string& path, std::string_view data) override {
    written.push_back(path.substr(path.rfind('/') + 1));
    return LocalStore::WriteAtomic(path, data);
  }
  std::vector<std::string> written;
};

TEST_F(EntryStateTest, FlagsAreWrittenBeforeTheHlo) {
  // A scan between the two writes must never see an HLO without its flags.
  RecordingStore recording(dir.path());
  ASSERT_TRUE(PutEntryInputs(recording, entry, "HLO", "[]").ok());
  EXPECT_EQ(recording.written, (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
}

TEST(DoneFile, RecordRoundTripsAndEmptyMeansNothingToCheck) {
  ArtifactRecord record{"model.so", 1234, std::string(64, 'a')};
  std::string text = DoneFileText(record);
  EXPECT_EQ(text, "{\"artifact\":\"model.so\",\"size\":1234,\"sha256\":\"" + std::string(64, 'a') + "\"}\n");
  auto parsed = ParseDoneFile(text, "x/model.done");
  ASSERT_TRUE(parsed.ok() && parsed->has_value()) << (parsed.ok() ? "" : parsed.error().message);
  EXPECT_EQ((*parsed)->size, 1234);
  EXPECT_EQ((*parsed)->sha256, std::string(64, 'a'));
  EXPECT_EQ((*parsed)->artifact, "model.so");
  for (const char* empty : {"", "\n", "  \n"}) {
    auto none = ParseDoneFile(empty, "x/model.done");
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
  }
  for (const char* bad : {"garbage", "{\"size\":1}", "{\"size\":-1,\"sha256\":\"00\"}",
                          "{\"size\":1,\"sha256\":\"XYZ\"}"}) {
    auto r = ParseDoneFile(bad, "x/model.done");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("x/model.done"), std::string::npos) << r.error().message;
  }
}

TEST_F(EntryStateTest, ArtifactNotMatchingModelDoneIsDamaged) {
  const std::string bytes(1000, 'x');
  Put("model.hlo_module.pb");
  Put("model.so", bytes);
  Put("model.done", DoneFileText({"model.so", 1000, npc::util::Sha256Hex(bytes)}));
  EXPECT_EQ(State(), EntryState::kDone);
  EXPECT_EQ(*GetEntryState(store, entry, "model.so", ArtifactCheck::kDigest), EntryState::kDone);

  // Same size, one byte flipped: only the digest check sees it.
  std::string flipped = bytes;
  flipped[500] = 'y';
  Put("model.so", flipped);
  EXPECT_EQ(State(), EntryState::kDone);
  EXPECT_EQ(*GetEntryState(store, entry, "model.so", ArtifactCheck::kDigest), EntryState::kDamaged);
  auto why = CheckEntryArtifact(store, entry, "model.so", ArtifactCheck::kDigest);
  ASSERT_TRUE(why.ok() && why->has_value());
  EXPECT_NE((*why)->find("SHA-256 of model.so"), std::string::npos) << **why;

  // Cut to half, emptied: the cheap size check sees it.
  for (const std::string& cut : {bytes.substr(0, 500), std::string()}) {
    Put("model.so", cut);
    EXPECT_EQ(State(), EntryState::kDamaged);
    why = CheckEntryArtifact(store, entry, "model.so", ArtifactCheck::kSize);
    ASSERT_TRUE(why.ok() && why->has_value());
    EXPECT_NE((*why)->find("model.so is " + std::to_string(cut.size()) + " bytes, model.done records 1000"),
              std::string::npos) << **why;
  }
  // A model.done with damaged bytes is damage too; an empty one (libneuronxla's) is DONE, unchecked.
  Put("model.done", "{\"size\":10");
  EXPECT_EQ(State(), EntryState::kDamaged);
  Put("model.done", "");
  EXPECT_EQ(*GetEntryState(store, entry, "model.so", ArtifactCheck::kDigest), EntryState::kDone);
}

TEST(OpenStore, LocalPathsAndUnsupportedSchemes) {
  TempDir dir;
  auto local = OpenStore(dir.path());
  ASSERT_TRUE(local.ok());
  EXPECT_EQ((*local)->url(), dir.path());
  auto file_url = OpenStore("file://" + dir.path());
  ASSERT_TRUE(file_url.ok());
  EXPECT_EQ((*file_url)->url(), dir.path());
  EXPECT_FALSE(OpenStore("gs://bucket/x").ok());
}

}  // namespace
}  // namespace npc::cache
