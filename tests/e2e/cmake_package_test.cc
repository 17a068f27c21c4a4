// End-to-end tests of npc's CMake package and reproducible builds: npc is
// installed from this build into a temporary prefix (`cmake --install`), then
// samples/cmake_project (a copy of it) is configured against the installed
// package with find_package(npc) and built with the Ninja and the Unix
// Makefiles generators: the build compiles the program, collects its graphs
// with a trial run and precompiles them; a second build does nothing; a
// change to one graph recompiles exactly that one. Then the manifest round
// trip (manifest, wipe artifacts, offline rebuild, same digests, verify, an
// HLO changed behind the manifest's back refused), the package from the build
// tree, and the pkg-config file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npc/cache.h"
#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using npc::testing::CommandResult;
using npc::testing::FileExists;
using npc::testing::ReadFile;
using npc::testing::RunCommand;
using npc::testing::TempDir;
using npc::testing::WriteFile;

// Environment of every command: nothing from the caller's npc/Neuron
// settings or make flags leaks into the builds.
const std::map<std::string, std::string> kCleanEnv = {
    {"NEURON_COMPILE_CACHE_URL", "<unset>"}, {"NEURON_CC_FLAGS", "<unset>"},
    {"NEURON_EXTRACT_GRAPHS_ONLY", "<unset>"}, {"NPC_BACKEND", "<unset>"},
    {"CMAKE_GENERATOR", "<unset>"}, {"MAKEFLAGS", "<unset>"}, {"MFLAGS", "<unset>"},
    {"NPC_TOOL_PROGRAM", "<unset>"}};

CommandResult RunClean(const std::vector<std::string>& argv, const std::string& cwd = "") {
  return RunCommand(argv, kCleanEnv, cwd);
}

// Compile edges that ran in a build's output ("[1/3] NPC 1234...").
int CompileEdges(const std::string& output) {
  static const std::regex edge(R"(\] NPC [0-9]+)");
  return static_cast<int>(std::distance(std::sregex_iterator(output.begin(), output.end(), edge),
                                        std::sregex_iterator()));
}

struct CacheEntry {
  std::string dir;  // absolute
  bool done = false;
  fs::file_time_type done_mtime{};
};

// Every MODULE_* entry of every compiler directory of the cache, by path.
std::map<std::string, CacheEntry> ScanCache(const std::string& root) {
  std::map<std::string, CacheEntry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& compiler_dir : fs::directory_iterator(root)) {
    if (!compiler_dir.is_directory()) continue;
    for (const auto& entry : fs::directory_iterator(compiler_dir.path())) {
      if (entry.path().filename().string().rfind("MODULE_", 0) != 0) continue;
      CacheEntry e;
      e.dir = entry.path().string();
      fs::path done = entry.path() / "model.done";
      e.done = fs::exists(done, ec);
      if (e.done) e.done_mtime = fs::last_write_time(done, ec);
      out[e.dir] = e;
    }
  }
  return out;
}

int CountDone(const std::map<std::string, CacheEntry>& cache) {
  return static_cast<int>(std::count_if(cache.begin(), cache.end(), [](const auto& kv) { return kv.second.done; }));
}

std::string Sha256Of(const std::string& path) {
  auto r = RunClean({"sha256sum", path});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return r.output.substr(0, 64);
}

class CmakePackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // `cmake --install` of this very build (the test depends on npc being built).
    auto install = RunClean({"cmake", "--install", NPC_BINARY_DIR, "--prefix", prefix()});
    ASSERT_EQ(install.exit_status, 0) << install.output;
    ASSERT_TRUE(FileExists(prefix() + "/lib/cmake/npc/npcConfig.cmake")) << install.output;
    ASSERT_TRUE(FileExists(npc())) << install.output;
    // A private copy of the sample: tests edit its sources.
    std::error_code ec;
    fs::copy(std::string(NPC_SOURCE_DIR) + "/samples/cmake_project", src(), fs::copy_options::recursive, ec);
    ASSERT_FALSE(ec) << ec.message();
  }

  std::string prefix() const { return tmp.Sub("prefix"); }
  std::string npc() const { return prefix() + "/bin/npc"; }
  std::string src() const { return tmp.Sub("src"); }
  std::string build() const { return tmp.Sub("build"); }
  std::string cache() const { return tmp.Sub("cache"); }

  CommandResult Configure(const std::string& generator, const std::string& package_prefix,
                          const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {"cmake", "-S", src(), "-B", build(), "-G", generator,
                                     "-DCMAKE_PREFIX_PATH=" + package_prefix, "-DNPC_CACHE_DIR=" + cache()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunClean(argv);
  }
  CommandResult Build() { return RunClean({"cmake", "--build", build(), "--parallel", "2"}); }
  // A real run of the program, without any npc environment variable.
  CommandResult RunProgram() { return RunClean({build() + "/tiny_train", "--steps", "20"}); }

  void ChangeEvalGraph() {
    std::string config = ReadFile(src() + "/model_config.h");
    const std::string from = "kEvalExamples = 64;";
    size_t pos = config.find(from);
    ASSERT_NE(pos, std::string::npos) << "model_config.h no longer has " << from;
    config.replace(pos, from.size(), "kEvalExamples = 48;");
    ASSERT_TRUE(WriteFile(src() + "/model_config.h", config));
  }

  // Configure + first build + no-op build + one changed graph, with `generator`.
  void BuildIncrementally(const std::string& generator) {
    auto configure = Configure(generator, prefix());
    ASSERT_EQ(configure.exit_status, 0) << configure.output;

    // First build: the program, the trial run, every graph compiled.
    auto first = Build();
    ASSERT_EQ(first.exit_status, 0) << first.output;
    auto after_first = ScanCache(cache());
    EXPECT_EQ(after_first.size(), 3u) << first.output;
    EXPECT_EQ(CountDone(after_first), 3) << first.output;
    EXPECT_EQ(CompileEdges(first.output), 3) << first.output;
    auto run = RunProgram();
    ASSERT_EQ(run.exit_status, 0) << run.output;
    EXPECT_NE(run.output.find("npc cache: hits=3 misses=0 compiles=0"), std::string::npos) << run.output;
    EXPECT_NE(run.output.find(cache()), std::string::npos) << "the program must use the project's cache\n"
                                                           << run.output;

    // Second build: nothing to do: no trial run, no compile edge, no artifact touched.
    auto second = Build();
    ASSERT_EQ(second.exit_status, 0) << second.output;
    EXPECT_EQ(CompileEdges(second.output), 0) << second.output;
    EXPECT_EQ(second.output.find("Extracting graphs"), std::string::npos) << second.output;
    auto after_second = ScanCache(cache());
    ASSERT_EQ(after_second.size(), after_first.size());
    for (const auto& [dir, e] : after_first) {
      EXPECT_TRUE(after_second[dir].done_mtime == e.done_mtime) << dir << " was touched by a no-op build";
    }

    // One graph changes (the eval batch size): exactly one new entry compiles.
    ChangeEvalGraph();
    auto third = Build();
    ASSERT_EQ(third.exit_status, 0) << third.output;
    auto after_third = ScanCache(cache());
    EXPECT_EQ(after_third.size(), 4u) << third.output;
    EXPECT_EQ(CountDone(after_third), 4) << third.output;
    EXPECT_EQ(CompileEdges(third.output), 1) << third.output;
    for (const auto& [dir, e] : after_first) {
      EXPECT_TRUE(after_third[dir].done_mtime == e.done_mtime) << dir << " was recompiled";
    }
    auto rerun = RunProgram();
    ASSERT_EQ(rerun.exit_status, 0) << rerun.output;
    EXPECT_NE(rerun.output.find("npc cache: hits=3 misses=0 compiles=0"), std::string::npos) << rerun.output;
  }

  TempDir tmp{"npc-cmake-package"};
};

