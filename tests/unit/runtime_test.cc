// Unit tests of the runtime API (runtime/api/runtime.cc) with the real host
// backend: trial-run extraction, JIT compile on a miss, hits, cached failures,
// and the C API.
#include <gtest/gtest.h>

#include <cstring>

#include "npc/cache.h"
#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "npc/npc.h"
#include "npc/runtime.h"
#include "support/test_support.h"

namespace npc {
namespace {

using npc::testing::TempDir;

// y = x * 3 + 1 over f32[4].
xla::HloModuleProto AffineModule() {
  hlo::HloBuilder b("affine");
  hlo::Op x = b.Parameter(0, xla::F32, {4}, "x");
  hlo::Op three = b.Broadcast(b.ConstantF32(3.0f), {4}, {});
  hlo::Op one = b.Broadcast(b.ConstantF32(1.0f), {4}, {});
  return b.Build(b.Tuple({b.Add(b.Mul(x, three), one)}));
}

Tensor F32(std::vector<int64_t> dims, std::vector<float> values) {
  Tensor t = ZeroTensor(xla::F32, std::move(dims));
  std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(float));
  return t;
}

RuntimeOptions Options(const std::string& cache, bool extract = false) {
  RuntimeOptions o;
  o.cache_url = cache;
  o.extract_graphs_only = extract;
  o.compiler_flags = {"--model-type=transformer"};
  return o;
}

TEST(Runtime, TrialRunExtractsAndReturnsZeros) {
  TempDir dir;
  auto rt = Runtime::Create(Options(dir.path(), /*extract=*/true));
  ASSERT_TRUE(rt.ok()) << rt.error().message;
  auto exe = (*rt)->GetExecutable(AffineModule());
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  EXPECT_TRUE((*exe)->is_placeholder());
  auto out = (*exe)->Run({F32({4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].dims, (std::vector<int64_t>{4}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*out)[0].data<float>()[i], 0.0f);

  // The entry holds the HLO and the flags, and nothing is compiled.
  cache::LocalStore store(dir.path());
  cache::EntryRef entry{"", hlo::CanonicalGraphKey(AffineModule()), "cc298dfa"};
  auto dirs = store.List("");
  ASSERT_EQ(dirs->size(), 1u);
  entry.compiler_dir = (*dirs)[0];
  EXPECT_EQ(*store.Read(entry.file("compile_flags.json")), R"(["--model-type=transformer"])");
  EXPECT_EQ(*cache::GetEntryState(store, entry, "model.so"), cache::EntryState::kTodo);
  auto read = hlo::ReadHloModuleFile(*store.LocalPath(entry.file("model.hlo_module.pb")));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(hlo::CanonicalGraphKey(*read), entry.graph_key);
  EXPECT_EQ((*rt)->counters().extracted, 1);
  EXPECT_EQ((*rt)->counters().compiles, 0);
}

TEST(Runtime, MissCompilesThenHits) {
  TempDir dir;
  {
    auto rt = Runtime::Create(Options(dir.path()));
    ASSERT_TRUE(rt.ok()) << rt.error().message;
    auto exe = (*rt)->GetExecutable(AffineModule());
    ASSERT_TRUE(exe.ok()) << exe.error().message;
    EXPECT_FALSE((*exe)->is_placeholder());
    auto out = (*exe)->Run({F32({4}, {1, 2, 3, -4})});
    ASSERT_TRUE(out.ok()) << out.error().message;
    const float* y = (*out)[0].data<float>();
    EXPECT_FLOAT_EQ(y[0], 4);
    EXPECT_FLOAT_EQ(y[1], 7);
    EXPECT_FLOAT_EQ(y[2], 10);
    EXPECT_FLOAT_EQ(y[3], -11);
    CacheCounters c = (*rt)->counters();
    EXPECT_EQ(c.misses, 1);
    EXPECT_EQ(c.compiles, 1);
    EXPECT_EQ(c.hits, 0);
    // Wrong arguments are refused, not run.
    EXPECT_FALSE((*exe)->Run({F32({3}, {1, 2, 3})}).ok());
  }
  auto rt = Runtime::Create(Options(dir.path()));
  ASSERT_TRUE(rt.ok());
  auto exe = (*rt)->GetExecutable(AffineModule());
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  EXPECT_EQ((*rt)->counters().hits, 1);
  EXPECT_EQ((*rt)->counters().misses, 0);
  EXPECT_EQ((*rt)->counters().compiles, 0);
}

TEST(Runtime, UnsupportedOpFailsAndIsCachedAsAFailure) {
  TempDir dir;
  hlo::HloBuilder b("bad");
  hlo::Op x = b.Parameter(0, xla::F32, {2, 2}, "x");
  xla::HloInstructionProto chol;
  chol.set_opcode("cholesky");
  xla::HloModuleProto m = b.Build(b.AddInstruction(chol, {x}, x.shape));

  auto rt = Runtime::Create(Options(dir.path()));
  ASSERT_TRUE(rt.ok());
  auto exe = (*rt)->GetExecutable(m);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.error().message.find("cholesky"), std::string::npos) << exe.error().message;
  EXPECT_NE(exe.error().message.find("model.log"), std::string::npos);
  auto again = (*rt)->GetExecutable(m);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("cached compile failure"), std::string::npos) << again.error().message;
  EXPECT_EQ((*rt)->counters().compiles, 0);
  EXPECT_EQ((*rt)->counters().failed_compiles, 2);
}

TEST(Runtime, OptionsFromTheEnvironment) {
  setenv("NEURON_CC_FLAGS", "--cache_dir=/from/flags -O1 --retry_failed_compilation", 1);
  setenv("NEURON_COMPILE_CACHE_URL", "/from/env", 1);
  setenv("NEURON_EXTRACT_GRAPHS_ONLY", "1", 1);
  auto o = RuntimeOptionsFromEnvironment();
  unsetenv("NEURON_CC_FLAGS");
  unsetenv("NEURON_COMPILE_CACHE_URL");
  unsetenv("NEURON_EXTRACT_GRAPHS_ONLY");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cache_url, "/from/flags");
  EXPECT_EQ(o->compiler_flags, std::vector<std::string>{"-O1"});
  EXPECT_TRUE(o->retry_failed_compilation);
  EXPECT_TRUE(o->extract_graphs_only);
}

