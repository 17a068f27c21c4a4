// The sample's model sizes. Each graph's shapes come from here, so editing a
// value changes the graphs that use it (and only those) and the next
// `cmake --build` precompiles exactly the changed graphs:
//   kBatch, kInputs      all three graphs
//   kHidden, kOutputs    train step and eval
//   kEvalExamples        eval only
#pragma once

#include <cstdint>

namespace tiny {

constexpr int64_t kInputs = 8;
constexpr int64_t kHidden = 16;
constexpr int64_t kOutputs = 2;
constexpr int64_t kBatch = 32;
constexpr int64_t kEvalExamples = 64;

}  // namespace tiny
