// The MLP of samples/mlp_train: its HLO graphs (built with npc::hlo::HloBuilder)
// and its synthetic data set. Shared by the mlp_train program, its unit test
// (tests/unit/mlp_model_test.cc) and the CMake sample project.
//
// Model: inputs [N, D] -> dense(D, H) -> tanh -> dense(H, C) -> logits [N, C],
// trained with softmax cross-entropy (mean over the batch) and plain SGD.
// Parameters, in the order every graph takes and returns them:
//   w1 f32[D, H], b1 f32[H], w2 f32[H, C], b2 f32[C].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto

namespace mlp {

// npc's HLO protos live in npc::xla (so that a program may also link XLA).
namespace xla = ::npc::xla;

struct ModelConfig {
  int64_t inputs = 16;   // D: features per example
  int64_t hidden = 32;   // H: hidden units
  int64_t classes = 4;   // C: classes
};

// Number of uniform [0,1) values the init graph takes: D*H + H*C.
int64_t InitRandomCount(const ModelConfig& config);

// Graph 1, "mlp_init": parameter 0 `uniform` f32[D*H + H*C] of values in [0,1)
// -> tuple(w1, b1, w2, b2). Weights are Glorot-uniform, (2u - 1) * sqrt(6 /
// (fan_in + fan_out)), w1 from the first D*H values (row-major), w2 from the
// rest; biases are zero.
xla::HloModuleProto BuildInitModule(const ModelConfig& config);

// Graphs 2 and 4, "mlp_train_step_b<batch>": parameters w1, b1, w2, b2,
// x f32[batch, D], labels s32[batch] (class ids in [0, C)), lr f32[] ->
// tuple(w1', b1', w2', b2', loss f32[]) where p' = p - lr * dLoss/dp and loss
// is the mean cross-entropy of the batch before the update.
xla::HloModuleProto BuildTrainStepModule(const ModelConfig& config, int64_t batch);

// Graph 3, "mlp_eval_n<examples>": parameters w1, b1, w2, b2,
// x f32[examples, D], labels s32[examples] -> tuple(loss f32[] (mean
// cross-entropy), correct s32[] (examples whose arg-max logit, lowest index on
// ties, is the label)).
xla::HloModuleProto BuildEvalModule(const ModelConfig& config, int64_t examples);

// A labelled data set: x row-major [size, D], labels in [0, C).
struct Dataset {
  int64_t size = 0;
  std::vector<float> x;
  std::vector<int32_t> labels;
};

// C Gaussian-ish clusters in D dimensions: class centers with coordinates
// ~N(0, 0.75^2), examples = center of a uniformly drawn class + N(0, 1) noise.
// Normal deviates are sums of 12 uniforms minus 6 and uniforms come from raw
// std::mt19937 outputs, in double arithmetic only (no libm, no standard
// distributions), so the data is bit-identical on every platform.
// `train` and `eval` share the centers; both are fully determined by `seed`.
struct Data {
  Dataset train;
  Dataset eval;
};
Data MakeData(const ModelConfig& config, int64_t train_size, int64_t eval_size, uint32_t seed);

// `count` uniform [0,1) floats from std::mt19937(seed), platform-independent.
std::vector<float> UniformFloats(int64_t count, uint32_t seed);

// A permutation of [0, n) by Fisher-Yates on raw mt19937 outputs
// (std::shuffle's algorithm is unspecified, so it is not used).
std::vector<int64_t> Permutation(int64_t n, uint32_t seed);

}  // namespace mlp