TEST(CApi, CompilesAndRunsThroughTheCInterface) {
  TempDir dir;
  setenv("NEURON_COMPILE_CACHE_URL", dir.path().c_str(), 1);
  npc_runtime* rt = nullptr;
  char error[512] = {0};
  ASSERT_EQ(npc_runtime_create(&rt, error, sizeof error), 0) << error;
  unsetenv("NEURON_COMPILE_CACHE_URL");
  std::string bytes = AffineModule().SerializeAsString();
  npc_executable* exe = nullptr;
  ASSERT_EQ(npc_runtime_get_executable(rt, bytes.data(), bytes.size(), nullptr, &exe, error, sizeof error), 0) << error;
  ASSERT_EQ(npc_executable_num_parameters(exe), 1u);
  ASSERT_EQ(npc_executable_num_outputs(exe), 1u);
  int type = 0;
  int64_t dims[4];
  EXPECT_EQ(npc_executable_output_shape(exe, 0, &type, dims, 4), 1);
  EXPECT_EQ(type, xla::F32);
  EXPECT_EQ(dims[0], 4);
  float in[4] = {0, 1, 2, 3}, out[4] = {0};
  const void* inputs[] = {in};
  void* outputs[] = {out};
  ASSERT_EQ(npc_executable_run(exe, inputs, outputs, error, sizeof error), 0) << error;
  EXPECT_FLOAT_EQ(out[3], 10.0f);
  npc_counters counters;
  npc_runtime_counters(rt, &counters);
  EXPECT_EQ(counters.compiles, 1);
  // Bad bytes give an error, not a crash.
  EXPECT_NE(npc_runtime_get_executable(rt, "junk", 4, nullptr, &exe, error, sizeof error), 0);
  EXPECT_NE(std::string(error).find("HLO"), std::string::npos) << error;
  npc_executable_destroy(exe);
  npc_runtime_destroy(rt);
}

}  // namespace
}  // namespace npc
