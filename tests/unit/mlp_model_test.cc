// Tests of samples/mlp_train/model.{h,cc}: the graphs' structure, the data
// set's determinism, and the graphs' math run through npc's runtime with the
// host backend, checked against a plain C++ reference and against finite
// differences of the graph's own loss.
#include <gtest/gtest.h>

// model.h comes with the npc_mlp_model library (samples/mlp_train), which
// samples/mlp_train/CMakeLists.txt links into this test; without the samples
// (NPC_BUILD_SAMPLES=OFF) there is nothing to test.
#if !__has_include("model.h")
TEST(MlpModel, Skipped) { GTEST_SKIP() << "samples/mlp_train is not part of this build"; }
#else
#include "model.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "npc/hlo.h"
#include "npc/runtime.h"
#include "npc/tensor.h"
#include "support/test_support.h"

namespace {

namespace xla = ::npc::xla;
using npc::testing::TempDir;

// The ops the sample may use (see the sample's brief).
const std::set<std::string> kAllowedOps = {
    "parameter", "constant", "broadcast", "reshape",  "transpose", "dot",
    "add",       "subtract", "multiply",  "divide",   "negate",    "maximum",
    "minimum",   "exponential", "log",    "tanh",     "sqrt",      "rsqrt",
    "power",     "compare",  "select",    "convert",  "reduce",    "iota",
    "tuple",     "get-tuple-element", "slice", "concatenate", "call"};

const mlp::ModelConfig kConfig;

std::vector<std::string> Shapes(const google::protobuf::RepeatedPtrField<xla::ShapeProto>& shapes) {
  std::vector<std::string> v;
  for (const auto& s : shapes) v.push_back(npc::hlo::ShapeToString(s));
  return v;
}

void ExpectWellFormed(const xla::HloModuleProto& m) {
  auto status = npc::hlo::ValidateModule(m, m.name());
  EXPECT_TRUE(status.ok()) << status.error().message;
  for (const auto& c : m.computations()) {
    for (const auto& i : c.instructions()) {
      EXPECT_TRUE(kAllowedOps.count(i.opcode())) << m.name() << ": " << i.opcode();
    }
  }
}

TEST(MlpModel, GraphSignatures) {
  auto init = mlp::BuildInitModule(kConfig);
  ExpectWellFormed(init);
  EXPECT_EQ(init.name(), "mlp_init");
  EXPECT_EQ(Shapes(init.host_program_shape().parameters()), (std::vector<std::string>{"f32[640]{0}"}));
  EXPECT_EQ(npc::hlo::ShapeToString(init.host_program_shape().result()),
            "(f32[16,32]{1,0}, f32[32]{0}, f32[32,4]{1,0}, f32[4]{0})");

  auto train = mlp::BuildTrainStepModule(kConfig, 64);
  ExpectWellFormed(train);
  EXPECT_EQ(train.name(), "mlp_train_step_b64");
  EXPECT_EQ(Shapes(train.host_program_shape().parameters()),
            (std::vector<std::string>{"f32[16,32]{1,0}", "f32[32]{0}", "f32[32,4]{1,0}", "f32[4]{0}",
                                      "f32[64,16]{1,0}", "s32[64]{0}", "f32[]"}));
  EXPECT_EQ(npc::hlo::ShapeToString(train.host_program_shape().result()),
            "(f32[16,32]{1,0}, f32[32]{0}, f32[32,4]{1,0}, f32[4]{0}, f32[])");

  auto eval = mlp::BuildEvalModule(kConfig, 400);
  ExpectWellFormed(eval);
  EXPECT_EQ(npc::hlo::ShapeToString(eval.host_program_shape().result()), "(f32[], s32[])");

  // Four distinct graphs; building twice gives the same graph.
  std::set<std::string> keys = {
      npc::hlo::CanonicalGraphKey(init), npc::hlo::CanonicalGraphKey(train),
      npc::hlo::CanonicalGraphKey(eval),
      npc::hlo::CanonicalGraphKey(mlp::BuildTrainStepModule(kConfig, 40))};
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(npc::hlo::CanonicalGraphKey(mlp::BuildTrainStepModule(kConfig, 64)),
            npc::hlo::CanonicalGraphKey(train));
  EXPECT_EQ(mlp::BuildTrainStepModule(kConfig, 64).SerializeAsString(), train.SerializeAsString());
}

TEST(MlpModel, DataIsDeterministic) {
  auto a = mlp::MakeData(kConfig, 100, 50, 7);
  auto b = mlp::MakeData(kConfig, 100, 50, 7);
  auto c = mlp::MakeData(kConfig, 100, 50, 8);
  EXPECT_EQ(a.train.x, b.train.x);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_EQ(a.eval.x, b.eval.x);
  EXPECT_NE(a.train.x, c.train.x);
  ASSERT_EQ(a.train.x.size(), 100u * 16);
  ASSERT_EQ(a.eval.labels.size(), 50u);
  std::set<int32_t> classes(a.train.labels.begin(), a.train.labels.end());
  EXPECT_EQ(classes, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(mlp::UniformFloats(10, 3), mlp::UniformFloats(10, 3));
  for (float u : mlp::UniformFloats(1000, 3)) {
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
  auto p = mlp::Permutation(37, 5);
  std::set<int64_t> seen(p.begin(), p.end());
  EXPECT_EQ(seen.size(), 37u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 36);
  EXPECT_EQ(p, mlp::Permutation(37, 5));
}

TEST(MlpModel, DataIsPlatformIndependent) {
  // std::mt19937's output sequence is fixed by the C++ standard, and the
  // transforms use only double arithmetic: these values hold everywhere.
  auto d = mlp::MakeData(kConfig, 4, 0, 1);
  uint32_t bits = 0;
  std::memcpy(&bits, &d.train.x[0], 4);
  EXPECT_EQ(d.train.labels, (std::vector<int32_t>{2, 1, 0, 0}));
  EXPECT_EQ(bits, 0x3ee5d1d5u) << d.train.x[0];
}

// ---- the graphs run through the runtime (host backend) --------------------

npc::Tensor F32(std::vector<int64_t> dims, const std::vector<float>& v) {
  npc::Tensor t = npc::ZeroTensor(xla::F32, std::move(dims));
  EXPECT_EQ(t.bytes.size(), v.size() * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
npc::Tensor S32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  npc::Tensor t = npc::ZeroTensor(xla::S32, std::move(dims));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
std::vector<float> Values(const npc::Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.element_count());
}

// Plain C++ reference of the model, in double.
struct RefParams {
  std::vector<double> w1, b1, w2, b2;  // [D,H], [H], [H,C], [C]
};
struct RefStep {
  RefParams grad;
  double loss = 0;
  int correct = 0;
};

RefStep Reference(const RefParams& p, const std::vector<float>& x, const std::vector<int32_t>& y) {
  const int64_t D = kConfig.inputs, H = kConfig.hidden, C = kConfig.classes;
  const int64_t n = static_cast<int64_t>(y.size());
  RefStep r;
  r.grad.w1.assign(D * H, 0);
  r.grad.b1.assign(H, 0);
  r.grad.w2.assign(H * C, 0);
  r.grad.b2.assign(C, 0);
  for (int64_t e = 0; e < n; ++e) {
    std::vector<double> h(H), logits(C), prob(C);
    for (int64_t j = 0; j < H; ++j) {
      double s = p.b1[j];
      for (int64_t i = 0; i < D; ++i) s += x[e * D + i] * p.w1[i * H + j];
      h[j] = std::tanh(s);
    }
    double mx = -INFINITY;
    int arg = 0;
    for (int64_t k = 0; k < C; ++k) {
      double s = p.b2[k];
      for (int64_t j = 0; j < H; ++j) s += h[j] * p.w2[j * C + k];
      logits[k] = s;
      if (s > mx) mx = s, arg = static_cast<int>(k);
    }
    double sum = 0;
    for (int64_t k = 0; k < C; ++k) sum += std::exp(logits[k] - mx);
    for (int64_t k = 0; k < C; ++k) prob[k] = std::exp(logits[k] - mx) / sum;
    r.loss += -(logits[y[e]] - mx - std::log(sum)) / n;
    r.correct += arg == y[e];
    std::vector<double> dh(H, 0);
    for (int64_t k = 0; k < C; ++k) {
      const double dl = (prob[k] - (k == y[e] ? 1 : 0)) / n;
      r.grad.b2[k] += dl;
      for (int64_t j = 0; j < H; ++j) {
        r.grad.w2[j * C + k] += h[j] * dl;
        dh[j] += p.w2[j * C + k] * dl;
      }
    }
    for (int64_t j = 0; j < H; ++j) {
      const double dpre = dh[j] * (1 - h[j] * h[j]);
      r.grad.b1[j] += dpre;
      for (int64_t i = 0; i < D; ++i) r.grad.w1[i * H + j] += x[e * D + i] * dpre;
    }
  }
  return r;
}

class MlpModelRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    npc::RuntimeOptions o;
    o.cache_url = dir_.path();
    auto rt = npc::Runtime::Create(o);
    ASSERT_TRUE(rt.ok()) << rt.error().message;
    rt_ = std::move(rt).value();
  }
  std::shared_ptr<npc::Executable> Get(const xla::HloModuleProto& m) {
    auto exe = rt_->GetExecutable(m);
    EXPECT_TRUE(exe.ok()) << exe.error().message;
    return exe.ok() ? exe.value() : nullptr;
  }
  std::vector<npc::Tensor> Run(const npc::Executable& exe, const std::vector<npc::Tensor>& args) {
    auto out = exe.Run(args);
    EXPECT_TRUE(out.ok()) << out.error().message;
    return out.ok() ? out.value() : std::vector<npc::Tensor>{};
  }
  TempDir dir_;
  std::unique_ptr<npc::Runtime> rt_;
};

TEST_F(MlpModelRuntime, InitMatchesGlorotUniform) {
  auto init = Get(mlp::BuildInitModule(kConfig));
  ASSERT_TRUE(init);
  std::vector<float> u = mlp::UniformFloats(mlp::InitRandomCount(kConfig), 11);
  auto out = Run(*init, {F32({mlp::InitRandomCount(kConfig)}, u)});
  ASSERT_EQ(out.size(), 4u);
  const double a1 = std::sqrt(6.0 / (16 + 32)), a2 = std::sqrt(6.0 / (32 + 4));
  auto w1 = Values(out[0]), w2 = Values(out[2]);
  ASSERT_EQ(w1.size(), 512u);
  ASSERT_EQ(w2.size(), 128u);
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_NEAR(w1[i], (2.0 * u[i] - 1) * a1, 1e-6);
  for (size_t i = 0; i < w2.size(); ++i) EXPECT_NEAR(w2[i], (2.0 * u[512 + i] - 1) * a2, 1e-6);
  for (float v : Values(out[1])) EXPECT_EQ(v, 0.0f);
  for (float v : Values(out[3])) EXPECT_EQ(v, 0.0f);
}

TEST_F(MlpModelRuntime, TrainStepAndEvalMatchReferenceAndFiniteDifferences) {
  const int64_t n = 8;
  auto data = mlp::MakeData(kConfig, n, n, 3);
  auto train = Get(mlp::BuildTrainStepModule(kConfig, n));
  auto eval = Get(mlp::BuildEvalModule(kConfig, n));
  ASSERT_TRUE(train && eval);

  // Random parameters, biases included, large enough that tanh saturates a little.
  std::vector<float> u = mlp::UniformFloats(16 * 32 + 32 + 32 * 4 + 4, 5);
  std::vector<std::vector<float>> params(4);
  const std::vector<size_t> sizes = {16 * 32, 32, 32 * 4, 4};
  const std::vector<std::vector<int64_t>> dims = {{16, 32}, {32}, {32, 4}, {4}};
  size_t k = 0;
  for (size_t p = 0; p < 4; ++p) {
    for (size_t i = 0; i < sizes[p]; ++i) params[p].push_back((u[k++] - 0.5f) * 0.8f);
  }
  auto args_for = [&](const std::vector<std::vector<float>>& ps, bool with_lr, float lr) {
    std::vector<npc::Tensor> args;
    for (size_t p = 0; p < 4; ++p) args.push_back(F32(dims[p], ps[p]));
    args.push_back(F32({n, 16}, data.train.x));
    args.push_back(S32({n}, data.train.labels));
    if (with_lr) args.push_back(F32({}, {lr}));
    return args;
  };

  const float lr = 0.5f;
  auto out = Run(*train, args_for(params, true, lr));
  ASSERT_EQ(out.size(), 5u);
  RefParams ref_p{{params[0].begin(), params[0].end()}, {params[1].begin(), params[1].end()},
                  {params[2].begin(), params[2].end()}, {params[3].begin(), params[3].end()}};
  RefStep ref = Reference(ref_p, data.train.x, data.train.labels);
  EXPECT_NEAR(Values(out[4])[0], ref.loss, 1e-5 * std::max(1.0, ref.loss));
  const std::vector<const std::vector<double>*> ref_grads = {&ref.grad.w1, &ref.grad.b1,
                                                             &ref.grad.w2, &ref.grad.b2};
  for (size_t p = 0; p < 4; ++p) {
    auto updated = Values(out[p]);
    ASSERT_EQ(updated.size(), sizes[p]);
    for (size_t i = 0; i < sizes[p]; ++i) {
      const double grad = (params[p][i] - updated[i]) / lr;
      EXPECT_NEAR(grad, (*ref_grads[p])[i], 1e-4) << "param " << p << " index " << i;
    }
  }

  // Finite differences of the graph's own loss (the loss output is computed
  // before the update, so lr = 0 leaves the parameters alone).
  auto loss_at = [&](const std::vector<std::vector<float>>& ps) {
    auto o = Run(*train, args_for(ps, true, 0.0f));
    return o.size() == 5 ? static_cast<double>(Values(o[4])[0]) : NAN;
  };
  const float eps = 1e-2f;
  for (size_t p = 0; p < 4; ++p) {
    for (size_t i : {size_t{0}, sizes[p] / 2, sizes[p] - 1}) {
      auto plus = params, minus = params;
      plus[p][i] += eps;
      minus[p][i] -= eps;
      const double numeric = (loss_at(plus) - loss_at(minus)) / (plus[p][i] - minus[p][i]);
      const double analytic = (params[p][i] - Values(out[p])[i]) / lr;
      EXPECT_NEAR(analytic, numeric, 2e-3) << "param " << p << " index " << i;
    }
  }

  // Eval: mean loss and arg-max accuracy.
  auto ev = Run(*eval, args_for(params, false, 0));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_NEAR(Values(ev[0])[0], ref.loss, 1e-5 * std::max(1.0, ref.loss));
  EXPECT_EQ(ev[1].type, xla::S32);
  EXPECT_EQ(ev[1].data<int32_t>()[0], ref.correct);
}

}  // namespace

#endif  // __has_include("model.h")
