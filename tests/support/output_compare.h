// Seeded random inputs for a module's parameters, and the comparison of two
// sets of outputs (the host backend's and the HLO evaluator's) with stated
// tolerances. Shared by tests/unit/host_vs_evaluator_test.cc and
// tests/e2e/corpus_test.cc.
//
// Tolerances (CompareOutputs). Integers and pred must match exactly.
// Floating-point outputs must satisfy |host - ref| <= rel * |ref| + abs, NaN
// matching NaN and an infinity matching the same infinity: f32/f64 rel = 1e-5,
// abs = 1e-6; bf16 rel = 2^-7, abs = 2^-7 / 10; f16 rel = 2^-10, abs =
// 2^-10 / 10 (two of their ulps). See host_vs_evaluator_test.cc for why.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "npc/runtime.h"
#include "npc/tensor.h"

namespace npc::testing {

// Integer inputs are drawn from [lo, hi]; floating-point ones from [-2, 2],
// or (0, 2] with positive_floats.
struct InputRanges {
  int64_t lo = -8;
  int64_t hi = 8;
  bool positive_floats = false;
};

// A tensor of `spec` with seeded values: f32/f64 k/500 for k in [-1000, 1000]
// (so in [-2, 2]); bf16 k/64 for k in [-128, 128] and f16 k/512 for k in
// [-1024, 1024] (exact in those types); k >= 1 with positive_floats; integers
// in [ints.lo, ints.hi] (unsigned: [max(lo, 0), hi]); pred 0/1.
Tensor RandomTensor(const TensorSpec& spec, std::mt19937& gen, InputRanges ints);

// One RandomTensor per spec, from one generator seeded with `seed`.
std::vector<Tensor> RandomArguments(const std::vector<TensorSpec>& specs, uint32_t seed, InputRanges ints = {});

struct Comparison {
  bool matched = true;
  std::string first_mismatches;  // up to five, one per line
  int64_t float_values = 0;
  int64_t identical = 0;   // float values equal (or both NaN)
  int64_t nan_values = 0;  // of those, NaN on both sides
  double max_relative_error = 0;
};

// Compares `host` (the backend's outputs) with `ref` (the evaluator's).
Comparison CompareOutputs(const std::vector<Tensor>& host, const std::vector<Tensor>& ref);

}  // namespace npc::testing
