// End-to-end: `neuron_parallel_compile --command compile` and `npc` driving the
// real ninja and the real C++ compiler (host backend) over a cache filled the
// way a trial run fills it. Failures, cached failures, corrupt inputs,
// incremental builds, scan/clean/clear-locks.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "npc/cache.h"
#include "npc/hlo.h"
#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;
using cache::EntryState;
using testing::CommandResult;
using testing::FileExists;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

int64_t MtimeNs(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

std::string KeyOf(const std::string& entry) {
  auto name = entry.substr(entry.rfind('/') + 1);
  return name.substr(7, name.find('+') - 7);
}

class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = tmp_.Sub("cache");
    dir_ = testing::HostCompilerDir();
    ASSERT_FALSE(dir_.empty());
  }
  CommandResult Cli(Args args, std::map<std::string, std::string> env = {}, const std::string& cwd = "") {
    args.insert(args.begin(), NPC_CLI);
    env.emplace("NEURON_CC_FLAGS", "<unset>");
    env.emplace("NEURON_COMPILE_CACHE_URL", "<unset>");
    return RunCommand(args, env, cwd);
  }
  CommandResult Tool(Args args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), NPC_TOOL);
    env.emplace("NEURON_CC_FLAGS", "<unset>");
    env.emplace("NEURON_COMPILE_CACHE_URL", "<unset>");
    return RunCommand(args, env);
  }
  EntryState State(const std::string& entry) {
    cache::LocalStore store(cache_);
    auto ref = cache::ParseEntryDirName(dir_, entry.substr(entry.rfind('/') + 1));
    EXPECT_TRUE(ref.has_value()) << entry;
    auto state = cache::GetEntryState(store, *ref, "model.so");
    EXPECT_TRUE(state.ok());
    return state.ok() ? *state : EntryState::kEmpty;
  }
  std::string Path(const std::string& entry, const std::string& file) { return cache_ + "/" + entry + "/" + file; }
  std::string BuildDir() { return cache_ + "/" + dir_ + "/.npc-build"; }

  TempDir tmp_;
  std::string cache_;
  std::string dir_;
};

