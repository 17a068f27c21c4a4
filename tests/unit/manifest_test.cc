// Unit tests of the reproducible-build manifest (generator/manifest.cc) and of
// `npc import`'s library function (generator/import.cc): making, writing and
// reading manifests, checking a cache against one, the build.ninja written
// from one, verify, and the host backend's determinism that verify relies on.
#include <filesystem>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "generator/import.h"
#include "generator/manifest.h"
#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace npc::tool {
namespace {

using npc::testing::ReadFile;
using npc::testing::TempDir;
using npc::testing::WriteFile;

// Deterministic unless `salt` changes between compiles: the artifact is a
// function of the HLO bytes and flags.
class FakeCompiler : public Compiler {
 public:
  std::string backend() const override { return "host"; }
  Result<std::string> CacheDirectoryName() override { return std::string("fake-1"); }
  std::string ArtifactName() const override { return "model.so"; }
  int64_t DefaultMemoryPerCompileBytes() const override { return 1; }
  CompileOutcome Compile(const CompileJob& job) override {
    CompileOutcome out;
    std::ifstream in(job.hlo_path, std::ios::binary);
    std::string hlo((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string flags;
    for (const auto& f : job.flags) flags += f + ",";
    std::ofstream(job.artifact_path, std::ios::binary) << "ARTIFACT(" << Sha256Hex(hlo) << "," << flags << ")"
                                                       << (nondeterministic ? std::to_string(++salt) : "");
    out.ok = true;
    return out;
  }
  bool nondeterministic = false;
  std::atomic<int> salt{0};
};

xla::HloModuleProto Module(int64_t n) {
  hlo::HloBuilder b("manifest_test_" + std::to_string(n));
  auto x = b.Parameter(0, xla::F32, {n}, "x");
  auto two = b.Broadcast(b.ConstantF32(2.0f), {n}, {});
  return b.Build(b.Tuple({b.Add(b.Mul(x, two), x)}));
}

class ManifestTest : public ::testing::Test {
 protected:
  // A TODO entry for Module(n) with `flags`; returns its ref.
  cache::EntryRef PutEntry(int64_t n, const std::vector<std::string>& flags = {}) {
    xla::HloModuleProto m = Module(n);
    std::string json = cache::CompileFlagsJson(flags);
    cache::EntryRef ref{"fake-1", hlo::CanonicalGraphKey(m), cache::FlagsHash(json)};
    EXPECT_TRUE(cache::PutEntryInputs(store, ref, m.SerializeAsString(), json).ok());
    return ref;
  }
  void Compile(const cache::EntryRef& ref) {
    auto r = CompileEntry(store, compiler, ref, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->status, EntryCompileResult::Status::kCompiled);
  }
  Manifest Make() {
    auto made = MakeManifest(store, "fake-1", "model.so", "host");
    EXPECT_TRUE(made.ok()) << made.error().message;
    return made.ok() ? made->manifest : Manifest{};
  }
  std::string Local(const std::string& rel) { return dir.path() + "/" + rel; }

  TempDir dir{"npc-manifest-test"};
  cache::LocalStore store{dir.path()};
  FakeCompiler compiler;
};

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(ManifestTest, RecordsTodoAndDoneEntriesSkipsFailedAndEmpty) {
  auto todo = PutEntry(4, {"--target=trn1"});
  auto done = PutEntry(8);
  Compile(done);
  auto failed = PutEntry(16);
  ASSERT_TRUE(store.WriteAtomic(failed.file(cache::kLogFile), "boom").ok());
  ASSERT_TRUE(store.WriteAtomic("fake-1/MODULE_1+d41d8cd9/unrelated.txt", "x").ok());

  auto made = MakeManifest(store, "fake-1", "model.so", "host");
  ASSERT_TRUE(made.ok()) << made.error().message;
  const Manifest& m = made->manifest;
  EXPECT_EQ(m.backend, "host");
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_LT(m.entries[0].ref().dir(), m.entries[1].ref().dir());  // sorted
  for (const auto& e : m.entries) {
    std::string hlo = *store.Read(e.ref().file(cache::kHloFile));
    EXPECT_EQ(e.hlo_sha256, Sha256Hex(hlo));
    EXPECT_EQ(e.hlo_bytes, static_cast<int64_t>(hlo.size()));
    EXPECT_EQ(e.hlo_file, cache::kHloFile);
    EXPECT_EQ(e.artifact_file, "model.so");
    if (e.ref().dir() == todo.dir()) {
      EXPECT_EQ(e.flags, std::vector<std::string>{"--target=trn1"});
      EXPECT_EQ(e.flags_hash, "e30acd3a");
      EXPECT_FALSE(e.artifact_sha256.has_value());
    } else {
      EXPECT_EQ(e.ref().dir(), done.dir());
      ASSERT_TRUE(e.artifact_sha256.has_value());
      EXPECT_EQ(*e.artifact_sha256, Sha256Hex(*store.Read(done.file("model.so"))));
    }
  }
  ASSERT_EQ(made->skipped.size(), 2u);
  std::string skipped = made->skipped[0] + "\n" + made->skipped[1];
  EXPECT_NE(skipped.find(failed.dir() + ": FAILED"), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("fake-1/MODULE_1+d41d8cd9: EMPTY"), std::string::npos) << skipped;
}

TEST_F(ManifestTest, JsonRoundTripIsByteIdentical) {
  PutEntry(4, {"--a", "--b=1 2"});
  Compile(PutEntry(8));
  Manifest m = Make();
  std::string text = ManifestToJson(m);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("\"format\": \"npc-manifest\""), std::string::npos) << text;
  EXPECT_EQ(text.find(dir.path()), std::string::npos) << "the manifest must not name the cache location";
  auto parsed = ParseManifest(text, "m.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(ManifestToJson(*parsed), text);
  ASSERT_TRUE(WriteManifestFile(Local("out/m.json"), m).ok());
  EXPECT_EQ(ReadFile(Local("out/m.json")), text);
  auto read = ReadManifestFile(Local("out/m.json"));
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->entries.size(), 2u);
  // Made again from the same cache: the same bytes.
  EXPECT_EQ(ManifestToJson(Make()), text);
}

TEST_F(ManifestTest, ParseRejectsMalformedManifests) {
  PutEntry(4);
  std::string good = ManifestToJson(Make());
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto r = ParseManifest(text, "bad.json");
    ASSERT_FALSE(r.ok()) << "accepted: " << text;
    EXPECT_NE(r.error().message.find("bad.json"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  expect_error("not json", "not a valid JSON");
  expect_error(R"({"format": "other", "version": 1, "entries": []})", "not an npc manifest");
  expect_error(R"({"format": "npc-manifest", "version": 99, "entries": []})", "version 99");
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return pos == std::string::npos ? s : s.replace(pos, from.size(), to);
  };
  expect_error(replace("\"graph_key\": \"", "\"graph_key\": \"1"), "disagrees");
  expect_error(replace("\"hlo_sha256\": \"", "\"hlo_sha256\": \"zz"), "hlo_sha256");
  expect_error(replace("\"flags\": []", "\"flags\": [1]"), "non-string");
  // The same entry twice.
  auto j = nlohmann::json::parse(good);
  j["entries"].push_back(j["entries"][0]);
  expect_error(j.dump(), "listed twice");
}

TEST_F(ManifestTest, CheckAcceptsAnUnchangedCache) {
  PutEntry(4);
  Compile(PutEntry(8));
  Manifest m = Make();
  EXPECT_TRUE(CheckManifest(store, m, {"fake-1", true}).ok());
}

TEST_F(ManifestTest, CheckNamesTheEntryAndFileOfAChangedHlo) {
  auto a = PutEntry(4);
  PutEntry(8);
  Manifest m = Make();
  // The HLO is replaced behind the manifest's back (same entry directory).
  ASSERT_TRUE(store.WriteAtomic(a.file(cache::kHloFile), Module(5).SerializeAsString()).ok());
  auto st = CheckManifest(store, m, {"fake-1", false});
  ASSERT_FALSE(st.ok());
  const std::string& msg = st.error().message;
  EXPECT_NE(msg.find("1 problem"), std::string::npos) << msg;
  EXPECT_NE(msg.find("manifest entry " + a.dir()), std::string::npos) << msg;
  EXPECT_NE(msg.find(Local(a.file(cache::kHloFile))), std::string::npos) << msg;
  EXPECT_NE(msg.find("differs from the manifest"), std::string::npos) << msg;
}

TEST_F(ManifestTest, CheckReportsMissingEntriesChangedFlagsOtherCompilersAndArtifacts) {
  auto a = PutEntry(4);
  auto b = PutEntry(8);
  auto c = PutEntry(16);
  Compile(c);
  Manifest m = Make();
  ASSERT_TRUE(store.RemoveTree(a.dir()).ok());
  ASSERT_TRUE(store.WriteAtomic(b.file(cache::kFlagsFile), R"(["--other"])").ok());
  ASSERT_TRUE(store.WriteAtomic(c.file("model.so"), "tampered").ok());
  auto st = CheckManifest(store, m, {"fake-1", true});
  ASSERT_FALSE(st.ok());
  const std::string& msg = st.error().message;
  EXPECT_NE(msg.find("3 problems"), std::string::npos) << msg;
  EXPECT_NE(msg.find(a.dir() + ": not in the cache"), std::string::npos) << msg;
  EXPECT_NE(msg.find(Local(b.file(cache::kFlagsFile)) + " differs"), std::string::npos) << msg;
  EXPECT_NE(msg.find(Local(c.file("model.so")) + " differs"), std::string::npos) << msg;
  // Without the artifact check the tampered artifact is not a problem.
  auto no_artifacts = CheckManifest(store, m, {"fake-1", false});
  ASSERT_FALSE(no_artifacts.ok());
  EXPECT_NE(no_artifacts.error().message.find("2 problems"), std::string::npos);

  auto other = CheckManifest(store, m, {"fake-2", false});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("made for compiler directory fake-1, but the compiler in use is fake-2"),
            std::string::npos)
      << other.error().message;
}

TEST(OfflineTest, RefusesNetworkCaches) {
  EXPECT_TRUE(CheckOfflineCacheUrl("/var/tmp/neuron-compile-cache").ok());
  EXPECT_TRUE(CheckOfflineCacheUrl("relative/dir").ok());
  EXPECT_TRUE(CheckOfflineCacheUrl("file:///tmp/cache").ok());
  for (const char* url : {"s3://bucket/prefix", "https://example.com/cache"}) {
    auto st = CheckOfflineCacheUrl(url);
    ASSERT_FALSE(st.ok()) << url;
    EXPECT_NE(st.error().message.find(url), std::string::npos) << st.error().message;
    EXPECT_NE(st.error().message.find("network"), std::string::npos) << st.error().message;
  }
}

TEST_F(ManifestTest, ImportPutsHloFilesAsTodoEntries) {
  TempDir src{"npc-import-src"};
  xla::HloModuleProto m4 = Module(4), m8 = Module(8);
  ASSERT_TRUE(WriteFile(src.Sub("a.pb"), m4.SerializeAsString()));
  ASSERT_TRUE(WriteFile(src.Sub("b.pb"), m8.SerializeAsString()));
  auto imported = ImportHloFiles(store, "fake-1", {src.Sub("a.pb"), src.Sub("b.pb")}, {"--target=trn1"});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  ASSERT_EQ(imported->size(), 2u);
  const ImportedEntry& a = (*imported)[0];
  EXPECT_TRUE(a.created);
  EXPECT_EQ(a.source, src.Sub("a.pb"));
  EXPECT_EQ(a.ref.compiler_dir, "fake-1");
  EXPECT_EQ(a.ref.graph_key, hlo::CanonicalGraphKey(m4));
  EXPECT_EQ(a.ref.flags_hash, "e30acd3a");
  EXPECT_EQ(*store.Read(a.ref.file(cache::kFlagsFile)), R"(["--target=trn1"])");
  EXPECT_EQ(*cache::GetEntryState(store, a.ref, "model.so"), cache::EntryState::kTodo);
  auto back = hlo::ParseHloModule(*store.Read(a.ref.file(cache::kHloFile)), "imported");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(hlo::CanonicalGraphKey(*back), a.ref.graph_key);

  // Again: nothing new, nothing rewritten.
  auto again = ImportHloFiles(store, "fake-1", {src.Sub("a.pb")}, {"--target=trn1"});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)[0].created);
  EXPECT_EQ((*again)[0].ref.dir(), a.ref.dir());
  // Other flags: another entry.
  auto other = ImportHloFiles(store, "fake-1", {src.Sub("a.pb")}, {});
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)[0].created);
  EXPECT_EQ((*other)[0].ref.flags_hash, "d7517139");  // FlagsHash("[]")
}

