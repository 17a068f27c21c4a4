// End-to-end: the user's flow with a real C++ training program.
//   neuron_parallel_compile --cache_dir <tmp> mlp_train --steps 10   (trial run + parallel compile)
//   NEURON_COMPILE_CACHE_URL=<tmp> mlp_train --steps 300             (real run: all cache hits)
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace npc {
namespace {

using Args = std::vector<std::string>;
using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

std::map<std::string, std::string> CleanEnv(std::map<std::string, std::string> extra = {}) {
  for (const char* name : {"NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL", "NEURON_EXTRACT_GRAPHS_ONLY",
                           "NEURON_PARALLEL_COMPILE", "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE"}) {
    extra.emplace(name, "<unset>");
  }
  return extra;
}

double Number(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) {
    ADD_FAILURE() << "no match for /" << pattern << "/ in:\n" << text;
    return -1;
  }
  return std::stod(m[1].str());
}

nlohmann::json Scan(const std::string& cache) {
  auto scan = RunCommand({NPC_TOOL, "scan", "--cache", cache, "--json"}, CleanEnv());
  EXPECT_EQ(scan.exit_status, 0) << scan.output;
  size_t brace = scan.output.find('{');
  if (brace == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(scan.output.substr(brace), nullptr, false);
}

TEST(FlowTest, TrialRunCompileThenRealRunHitsTheCache) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache");
  auto precompile = RunCommand({NPC_CLI, "--cache_dir", cache, NPC_MLP_TRAIN, "--steps", "10"}, CleanEnv());
  ASSERT_EQ(precompile.exit_status, 0) << precompile.output;
  EXPECT_NE(precompile.output.find("Total failed compilations: 0"), std::string::npos) << precompile.output;
  const int graphs = static_cast<int>(Number(precompile.output, "Total graphs: (\\d+)"));
  EXPECT_GE(graphs, 1);
  EXPECT_EQ(Number(precompile.output, "Total successful compilations: (\\d+)"), graphs);

  auto scan = Scan(cache);
  ASSERT_TRUE(scan.contains("entries")) << scan.dump();
  ASSERT_EQ(static_cast<int>(scan["entries"].size()), graphs) << scan.dump(2);
  for (const auto& e : scan["entries"]) EXPECT_EQ(e["state"], "DONE") << e.dump();

  auto real = RunCommand({NPC_MLP_TRAIN, "--steps", "300"}, CleanEnv({{"NEURON_COMPILE_CACHE_URL", cache}}));
  ASSERT_EQ(real.exit_status, 0) << real.output;
  EXPECT_EQ(Number(real.output, "npc cache: hits=\\d+ misses=(\\d+)"), 0) << real.output;
  EXPECT_GE(Number(real.output, "npc cache: hits=(\\d+)"), 1) << real.output;
  EXPECT_EQ(Number(real.output, "compiles=(\\d+)"), 0) << real.output;
  const double initial = Number(real.output, "initial: loss ([-+0-9.eE]+)");
  const double final_loss = Number(real.output, "final: loss ([-+0-9.eE]+)");
  EXPECT_LT(final_loss, initial) << real.output;

  // A second precompile of the same trial finds everything compiled.
  auto again = RunCommand({NPC_CLI, "--cache_dir", cache, NPC_MLP_TRAIN, "--steps", "10"}, CleanEnv());
  EXPECT_EQ(again.exit_status, 0) << again.output;
  EXPECT_NE(again.output.find("Total failed compilations: 0"), std::string::npos) << again.output;
}

TEST(FlowTest, CollectThenNinjaByHand) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache");
  const std::string build = tmp.Sub("build");
  auto collect = RunCommand({NPC_TOOL, "collect", "--cache", cache, "--build_dir", build, "--", NPC_MLP_TRAIN,
                             "--steps", "3"},
                            CleanEnv());
  ASSERT_EQ(collect.exit_status, 0) << collect.output;
  for (const auto& e : Scan(cache)["entries"]) EXPECT_EQ(e["state"], "TODO") << e.dump();
  auto ninja = RunCommand({"ninja", "-C", build}, CleanEnv());
  ASSERT_EQ(ninja.exit_status, 0) << ninja.output;
  auto scan = Scan(cache);
  ASSERT_GE(scan["entries"].size(), 1u);
  for (const auto& e : scan["entries"]) EXPECT_EQ(e["state"], "DONE") << e.dump();
  auto again = RunCommand({"ninja", "-C", build}, CleanEnv());
  EXPECT_NE(again.output.find("no work to do"), std::string::npos) << again.output;
}

TEST(FlowTest, TrialCommandGetsItsOptionsAndEnvironment) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache");
  auto run = RunCommand({NPC_CLI, "--command", "collect", "--cache_dir", cache, "/bin/sh", "-c",
                         "echo ARGS=\"$*\" EXTRACT=$NEURON_EXTRACT_GRAPHS_ONLY PC=$NEURON_PARALLEL_COMPILE "
                         "NULL=$NEURON_FALL_BACK_TO_NULL_NEFF URL=$NEURON_COMPILE_CACHE_URL",
                         "sh", "--num_parallel", "7", "--cache_dir", "/elsewhere"},
                        CleanEnv());
  ASSERT_EQ(run.exit_status, 0) << run.output;
  EXPECT_NE(run.output.find("ARGS=--num_parallel 7 --cache_dir /elsewhere EXTRACT=1 PC=1 NULL=1 URL=" + cache),
            std::string::npos)
      << run.output;
}

TEST(FlowTest, FailingTrialRunStopsUnlessIgnored) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache");
  auto fail = RunCommand({NPC_CLI, "--cache_dir", cache, "/bin/sh", "-c", "exit 3"}, CleanEnv());
  EXPECT_EQ(fail.exit_status, 3) << fail.output;
  EXPECT_EQ(fail.output.find("Total graphs"), std::string::npos) << fail.output;
  auto ignored = RunCommand({NPC_CLI, "--cache_dir", cache, "/bin/sh", "-c", "exit 3"},
                            CleanEnv({{"NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE", "1"}}));
  EXPECT_EQ(ignored.exit_status, 0) << ignored.output;
  EXPECT_NE(ignored.output.find("Total graphs: 0"), std::string::npos) << ignored.output;
}

}  // namespace
}  // namespace npc
