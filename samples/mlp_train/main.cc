// mlp_train: trains a small MLP on a synthetic classification set, with every
// computation an HLO graph run through npc's runtime (npc::Runtime), the way a
// framework would run its graphs through Neuron's compile hook.
//
//   mlp_train [--steps N] [--batch B] [--lr LR] [--seed S] [--log_every K] [--quiet]
//
// Graphs: mlp_init, mlp_eval_n<eval size>, mlp_train_step_b<batch> and, when
// the training set is not a multiple of the batch, mlp_train_step_b<rest>.
// All are requested before the first step, so a trial run
// (NEURON_EXTRACT_GRAPHS_ONLY=1, under neuron_parallel_compile) extracts every
// graph whatever --steps says. In a trial run outputs are zeros; the program
// still runs to the end and exits 0.
//
// Output: `initial: loss L accuracy A`, every K steps `step S loss L`,
// `final: loss L accuracy A`, `npc cache: hits=H misses=M compiles=C`.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model.h"
#include "npc/runtime.h"
#include "npc/tensor.h"

namespace {

namespace xla = ::npc::xla;

npc::Tensor F32Tensor(std::vector<int64_t> dims, const float* values) {
  npc::Tensor t = npc::ZeroTensor(xla::F32, std::move(dims));
  std::memcpy(t.bytes.data(), values, t.bytes.size());
  return t;
}

npc::Tensor S32Tensor(std::vector<int64_t> dims, const int32_t* values) {
  npc::Tensor t = npc::ZeroTensor(xla::S32, std::move(dims));
  std::memcpy(t.bytes.data(), values, t.bytes.size());
  return t;
}

npc::Tensor ScalarF32(float v) { return F32Tensor({}, &v); }

[[noreturn]] void Die(const std::string& what, const std::string& message) {
  std::fprintf(stderr, "mlp_train: %s: %s\n", what.c_str(), message.c_str());
  std::exit(1);
}

std::shared_ptr<npc::Executable> GetExecutable(npc::Runtime& rt, const xla::HloModuleProto& m) {
  auto exe = rt.GetExecutable(m);
  if (!exe.ok()) Die("graph " + m.name(), exe.error().message);
  return std::move(exe).value();
}

std::vector<npc::Tensor> Run(const npc::Executable& exe, const std::string& name,
                             const std::vector<npc::Tensor>& args) {
  auto out = exe.Run(args);
  if (!out.ok()) Die("running " + name, out.error().message);
  return std::move(out).value();
}

struct EvalResult {
  float loss = 0;
  double accuracy = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 300;
  int64_t batch = 64;
  float lr = 0.2f;
  uint32_t seed = 1;
  int64_t log_every = 10;
  int64_t train_size = 1000;
  int64_t eval_size = 400;
  bool quiet = false;

  CLI::App app{"Trains an MLP on synthetic data through npc's runtime."};
  app.add_option("--steps", steps, "number of training steps (epochs wrap)")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "SGD learning rate");
  app.add_option("--seed", seed, "seed of the data set, the initial weights and the shuffles");
  app.add_option("--log_every", log_every, "print the loss every K steps")->check(CLI::PositiveNumber);
  app.add_option("--train_examples", train_size, "training set size")->check(CLI::PositiveNumber);
  app.add_option("--eval_examples", eval_size, "evaluation set size")->check(CLI::PositiveNumber);
  app.add_flag("--quiet", quiet, "print only the initial, final and cache lines");
  CLI11_PARSE(app, argc, argv);
  if (batch > train_size) batch = train_size;

  const mlp::ModelConfig config;
  const mlp::Data data = mlp::MakeData(config, train_size, eval_size, seed);
  const int64_t full_batches = train_size / batch;
  const int64_t last_batch = train_size % batch;
  const int64_t batches_per_epoch = full_batches + (last_batch > 0 ? 1 : 0);

  auto runtime = npc::Runtime::FromEnvironment();
  if (!runtime.ok()) Die("runtime", runtime.error().message);
  npc::Runtime& rt = **runtime;

