// libnpc_pjrt.so driven by npc's own PJRT C API client as a framework would
// drive it, with format "hlo" (what PyTorch/XLA sends): a miss compiles into
// a DONE entry keyed by the canonical graph key, a second compile is a hit
// (nothing recompiled), the executable runs, and serializes to its artifact; a module XLA rejects becomes a
// cached failure whose PJRT_Error (the plugin's own) names the entry.
// Skipped, saying so, when the plugin is not built.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "npc/hlo.h"
#include "support/test_support.h"
#if NPC_HAVE_PJRT
#include "pjrt/pjrt_client.h"
#endif
#ifdef NPC_PJRT_PLUGIN_LIB
#include "pjrt_c_api.h"
#endif

namespace npc {
namespace {

namespace fs = std::filesystem;

#if NPC_HAVE_PJRT && defined(NPC_PJRT_PLUGIN_LIB)

constexpr char kModuleText[] = R"(HloModule add_mul

ENTRY main {
  x = f32[2,2]{1,0} parameter(0)
  y = f32[2,2]{1,0} parameter(1)
  s = f32[2,2]{1,0} add(x, y)
  ROOT m = f32[2,2]{1,0} multiply(s, y)
}
)";

constexpr char kRejectedText[] = R"(HloModule bad_add

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3,2]{1,0} parameter(1)
  ROOT s = f32[2,3]{1,0} add(x, y)
}
)";

xla::HloModuleProto Module(const char* text) {
  auto module = hlo::ParseHloModule(text, "test module");
  EXPECT_TRUE(module.ok()) << (module.ok() ? "" : module.error().message);
  return module.ok() ? *module : xla::HloModuleProto();
}

std::string FindEntry(const std::string& cache, const std::string& key) {
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(cache, ec)) {
    for (const auto& entry : fs::directory_iterator(dir.path(), ec)) {
      if (entry.path().filename().string().rfind("MODULE_" + key + "+", 0) == 0) return entry.path().string();
    }
  }
  return "";
}

// PJRT_Client_Compile through the plugin's API table, as a framework calls it.
Result<std::unique_ptr<pjrt::LoadedExecutable>> Compile(const pjrt::Client& client, std::string code) {
  PJRT_Program program{};
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = code.data();
  program.code_size = code.size();
  program.format = "hlo";
  program.format_size = 3;
  PJRT_Client_Compile_Args args{};
  args.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  args.client = client.client();
  args.program = &program;
  if (PJRT_Error* error = client.api()->PJRT_Client_Compile(&args)) return client.TakeError(error, "PJRT_Client_Compile");
  return std::make_unique<pjrt::LoadedExecutable>(&client, args.executable);
}

Tensor F32(std::vector<float> values) {
  Tensor t = ZeroTensor(xla::F32, {2, 2});
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TEST(PjrtPluginTest, HloMissCompilesIntoTheCacheThenHitsAndRuns) {
  testing::TempDir tmp("npc-plugin");
  const std::string cache = tmp.Sub("cache");
  setenv("NEURON_COMPILE_CACHE_URL", cache.c_str(), 1);
  setenv("NEURON_CC_FLAGS", "", 1);
  unsetenv("NEURON_EXTRACT_GRAPHS_ONLY");
  auto client = pjrt::Client::Open(NPC_PJRT_PLUGIN_LIB);
  ASSERT_TRUE(client.ok()) << client.error().message;
  EXPECT_EQ((*client)->platform_name(), "cpu");

  const xla::HloModuleProto module = Module(kModuleText);
  const std::string code = module.SerializeAsString();
  auto first = Compile(**client, code);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const std::string entry = FindEntry(cache, hlo::CanonicalGraphKey(module));
  ASSERT_FALSE(entry.empty()) << "no entry for the canonical key under " << cache;
  EXPECT_TRUE(fs::exists(entry + "/model.hlo_module.pb"));
  EXPECT_TRUE(fs::exists(entry + "/model.pjrt") && fs::exists(entry + "/model.done"));
  EXPECT_EQ(testing::ReadFile(entry + "/compile_flags.json"), "[]");
  const auto stamp = fs::last_write_time(entry + "/model.pjrt");

  auto second = Compile(**client, code);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(fs::last_write_time(entry + "/model.pjrt"), stamp) << "a hit recompiled";
  auto out = (*second)->Execute({F32({1, 2, 3, 4}), F32({2, 2, 2, 2})});
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->size(), 1u);
  std::vector<float> got(4);
  std::memcpy(got.data(), (*out)[0].bytes.data(), 16);
  EXPECT_EQ(got, (std::vector<float>{6, 8, 10, 12}));

  // A framework serializing an executable loaded from the cache (JAX's own cache does) gets bytes
  // that load and run: the artifact (XLA CPU cannot re-serialize a deserialized executable itself).
  auto serialized = (*client)->CompileAndSerialize(code, "hlo", "");
  ASSERT_TRUE(serialized.ok()) << serialized.error().message;
  EXPECT_EQ(*serialized, testing::ReadFile(entry + "/model.pjrt"));
  auto reloaded = (*client)->DeserializeAndLoad(*serialized);
  ASSERT_TRUE(reloaded.ok()) << reloaded.error().message;
  auto again = (*reloaded)->Execute({F32({1, 2, 3, 4}), F32({2, 2, 2, 2})});
  ASSERT_TRUE(again.ok()) << again.error().message;
  std::memcpy(got.data(), (*again)[0].bytes.data(), 16);
  EXPECT_EQ(got, (std::vector<float>{6, 8, 10, 12}));

  // A damaged artifact (64 bytes flipped in the middle, size unchanged) is never loaded: the entry
  // is compiled again and the new artifact runs.
  std::string damaged = testing::ReadFile(entry + "/model.pjrt");
  ASSERT_GT(damaged.size(), 128u);
  for (size_t i = damaged.size() / 2; i < damaged.size() / 2 + 64; ++i) damaged[i] = static_cast<char>(~damaged[i]);
  ASSERT_TRUE(testing::WriteFile(entry + "/model.pjrt", damaged));
  auto repaired = Compile(**client, code);
  ASSERT_TRUE(repaired.ok()) << repaired.error().message;
  EXPECT_NE(testing::ReadFile(entry + "/model.pjrt"), damaged) << "the damaged artifact was kept";
  auto after = (*repaired)->Execute({F32({1, 2, 3, 4}), F32({2, 2, 2, 2})});
  ASSERT_TRUE(after.ok()) << after.error().message;
  std::memcpy(got.data(), (*after)[0].bytes.data(), 16);
  EXPECT_EQ(got, (std::vector<float>{6, 8, 10, 12}));

  const xla::HloModuleProto bad = Module(kRejectedText);
  auto rejected = Compile(**client, bad.SerializeAsString());
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.error().message.find("libnpc_pjrt: compile of " + cache), std::string::npos)
      << rejected.error().message;
  const std::string bad_entry = FindEntry(cache, hlo::CanonicalGraphKey(bad));
  ASSERT_FALSE(bad_entry.empty());
  EXPECT_TRUE(fs::exists(bad_entry + "/model.log"));
  auto cached = Compile(**client, bad.SerializeAsString());
  ASSERT_FALSE(cached.ok());
  EXPECT_NE(cached.error().message.find("cached compile failure of " + bad_entry), std::string::npos)
      << cached.error().message;
}

#else
TEST(PjrtPluginTest, HloMissCompilesIntoTheCacheThenHitsAndRuns) {
  GTEST_SKIP() << "libnpc_pjrt.so is not built (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
}
#endif

}  // namespace
}  // namespace npc
