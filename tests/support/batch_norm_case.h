// A known-answer case for batch-norm-training / -inference / -grad (XLA's
// operation semantics, as host_backend.h states them), worked by hand, shared
// by the HLO evaluator's tests and the host backend's so that both
// implementations are held to the same numbers.
//
// Numbers chosen so that variance + epsilon = 6 + 3 = 9 for both features.
// x (f32[3,2], feature_index 1): feature 0 is (0, 3, 6), mean 3; feature 1 is
// (-3, 0, 3), mean 0. scale (2, 1), offset (1, 0). gy: feature 0 (1, 2, 6),
// feature 1 (0, 0, 3).
#pragma once

#include <string>
#include <vector>

namespace npc::testing {

inline constexpr char kBatchNormModule[] = R"(
HloModule batch_norm

ENTRY %main (x: f32[3,2], gy: f32[3,2], scale: f32[2], offset: f32[2]) -> (f32[3,2], f32[2], f32[2], f32[3,2], f32[3,2], f32[2], f32[2]) {
  %x = f32[3,2] parameter(0)
  %gy = f32[3,2] parameter(1)
  %scale = f32[2] parameter(2)
  %offset = f32[2] parameter(3)
  %bn = (f32[3,2], f32[2], f32[2]) batch-norm-training(%x, %scale, %offset), epsilon=3, feature_index=1
  %y = f32[3,2] get-tuple-element(%bn), index=0
  %mean = f32[2] get-tuple-element(%bn), index=1
  %var = f32[2] get-tuple-element(%bn), index=2
  %inf = f32[3,2] batch-norm-inference(%x, %scale, %offset, %mean, %var), epsilon=3, feature_index=1
  %g = (f32[3,2], f32[2], f32[2]) batch-norm-grad(%x, %scale, %mean, %var, %gy), epsilon=3, feature_index=1
  %gx = f32[3,2] get-tuple-element(%g), index=0
  %gs = f32[2] get-tuple-element(%g), index=1
  %go = f32[2] get-tuple-element(%g), index=2
  ROOT %out = (f32[3,2], f32[2], f32[2], f32[3,2], f32[3,2], f32[2], f32[2]) tuple(%y, %mean, %var, %inf, %gx, %gs, %go)
}
)";

// Parameters of kBatchNormModule, row-major: x, gy, scale, offset.
struct BatchNormInput {
  std::vector<int64_t> dims;
  std::vector<float> values;
};
inline const std::vector<BatchNormInput>& BatchNormInputs() {
  static const std::vector<BatchNormInput> inputs = {
      {{3, 2}, {0, -3, 3, 0, 6, 3}}, {{3, 2}, {1, 0, 2, 0, 6, 3}}, {{2}, {2, 1}}, {{2}, {1, 0}}};
  return inputs;
}

// The seven outputs of kBatchNormModule, each with what it is.
struct BatchNormOutput {
  std::string what;
  std::vector<float> values;
};
inline const std::vector<BatchNormOutput>& BatchNormOutputs() {
  static const std::vector<BatchNormOutput> outputs = {
      {"y = scale * (x - mean) / sqrt(6 + 3) + offset", {-1, -1, 1, 0, 3, 1}},
      {"mean", {3, 0}},
      {"variance (biased: / m)", {6, 6}},
      {"inference (same mean and variance)", {-1, -1, 1, 0, 3, 1}},
      // Feature 0: sum gy 9, sum gy*(x-mean) 15, d = 3, c = 15/9/3,
      // gx = 2/3 (gy - 3 - 5/9 (x - 3)) = (-2/9, -2/3, 8/9). Feature 1:
      // sum gy 3, sum gy*x 9, d = 1, c = 1/3, gx = 1/3 (gy - 1 - x/3) =
      // (0, -1/3, 1/3).
      {"grad x", {-2.f / 9, 0, -2.f / 3, -1.f / 3, 8.f / 9, 1.f / 3}},
      {"grad scale = sum gy*(x-mean) / 3", {5, 3}},
      {"grad offset = sum gy", {9, 3}},
  };
  return outputs;
}

}  // namespace npc::testing
