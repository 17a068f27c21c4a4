// samples/cmake_project built against the installed npc with NPC_BACKEND=pjrt
// in the environment: the build's trial run and compile edges use XLA's CPU
// plugin, the program's real run hits every graph, and its losses are those of
// the host backend (within float tolerance). Skipped without the pjrt backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "compilers/pjrt_compiler.h"
#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin: " << (haystack)

std::map<std::string, std::string> Env(const std::string& backend) {
  return {{"NEURON_COMPILE_CACHE_URL", "<unset>"}, {"NEURON_CC_FLAGS", "<unset>"},
          {"NEURON_EXTRACT_GRAPHS_ONLY", "<unset>"}, {"NPC_BACKEND", backend},
          {"NPC_PJRT_PLUGIN", "<unset>"}, {"CMAKE_GENERATOR", "<unset>"}, {"MAKEFLAGS", "<unset>"},
          {"NPC_TOOL_PROGRAM", "<unset>"}};
}

std::vector<double> Losses(const std::string& output) {
  std::vector<double> losses;
  std::regex re("loss ([-+0-9.eE]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it) {
    losses.push_back(std::stod((*it)[1].str()));
  }
  return losses;
}

TEST(PjrtCmakeProjectTest, BuildPrecompilesWithXlaAndTrainsLikeTheHostBackend) {
#if !NPC_HAVE_PJRT
  GTEST_SKIP() << "npc was built without the pjrt backend (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
#endif
  if (PjrtDefaultPluginPath().empty()) GTEST_SKIP() << "no default PJRT plugin (scripts/install-deps.sh --pjrt)";
  TempDir tmp("npc-pjrt-cmake");
  const std::string prefix = tmp.Sub("prefix"), src = tmp.Sub("src"), build = tmp.Sub("build");
  const std::string cache = tmp.Sub("cache");
  auto install = RunCommand({"cmake", "--install", NPC_BINARY_DIR, "--prefix", prefix}, Env("pjrt"));
  ASSERT_EQ(install.exit_status, 0) << install.output;
  std::error_code ec;
  fs::copy(std::string(NPC_SOURCE_DIR) + "/samples/cmake_project", src, fs::copy_options::recursive, ec);
  ASSERT_FALSE(ec) << ec.message();
  auto configure = RunCommand({"cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_PREFIX_PATH=" + prefix,
                               "-DNPC_CACHE_DIR=" + cache},
                              Env("pjrt"));
  ASSERT_EQ(configure.exit_status, 0) << configure.output;
  auto built = RunCommand({"cmake", "--build", build, "--parallel", "2"}, Env("pjrt"));
  ASSERT_EQ(built.exit_status, 0) << built.output;

  int done = 0;
  for (const auto& dir : fs::directory_iterator(cache)) {
    ASSERT_EQ(dir.path().filename().string().rfind("pjrt-cpu-", 0), 0u) << dir.path();
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      done += fs::exists(entry.path() / "model.done") && fs::exists(entry.path() / "model.pjrt");
    }
  }
  EXPECT_EQ(done, 3) << built.output;

  auto pjrt = RunCommand({build + "/tiny_train", "--steps", "60"}, Env("pjrt"));
  ASSERT_EQ(pjrt.exit_status, 0) << pjrt.output;
  EXPECT_CONTAINS(pjrt.output, "npc cache: hits=3 misses=0 compiles=0");
  auto host = RunCommand({build + "/tiny_train", "--steps", "60"}, Env("host"));
  ASSERT_EQ(host.exit_status, 0) << host.output;
  const auto a = Losses(pjrt.output), b = Losses(host.output);
  ASSERT_GE(a.size(), 3u) << pjrt.output;
  ASSERT_EQ(a.size(), b.size()) << pjrt.output << host.output;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-4 + 1e-3 * std::abs(b[i])) << "loss " << i << "\n" << pjrt.output << host.output;
  }
}

}  // namespace
}  // namespace npc