TEST_F(CompileTest, FailureIsCachedReportedAndRetried) {
  const std::string good1 = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string good2 = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(16));
  const std::string bad = testing::PutTestEntry(cache_, dir_, testing::UnsupportedOpModule());

  auto first = Cli({"--command", "compile", "--cache_dir", cache_});
  EXPECT_EQ(first.exit_status, 1) << first.output;
  EXPECT_NE(first.output.find("Total graphs: 3"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("Total successful compilations: 2"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("Total failed compilations: 1"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("compilation_report"), std::string::npos);
  EXPECT_NE(first.output.find("||NEURON_PARALLEL_COMPILE||"), std::string::npos);
  // The failing edge shows the compiler output and where the log is.
  EXPECT_NE(first.output.find(Path(bad, "model.log")), std::string::npos) << first.output;
  EXPECT_EQ(State(good1), EntryState::kDone);
  EXPECT_EQ(State(good2), EntryState::kDone);
  EXPECT_EQ(State(bad), EntryState::kFailed);
  ASSERT_TRUE(FileExists(Path(bad, "model.log")));
  EXPECT_NE(ReadFile(Path(bad, "model.log")).find("cholesky"), std::string::npos) << ReadFile(Path(bad, "model.log"));
  EXPECT_FALSE(FileExists(Path(bad, "model.so")));
  EXPECT_FALSE(FileExists(Path(bad, "model.done")));

  // Second run: the cached failure is reported (and counted), not recompiled.
  const int64_t log_mtime = MtimeNs(Path(bad, "model.log"));
  const int64_t so_mtime = MtimeNs(Path(good1, "model.so"));
  usleep(20000);
  auto second = Cli({"--command", "compile", "--cache_dir", cache_}, {{"NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "1"}},
                    tmp_.path());
  EXPECT_EQ(second.exit_status, 1) << second.output;
  EXPECT_NE(second.output.find("cached failure"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("Got a cached failed neff at"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("Total failed compilations: 1"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("NPC " + KeyOf(bad)), std::string::npos) << second.output;
  EXPECT_EQ(MtimeNs(Path(bad, "model.log")), log_mtime);
  EXPECT_EQ(MtimeNs(Path(good1, "model.so")), so_mtime);
  // NEURON_PARALLEL_COMPILE_DUMP_RESULTS=1: the results JSON in the working directory.
  const std::string dumped = tmp_.Sub("neuron_parallel_compile_results.json");
  ASSERT_TRUE(FileExists(dumped)) << second.output;
  auto results = nlohmann::json::parse(ReadFile(dumped));
  ASSERT_TRUE(results["compilation_report"].contains(Path(bad, "model.hlo_module.pb"))) << results.dump(2);
  EXPECT_EQ(results["compilation_report"][Path(bad, "model.hlo_module.pb")]["status"], false);
  EXPECT_EQ(results["compilation_summary"]["false"], 1);

  // --retry_failed_compilation compiles it again (and it fails again).
  auto third = Cli({"--command", "compile", "--retry_failed_compilation", "--cache_dir", cache_});
  EXPECT_EQ(third.exit_status, 1) << third.output;
  EXPECT_NE(third.output.find("NPC " + KeyOf(bad)), std::string::npos) << third.output;
  EXPECT_NE(MtimeNs(Path(bad, "model.log")), log_mtime);
  EXPECT_EQ(MtimeNs(Path(good1, "model.so")), so_mtime);
  EXPECT_EQ(State(bad), EntryState::kFailed);

  // The retry flag is honored from NEURON_CC_FLAGS too.
  const int64_t log_mtime2 = MtimeNs(Path(bad, "model.log"));
  usleep(20000);
  auto fourth = Cli({"--command", "compile", "--cache_dir", cache_},
                    {{"NEURON_CC_FLAGS", "--retry_failed_compilation"}});
  EXPECT_EQ(fourth.exit_status, 1) << fourth.output;
  EXPECT_NE(MtimeNs(Path(bad, "model.log")), log_mtime2);
}

TEST_F(CompileTest, CorruptHloFailsNamingTheFile) {
  const std::string good = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string corrupt =
      testing::PutTestEntryBytes(cache_, dir_, "\xff\xff\xff\xff garbage, not an HLO module", "4242");
  auto run = Cli({"--command", "compile", "--cache_dir", cache_});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_EQ(State(good), EntryState::kDone);
  EXPECT_EQ(State(corrupt), EntryState::kFailed);
  const std::string hlo = Path(corrupt, "model.hlo_module.pb");
  EXPECT_NE(ReadFile(Path(corrupt, "model.log")).find(hlo), std::string::npos) << ReadFile(Path(corrupt, "model.log"));
  EXPECT_NE(run.output.find(hlo), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Total failed compilations: 1"), std::string::npos) << run.output;
}

TEST_F(CompileTest, NinjaByHandIsIncrementalAndRegenerates) {
  const std::string a = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string b = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(32));
  auto gen = Tool({"generate", "--cache", cache_, "--num_parallel", "1"});
  ASSERT_EQ(gen.exit_status, 0) << gen.output;
  const std::string ninja_file = BuildDir() + "/build.ninja";
  ASSERT_TRUE(FileExists(ninja_file));
  // Deterministic: the same cache state gives the same bytes.
  const std::string text = ReadFile(ninja_file);
  ASSERT_EQ(Tool({"generate", "--cache", cache_, "--num_parallel", "1"}).exit_status, 0);
  EXPECT_EQ(ReadFile(ninja_file), text);
  // Costliest (largest HLO) first.
  EXPECT_LT(text.find(b + "/model.done"), text.find(a + "/model.done")) << text;

  auto build = RunCommand({"ninja", "-C", BuildDir()});
  ASSERT_EQ(build.exit_status, 0) << build.output;
  EXPECT_NE(build.output.find("NPC " + KeyOf(a)), std::string::npos) << build.output;
  EXPECT_EQ(State(a), EntryState::kDone);
  EXPECT_EQ(State(b), EntryState::kDone);
  auto again = RunCommand({"ninja", "-C", BuildDir()});
  ASSERT_EQ(again.exit_status, 0) << again.output;
  EXPECT_NE(again.output.find("no work to do"), std::string::npos) << again.output;

  // A new graph appears (a later trial run): ninja re-runs the generator and
  // compiles only the new entry.
  usleep(20000);
  const std::string c = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(64));
  auto third = RunCommand({"ninja", "-C", BuildDir()});
  ASSERT_EQ(third.exit_status, 0) << third.output;
  EXPECT_NE(third.output.find("NPC " + KeyOf(c)), std::string::npos) << third.output;
  EXPECT_EQ(third.output.find("NPC " + KeyOf(a)), std::string::npos) << third.output;
  EXPECT_EQ(third.output.find("NPC " + KeyOf(b)), std::string::npos) << third.output;
  EXPECT_EQ(State(c), EntryState::kDone);
  // The per-edge result record is there for the summary.
  auto record = nlohmann::json::parse(ReadFile(BuildDir() + "/results/" + c.substr(c.rfind('/') + 1) + ".json"));
  EXPECT_EQ(record["status"], "compiled");
  EXPECT_EQ(record["hlo_path"], Path(c, "model.hlo_module.pb"));
  // The measured compile memory is recorded for the pool size.
  EXPECT_TRUE(FileExists(BuildDir() + "/.npc_compile_memory"));

  // `compile` afterwards: nothing to do, exit 0.
  auto compile = Cli({"--command", "compile", "--cache_dir", cache_});
  EXPECT_EQ(compile.exit_status, 0) << compile.output;
  EXPECT_NE(compile.output.find("Total failed compilations: 0"), std::string::npos) << compile.output;
}

TEST_F(CompileTest, ScanClearLocksAndClean) {
  const std::string a = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string b = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(16));
  ASSERT_TRUE(testing::WriteFile(Path(a, "model.lock"), "pid 999999\n"));  // stale
  ASSERT_TRUE(testing::WriteFile(Path(b, "model.lock"), ""));
  int fd = open(Path(b, "model.lock").c_str(), O_RDWR);  // held by this live process
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_TRUE(testing::WriteFile(cache_ + "/" + dir_ + "/unrelated.txt", "keep until clean"));

  auto scan = Tool({"scan", "--cache", cache_, "--json"});
  ASSERT_EQ(scan.exit_status, 0) << scan.output;
  auto j = nlohmann::json::parse(scan.output.substr(scan.output.find('{')));
  ASSERT_EQ(j["entries"].size(), 2u) << scan.output;
  std::map<std::string, std::string> states;
  for (const auto& e : j["entries"]) states[e["entry"]] = e["state"];
  EXPECT_EQ(states[a], "TODO");
  EXPECT_EQ(states[b], "LOCKED");
  auto text_scan = Cli({"--command", "scan", "--cache_dir", cache_});
  EXPECT_EQ(text_scan.exit_status, 0);
  EXPECT_NE(text_scan.output.find("LOCKED"), std::string::npos) << text_scan.output;

  auto clear = Cli({"--command", "clear-locks", "--cache_dir", cache_});
  EXPECT_EQ(clear.exit_status, 0) << clear.output;
  EXPECT_FALSE(FileExists(Path(a, "model.lock")));
  EXPECT_TRUE(FileExists(Path(b, "model.lock")));
  EXPECT_NE(clear.output.find("Held by a live process"), std::string::npos) << clear.output;
  EXPECT_TRUE(FileExists(cache_ + "/" + dir_ + "/unrelated.txt"));

  auto clean = Cli({"--command", "clean", "--cache_dir", cache_});
  EXPECT_EQ(clean.exit_status, 0) << clean.output;
  EXPECT_FALSE(FileExists(cache_ + "/" + a));
  EXPECT_TRUE(FileExists(cache_ + "/" + b)) << "an entry in use is left";
  EXPECT_FALSE(FileExists(cache_ + "/" + dir_ + "/unrelated.txt"));
  close(fd);
  auto clean2 = Tool({"clean", "--cache", cache_});
  EXPECT_EQ(clean2.exit_status, 0) << clean2.output;
  EXPECT_FALSE(FileExists(cache_ + "/" + b));
}

TEST_F(CompileTest, MaxRetriesFromEnvironment) {
  const std::string bad = testing::PutTestEntry(cache_, dir_, testing::UnsupportedOpModule());
  auto run = Cli({"--command", "compile", "--cache_dir", cache_},
                 {{"NEURON_PARALLEL_COMPILE_MAX_RETRIES", "2"}, {"NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "1"}},
                 tmp_.path());
  EXPECT_EQ(run.exit_status, 1) << run.output;
  auto results = nlohmann::json::parse(ReadFile(tmp_.Sub("neuron_parallel_compile_results.json")));
  const auto& item = results["compilation_report"][Path(bad, "model.hlo_module.pb")];
  EXPECT_EQ(item["status"], false) << results.dump(2);
  EXPECT_EQ(item["retry"], 2) << results.dump(2);
  EXPECT_NE(ReadFile(Path(bad, "model.log")).find("attempts: 3"), std::string::npos) << ReadFile(Path(bad, "model.log"));
}

// The neuronx-cc backend with a stand-in compiler: the same flow, model.neff
// artifacts, and a pool sized for 64 GiB per compile.
TEST_F(CompileTest, NeuronxCcBackendWithFakeCompiler) {
  const std::string fake = tmp_.Sub("neuronx-cc");
  ASSERT_TRUE(testing::WriteFile(fake,
                                 "#!/bin/sh\n"
                                 "if [ \"$1\" = --version ]; then echo 'NeuronX Compiler version 2.16.372.0+4a9b2326'; "
                                 "exit 0; fi\n"
                                 "echo \"$*\" >> " + tmp_.Sub("neuronx-cc.log") + "\n"
                                 "out=\n"
                                 "while [ $# -gt 0 ]; do [ \"$1\" = --output ] && out=$2; shift; done\n"
                                 "echo NEFF > \"$out\"\n"));
  chmod(fake.c_str(), 0755);
  const std::string neuron_dir = "neuronxcc-2.16.372.0+4a9b2326";
  const std::string a = testing::PutTestEntry(cache_, neuron_dir, testing::SmallTestModule(8));
  const std::string b = testing::PutTestEntry(cache_, neuron_dir, testing::SmallTestModule(16));
  auto run = Cli({"--command", "compile", "--backend", "neuronx-cc", "--cache_dir", cache_}, {{"NPC_COMPILER", fake}});
  ASSERT_EQ(run.exit_status, 0) << run.output;
  EXPECT_NE(run.output.find("Total successful compilations: 2"), std::string::npos) << run.output;
  for (const auto& e : {a, b}) {
    EXPECT_EQ(ReadFile(Path(e, "model.neff")), "NEFF\n");
    EXPECT_TRUE(FileExists(Path(e, "model.done")));
  }
  const std::string calls = ReadFile(tmp_.Sub("neuronx-cc.log"));
  EXPECT_NE(calls.find("compile --framework=XLA " + Path(a, "model.hlo_module.pb") + " --output "), std::string::npos)
      << calls;
  EXPECT_NE(calls.find("--verbose=35"), std::string::npos) << calls;
  // Pool depth: MemAvailable / 64 GiB, at least 1, at most the CPU count.
  std::string meminfo = ReadFile("/proc/meminfo");
  int64_t kb = std::stoll(meminfo.substr(meminfo.find("MemAvailable:") + 13));
  int64_t expected = std::max<int64_t>(1, std::min<int64_t>(sysconf(_SC_NPROCESSORS_ONLN), (kb << 10) / (int64_t{64} << 30)));
  const std::string ninja_file = ReadFile(cache_ + "/" + neuron_dir + "/.npc-build/build.ninja");
  EXPECT_NE(ninja_file.find("pool compile_pool\n  depth = " + std::to_string(expected) + "\n"), std::string::npos)
      << ninja_file;
}

// A stray directory named like an entry but malformed (a line break in it) is
// skipped with a warning naming it; the other entries compile. A cache path
// that build.ninja cannot hold ('|') is refused with an error naming it.
TEST_F(CompileTest, MalformedEntryNameSkippedAndInexpressiblePathRefused) {
  const std::string good = testing::PutTestEntry(cache_, dir_, testing::SmallTestModule(8));
  const std::string stray = cache_ + "/" + dir_ + "/MODULE_1\n2+abc";
  ASSERT_TRUE(testing::WriteFile(stray + "/model.hlo_module.pb", "x"));
  auto run = Tool({"compile", "--cache", cache_});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_NE(run.output.find("ignoring " + cache_ + "/" + dir_ + "/MODULE_1\\n2+abc"), std::string::npos) << run.output;
  EXPECT_EQ(State(good), EntryState::kDone);
  EXPECT_TRUE(FileExists(stray + "/model.hlo_module.pb")) << "left alone";

  const std::string piped = tmp_.Sub("a|b");
  testing::PutTestEntry(piped, dir_, testing::SmallTestModule(8));
  auto refused = Tool({"compile", "--cache", piped});
  EXPECT_EQ(refused.exit_status, 1) << refused.output;
  EXPECT_NE(refused.output.find("\"" + piped + "/" + dir_), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("'|'"), std::string::npos) << refused.output;
}

// `npc import --flags '<flags>'`: the imported entries get exactly those
// compiler flags (compile_flags.json and its hash in the entry name), in
// place of NEURON_CC_FLAGS'; cache options in --flags are refused.
TEST_F(CompileTest, ImportWithFlags) {
  const std::string hlo = tmp_.Sub("step.pb");
  ASSERT_TRUE(testing::WriteFile(hlo, testing::SmallTestModule(8).SerializeAsString()));
  auto imported = Tool({"import", "--cache", cache_, "--flags=--target=trn2 -O1", hlo},
                       {{"NEURON_CC_FLAGS", "--model-type=transformer"}});
  ASSERT_EQ(imported.exit_status, 0) << imported.output;
  const std::string json = R"(["--target=trn2", "-O1"])";
  const std::string entry_dir = dir_ + "/MODULE_" + hlo::CanonicalGraphKey(testing::SmallTestModule(8)) + "+" +
                                cache::FlagsHash(json);
  EXPECT_EQ(ReadFile(cache_ + "/" + entry_dir + "/compile_flags.json"), json) << imported.output;

  auto from_env = Tool({"import", "--cache", cache_, hlo}, {{"NEURON_CC_FLAGS", "--cache_dir=/elsewhere -O2"}});
  ASSERT_EQ(from_env.exit_status, 0) << from_env.output;
  const std::string env_dir = dir_ + "/MODULE_" + hlo::CanonicalGraphKey(testing::SmallTestModule(8)) + "+" +
                              cache::FlagsHash(R"(["-O2"])");
  EXPECT_EQ(ReadFile(cache_ + "/" + env_dir + "/compile_flags.json"), R"(["-O2"])") << from_env.output;

  auto bad = Tool({"import", "--cache", cache_, "--flags=--cache_dir=/x -O1", hlo});
  EXPECT_EQ(bad.exit_status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--cache_dir is an option of the cache"), std::string::npos) << bad.output;
}

// 256 failures must not wrap the exit status to 0.
TEST_F(CompileTest, ExitStatusIsCappedAt255) {
  for (int i = 0; i < 256; ++i) {
    testing::PutTestEntryBytes(cache_, dir_, "\xff\xff\xff garbage " + std::to_string(i), std::to_string(1000 + i));
  }
  auto run = Cli({"--command", "compile", "--cache_dir", cache_, "--num_parallel", "4"});
  EXPECT_EQ(run.exit_status, 255) << run.output.substr(run.output.size() > 3000 ? run.output.size() - 3000 : 0);
  EXPECT_NE(run.output.find("Total failed compilations: 256"), std::string::npos);
  // Again, as cached failures: still 255.
  auto again = Cli({"--command", "compile", "--cache_dir", cache_});
  EXPECT_EQ(again.exit_status, 255);
}

}  // namespace
}  // namespace npc
