// Graph construction and data generation of samples/mlp_train (see model.h).
#include "model.h"

#include <cmath>
#include <random>

#include "npc/hlo_builder.h"

namespace mlp {
namespace {

using npc::hlo::HloBuilder;
using npc::hlo::Op;

struct Params {
  Op w1, b1, w2, b2;
};

Params AddParams(HloBuilder& b, const ModelConfig& c) {
  Params p;
  p.w1 = b.Parameter(0, xla::F32, {c.inputs, c.hidden}, "w1");
  p.b1 = b.Parameter(1, xla::F32, {c.hidden}, "b1");
  p.w2 = b.Parameter(2, xla::F32, {c.hidden, c.classes}, "w2");
  p.b2 = b.Parameter(3, xla::F32, {c.classes}, "b2");
  return p;
}

Op Scalar(HloBuilder& b, float value, const std::vector<int64_t>& dims) {
  return b.Broadcast(b.ConstantF32(value), dims, {});
}

// Adds the computation "mlp_forward": (w1, b1, w2, b2, x f32[n, D]) ->
// (h f32[n, H], logits f32[n, C]); returns its id.
int64_t AddForward(HloBuilder& b, const ModelConfig& c, int64_t n) {
  HloBuilder f("mlp_forward");
  Params p = AddParams(f, c);
  Op x = f.Parameter(4, xla::F32, {n, c.inputs}, "x");
  Op h_pre = f.Add(f.Dot(x, p.w1, {1}, {0}), f.Broadcast(p.b1, {n, c.hidden}, {1}));
  Op h = f.Unary("tanh", h_pre);
  Op logits = f.Add(f.Dot(h, p.w2, {1}, {0}), f.Broadcast(p.b2, {n, c.classes}, {1}));
  return b.AddComputation(f, f.Tuple({h, logits}));
}

struct Forward {
  Op h;       // f32[n, H]
  Op logits;  // f32[n, C]
};

Forward CallForward(HloBuilder& b, const ModelConfig& c, int64_t n, const Params& p, Op x) {
  int64_t forward = AddForward(b, c, n);
  auto result = HloBuilder::TupleShape({HloBuilder::ArrayShape(xla::F32, {n, c.hidden}),
                                        HloBuilder::ArrayShape(xla::F32, {n, c.classes})});
  Op call = b.Call({p.w1, p.b1, p.w2, p.b2, x}, forward, result);
  return Forward{b.GetTupleElement(call, 0), b.GetTupleElement(call, 1)};
}

struct SoftmaxCrossEntropy {
  Op probs;    // f32[n, C]
  Op one_hot;  // f32[n, C]
  Op loss;     // f32[], mean over the batch
};

// Numerically stable: logits - max(logits) before exp.
SoftmaxCrossEntropy CrossEntropy(HloBuilder& b, const ModelConfig& c, int64_t n, Op logits,
                                 Op labels, int64_t add_f32, int64_t max_f32) {
  const std::vector<int64_t> nc = {n, c.classes};
  Op max = b.Reduce(logits, b.ConstantF32(-INFINITY), {1}, max_f32);
  Op shifted = b.Sub(logits, b.Broadcast(max, nc, {0}));
  Op e = b.Exp(shifted);
  Op sum = b.Reduce(e, b.ConstantF32(0.0f), {1}, add_f32);
  Op log_probs = b.Sub(shifted, b.Broadcast(b.Log(sum), nc, {0}));
  Op probs = b.Div(e, b.Broadcast(sum, nc, {0}));
  Op classes = b.Iota(xla::S32, nc, 1);
  Op one_hot = b.Convert(b.Compare(classes, b.Broadcast(labels, nc, {0}), "EQ"), xla::F32);
  Op total = b.Reduce(b.Mul(one_hot, log_probs), b.ConstantF32(0.0f), {0, 1}, add_f32);
  Op loss = b.Div(b.Neg(total), b.ConstantF32(static_cast<float>(n)));
  return SoftmaxCrossEntropy{probs, one_hot, loss};
}

Op SgdUpdate(HloBuilder& b, Op param, Op grad, Op lr) {
  std::vector<int64_t> dims(param.shape.dimensions().begin(), param.shape.dimensions().end());
  return b.Sub(param, b.Mul(b.Broadcast(lr, dims, {}), grad));
}

}  // namespace

int64_t InitRandomCount(const ModelConfig& c) {
  return c.inputs * c.hidden + c.hidden * c.classes;
}

xla::HloModuleProto BuildInitModule(const ModelConfig& c) {
  HloBuilder b("mlp_init");
  const int64_t n1 = c.inputs * c.hidden;
  const int64_t n2 = c.hidden * c.classes;
  Op u = b.Parameter(0, xla::F32, {n1 + n2}, "uniform");
  auto glorot = [&](Op values, int64_t fan_in, int64_t fan_out) {
    const float limit = static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in + fan_out)));
    std::vector<int64_t> dims = {fan_in, fan_out};
    Op centered = b.Sub(b.Mul(Scalar(b, 2.0f, dims), b.Reshape(values, dims)), Scalar(b, 1.0f, dims));
    return b.Mul(centered, Scalar(b, limit, dims));
  };
  Op w1 = glorot(b.Slice(u, {0}, {n1}, {1}), c.inputs, c.hidden);
  Op w2 = glorot(b.Slice(u, {n1}, {n1 + n2}, {1}), c.hidden, c.classes);
  Op b1 = Scalar(b, 0.0f, {c.hidden});
  Op b2 = Scalar(b, 0.0f, {c.classes});
  return b.Build(b.Tuple({w1, b1, w2, b2}));
}