TEST_F(CmakePackageTest, NinjaBuildPrecompilesIncrementally) { BuildIncrementally("Ninja"); }

TEST_F(CmakePackageTest, MakefilesBuildPrecompilesIncrementally) { BuildIncrementally("Unix Makefiles"); }

TEST_F(CmakePackageTest, ManifestRoundTripOffline) {
  ASSERT_EQ(Configure("Ninja", prefix()).exit_status, 0);
  auto first = Build();
  ASSERT_EQ(first.exit_status, 0) << first.output;
  ASSERT_EQ(CountDone(ScanCache(cache())), 3) << first.output;

  // The manifest records every entry with its HLO and artifact digests.
  const std::string manifest = tmp.Sub("npc.lock.json");
  auto made = RunClean({npc(), "manifest", "--cache_dir", cache(), "--manifest", manifest});
  ASSERT_EQ(made.exit_status, 0) << made.output;
  auto json = nlohmann::json::parse(ReadFile(manifest));
  ASSERT_EQ(json["entries"].size(), 3u) << json.dump(2);
  std::map<std::string, std::string> artifact_digest;  // entry dir (absolute) -> sha256
  for (const auto& e : json["entries"]) {
    ASSERT_TRUE(e.contains("artifact_sha256")) << e.dump();
    std::string dir = cache() + "/" + e["entry"].get<std::string>();
    EXPECT_EQ(Sha256Of(dir + "/model.hlo_module.pb"), e["hlo_sha256"].get<std::string>());
    artifact_digest[dir] = e["artifact_sha256"].get<std::string>();
  }

  // Wipe the compiled artifacts; rebuild offline from the manifest.
  for (const auto& [dir, digest] : artifact_digest) {
    fs::remove(dir + "/model.so");
    fs::remove(dir + "/model.done");
  }
  const std::string offline_build = tmp.Sub("offline-build");
  auto offline = RunClean({npc(), "compile", "--cache_dir", cache(), "--build_dir", offline_build, "--manifest", manifest,
                      "--offline"});
  ASSERT_EQ(offline.exit_status, 0) << offline.output;
  EXPECT_EQ(CompileEdges(offline.output), 3) << offline.output;
  for (const auto& [dir, digest] : artifact_digest) {
    ASSERT_TRUE(FileExists(dir + "/model.done")) << dir;
    EXPECT_EQ(Sha256Of(dir + "/model.so"), digest) << dir << " was not reproduced byte for byte";
  }

  // The build file is a function of the manifest: regenerated, the same bytes.
  const std::string ninja_file = offline_build + "/build.ninja";
  std::string first_ninja = ReadFile(ninja_file);
  fs::remove(ninja_file);
  auto regenerate = RunClean({npc(), "generate", "--cache_dir", cache(), "--build_dir", offline_build, "--manifest",
                         manifest, "--offline"});
  ASSERT_EQ(regenerate.exit_status, 0) << regenerate.output;
  EXPECT_EQ(ReadFile(ninja_file), first_ninja);

  // verify recompiles every entry elsewhere and finds the same digests.
  auto verify = RunClean({npc(), "verify", "--cache_dir", cache(), "--manifest", manifest, "--scratch_dir",
                     tmp.Sub("verify-scratch")});
  EXPECT_EQ(verify.exit_status, 0) << verify.output;
  EXPECT_NE(verify.output.find("3 reproduced, 0 differ, 0 failed"), std::string::npos) << verify.output;

  // A network cache is refused offline.
  auto s3 = RunClean({npc(), "compile", "--cache_dir", "s3://bucket/cache", "--manifest", manifest, "--offline"});
  EXPECT_NE(s3.exit_status, 0) << s3.output;
  EXPECT_NE(s3.output.find("needs the network"), std::string::npos) << s3.output;

  // The CMake build locked to the manifest, offline: builds as before.
  auto locked = Configure("Ninja", prefix(), {"-DTINY_MANIFEST=" + manifest, "-DTINY_OFFLINE=ON"});
  ASSERT_EQ(locked.exit_status, 0) << locked.output;
  auto locked_build = Build();
  EXPECT_EQ(locked_build.exit_status, 0) << locked_build.output;

  // An HLO changed behind the manifest's back: refused, naming entry and file.
  const auto& victim = artifact_digest.begin()->first;
  const auto& other = std::next(artifact_digest.begin())->first;
  ASSERT_TRUE(WriteFile(victim + "/model.hlo_module.pb", ReadFile(other + "/model.hlo_module.pb")));
  const std::string victim_entry = fs::path(victim).parent_path().filename().string() + "/" +
                                   fs::path(victim).filename().string();
  auto refused = RunClean({npc(), "compile", "--cache_dir", cache(), "--build_dir", offline_build, "--manifest", manifest,
                      "--offline"});
  EXPECT_NE(refused.exit_status, 0) << refused.output;
  EXPECT_NE(refused.output.find("manifest entry " + victim_entry), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find(victim + "/model.hlo_module.pb differs from the manifest"), std::string::npos)
      << refused.output;
  EXPECT_EQ(CompileEdges(refused.output), 0) << refused.output;
  // ... and so is the CMake build locked to it.
  auto locked_refused = Build();
  EXPECT_NE(locked_refused.exit_status, 0) << locked_refused.output;
  EXPECT_NE(locked_refused.output.find(victim + "/model.hlo_module.pb differs from the manifest"), std::string::npos)
      << locked_refused.output;
}

