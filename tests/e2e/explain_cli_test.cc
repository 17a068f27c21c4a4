// End to end: `npc explain` on a cache filled with `npc import`, run as the
// real program. A hit, a changed constant, changed flags, another compiler
// directory, and a file that does not read.
#include <filesystem>

#include <gtest/gtest.h>

#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace npc {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

xla::HloModuleProto Module(float scale) {
  hlo::HloBuilder b("explain_me");
  hlo::Op x = b.Parameter(0, xla::F32, {16}, "x");
  hlo::Op s = b.Broadcast(b.ConstantF32(scale), {16}, {});
  return b.Build(b.Add(b.Mul(x, s), x));
}

class ExplainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = tmp_.Sub("cache");
    ASSERT_TRUE(testing::WriteFile(tmp_.Sub("cached.pb"), Module(2.0f).SerializeAsString()));
    ASSERT_TRUE(testing::WriteFile(tmp_.Sub("changed.pb"), Module(0.5f).SerializeAsString()));
    auto imported = Npc({"import", "--cache_dir", cache_, tmp_.Sub("cached.pb")});
    ASSERT_EQ(imported.exit_status, 0) << imported.output;
  }
  CommandResult Npc(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), NPC_TOOL);
    env.emplace("NEURON_CC_FLAGS", "<unset>");
    env.emplace("NEURON_COMPILE_CACHE_URL", "<unset>");
    return RunCommand(args, env);
  }
  TempDir tmp_;
  std::string cache_;
};

TEST_F(ExplainTest, CollectedThenCompiledGraphIsTodoThenAHit) {
  auto todo = Npc({"explain", "--cache_dir", cache_, tmp_.Sub("cached.pb")});
  EXPECT_EQ(todo.exit_status, 1) << todo.output;
  EXPECT_NE(todo.output.find(": TODO (collected, not compiled yet"), std::string::npos) << todo.output;

  auto compile = Npc({"compile", "--cache_dir", cache_});
  ASSERT_EQ(compile.exit_status, 0) << compile.output;
  auto hit = Npc({"explain", "--cache_dir", cache_, tmp_.Sub("cached.pb")});
  EXPECT_EQ(hit.exit_status, 0) << hit.output;
  EXPECT_NE(hit.output.find(": DONE (a cache hit)"), std::string::npos) << hit.output;
}

TEST_F(ExplainTest, ChangedConstantIsNamed) {
  auto r = Npc({"explain", "--cache_dir", cache_, tmp_.Sub("changed.pb")});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("absent (a cache miss)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("4 of 5 instructions equal"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("literal.f32s[0]: 2 -> 0.5"), std::string::npos) << r.output;
}

TEST_F(ExplainTest, ChangedFlagsAreNamed) {
  auto r = Npc({"explain", "--cache_dir", cache_, tmp_.Sub("cached.pb")}, {{"NEURON_CC_FLAGS", "--O1 --cache_dir=" + cache_}});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("same graph, other flags"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("only in this run:          --O1"), std::string::npos) << r.output;
}

TEST_F(ExplainTest, OtherCompilerDirectoryIsNamed) {
  // The same entry, as if written by another compiler version.
  namespace fs = std::filesystem;
  std::string dir;
  for (const auto& e : fs::directory_iterator(cache_)) dir = e.path().filename().string();
  ASSERT_FALSE(dir.empty());
  fs::rename(cache_ + "/" + dir, cache_ + "/host-oldcc-1.0-cg0");
  auto r = Npc({"explain", "--cache_dir", cache_, tmp_.Sub("cached.pb")});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("under another compiler directory: host-oldcc-1.0-cg0/MODULE_"), std::string::npos)
      << r.output;
}

TEST_F(ExplainTest, UnreadableFileIsAnErrorNamingIt) {
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("broken.hlo"), "HloModule m\nENTRY e {\n  %p = f32[2 parameter(0)\n}\n"));
  auto r = Npc({"explain", "--cache_dir", cache_, tmp_.Sub("broken.hlo")});
  EXPECT_EQ(r.exit_status, 2) << r.output;
  EXPECT_NE(r.output.find(tmp_.Sub("broken.hlo") + ":3:"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace npc