xla::HloModuleProto BuildTrainStepModule(const ModelConfig& c, int64_t n) {
  HloBuilder b("mlp_train_step_b" + std::to_string(n));
  Params p = AddParams(b, c);
  Op x = b.Parameter(4, xla::F32, {n, c.inputs}, "x");
  Op labels = b.Parameter(5, xla::S32, {n}, "labels");
  Op lr = b.Parameter(6, xla::F32, {}, "lr");
  const int64_t add_f32 = b.MakeReducer("add", xla::F32);
  const int64_t max_f32 = b.MakeReducer("maximum", xla::F32);

  Forward fwd = CallForward(b, c, n, p, x);
  SoftmaxCrossEntropy ce = CrossEntropy(b, c, n, fwd.logits, labels, add_f32, max_f32);

  // Backward. dLoss/dlogits = (softmax - one_hot) / n.
  const std::vector<int64_t> nc = {n, c.classes};
  const std::vector<int64_t> nh = {n, c.hidden};
  Op d_logits = b.Div(b.Sub(ce.probs, ce.one_hot), Scalar(b, static_cast<float>(n), nc));
  Op d_w2 = b.Dot(fwd.h, d_logits, {0}, {0});                          // [H, C]
  Op d_b2 = b.Reduce(d_logits, b.ConstantF32(0.0f), {0}, add_f32);     // [C]
  Op d_h = b.Dot(d_logits, p.w2, {1}, {1});                            // [n, H]
  Op d_h_pre = b.Mul(d_h, b.Sub(Scalar(b, 1.0f, nh), b.Mul(fwd.h, fwd.h)));  // tanh' = 1 - h^2
  Op d_w1 = b.Dot(x, d_h_pre, {0}, {0});                               // [D, H]
  Op d_b1 = b.Reduce(d_h_pre, b.ConstantF32(0.0f), {0}, add_f32);      // [H]

  return b.Build(b.Tuple({SgdUpdate(b, p.w1, d_w1, lr), SgdUpdate(b, p.b1, d_b1, lr),
                          SgdUpdate(b, p.w2, d_w2, lr), SgdUpdate(b, p.b2, d_b2, lr), ce.loss}));
}

xla::HloModuleProto BuildEvalModule(const ModelConfig& c, int64_t n) {
  HloBuilder b("mlp_eval_n" + std::to_string(n));
  Params p = AddParams(b, c);
  Op x = b.Parameter(4, xla::F32, {n, c.inputs}, "x");
  Op labels = b.Parameter(5, xla::S32, {n}, "labels");
  const int64_t add_f32 = b.MakeReducer("add", xla::F32);
  const int64_t max_f32 = b.MakeReducer("maximum", xla::F32);
  const int64_t min_s32 = b.MakeReducer("minimum", xla::S32);
  const int64_t add_s32 = b.MakeReducer("add", xla::S32);

  Forward fwd = CallForward(b, c, n, p, x);
  SoftmaxCrossEntropy ce = CrossEntropy(b, c, n, fwd.logits, labels, add_f32, max_f32);

  // arg max: the lowest class index whose logit equals the row's maximum.
  const std::vector<int64_t> nc = {n, c.classes};
  Op max = b.Reduce(fwd.logits, b.ConstantF32(-INFINITY), {1}, max_f32);
  Op is_max = b.Compare(fwd.logits, b.Broadcast(max, nc, {0}), "EQ");
  Op classes = b.Iota(xla::S32, nc, 1);
  Op candidates = b.Select(is_max, classes, b.Broadcast(b.ConstantS32(static_cast<int32_t>(c.classes)), nc, {}));
  Op predicted = b.Reduce(candidates, b.ConstantS32(static_cast<int32_t>(c.classes)), {1}, min_s32);
  Op hit = b.Convert(b.Compare(predicted, labels, "EQ"), xla::S32);
  Op correct = b.Reduce(hit, b.ConstantS32(0), {0}, add_s32);
  return b.Build(b.Tuple({ce.loss, correct}));
}

namespace {

// Uniform in (0, 1): 32 random bits, exact in double.
double Uniform(std::mt19937& rng) { return (static_cast<double>(rng()) + 0.5) / 4294967296.0; }

// Approximately N(0, 1): Irwin-Hall sum of 12 uniforms, minus 6.
double Normal(std::mt19937& rng) {
  double s = 0;
  for (int i = 0; i < 12; ++i) s += Uniform(rng);
  return s - 6.0;
}

Dataset MakeExamples(const ModelConfig& c, const std::vector<double>& centers, int64_t size,
                     std::mt19937& rng) {
  Dataset d;
  d.size = size;
  d.x.reserve(size * c.inputs);
  for (int64_t i = 0; i < size; ++i) {
    const int32_t label = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.classes));
    d.labels.push_back(label);
    for (int64_t j = 0; j < c.inputs; ++j) {
      d.x.push_back(static_cast<float>(centers[label * c.inputs + j] + Normal(rng)));
    }
  }
  return d;
}

}  // namespace

Data MakeData(const ModelConfig& c, int64_t train_size, int64_t eval_size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> centers;
  for (int64_t i = 0; i < c.classes * c.inputs; ++i) centers.push_back(1.0 * Normal(rng));
  Data data;
  data.train = MakeExamples(c, centers, train_size, rng);
  data.eval = MakeExamples(c, centers, eval_size, rng);
  return data;
}

std::vector<float> UniformFloats(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v;
  v.reserve(count);
  // 24 random bits: exactly representable, in [0, 1).
  for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<float>(rng() >> 8) / 16777216.0f);
  return v;
}

std::vector<int64_t> Permutation(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint32_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace mlp