TEST_F(ManifestTest, ImportOfABadFileNamesItAndWritesNothing) {
  TempDir src{"npc-import-src"};
  ASSERT_TRUE(WriteFile(src.Sub("good.pb"), Module(4).SerializeAsString()));
  ASSERT_TRUE(WriteFile(src.Sub("bad.pb"), "\x08\xff\xff garbage"));
  auto imported = ImportHloFiles(store, "fake-1", {src.Sub("good.pb"), src.Sub("bad.pb")}, {});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.error().message.find(src.Sub("bad.pb")), std::string::npos) << imported.error().message;
  EXPECT_TRUE(store.List("fake-1")->empty());
  auto missing = ImportHloFiles(store, "fake-1", {src.Sub("absent.pb")}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("absent.pb"), std::string::npos) << missing.error().message;
}

TEST_F(ManifestTest, ImportKeepGoingImportsWhatReadsAndReportsTheRest) {
  TempDir src{"npc-import-src"};
  ASSERT_TRUE(WriteFile(src.Sub("good.pb"), Module(4).SerializeAsString()));
  ASSERT_TRUE(WriteFile(src.Sub("bad.pb"), "\x08\xff\xff garbage"));
  std::vector<Error> unreadable;
  auto imported = ImportHloFiles(store, "fake-1", {src.Sub("good.pb"), src.Sub("bad.pb")}, {}, &unreadable);
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  ASSERT_EQ(imported->size(), 1u);
  EXPECT_EQ((*imported)[0].source, src.Sub("good.pb"));
  ASSERT_EQ(unreadable.size(), 1u);
  EXPECT_NE(unreadable[0].message.find(src.Sub("bad.pb")), std::string::npos) << unreadable[0].message;
  EXPECT_EQ(*cache::GetEntryState(store, (*imported)[0].ref, "model.so"), cache::EntryState::kTodo);
}

