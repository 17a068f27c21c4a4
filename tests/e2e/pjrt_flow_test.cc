// End-to-end with the pjrt backend (XLA's CPU plugin, scripts/install-deps.sh --pjrt):
//   NPC_BACKEND=pjrt npc collect -- mlp_train; ninja -C <build dir>; NPC_BACKEND=pjrt mlp_train
// trains to the same losses as the host backend; failures are one clear error.
// Skipped, saying so, when npc was built without the pjrt backend.
#include <filesystem>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compilers/pjrt_compiler.h"
#include "support/test_support.h"

namespace npc {
namespace {

using testing::RunCommand;
using testing::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin: " << (haystack)

std::map<std::string, std::string> PjrtEnv(std::map<std::string, std::string> extra = {}) {
  for (const char* name : {"NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL", "NEURON_EXTRACT_GRAPHS_ONLY",
                           "NEURON_PARALLEL_COMPILE", "NPC_PJRT_PLUGIN", "NPC_COMPILER", "NPC_COMPILER_VERSION"}) {
    extra.emplace(name, "<unset>");
  }
  extra.emplace("NPC_BACKEND", "pjrt");
  return extra;
}

// Every "<label> loss <x>" of mlp_train's output, in order.
std::vector<double> Losses(const std::string& output) {
  std::vector<double> losses;
  std::regex re("(initial:|step \\d+|final:) loss ([-+0-9.eE]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it) {
    losses.push_back(std::stod((*it)[2].str()));
  }
  return losses;
}

nlohmann::json Scan(const std::string& cache) {
  auto scan = RunCommand({NPC_TOOL, "scan", "--cache", cache, "--backend", "pjrt", "--json"}, PjrtEnv());
  EXPECT_EQ(scan.exit_status, 0) << scan.output;
  size_t brace = scan.output.find('{');
  if (brace == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(scan.output.substr(brace), nullptr, false);
}

class PjrtFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if !NPC_HAVE_PJRT
    GTEST_SKIP() << "npc was built without the pjrt backend (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
#endif
    if (PjrtDefaultPluginPath().empty()) GTEST_SKIP() << "no default PJRT plugin (scripts/install-deps.sh --pjrt)";
  }
};

TEST_F(PjrtFlowTest, CollectNinjaRealRunTrainsLikeTheHostBackend) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache"), build = tmp.Sub("build");
  auto collect = RunCommand({NPC_TOOL, "collect", "--cache", cache, "--build_dir", build, "--", NPC_MLP_TRAIN,
                             "--steps", "3"},
                            PjrtEnv());
  ASSERT_EQ(collect.exit_status, 0) << collect.output;
  EXPECT_CONTAINS(collect.output, "/pjrt-cpu-api");
  auto ninja = RunCommand({"ninja", "-C", build}, PjrtEnv());
  ASSERT_EQ(ninja.exit_status, 0) << ninja.output;
  auto scan = Scan(cache);
  ASSERT_GE(scan["entries"].size(), 1u) << scan.dump(2);
  for (const auto& e : scan["entries"]) EXPECT_EQ(e["state"], "DONE") << e.dump();

  auto pjrt = RunCommand({NPC_MLP_TRAIN, "--steps", "60"}, PjrtEnv({{"NEURON_COMPILE_CACHE_URL", cache}}));
  ASSERT_EQ(pjrt.exit_status, 0) << pjrt.output;
  EXPECT_CONTAINS(pjrt.output, "misses=0 compiles=0");
  auto host = RunCommand({NPC_MLP_TRAIN, "--steps", "60"},
                         PjrtEnv({{"NPC_BACKEND", "host"}, {"NEURON_COMPILE_CACHE_URL", tmp.Sub("host-cache")}}));
  ASSERT_EQ(host.exit_status, 0) << host.output;

  const std::vector<double> a = Losses(pjrt.output), b = Losses(host.output);
  ASSERT_GE(a.size(), 3u) << pjrt.output;
  ASSERT_EQ(a.size(), b.size()) << pjrt.output << host.output;
  EXPECT_LT(a.back(), a.front()) << pjrt.output;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-4 + 1e-3 * std::abs(b[i])) << "loss line " << i << "\npjrt:\n"
                                                            << pjrt.output << "\nhost:\n" << host.output;
  }
}

