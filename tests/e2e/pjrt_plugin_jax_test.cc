// The real client: an unmodified JAX training script (tests/jax/train.py: an
// MLP with jax.jit, jax.grad, a momentum update and an evaluation step on
// synthetic data; it knows nothing of npc) runs with libnpc_pjrt.so loaded
// through JAX's documented plugin mechanism (PJRT_NAMES_AND_LIBRARY_PATHS,
// JAX_PLATFORMS):
//  1. `neuron_parallel_compile python train.py --steps 3` extracts its graphs
//     (StableHLO entries) and compiles them with the real ninja: all DONE (the
//     trial's own steps compute the right losses);
//  2. `python train.py --steps 50`: every graph a cache hit (the plugin's
//     counters), losses equal to plain JAX CPU's;
//  3. a second trial run adds no entry; another model width adds only the
//     graphs that depend on it.
// Skipped, saying so, without the plugin or without jax in build/pjrt-venv
// (scripts/install-pjrt.sh --jax).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "support/test_support.h"

namespace npc::testing {
namespace {

namespace fs = std::filesystem;
const std::string kPython = std::string(NPC_BINARY_DIR) + "/pjrt-venv/bin/python";
const std::string kTrain = std::string(NPC_SOURCE_DIR) + "/tests/jax/train.py";

std::map<std::string, std::string> PluginEnv(const std::string& cache) {
#ifdef NPC_PJRT_PLUGIN_LIB
  const std::string plugin = NPC_PJRT_PLUGIN_LIB;
#else
  const std::string plugin;
#endif
  return {{"NEURON_COMPILE_CACHE_URL", cache}, {"PJRT_NAMES_AND_LIBRARY_PATHS", "npc:" + plugin},
          {"JAX_PLATFORMS", "npc"}, {"NPC_BACKEND", "pjrt"}, {"NEURON_CC_FLAGS", ""}};
}

// Entry directory names under every compiler directory of `cache`.
std::set<std::string> Entries(const std::string& cache) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(cache, ec)) {
    for (const auto& entry : fs::directory_iterator(dir.path(), ec)) {
      if (entry.path().filename().string().rfind("MODULE_", 0) == 0) out.insert(entry.path().string());
    }
  }
  return out;
}

std::vector<double> Losses(const std::string& output) {
  std::vector<double> losses;
  std::istringstream in(output);
  std::string line;
  static const std::regex step(R"(^(step \d+|eval) loss ([-0-9.e+]+))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, step)) losses.push_back(std::stod(m[2]));
  }
  return losses;
}

// The plugin's counters line: "npc cache: hits=H misses=M compiles=C failed_compiles=F extracted=E".
std::map<std::string, int> Counters(const std::string& output) {
  std::map<std::string, int> out;
  static const std::regex line(R"(npc cache: hits=(\d+) misses=(\d+) compiles=(\d+) failed_compiles=(\d+) extracted=(\d+))");
  std::smatch m;
  if (!std::regex_search(output, m, line)) return out;
  const char* names[] = {"hits", "misses", "compiles", "failed_compiles", "extracted"};
  for (int i = 0; i < 5; ++i) out[names[i]] = std::stoi(m[i + 1]);
  return out;
}

TEST(PjrtPluginJaxTest, UnmodifiedJaxScriptRunsFromThePrecompiledCache) {
#ifndef NPC_PJRT_PLUGIN_LIB
  GTEST_SKIP() << "libnpc_pjrt.so is not built (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
#endif
  if (RunCommand({kPython, "-c", "import jax"}).exit_status != 0) {
    GTEST_SKIP() << "no jax in " << kPython << " (scripts/install-pjrt.sh --jax)";
  }
  TempDir tmp("npc-plugin-jax");
  const std::string cache = tmp.Sub("cache");
  const auto env = PluginEnv(cache);

  // 1. collect + compile with the real ninja.
  auto trial = RunCommand({NPC_CLI, kPython, kTrain, "--steps", "3"}, env, tmp.path());
  ASSERT_EQ(trial.exit_status, 0) << trial.output;
  const std::set<std::string> entries = Entries(cache);
  ASSERT_GT(entries.size(), 2u) << trial.output;
  for (const auto& e : entries) {
    EXPECT_TRUE(fs::exists(e + "/model.stablehlo.mlirbc")) << e;
    EXPECT_TRUE(fs::exists(e + "/model.pjrt") && fs::exists(e + "/model.done")) << e << " not DONE\n" << trial.output;
  }
  EXPECT_EQ(Counters(trial.output)["extracted"], static_cast<int>(entries.size())) << trial.output;
  EXPECT_NE(trial.output.find("Total failed compilations: 0"), std::string::npos) << trial.output;

  // 2. the real run: only hits; the losses of plain JAX CPU.
  auto run = RunCommand({kPython, kTrain, "--steps", "50"}, env, tmp.path());
  ASSERT_EQ(run.exit_status, 0) << run.output;
  auto counters = Counters(run.output);
  EXPECT_GT(counters["hits"], 2) << run.output;
  EXPECT_EQ(counters["misses"], 0) << run.output;
  EXPECT_EQ(counters["compiles"], 0) << run.output;
  auto plain = RunCommand({kPython, kTrain, "--steps", "50"}, {{"JAX_PLATFORMS", "cpu"}}, tmp.path());
  ASSERT_EQ(plain.exit_status, 0) << plain.output;
  const auto got = Losses(run.output), want = Losses(plain.output);
  ASSERT_EQ(got.size(), 51u) << run.output;
  ASSERT_EQ(want.size(), got.size()) << plain.output;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * std::abs(want[i]) + 1e-5) << "loss " << i;
  EXPECT_EQ(Entries(cache), entries) << "a real run made entries";
  // The trial run's executables (XLA's cheapest settings) compute the same steps.
  const auto trial_losses = Losses(trial.output);
  ASSERT_EQ(trial_losses.size(), 4u) << trial.output;
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(trial_losses[i], want[i], 1e-4 * std::abs(want[i]) + 1e-5) << "trial loss " << i;

  // 3. a second trial run adds nothing; another width adds only its own graphs.
  auto again = RunCommand({NPC_CLI, kPython, kTrain, "--steps", "3"}, env, tmp.path());
  ASSERT_EQ(again.exit_status, 0) << again.output;
  EXPECT_EQ(Entries(cache), entries) << again.output;
  EXPECT_EQ(Counters(again.output)["extracted"], 0) << again.output;
  auto wider = RunCommand({NPC_CLI, kPython, kTrain, "--steps", "3", "--width", "96"}, env, tmp.path());
  ASSERT_EQ(wider.exit_status, 0) << wider.output;
  const std::set<std::string> after = Entries(cache);
  std::set<std::string> added;
  for (const auto& e : after) {
    if (!entries.count(e)) added.insert(e);
  }
  for (const auto& e : entries) EXPECT_TRUE(after.count(e)) << e << " disappeared";
  const auto wide_counters = Counters(wider.output);
  EXPECT_GT(added.size(), 0u) << wider.output;
  EXPECT_LT(added.size(), entries.size()) << "graphs independent of the width were extracted again";
  EXPECT_EQ(wide_counters.at("extracted"), static_cast<int>(added.size())) << wider.output;
  EXPECT_GT(wide_counters.at("hits"), 0) << wider.output;
  std::printf("JAX plugin flow: %zu graphs at width 64, %zu more at width 96 (%d hits)\n", entries.size(),
              added.size(), wide_counters.at("hits"));
}

}  // namespace
}  // namespace npc::testing