TEST(ExpandHloPaths, WalksFoldersForHloFileNamesInOrder) {
  TempDir src{"npc-expand"};
  ASSERT_TRUE(WriteFile(src.Sub("b.hlo"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub("a.pb"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub("README.md"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub(".hidden.hlo"), "x"));
  std::filesystem::create_directories(src.Sub("dump/.git"));
  ASSERT_TRUE(WriteFile(src.Sub("dump/module_0001.before_optimizations.txt"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub("dump/m.binpb.gz"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub("dump/.git/c.hlo"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub("dump/notes.json"), "x"));
  ASSERT_TRUE(WriteFile(src.Sub("single.data"), "x"));
  auto files = ExpandHloPaths({src.Sub("single.data"), src.path()});
  ASSERT_TRUE(files.ok()) << files.error().message;
  std::vector<std::string> want = {src.Sub("single.data"), src.Sub("a.pb"), src.Sub("b.hlo"),
                                   src.Sub("dump/m.binpb.gz"), src.Sub("dump/module_0001.before_optimizations.txt")};
  EXPECT_EQ(*files, want);

  auto missing = ExpandHloPaths({src.Sub("absent")});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(src.Sub("absent")), std::string::npos);
  TempDir empty{"npc-expand-empty"};
  auto none = ExpandHloPaths({empty.path()});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no HLO files"), std::string::npos) << none.error().message;
}

TEST_F(ManifestTest, VerifyReproducesDeterministicArtifacts) {
  Compile(PutEntry(4));
  Compile(PutEntry(8, {"--x"}));
  PutEntry(16);  // never compiled: no reference digest
  Manifest m = Make();
  TempDir scratch{"npc-verify"};
  auto report = Verify(store, compiler, m, VerifyOptions{scratch.path(), 2});
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->matched, 2);
  EXPECT_EQ(report->unreferenced, 1);
  EXPECT_EQ(report->mismatched, 0);
  EXPECT_EQ(report->failed, 0);
  EXPECT_TRUE(report->ok());
  // Run again into the same scratch directory: recompiled, not found done.
  auto again = Verify(store, compiler, m, VerifyOptions{scratch.path(), 1});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->matched, 2);
}

TEST_F(ManifestTest, VerifyReportsDifferingArtifactsAndChangedInputs) {
  auto a = PutEntry(4);
  auto b = PutEntry(8);
  Compile(a);
  Compile(b);
  Manifest m = Make();
  ASSERT_TRUE(store.WriteAtomic(b.file(cache::kHloFile), Module(9).SerializeAsString()).ok());
  compiler.nondeterministic = true;
  TempDir scratch{"npc-verify"};
  auto report = Verify(store, compiler, m, VerifyOptions{scratch.path(), 1});
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_FALSE(report->ok());
  EXPECT_EQ(report->mismatched, 1);
  EXPECT_EQ(report->failed, 1);
  for (const auto& r : report->entries) {
    if (r.entry == a.dir()) {
      EXPECT_TRUE(r.compiled);
      EXPECT_FALSE(r.match);
      EXPECT_NE(r.message.find("differs"), std::string::npos) << r.message;
    } else {
      EXPECT_FALSE(r.compiled);
      EXPECT_NE(r.message.find("differs from the manifest"), std::string::npos) << r.message;
    }
  }
}

// The build file written from a manifest depends on the manifest and the
// options only: not on the cache's state, not on the available memory.
TEST_F(ManifestTest, BuildFileFromAManifestIsByteIdentical) {
  PutEntry(4);
  auto done = PutEntry(8);
  Compile(done);
  ASSERT_TRUE(WriteManifestFile(Local("m.json"), Make()).ok());
  setenv("NPC_TOOL_PROGRAM", "/opt/npc/bin/npc", 1);
  ToolOptions options;
  options.verb = "generate";
  options.cache_dir = dir.path();
  options.backend = "host";
  options.compiler_dir = "fake-1";
  options.build_dir = Local("build");
  ManifestCommandOptions mo;
  mo.manifest_path = Local("m.json");
  mo.offline = true;
  ASSERT_EQ(RunGenerateFromManifest(options, mo), 0);
  std::string first = ReadFile(Local("build/build.ninja"));
  EXPECT_NE(first.find("--manifest " + Local("m.json") + " --offline"), std::string::npos) << first;
  EXPECT_NE(first.find(Local(done.file(cache::kDoneFile))), std::string::npos) << "DONE entries are edges too";
  // Another state of the cache (an entry compiled, one added) and a fresh file:
  // the same bytes.
  PutEntry(32);
  std::remove(Local("build/build.ninja").c_str());
  ASSERT_EQ(RunGenerateFromManifest(options, mo), 0);
  EXPECT_EQ(ReadFile(Local("build/build.ninja")), first);

  // An HLO changed behind the manifest's back: refused, no build file.
  ASSERT_TRUE(store.WriteAtomic(done.file(cache::kHloFile), Module(5).SerializeAsString()).ok());
  std::remove(Local("build/build.ninja").c_str());
  EXPECT_EQ(RunGenerateFromManifest(options, mo), 1);
  EXPECT_FALSE(npc::testing::FileExists(Local("build/build.ninja")));

  // Offline and a network cache: refused before anything is opened.
  options.cache_dir = "s3://bucket/cache";
  EXPECT_EQ(RunGenerateFromManifest(options, mo), 1);
  unsetenv("NPC_TOOL_PROGRAM");
}

// verify needs a deterministic backend: the host backend compiles the same
// module in different cache roots and entry work directories into the same bytes.
TEST(HostDeterminismTest, SameModuleGivesByteIdenticalSharedObject) {
  TempDir cache_dir{"npc-determinism"};
  cache::LocalStore store(cache_dir.path());
  CompilerOptions co = CompilerOptionsFromEnvironment();
  co.backend = "host";
  auto compiler = MakeCompiler(co);
  ASSERT_TRUE(compiler.ok()) << compiler.error().message;
  auto compiler_dir = (*compiler)->CacheDirectoryName();
  ASSERT_TRUE(compiler_dir.ok()) << compiler_dir.error().message;
  xla::HloModuleProto m = Module(6);
  cache::EntryRef ref{*compiler_dir, hlo::CanonicalGraphKey(m), cache::FlagsHash("[]")};
  ASSERT_TRUE(cache::PutEntryInputs(store, ref, m.SerializeAsString(), "[]").ok());
  auto r = CompileEntry(store, **compiler, ref, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->status, EntryCompileResult::Status::kCompiled) << r->log;
  auto made = MakeManifest(store, *compiler_dir, (*compiler)->ArtifactName(), "host");
  ASSERT_TRUE(made.ok()) << made.error().message;
  TempDir scratch{"npc-determinism-scratch"};
  auto report = Verify(store, **compiler, made->manifest, VerifyOptions{scratch.path() + "/deeper/path", 1});
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->entries.size(), 1u);
  EXPECT_TRUE(report->entries[0].match) << report->entries[0].message;
}

}  // namespace
}  // namespace npc::tool