TEST_F(PjrtFlowTest, ModuleXlaRejectsFailsWithXlasTextInModelLog) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache");
  ASSERT_TRUE(testing::WriteFile(tmp.Sub("bad.hlo"),
                                 "HloModule bad_add\n\nENTRY main {\n  x = f32[2,3]{1,0} parameter(0)\n"
                                 "  y = f32[3,2]{1,0} parameter(1)\n  ROOT s = f32[2,3]{1,0} add(x, y)\n}\n"));
  auto import = RunCommand({NPC_TOOL, "import", "--cache", cache, "--backend", "pjrt", tmp.Sub("bad.hlo")}, PjrtEnv());
  ASSERT_EQ(import.exit_status, 0) << import.output;
  auto compile = RunCommand({NPC_TOOL, "compile", "--cache", cache, "--backend", "pjrt"}, PjrtEnv());
  EXPECT_NE(compile.exit_status, 0) << compile.output;
  EXPECT_CONTAINS(compile.output, "Total failed compilations: 1");
  auto scan = Scan(cache);
  ASSERT_EQ(scan["entries"].size(), 1u) << scan.dump(2);
  EXPECT_EQ(scan["entries"][0]["state"], "FAILED");
  const std::string entry = cache + "/" + scan["entries"][0]["entry"].get<std::string>();
  const std::string log = testing::ReadFile(entry + "/model.log");
  EXPECT_CONTAINS(log, "PJRT_Client_Compile");
  EXPECT_CONTAINS(log, "Binary op with incompatible shapes");  // XLA's verifier
  EXPECT_CONTAINS(log, PjrtDefaultPluginPath());
}

TEST_F(PjrtFlowTest, MissingOrWrongPluginIsOneClearError) {
  TempDir tmp;
  ASSERT_TRUE(testing::WriteFile(tmp.Sub("not-a-plugin.so"), "text"));
  for (const std::string& plugin : {tmp.Sub("missing.so"), tmp.Sub("not-a-plugin.so")}) {
    auto run = RunCommand({NPC_MLP_TRAIN, "--steps", "2"},
                          PjrtEnv({{"NPC_PJRT_PLUGIN", plugin}, {"NEURON_COMPILE_CACHE_URL", tmp.Sub("cache")}}));
    EXPECT_NE(run.exit_status, 0) << run.output;
    EXPECT_GT(run.exit_status, 0) << run.output;
    EXPECT_LT(run.exit_status, 128) << run.output;
    EXPECT_CONTAINS(run.output, "PJRT plugin " + plugin + ": ");
    auto compile = RunCommand({NPC_TOOL, "compile", "--cache", tmp.Sub("cache"), "--backend", "pjrt"},
                              PjrtEnv({{"NPC_PJRT_PLUGIN", plugin}}));
    EXPECT_NE(compile.exit_status, 0) << compile.output;
    EXPECT_CONTAINS(compile.output, "PJRT plugin " + plugin + ": ");
  }
}

TEST_F(PjrtFlowTest, NinjaWithAnotherPluginThanTheTrialRunDoesNotCompileIntoItsDirectory) {
  TempDir tmp;
  const std::string cache = tmp.Sub("cache"), build = tmp.Sub("build");
  // The trial run's compiler directory is "pjrt-other-1" (as another plugin's would be) ...
  auto collect = RunCommand({NPC_TOOL, "collect", "--cache", cache, "--build_dir", build, "--", NPC_MLP_TRAIN,
                             "--steps", "1"},
                            PjrtEnv({{"NPC_COMPILER_VERSION", "other-1"}}));
  ASSERT_EQ(collect.exit_status, 0) << collect.output;
  // ... and ninja runs with the default plugin, whose directory is another.
  auto ninja = RunCommand({"ninja", "-C", build}, PjrtEnv());
  EXPECT_NE(ninja.exit_status, 0) << ninja.output;
  EXPECT_CONTAINS(ninja.output, "belongs to compiler directory pjrt-other-1");
  for (const auto& e : std::filesystem::directory_iterator(cache + "/pjrt-other-1")) {
    EXPECT_FALSE(std::filesystem::exists(e.path() / "model.pjrt")) << e.path();
  }
}

}  // namespace
}  // namespace npc
