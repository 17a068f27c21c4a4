// tiny_train: trains the tiny MLP of model.h on synthetic data with npc's
// runtime. Its graphs are precompiled by the build (npc_precompile_trial in
// CMakeLists.txt), and npc_link_runtime points it at that cache, so a plain
// run finds every graph there:
//   tiny_train [--steps N]
// The last line reports the cache counters ("npc cache: hits=3 misses=0 ...").
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <npc_project_cache.h>  // npc_link_runtime(): the project's cache as the default

#include "model.h"
#include "model_config.h"
#include "npc/runtime.h"
#include "npc/tensor.h"

namespace {

npc::Tensor F32(std::vector<int64_t> dims, const std::vector<float>& values) {
  npc::Tensor t = npc::ZeroTensor(npc::xla::F32, std::move(dims));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// Deterministic pseudo-random values in [-1, 1).
std::vector<float> Random(int64_t count, uint32_t& state) {
  std::vector<float> out(static_cast<size_t>(count));
  for (auto& v : out) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return out;
}

// Targets: a fixed linear function of the (normalized) inputs.
std::vector<float> Targets(const std::vector<float>& x, int64_t rows) {
  std::vector<float> y(static_cast<size_t>(rows * tiny::kOutputs));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < tiny::kOutputs; ++o) {
      float s = 0;
      for (int64_t i = 0; i < tiny::kInputs; ++i) {
        s += x[r * tiny::kInputs + i] * (static_cast<float>((i + o) % 3) - 1.0f) * 0.5f;
      }
      y[r * tiny::kOutputs + o] = s;
    }
  }
  return y;
}

template <class T>
T Check(npc::Result<T> r, const char* what) {
  if (!r) {
    std::cerr << "tiny_train: " << what << ": " << r.error().message << "\n";
    std::exit(1);
  }
  return std::move(*r);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: tiny_train [--steps N]\n";
      return 2;
    }
  }
  auto runtime = Check(npc_project::CreateRuntime(), "cannot create the npc runtime");
  auto normalize = Check(runtime->GetExecutable(tiny::BuildNormalize()), "normalize graph");
  auto train_step = Check(runtime->GetExecutable(tiny::BuildTrainStep()), "train step graph");
  auto eval = Check(runtime->GetExecutable(tiny::BuildEval()), "eval graph");

  uint32_t seed = 42;
  npc::Tensor w1 = F32({tiny::kInputs, tiny::kHidden}, Random(tiny::kInputs * tiny::kHidden, seed));
  npc::Tensor w2 = F32({tiny::kHidden, tiny::kOutputs}, Random(tiny::kHidden * tiny::kOutputs, seed));
  for (auto* w : {&w1, &w2}) {
    for (int64_t i = 0; i < w->element_count(); ++i) w->data<float>()[i] *= 0.3f;
  }
  const npc::Tensor lr = F32({}, {0.05f});
  float loss = 0;
  for (int step = 0; step < steps; ++step) {
    npc::Tensor raw = F32({tiny::kBatch, tiny::kInputs}, Random(tiny::kBatch * tiny::kInputs, seed));
    npc::Tensor x = Check(normalize->Run({raw}), "normalize")[0];
    std::vector<float> xv(x.data<float>(), x.data<float>() + x.element_count());
    npc::Tensor y = F32({tiny::kBatch, tiny::kOutputs}, Targets(xv, tiny::kBatch));
    auto out = Check(train_step->Run({w1, w2, x, y, lr}), "train step");
    w1 = std::move(out[0]);
    w2 = std::move(out[1]);
    loss = out[2].data<float>()[0];
    if (step % 25 == 0 || step + 1 == steps) std::printf("step %d loss %.6f\n", step, loss);
  }
  std::vector<float> ex = Random(tiny::kEvalExamples * tiny::kInputs, seed);
  for (auto& v : ex) v = v * 0.5f - 0.25f;
  auto eval_out = Check(eval->Run({w1, w2, F32({tiny::kEvalExamples, tiny::kInputs}, ex),
                                   F32({tiny::kEvalExamples, tiny::kOutputs}, Targets(ex, tiny::kEvalExamples))}),
                        "eval");
  std::printf("eval loss %.6f\n", eval_out[0].data<float>()[0]);
  npc::CacheCounters c = runtime->counters();
  std::printf("npc cache: hits=%lld misses=%lld compiles=%lld extracted=%lld (%s)\n", static_cast<long long>(c.hits),
              static_cast<long long>(c.misses), static_cast<long long>(c.compiles),
              static_cast<long long>(c.extracted), runtime->compiler_cache_path().c_str());
  return 0;
}
