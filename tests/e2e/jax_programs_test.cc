// Real graphs from a real framework: tests/jax/export_programs.py exports the
// HloModuleProto of JAX programs (an MLP training step, a transformer block
// forward and backward, a small convolutional network forward and backward)
// with jax.jit(f).lower(...), and JAX's own outputs for fixed inputs. Each
// module goes through npc's runtime with the pjrt backend (XLA's CPU plugin)
// and with the host backend; both must reproduce JAX's outputs (f32: |x - jax|
// <= 1e-4 |jax| + 1e-5: XLA versions differ between jaxlib and the plugin).
// A module with an op the host backend does not compile (convolution) is
// reported, and must fail to compile naming it. Skipped, saying so, without
// the pjrt backend or without jax in build/pjrt-venv (scripts/install-pjrt.sh --jax).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "compilers/pjrt_compiler.h"
#include "host/host_backend.h"
#include "npc/hlo.h"
#include "npc/runtime.h"
#include "support/test_support.h"

namespace npc::testing {
namespace {

const std::string kPython = std::string(NPC_BINARY_DIR) + "/pjrt-venv/bin/python";

std::unique_ptr<Runtime> MakeRuntime(const std::string& cache, const std::string& backend) {
  RuntimeOptions options;
  options.cache_url = cache;
  options.compiler.backend = backend;
  auto runtime = Runtime::Create(options);
  EXPECT_TRUE(runtime.ok()) << backend << ": " << runtime.error().message;
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

std::vector<Tensor> ReadTensors(const std::string& dir, const std::string& name, const std::string& kind,
                                const nlohmann::json& specs) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string dtype = specs[i]["dtype"];
    EXPECT_TRUE(dtype == "float32" || dtype == "int32") << dtype;
    Tensor t = ZeroTensor(dtype == "float32" ? xla::F32 : xla::S32, specs[i]["shape"].get<std::vector<int64_t>>());
    const std::string bytes = ReadFile(dir + "/" + name + "." + kind + std::to_string(i) + ".bin");
    EXPECT_EQ(bytes.size(), t.bytes.size()) << name << " " << kind << i;
    std::memcpy(t.bytes.data(), bytes.data(), std::min(bytes.size(), t.bytes.size()));
    out.push_back(std::move(t));
  }
  return out;
}

// The largest |x - jax| / (1e-4 |jax| + 1e-5) over all outputs (<= 1 passes); -1 on a shape mismatch.
double WorstError(const std::vector<Tensor>& got, const std::vector<Tensor>& jax) {
  if (got.size() != jax.size()) return -1;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].dims != jax[i].dims || got[i].type != xla::F32 || jax[i].type != xla::F32) return -1;
    for (int64_t k = 0; k < got[i].element_count(); ++k) {
      const double a = got[i].data<float>()[k], b = jax[i].data<float>()[k];
      worst = std::max(worst, std::abs(a - b) / (1e-4 * std::abs(b) + 1e-5));
    }
  }
  return worst;
}

TEST(JaxProgramsTest, BothBackendsReproduceJaxOutputs) {
#if !NPC_HAVE_PJRT
  GTEST_SKIP() << "npc was built without the pjrt backend (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
#endif
  if (PjrtDefaultPluginPath().empty()) GTEST_SKIP() << "no default PJRT plugin (scripts/install-deps.sh --pjrt)";
  if (RunCommand({kPython, "-c", "import jax"}).exit_status != 0) {
    GTEST_SKIP() << "no jax in " << kPython << " (scripts/install-pjrt.sh --jax)";
  }
  TempDir tmp("npc-jax");
  auto exported = RunCommand({kPython, std::string(NPC_SOURCE_DIR) + "/tests/jax/export_programs.py", tmp.Sub("jax")},
                             {{"JAX_PLATFORMS", "cpu"}});
  ASSERT_EQ(exported.exit_status, 0) << exported.output;
  std::printf("%s", exported.output.c_str());
  const auto manifest = nlohmann::json::parse(ReadFile(tmp.Sub("jax/manifest.json")));
  ASSERT_EQ(manifest.size(), 3u);
  auto pjrt_rt = MakeRuntime(tmp.Sub("pjrt-cache"), "pjrt");
  auto host_rt = MakeRuntime(tmp.Sub("host-cache"), "host");
  ASSERT_TRUE(pjrt_rt && host_rt);

  for (const auto& [name, spec] : manifest.items()) {
    auto module = hlo::ParseHloModule(ReadFile(tmp.Sub("jax/" + name + ".hlo_module.pb")), name);
    ASSERT_TRUE(module.ok()) << module.error().message;
    const auto args = ReadTensors(tmp.Sub("jax"), name, "in", spec["inputs"]);
    const auto expected = ReadTensors(tmp.Sub("jax"), name, "out", spec["outputs"]);
    for (auto* rt : {pjrt_rt.get(), host_rt.get()}) {
      const std::string backend = rt->options().compiler.backend;
      auto exe = rt->GetExecutable(*module);
      if (backend == "host" && !host::UnsupportedOpcodes(*module).empty()) {
        const std::string op = host::UnsupportedOpcodes(*module).begin()->first;
        ASSERT_FALSE(exe.ok()) << name << ": the host backend compiled an unsupported " << op;
        std::printf("%-24s %-5s not compiled (unsupported: %s)\n", name.c_str(), backend.c_str(), op.c_str());
        continue;
      }
      ASSERT_TRUE(exe.ok()) << name << " (" << backend << "): " << exe.error().message;
      auto out = (*exe)->Run(args);
      ASSERT_TRUE(out.ok()) << name << " (" << backend << "): " << out.error().message;
      const double worst = WorstError(*out, expected);
      std::printf("%-24s %-5s worst error %.3f of the tolerance\n", name.c_str(), backend.c_str(), worst);
      EXPECT_GE(worst, 0) << name << " (" << backend << "): outputs of other shapes or types than JAX's";
      EXPECT_LE(worst, 1.0) << name << " (" << backend << ") differs from JAX";
    }
  }
}

}  // namespace
}  // namespace npc::testing