  // Every graph up front: a trial run sees them all.
  auto init = GetExecutable(rt, mlp::BuildInitModule(config));
  auto eval = GetExecutable(rt, mlp::BuildEvalModule(config, eval_size));
  auto train = GetExecutable(rt, mlp::BuildTrainStepModule(config, batch));
  std::shared_ptr<npc::Executable> train_last;
  if (last_batch > 0) train_last = GetExecutable(rt, mlp::BuildTrainStepModule(config, last_batch));
  const bool trial = init->is_placeholder();
  if (!quiet) {
    std::printf("mlp_train: %lld train / %lld eval examples, batch %lld (%lld per epoch), %d graphs%s\n",
                static_cast<long long>(train_size), static_cast<long long>(eval_size),
                static_cast<long long>(batch), static_cast<long long>(batches_per_epoch),
                last_batch > 0 ? 4 : 3, trial ? "; trial run: outputs are zeros" : "");
  }

  // Parameters: w1, b1, w2, b2.
  std::vector<npc::Tensor> params = [&] {
    std::vector<float> u = mlp::UniformFloats(mlp::InitRandomCount(config), seed ^ 0x9e3779b9u);
    return Run(*init, "mlp_init", {F32Tensor({mlp::InitRandomCount(config)}, u.data())});
  }();
  if (params.size() != 4) Die("mlp_init", "expected 4 outputs, got " + std::to_string(params.size()));

  const npc::Tensor eval_x = F32Tensor({eval_size, config.inputs}, data.eval.x.data());
  const npc::Tensor eval_labels = S32Tensor({eval_size}, data.eval.labels.data());
  auto evaluate = [&] {
    std::vector<npc::Tensor> args = params;
    args.push_back(eval_x);
    args.push_back(eval_labels);
    std::vector<npc::Tensor> out = Run(*eval, "mlp_eval", args);
    if (out.size() != 2) Die("mlp_eval", "expected 2 outputs, got " + std::to_string(out.size()));
    EvalResult r;
    r.loss = out[0].data<float>()[0];
    r.accuracy = static_cast<double>(out[1].data<int32_t>()[0]) / static_cast<double>(eval_size);
    return r;
  };

  const EvalResult initial = evaluate();
  std::printf("initial: loss %.6f accuracy %.4f\n", initial.loss, initial.accuracy);

  const npc::Tensor lr_tensor = ScalarF32(lr);
  std::vector<int64_t> order;
  std::vector<float> bx;
  std::vector<int32_t> by;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t epoch = step / batches_per_epoch;
    const int64_t index = step % batches_per_epoch;
    if (index == 0) order = mlp::Permutation(train_size, seed + static_cast<uint32_t>(epoch) + 1);
    const bool is_last = index == full_batches;
    const int64_t n = is_last ? last_batch : batch;
    bx.resize(n * config.inputs);
    by.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = order[index * batch + i];
      std::memcpy(&bx[i * config.inputs], &data.train.x[e * config.inputs], config.inputs * sizeof(float));
      by[i] = data.train.labels[e];
    }
    std::vector<npc::Tensor> args = std::move(params);
    args.push_back(F32Tensor({n, config.inputs}, bx.data()));
    args.push_back(S32Tensor({n}, by.data()));
    args.push_back(lr_tensor);
    std::vector<npc::Tensor> out = Run(is_last ? *train_last : *train, "mlp_train_step", args);
    if (out.size() != 5) Die("mlp_train_step", "expected 5 outputs, got " + std::to_string(out.size()));
    const float loss = out[4].data<float>()[0];
    out.pop_back();
    params = std::move(out);
    if (!quiet && ((step + 1) % log_every == 0 || step + 1 == steps)) {
      std::printf("step %lld loss %.6f\n", static_cast<long long>(step + 1), loss);
      std::fflush(stdout);
    }
  }

  const EvalResult final_result = evaluate();
  std::printf("final: loss %.6f accuracy %.4f\n", final_result.loss, final_result.accuracy);
  const npc::CacheCounters c = rt.counters();
  std::printf("npc cache: hits=%lld misses=%lld compiles=%lld\n", static_cast<long long>(c.hits),
              static_cast<long long>(c.misses), static_cast<long long>(c.compiles));
  return 0;
}
