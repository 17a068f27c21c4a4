// A plain HLO evaluator: the independent reference ("oracle") that the tests
// compare the host backend (runtime/host/) against.
//
// It interprets the entry computation of an HloModuleProto instruction by
// instruction, on values held as plain arrays (doubles for floating-point
// types, int64s for integers and pred), with straightforward multi-index
// loops. It is written for clarity, not speed, and shares no code with the
// backend it checks. Semantics follow XLA's operation semantics (and XLA's
// reference HloEvaluator where the spec leaves a choice):
//  - f32, bf16 and f16 arithmetic is done in C++ `float`, f64 in `double`;
//    every bf16/f16 result is rounded to nearest-even on store (a dot with a
//    bf16/f16 result accumulates in float and rounds once);
//  - dot accumulates from zero over the contracting indices in row-major order;
//    reduce accumulates into the init value over the reduced indices in
//    row-major order, calling the reducer as reducer(accumulator, element);
//  - integer arithmetic wraps (two's complement); integer x / 0 = -1 (all bits
//    set), x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0; integer power
//    with a negative (signed) exponent is 1 for base 1 and 0 otherwise, an
//    unsigned exponent is never negative; shifts by the bit width or more
//    give 0 (logical) or the sign fill (arithmetic; unsigned operands are
//    shifted as their signed reinterpretation); on pred, add is or and
//    multiply is and;
//  - float -> integer convert truncates toward zero, NaN gives 0, out-of-range
//    values saturate; anything -> pred is `x != 0`;
//  - maximum/minimum/clamp of floats propagate NaN; compare with
//    comparison_type TOTALORDER uses IEEE total order;
//  - dynamic-slice / dynamic-update-slice / gather clamp start indices so the
//    slice fits; scatter skips an update whose window does not fit;
//  - layouts are ignored: values are in logical (row-major) index order.
//
// Supported opcodes: parameter constant iota broadcast reshape copy transpose
// reverse slice concatenate pad dynamic-slice dynamic-update-slice gather
// scatter dot reduce map call fusion while conditional tuple get-tuple-element
// opt-barrier convert bitcast-convert compare select clamp, all-reduce
// all-gather reduce-scatter with one participant per replica group (the
// identity: one replica), rng-bit-generator (XLA's Philox bit generator:
// Philox4x32-10 blocks of the 128-bit counter + j under the 64-bit key
// state[0]; the counter is {state[1], state[2]} for a u64[3] state and
// {state[1], state[0]} for u64[2]; algorithm rng_default or rng_philox), the
// custom-calls AwsNeuronTransferWithStaticRing (torch-neuronx's transfer hint:
// the identity), AwsNeuronGelu (x * Phi(x)), AwsNeuronGeluBackward (its
// derivative Phi(x) + x * phi(x)), AwsNeuronSoftmax (x; softmax along the
// dimension given as a decimal backend_config) and AwsNeuronSoftmaxBackward
// (y, dy; y * (dy - sum(dy * y)) along that dimension), batch-norm-training,
// batch-norm-inference and batch-norm-grad (XLA's formulas, per feature over
// the other dimensions in row-major order, two-pass variance), the elementwise
// binary ops add subtract multiply divide remainder maximum minimum power atan2
// and or xor shift-left shift-right-logical shift-right-arithmetic, and the
// elementwise unary ops negate abs sign not floor ceil round-nearest-afz
// round-nearest-even exponential exponential-minus-one log log-plus-one
// logistic tanh sqrt rsqrt cbrt sine cosine tan erf is-finite popcnt
// count-leading-zeros.
// Element types: pred, s8, s16, s32, s64, u8, u16, u32, u64, bf16, f16, f32,
// f64. A constant the HLO text reader read as elided (`{...}`) is an error.
// Anything else is an Error naming the opcode (or type), the instruction and
// its computation, e.g.
//   hlo evaluator: unsupported opcode 'custom-call' (instruction %custom-call.3 in computation
//   main)
#pragma once

#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto
#include "npc/result.h"
#include "npc/tensor.h"

namespace npc::testing {

// Evaluates the entry computation of `module` (as npc::hlo::EntryComputation
// finds it) on `arguments`: one tensor per entry parameter leaf, in
// parameter_number order, a tuple-shaped parameter contributing its leaves
// depth-first (the convention of npc::Executable::parameters()). Returns the
// leaves of the root's value, depth-first (a non-tuple root is one output),
// as dense row-major tensors.
// Errors: a module that fails npc::hlo::ValidateModule, arguments whose count,
// types or dims do not match the parameters, an unsupported opcode or element
// type, a malformed instruction (wrong operand count, bad dimension numbers, a
// literal whose value count does not match its shape, a result that does not
// match the instruction's declared shape), a while loop running more than
// 10,000,000 iterations.
Result<std::vector<Tensor>> EvaluateHlo(const xla::HloModuleProto& module,
                                        const std::vector<Tensor>& arguments);

}  // namespace npc::testing