npc::xla::HloModuleProto SmallModule(int64_t n) {
  npc::hlo::HloBuilder b("cmake_import_" + std::to_string(n));
  auto x = b.Parameter(0, npc::xla::F32, {n}, "x");
  return b.Build(b.Tuple({b.Add(b.Mul(x, x), x)}));
}

// npc_precompile_hlo(): HLO files kept in a project are imported (with the
// given flags) and compiled by the build; a changed file compiles again.
TEST_F(CmakePackageTest, PrecompileHloFilesOfAProject) {
  const std::string project = tmp.Sub("hlo_project");
  ASSERT_TRUE(WriteFile(project + "/CMakeLists.txt", R"(cmake_minimum_required(VERSION 3.20)
project(hlo_import LANGUAGES CXX)
find_package(npc CONFIG REQUIRED)
npc_precompile_hlo(graphs ALL FILES graphs/a.pb graphs/b.pb FLAGS --opt-level=1 JOBS 2)
)"));
  ASSERT_TRUE(WriteFile(project + "/graphs/a.pb", SmallModule(4).SerializeAsString()));
  ASSERT_TRUE(WriteFile(project + "/graphs/b.pb", SmallModule(8).SerializeAsString()));
  auto configure = RunClean({"cmake", "-S", project, "-B", build(), "-G", "Ninja", "-DCMAKE_PREFIX_PATH=" + prefix(),
                             "-DNPC_CACHE_DIR=" + cache()});
  ASSERT_EQ(configure.exit_status, 0) << configure.output;
  auto first = Build();
  ASSERT_EQ(first.exit_status, 0) << first.output;
  auto entries = ScanCache(cache());
  ASSERT_EQ(entries.size(), 2u) << first.output;
  EXPECT_EQ(CountDone(entries), 2) << first.output;
  const std::string hash = npc::cache::FlagsHash(npc::cache::CompileFlagsJson({"--opt-level=1"}));
  for (const auto& [dir, e] : entries) {
    EXPECT_EQ(dir.substr(dir.size() - hash.size() - 1), "+" + hash) << dir;
    EXPECT_EQ(ReadFile(dir + "/compile_flags.json"), R"(["--opt-level=1"])");
  }

  auto second = Build();
  ASSERT_EQ(second.exit_status, 0) << second.output;
  EXPECT_EQ(CompileEdges(second.output), 0) << second.output;
  EXPECT_EQ(second.output.find("imported"), std::string::npos) << second.output;

  ASSERT_TRUE(WriteFile(project + "/graphs/b.pb", SmallModule(16).SerializeAsString()));
  auto third = Build();
  ASSERT_EQ(third.exit_status, 0) << third.output;
  EXPECT_EQ(CompileEdges(third.output), 1) << third.output;
  EXPECT_EQ(CountDone(ScanCache(cache())), 3) << third.output;
}

// find_package(npc) straight from npc's build tree (export(...)).
TEST_F(CmakePackageTest, BuildTreePackage) {
  auto configure = Configure("Ninja", NPC_BINARY_DIR);
  ASSERT_EQ(configure.exit_status, 0) << configure.output;
  std::string cache_file = ReadFile(build() + "/CMakeCache.txt");
  EXPECT_NE(cache_file.find("npc_DIR:PATH=" + std::string(NPC_BINARY_DIR) + "/lib/cmake/npc"), std::string::npos);
  auto built = Build();
  ASSERT_EQ(built.exit_status, 0) << built.output;
  EXPECT_EQ(CountDone(ScanCache(cache())), 3) << built.output;
  auto run = RunProgram();
  ASSERT_EQ(run.exit_status, 0) << run.output;
  EXPECT_NE(run.output.find("npc cache: hits=3 misses=0"), std::string::npos) << run.output;
}

// The installed package names nothing of the build or source tree, and the
// pkg-config file builds a program against the installed library.
TEST_F(CmakePackageTest, InstalledPackageIsSelfContainedAndPkgConfigWorks) {
  for (const auto& entry : fs::recursive_directory_iterator(prefix() + "/lib/cmake/npc")) {
    if (!entry.is_regular_file()) continue;
    std::string text = ReadFile(entry.path().string());
    EXPECT_EQ(text.find(NPC_BINARY_DIR), std::string::npos) << entry.path() << " names the build tree";
    EXPECT_EQ(text.find(std::string(NPC_SOURCE_DIR) + "/"), std::string::npos) << entry.path() << " names the sources";
  }
  EXPECT_TRUE(FileExists(prefix() + "/include/npc/runtime.h"));
  EXPECT_TRUE(FileExists(prefix() + "/include/npc/hlo.pb.h"));
  EXPECT_TRUE(FileExists(prefix() + "/bin/neuron_parallel_compile"));

  std::map<std::string, std::string> env = kCleanEnv;
  env["PKG_CONFIG_PATH"] = prefix() + "/lib/pkgconfig";
  auto flags = RunCommand({"pkg-config", "--cflags", "--libs", "npc"}, env);
  if (flags.exit_status == -1) GTEST_SKIP() << "pkg-config is not installed: " << flags.output;
  ASSERT_EQ(flags.exit_status, 0) << flags.output;
  EXPECT_NE(flags.output.find("-I" + prefix() + "/"), std::string::npos) << flags.output;  // relocated
  EXPECT_NE(flags.output.find("-lnpc"), std::string::npos) << flags.output;
  ASSERT_TRUE(WriteFile(tmp.Sub("pc/main.cc"),
                        "#include <iostream>\n#include \"npc/cache.h\"\n"
                        "int main() { std::cout << npc::cache::FlagsHash(\"[\\\"--target=trn1\\\"]\") << \"\\n\"; }\n"));
  std::vector<std::string> argv = {"sh", "-c",
                                   "c++ -std=c++17 main.cc -o main $(pkg-config --cflags --libs npc) -Wl,-rpath," +
                                       prefix() + "/lib && ./main"};
  auto built = RunCommand(argv, env, tmp.Sub("pc"));
  ASSERT_EQ(built.exit_status, 0) << built.output;
  EXPECT_NE(built.output.find("e30acd3a"), std::string::npos) << built.output;
}

}  // namespace
