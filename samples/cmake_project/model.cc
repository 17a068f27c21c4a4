#include "model.h"

#include "model_config.h"
#include "npc/hlo_builder.h"

namespace tiny {

namespace {

using npc::hlo::HloBuilder;
using npc::hlo::Op;
namespace xla = npc::xla;

Op Fill(HloBuilder& b, float value, const std::vector<int64_t>& dims) {
  return b.Broadcast(b.ConstantF32(value), dims, {});
}

// relu(x . w1) . w2, keeping the pre-activation and hidden layer.
struct Forward {
  Op z, h, out;
};
Forward Mlp(HloBuilder& b, Op x, Op w1, Op w2, int64_t rows) {
  Forward f;
  f.z = b.Dot(x, w1, {1}, {0});                                   // [rows, H]
  f.h = b.Max(f.z, Fill(b, 0.0f, {rows, kHidden}));               // relu
  f.out = b.Dot(f.h, w2, {1}, {0});                               // [rows, O]
  return f;
}

// Mean squared error of `out` against `y` ([rows, O]), and out - y.
Op MeanSquaredError(HloBuilder& b, Op diff, int64_t rows) {
  int64_t add = b.MakeReducer("add", xla::F32);
  Op sum = b.Reduce(b.Mul(diff, diff), b.ConstantF32(0.0f), {0, 1}, add);
  return b.Div(sum, b.ConstantF32(static_cast<float>(rows * kOutputs)));
}

}  // namespace

xla::HloModuleProto BuildNormalize() {
  HloBuilder b("tiny_normalize");
  Op x = b.Parameter(0, xla::F32, {kBatch, kInputs}, "x");
  Op y = b.Sub(b.Mul(x, Fill(b, 0.5f, {kBatch, kInputs})), Fill(b, 0.25f, {kBatch, kInputs}));
  return b.Build(b.Tuple({y}));
}

xla::HloModuleProto BuildTrainStep() {
  HloBuilder b("tiny_train_step");
  Op w1 = b.Parameter(0, xla::F32, {kInputs, kHidden}, "w1");
  Op w2 = b.Parameter(1, xla::F32, {kHidden, kOutputs}, "w2");
  Op x = b.Parameter(2, xla::F32, {kBatch, kInputs}, "x");
  Op y = b.Parameter(3, xla::F32, {kBatch, kOutputs}, "y");
  Op lr = b.Parameter(4, xla::F32, {}, "lr");
  Forward f = Mlp(b, x, w1, w2, kBatch);
  Op diff = b.Sub(f.out, y);
  Op loss = MeanSquaredError(b, diff, kBatch);
  // Backward: dloss/dout = 2 (out - y) / (rows * O).
  Op g_out = b.Mul(diff, Fill(b, 2.0f / static_cast<float>(kBatch * kOutputs), {kBatch, kOutputs}));
  Op g_w2 = b.Dot(f.h, g_out, {0}, {0});                          // [H, O]
  Op g_h = b.Dot(g_out, w2, {1}, {1});                            // [B, H]
  Op zero = Fill(b, 0.0f, {kBatch, kHidden});
  Op g_z = b.Select(b.Compare(f.z, zero, "GT"), g_h, zero);
  Op g_w1 = b.Dot(x, g_z, {0}, {0});                              // [I, H]
  Op new_w1 = b.Sub(w1, b.Mul(b.Broadcast(lr, {kInputs, kHidden}, {}), g_w1));
  Op new_w2 = b.Sub(w2, b.Mul(b.Broadcast(lr, {kHidden, kOutputs}, {}), g_w2));
  return b.Build(b.Tuple({new_w1, new_w2, loss}));
}

xla::HloModuleProto BuildEval() {
  HloBuilder b("tiny_eval");
  Op w1 = b.Parameter(0, xla::F32, {kInputs, kHidden}, "w1");
  Op w2 = b.Parameter(1, xla::F32, {kHidden, kOutputs}, "w2");
  Op x = b.Parameter(2, xla::F32, {kEvalExamples, kInputs}, "x");
  Op y = b.Parameter(3, xla::F32, {kEvalExamples, kOutputs}, "y");
  Forward f = Mlp(b, x, w1, w2, kEvalExamples);
  return b.Build(b.Tuple({MeanSquaredError(b, b.Sub(f.out, y), kEvalExamples)}));
}

}  // namespace tiny
