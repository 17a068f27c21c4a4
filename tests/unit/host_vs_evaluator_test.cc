// The host backend (runtime/host/, compiled and run through the public
// runtime API) against the plain HLO evaluator (tests/support/hlo_evaluator.h)
// on seeded random inputs: modules built with HloBuilder covering the host
// backend's ops (the real modules of ../shared/corpus: tests/e2e/corpus_test.cc).
//
// Tolerances. Integers and pred must match exactly. Floating-point outputs
// must satisfy |host - ref| <= rel * |ref| + abs, NaN matching NaN and an
// infinity matching the same infinity. Both sides compute f32 in C++ float,
// one rounding per HLO op, so most results are bit-identical; what may
// legitimately differ is (a) transcendental functions and composite ops
// (logistic, rsqrt, tanh, ...) formulated differently or taken from another
// math routine (a few ulps), and (b) the order of summation in dot and reduce
// if the backend loops in another order (about n ulps for n terms). Each such
// difference is ~1e-7 relative and they compound through a chain of ops (the
// MLP's backward pass is ~30 ops deep), so f32/f64 use rel = 1e-5 (two orders
// of magnitude of headroom over a few ulps compounded) and abs = 1e-6 for
// results that are sums cancelling to ~0 (inputs are O(1), so an absolute
// error of ~1e-7 is expected there and relative error is meaningless). bf16
// and f16 results round each op to 8 / 11 significant bits, so a one-ulp
// difference upstream can flip a later rounding: rel = 2^-7 (bf16) and 2^-10
// (f16), two of their ulps, with abs scaled likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "npc/runtime.h"
#include "support/hlo_evaluator.h"
#include "support/output_compare.h"
#include "support/test_support.h"

namespace npc::testing {
namespace {

using hlo::HloBuilder;
using hlo::Op;

constexpr float kInf = std::numeric_limits<float>::infinity();

xla::ShapeProto Shape(xla::PrimitiveType t, const std::vector<int64_t>& dims) {
  return HloBuilder::ArrayShape(t, dims);
}

Op Instr(HloBuilder& b, const std::string& opcode, const std::vector<Op>& operands,
         const xla::ShapeProto& shape,
         const std::function<void(xla::HloInstructionProto&)>& set = nullptr) {
  xla::HloInstructionProto inst;
  inst.set_opcode(opcode);
  if (set) set(inst);
  return b.AddInstruction(std::move(inst), operands, shape);
}

// Random inputs and the output comparison: support/output_compare.h.

// ---- the fixture: one runtime (host backend, private cache) per test suite ----

class HostVsEvaluatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = new TempDir("npc-host-vs-eval");
    RuntimeOptions options;
    options.cache_url = cache_->path();
    auto rt = Runtime::Create(options);
    if (!rt.ok()) {
      ADD_FAILURE() << rt.error().message;
      return;
    }
    runtime_ = std::move(*rt).release();
  }
  static void TearDownTestSuite() {
    delete runtime_;
    runtime_ = nullptr;
    delete cache_;
    cache_ = nullptr;
  }

  // Compiles `module` with the host backend, runs it and the evaluator on the
  // same seeded random arguments, and expects equal outputs (see the
  // tolerances at the top of this file).
  void ExpectSameResults(const xla::HloModuleProto& module, uint32_t seed, InputRanges ints = {}) {
    ASSERT_NE(runtime_, nullptr);
    auto exe = runtime_->GetExecutable(module);
    ASSERT_TRUE(exe.ok()) << exe.error().message;
    std::vector<Tensor> args = RandomArguments((*exe)->parameters(), seed, ints);
    ExpectSameResults(module, **exe, args);
  }

  // The same with given arguments.
  void ExpectSameResults(const xla::HloModuleProto& module, const Executable& exe,
                         const std::vector<Tensor>& args) {
    auto host = exe.Run(args);
    ASSERT_TRUE(host.ok()) << host.error().message;
    auto ref = EvaluateHlo(module, args);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    Comparison c = CompareOutputs(*host, *ref);
    EXPECT_TRUE(c.matched) << "module " << module.name() << ": host backend and evaluator differ:\n"
                           << c.first_mismatches;
    std::cout << "[ compare  ] " << module.name() << ": " << c.identical << " of " << c.float_values
              << " float values identical (equal or both NaN), max relative error "
              << c.max_relative_error << "\n";
  }

  static TempDir* cache_;
  static Runtime* runtime_;
};

TempDir* HostVsEvaluatorTest::cache_ = nullptr;
Runtime* HostVsEvaluatorTest::runtime_ = nullptr;

// ---- modules ----

// One SGD step of a 2-layer MLP with softmax cross-entropy, written out by
// hand (forward, loss, backward, update), plus argmax predictions and the
// number of correct ones.
xla::HloModuleProto MlpTrainingStep() {
  constexpr int64_t kBatch = 8, kIn = 16, kHidden = 32, kClasses = 10;
  HloBuilder b("mlp_train_step");
  Op x = b.Parameter(0, xla::F32, {kBatch, kIn}, "x");
  Op w1 = b.Parameter(1, xla::F32, {kIn, kHidden}, "w1");
  Op b1 = b.Parameter(2, xla::F32, {kHidden}, "b1");
  Op w2 = b.Parameter(3, xla::F32, {kHidden, kClasses}, "w2");
  Op b2 = b.Parameter(4, xla::F32, {kClasses}, "b2");
  Op labels = b.Parameter(5, xla::S32, {kBatch}, "labels");
  const int64_t add = b.MakeReducer("add", xla::F32);
  const int64_t max = b.MakeReducer("maximum", xla::F32);
  Op zero = b.ConstantF32(0);
  auto bcast = [&](Op v, std::vector<int64_t> dims, std::vector<int64_t> map) {
    return b.Broadcast(v, dims, map);
  };

  // Forward.
  Op h_pre = b.Add(b.Dot(x, w1, {1}, {0}), bcast(b1, {kBatch, kHidden}, {1}));
  Op h = b.Max(h_pre, bcast(zero, {kBatch, kHidden}, {}));
  Op logits = b.Add(b.Dot(h, w2, {1}, {0}), bcast(b2, {kBatch, kClasses}, {1}));
  // Softmax cross-entropy.
  Op row_max = b.Reduce(logits, b.ConstantF32(-kInf), {1}, max);
  Op shifted = b.Sub(logits, bcast(row_max, {kBatch, kClasses}, {0}));
  Op e = b.Exp(shifted);
  Op sum_e = b.Reduce(e, zero, {1}, add);
  Op log_p = b.Sub(shifted, bcast(b.Log(sum_e), {kBatch, kClasses}, {0}));
  Op classes = b.Iota(xla::S32, {kBatch, kClasses}, 1);
  Op is_label = b.Compare(classes, bcast(labels, {kBatch, kClasses}, {0}), "EQ");
  Op one_hot = b.Convert(is_label, xla::F32);
  Op n = b.ConstantF32(static_cast<float>(kBatch));
  Op loss = b.Div(b.Neg(b.Reduce(b.Mul(one_hot, log_p), zero, {0, 1}, add)), n);
  // Backward.
  Op p = b.Div(e, bcast(sum_e, {kBatch, kClasses}, {0}));
  Op d_logits = b.Div(b.Sub(p, one_hot), bcast(n, {kBatch, kClasses}, {}));
  Op d_w2 = b.Dot(h, d_logits, {0}, {0});
  Op d_b2 = b.Reduce(d_logits, zero, {0}, add);
  Op d_h = b.Dot(d_logits, w2, {1}, {1});
  Op relu_on = b.Compare(h_pre, bcast(zero, {kBatch, kHidden}, {}), "GT");
  Op d_h_pre = b.Select(relu_on, d_h, bcast(zero, {kBatch, kHidden}, {}));
  Op d_w1 = b.Dot(x, d_h_pre, {0}, {0});
  Op d_b1 = b.Reduce(d_h_pre, zero, {0}, add);
  // SGD update.
  Op lr = b.ConstantF32(0.1f);
  auto step = [&](Op w, Op g) {
    std::vector<int64_t> dims(w.shape.dimensions().begin(), w.shape.dimensions().end());
    return b.Sub(w, b.Mul(bcast(lr, dims, {}), g));
  };
  // Predictions: argmax over classes (variadic reduce), and how many are right.
  HloBuilder sub("argmax");
  Op av = sub.Parameter(0, xla::F32, {});
  Op ai = sub.Parameter(1, xla::S32, {});
  Op bv = sub.Parameter(2, xla::F32, {});
  Op bi = sub.Parameter(3, xla::S32, {});
  Op keep = sub.Compare(av, bv, "GE");
  const int64_t argmax =
      b.AddComputation(sub, sub.Tuple({sub.Select(keep, av, bv), sub.Select(keep, ai, bi)}));
  Op pred = Instr(b, "reduce", {logits, classes, b.ConstantF32(-kInf), b.ConstantS32(-1)},
                  HloBuilder::TupleShape({Shape(xla::F32, {kBatch}), Shape(xla::S32, {kBatch})}),
                  [&](xla::HloInstructionProto& i) {
                    i.add_dimensions(1);
                    i.add_called_computation_ids(argmax);
                  });
  Op predicted = b.GetTupleElement(pred, 1);
  const int64_t add_s32 = b.MakeReducer("add", xla::S32);
  Op correct = b.Reduce(b.Convert(b.Compare(predicted, labels, "EQ"), xla::S32), b.ConstantS32(0),
                        {0}, add_s32);
  return b.Build(b.Tuple(
      {loss, step(w1, d_w1), step(b1, d_b1), step(w2, d_w2), step(b2, d_b2), predicted, correct}));
}

xla::HloModuleProto BatchDotsWithTransposes() {
  HloBuilder b("batch_dots");
  Op a = b.Parameter(0, xla::F32, {2, 3, 4});
  Op c = b.Parameter(1, xla::F32, {2, 5, 4});
  Op d = b.Parameter(2, xla::F32, {3, 2, 4});
  Op e = b.Parameter(3, xla::F32, {4, 2, 5});
  // [2,3,4] x [2,5,4] batch 0, contract 2 -> [2,3,5], then -> [3,2,5].
  Op ac = b.Dot(a, c, {2}, {2}, {0}, {0});
  Op t = b.Transpose(ac, {1, 0, 2});
  // Batch dims not leading: [3,2,4] batch 1 x [4,2,5] batch 1, contract 2 with 0 -> [2,3,5].
  Op de = b.Dot(d, e, {2}, {0}, {1}, {1});
  Op sum = b.Add(b.Transpose(de, {1, 0, 2}), t);  // [3,2,5]
  // Rank-3 transpose of an operand, then a plain matmul of a reshape.
  Op ct = b.Transpose(c, {2, 0, 1});                                     // [4,2,5]
  Op m = b.Dot(b.Reshape(a, {6, 4}), b.Reshape(ct, {4, 10}), {1}, {0});  // [6,10]
  // Two contracting dims and a free dim on each side.
  Op two = b.Dot(a, d, {1, 2}, {0, 2});  // [2,2]
  return b.Build(b.Tuple({sum, m, two}));
}

xla::HloModuleProto Reductions() {
  HloBuilder b("reductions");
  Op x = b.Parameter(0, xla::F32, {4, 5, 6});
  Op k = b.Parameter(1, xla::S32, {4, 5});
  Op d = b.Parameter(2, xla::F64, {3, 7});
  const int64_t add = b.MakeReducer("add", xla::F32);
  const int64_t max = b.MakeReducer("maximum", xla::F32);
  const int64_t min = b.MakeReducer("minimum", xla::F32);
  const int64_t add_s32 = b.MakeReducer("add", xla::S32);
  const int64_t max_s32 = b.MakeReducer("maximum", xla::S32);
  const int64_t mul_s32 = b.MakeReducer("multiply", xla::S32);
  const int64_t add_f64 = b.MakeReducer("add", xla::F64);
  // An order-sensitive reducer: f(acc, v) = acc * 0.5 + v.
  HloBuilder sub("halve_and_add");
  Op acc = sub.Parameter(0, xla::F32, {});
  Op v = sub.Parameter(1, xla::F32, {});
  const int64_t halve = b.AddComputation(sub, sub.Add(sub.Mul(acc, sub.ConstantF32(0.5f)), v));
  // Variadic: (max, argmax) over dimension 1.
  HloBuilder sub2("argmax");
  Op av = sub2.Parameter(0, xla::F32, {});
  Op ai = sub2.Parameter(1, xla::S32, {});
  Op bv = sub2.Parameter(2, xla::F32, {});
  Op bi = sub2.Parameter(3, xla::S32, {});
  Op keep = sub2.Compare(av, bv, "GE");
  const int64_t argmax =
      b.AddComputation(sub2, sub2.Tuple({sub2.Select(keep, av, bv), sub2.Select(keep, ai, bi)}));
  Op zero = b.ConstantF32(0);
  Op arg = Instr(b, "reduce",
                 {x, b.Iota(xla::S32, {4, 5, 6}, 1), b.ConstantF32(-kInf), b.ConstantS32(-1)},
                 HloBuilder::TupleShape({Shape(xla::F32, {4, 6}), Shape(xla::S32, {4, 6})}),
                 [&](xla::HloInstructionProto& i) {
                   i.add_dimensions(1);
                   i.add_called_computation_ids(argmax);
                 });
  return b.Build(b.Tuple({
      b.Reduce(x, zero, {1}, add),
      b.Reduce(x, zero, {0, 2}, add),
      b.Reduce(x, zero, {0, 1, 2}, add),
      b.Reduce(x, b.ConstantF32(-kInf), {2}, max),
      b.Reduce(x, b.ConstantF32(kInf), {0}, min),
      b.Reduce(x, b.ConstantF32(1.5f), {1}, halve),
      b.Reduce(k, b.ConstantS32(0), {1}, add_s32),
      b.Reduce(k, b.ConstantS32(-100), {0}, max_s32),
      b.Reduce(k, b.ConstantS32(1), {0, 1}, mul_s32),
      b.Reduce(d,
               Instr(b, "constant", {}, Shape(xla::F64, {}),
                     [](xla::HloInstructionProto& i) {
                       *i.mutable_literal()->mutable_shape() = Shape(xla::F64, {});
                       i.mutable_literal()->add_f64s(0.25);
                     }),
               {1}, add_f64),
      arg,
  }));
}

// Elementwise float ops, compares, selects and converts, chained.
xla::HloModuleProto FloatChains() {
  constexpr int64_t n = 64;
  HloBuilder b("float_chains");
  Op x = b.Parameter(0, xla::F32, {n});
  Op y = b.Parameter(1, xla::F32, {n});
  auto c = [&](float v) { return b.Broadcast(b.ConstantF32(v), {n}, {}); };
  Op ax = b.Unary("abs", x);
  Op pos = b.Add(ax, c(0.5f));  // > 0
  std::vector<Op> outs = {
      b.Unary("negate", x),
      ax,
      b.Unary("sign", x),
      b.Unary("floor", b.Mul(x, c(3.3f))),
      b.Unary("ceil", b.Mul(x, c(3.3f))),
      b.Unary("round-nearest-afz", b.Mul(x, c(2))),
      b.Unary("round-nearest-even", b.Mul(x, c(2))),
      b.Exp(x),
      b.Log(pos),
      b.Unary("exponential-minus-one", x),
      b.Unary("log-plus-one", ax),
      b.Unary("tanh", x),
      b.Unary("logistic", b.Mul(x, c(4))),
      b.Unary("sqrt", ax),
      b.Unary("rsqrt", pos),
      b.Unary("cbrt", x),
      b.Unary("sine", x),
      b.Unary("cosine", x),
      b.Unary("tan", x),
      b.Unary("erf", x),
      b.Binary("power", pos, y),
      b.Binary("atan2", x, y),
      b.Binary("remainder", b.Mul(x, c(5)), y),
      b.Sub(x, y),
      b.Mul(x, y),
      b.Div(x, pos),
      b.Max(x, y),
      b.Binary("minimum", x, y),
      Instr(b, "clamp", {c(-0.5f), x, c(0.75f)}, Shape(xla::F32, {n})),
      Instr(b, "is-finite", {b.Div(x, y)}, Shape(xla::PRED, {n})),
  };
  // Compare in every direction, combine the preds, select.
  Op lt = b.Compare(x, y, "LT");
  Op ge = b.Compare(x, y, "GE");
  Op eq = b.Compare(b.Unary("floor", x), b.Unary("floor", y), "EQ");
  Op ne = b.Compare(x, c(0), "NE");
  Op le = b.Compare(x, c(0.5f), "LE");
  Op gt = b.Compare(y, c(-0.5f), "GT");
  Op mixed = b.Binary("or", b.Binary("and", lt, gt), b.Binary("xor", eq, b.Unary("not", le)));
  outs.push_back(mixed);
  outs.push_back(b.Select(mixed, x, y));
  outs.push_back(b.Select(b.Binary("and", ge, ne), b.Exp(y), b.Neg(x)));
  // Converts: float -> int truncates toward zero; int -> float; pred -> float.
  Op scaled = b.Mul(x, c(7.7f));
  Op as_s32 = b.Convert(scaled, xla::S32);
  outs.push_back(as_s32);
  outs.push_back(b.Convert(b.Mul(x, c(1e10f)), xla::S32));  // saturates
  outs.push_back(b.Convert(scaled, xla::U32));              // negatives saturate to 0
  outs.push_back(b.Convert(scaled, xla::S64));
  outs.push_back(b.Convert(scaled, xla::F64));
  outs.push_back(b.Add(b.Convert(as_s32, xla::F32), b.Convert(mixed, xla::F32)));
  outs.push_back(b.Convert(x, xla::PRED));
  outs.push_back(Instr(b, "bitcast-convert", {x}, Shape(xla::S32, {n})));
  outs.push_back(Instr(b, "bitcast-convert",
                       {Instr(b, "bitcast-convert", {y}, Shape(xla::U32, {n}))},
                       Shape(xla::F32, {n})));
  // NaN (sqrt of the negative half of x) through maximum, minimum, clamp,
  // compares, converts and a max-reduce.
  Op nan_x = b.Unary("sqrt", x);
  outs.push_back(b.Max(nan_x, y));
  outs.push_back(b.Binary("minimum", y, nan_x));
  outs.push_back(Instr(b, "clamp", {c(-0.5f), nan_x, c(0.75f)}, Shape(xla::F32, {n})));
  outs.push_back(b.Compare(nan_x, y, "NE"));
  outs.push_back(b.Compare(nan_x, y, "GE"));
  outs.push_back(
      Instr(b, "compare", {nan_x, y}, Shape(xla::PRED, {n}), [](xla::HloInstructionProto& i) {
        i.set_comparison_direction("LT");
        i.set_comparison_type("TOTALORDER");
      }));
  outs.push_back(b.Convert(nan_x, xla::S32));
  outs.push_back(b.Reduce(b.Reshape(nan_x, {8, 8}), b.ConstantF32(-kInf), {1},
                          b.MakeReducer("maximum", xla::F32)));
  // Total-order compare distinguishes -0 from +0.
  outs.push_back(Instr(b, "compare", {b.Neg(b.Mul(x, c(0))), b.Mul(x, c(0))}, Shape(xla::PRED, {n}),
                       [](xla::HloInstructionProto& i) {
                         i.set_comparison_direction("LT");
                         i.set_comparison_type("TOTALORDER");
                       }));
  return b.Build(b.Tuple(outs));
}

// Integer ops on random small integers (zeros included: x / 0, x % 0) and
// their edge cases as constants.
xla::HloModuleProto IntegerChains() {
  constexpr int64_t n = 64;
  HloBuilder b("integer_chains");
  Op k = b.Parameter(0, xla::S32, {n});
  Op j = b.Parameter(1, xla::S32, {n});
  Op u = b.Parameter(2, xla::U32, {n});
  Op w = b.Parameter(3, xla::S64, {n});
  auto c = [&](int32_t v) { return b.Broadcast(b.ConstantS32(v), {n}, {}); };
  Op shift = b.Binary("and", j, c(31));
  Op big = b.Mul(k, c(123456789));  // wraps
  std::vector<Op> outs = {
      b.Add(k, j),
      b.Sub(k, j),
      big,
      b.Div(k, j),
      b.Binary("remainder", k, j),
      b.Div(big, j),
      b.Binary("remainder", big, j),
      b.Max(k, j),
      b.Binary("minimum", k, j),
      b.Binary("and", k, j),
      b.Binary("or", k, j),
      b.Binary("xor", k, j),
      b.Unary("not", k),
      b.Binary("shift-left", big, shift),
      b.Binary("shift-right-logical", big, shift),
      b.Binary("shift-right-arithmetic", big, shift),
      b.Binary("shift-left", k, b.Mul(j, c(5))),  // amounts >= 32 and negative
      b.Binary("shift-right-arithmetic", k, b.Mul(j, c(5))),
      b.Binary("shift-right-logical", k, b.Mul(j, c(5))),
      b.Unary("negate", k),
      b.Unary("abs", k),
      b.Unary("sign", k),
      b.Unary("popcnt", big),
      Instr(b, "count-leading-zeros", {big}, Shape(xla::S32, {n})),
      b.Binary("power", k, b.Unary("abs", j)),
      Instr(b, "clamp", {c(-3), k, c(4)}, Shape(xla::S32, {n})),
      b.Select(b.Compare(k, j, "LE"), k, j),
      b.Convert(k, xla::F32),
      b.Convert(big, xla::S8),
      b.Convert(k, xla::U32),
      b.Convert(w, xla::S32),
      b.Convert(k, xla::PRED),
      // pred arithmetic: add is or, multiply is and.
      b.Add(b.Convert(k, xla::PRED), b.Convert(j, xla::PRED)),
      b.Mul(b.Convert(k, xla::PRED), b.Convert(j, xla::PRED)),
  };
  // Unsigned arithmetic.
  Op uc = b.Convert(c(3), xla::U32);
  outs.push_back(b.Sub(u, uc));  // wraps below zero
  outs.push_back(b.Div(uc, u));  // u may be 0: the maximum
  outs.push_back(b.Binary("remainder", b.Mul(u, b.Convert(c(1000003), xla::U32)), b.Add(u, uc)));
  outs.push_back(b.Compare(b.Sub(u, uc), u, "GT"));
  // s64.
  Op wb = b.Mul(w, b.Broadcast(b.ConstantS64(int64_t{1} << 40), {n}, {}));
  outs.push_back(wb);
  outs.push_back(b.Div(wb, b.Convert(j, xla::S64)));
  outs.push_back(b.Convert(wb, xla::F32));
  // Edge cases: INT_MIN / -1, INT_MIN % -1, abs(INT_MIN).
  Op min = b.ConstantS32Array(
      {2}, {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::min()});
  Op minus_one = b.ConstantS32Array({2}, {-1, -1});
  outs.push_back(b.Div(min, minus_one));
  outs.push_back(b.Binary("remainder", min, minus_one));
  outs.push_back(b.Unary("abs", min));
  return b.Build(b.Tuple(outs));
}

// Two integer cases kept apart from IntegerChains, where XLA's definition is
// easy to get wrong:
//  - power with a negative exponent is 1 for base 1 and 0 for every other
//    base, -1 included (XLA's HloEvaluator and its CPU/GPU emitters:
//    `exponent < 0 ? (base == 1 ? 1 : 0) : base^exponent`);
//  - shift-right-arithmetic of an unsigned type shifts in copies of the top
//    bit (XLA reinterprets the bits as signed; LLVM's ashr).
xla::HloModuleProto IntegerPowerNegativeExponents() {
  HloBuilder b("integer_power_negative");
  Op base = b.ConstantS32Array({6}, {2, 1, -1, -1, 0, -2});
  Op exponent = b.ConstantS32Array({6}, {-1, -3, -1, -2, -1, -2});
  return b.Build(b.Binary("power", base, exponent));
}

xla::HloModuleProto UnsignedShiftRightArithmetic() {
  HloBuilder b("unsigned_shift_right_arithmetic");
  Op x = b.Parameter(0, xla::U32, {4});
  Op n = b.Parameter(1, xla::U32, {4});
  return b.Build(b.Binary("shift-right-arithmetic", x, n));
}

xla::HloModuleProto ShapeOps() {
  HloBuilder b("shape_ops");
  Op x = b.Parameter(0, xla::F32, {4, 6});
  Op y = b.Parameter(1, xla::F32, {3, 6});
  Op k = b.Parameter(2, xla::S32, {});
  Op z = b.Parameter(3, xla::F32, {2, 3});
  std::vector<Op> outs;
  outs.push_back(b.Slice(x, {1, 0}, {4, 6}, {2, 3}));
  outs.push_back(b.Slice(x, {0, 2}, {4, 5}, {1, 1}));
  outs.push_back(b.Concatenate({x, y, b.Slice(x, {0, 0}, {1, 6}, {1, 1})}, 0));
  outs.push_back(b.Concatenate(
      {b.Transpose(z, {1, 0}), b.Reshape(b.Slice(y, {0, 0}, {1, 6}, {1, 1}), {3, 2})}, 1));
  outs.push_back(b.Iota(xla::S32, {3, 4}, 0));
  outs.push_back(b.Add(b.Iota(xla::F32, {4, 6}, 1), x));
  outs.push_back(b.Broadcast(z, {4, 2, 5, 3}, {1, 3}));
  outs.push_back(b.Reshape(b.Transpose(b.Reshape(x, {2, 2, 6}), {2, 0, 1}), {12, 2}));
  outs.push_back(Instr(b, "reverse", {x}, Shape(xla::F32, {4, 6}), [](xla::HloInstructionProto& i) {
    i.add_dimensions(0);
    i.add_dimensions(1);
  }));
  outs.push_back(Instr(b, "pad", {z, b.ConstantF32(-1)}, Shape(xla::F32, {4, 4}),
                       [](xla::HloInstructionProto& i) {
                         // dim 0: low 1, high 1 -> 4; dim 1: low -1, interior 1, high 0 -> 5 - 1
                         // = 4.
                         auto* d0 = i.mutable_padding_config()->add_dimensions();
                         d0->set_edge_padding_low(1);
                         d0->set_edge_padding_high(1);
                         auto* d1 = i.mutable_padding_config()->add_dimensions();
                         d1->set_edge_padding_low(-1);
                         d1->set_interior_padding(1);
                       }));
  // Dynamic slices at a random start (clamped when out of range).
  outs.push_back(Instr(b, "dynamic-slice", {x, k, b.Sub(b.ConstantS32(2), k)},
                       Shape(xla::F32, {2, 3}), [](xla::HloInstructionProto& i) {
                         i.add_dynamic_slice_sizes(2);
                         i.add_dynamic_slice_sizes(3);
                       }));
  outs.push_back(Instr(b, "dynamic-update-slice", {x, z, k, k}, Shape(xla::F32, {4, 6})));
  return b.Build(b.Tuple(outs));
}

xla::HloModuleProto Calls() {
  const xla::ShapeProto f32_5 = Shape(xla::F32, {5});
  HloBuilder b("calls");
  // inner(a, b) = a * b + a, called from the entry ...
  HloBuilder inner("inner");
  Op ia = inner.Parameter(0, xla::F32, {5});
  Op ib = inner.Parameter(1, xla::F32, {5});
  const int64_t inner_id = b.AddComputation(inner, inner.Add(inner.Mul(ia, ib), ia));
  // ... and (a copy of it) from outer(a, b) = (inner(a, b), inner(b, a) - a),
  // which returns a tuple.
  HloBuilder outer("outer");
  HloBuilder nested("inner_of_outer");
  Op na = nested.Parameter(0, xla::F32, {5});
  Op nb = nested.Parameter(1, xla::F32, {5});
  const int64_t nested_id = outer.AddComputation(nested, nested.Add(nested.Mul(na, nb), na));
  Op oa = outer.Parameter(0, xla::F32, {5});
  Op ob = outer.Parameter(1, xla::F32, {5});
  Op r1 = outer.Call({oa, ob}, nested_id, f32_5);
  Op r2 = outer.Sub(outer.Call({ob, oa}, nested_id, f32_5), oa);
  const int64_t outer_id = b.AddComputation(outer, outer.Tuple({r1, r2}));

  Op x = b.Parameter(0, xla::F32, {5});
  Op y = b.Parameter(1, xla::F32, {5});
  Op direct = b.Call({x, y}, inner_id, f32_5);
  Op t = b.Call({direct, y}, outer_id, HloBuilder::TupleShape({f32_5, f32_5}));
  return b.Build(b.Tuple({direct, b.GetTupleElement(t, 0), b.GetTupleElement(t, 1)}));
}

// Embedding lookup (gather, start indices clamped) and its gradient
// (scatter-add; windows out of bounds skipped), on random indices in [-2, 9]
// for a 8-row table.
xla::HloModuleProto GatherScatter() {
  HloBuilder b("gather_scatter");
  HloBuilder sub("add");
  Op p0 = sub.Parameter(0, xla::F32, {});
  Op p1 = sub.Parameter(1, xla::F32, {});
  const int64_t add = b.AddComputation(sub, sub.Add(p0, p1));
  Op table = b.Parameter(0, xla::F32, {8, 3});
  Op ids = b.Parameter(1, xla::S32, {5});
  Op grads = b.Parameter(2, xla::F32, {5, 3});
  Op rows =
      Instr(b, "gather", {table, ids}, Shape(xla::F32, {5, 3}), [](xla::HloInstructionProto& i) {
        auto* dn = i.mutable_gather_dimension_numbers();
        dn->add_offset_dims(1);
        dn->add_collapsed_slice_dims(0);
        dn->add_start_index_map(0);
        dn->set_index_vector_dim(1);
        i.add_gather_slice_sizes(1);
        i.add_gather_slice_sizes(3);
      });
  Op zeros = b.Broadcast(b.ConstantF32(0), {8, 3}, {});
  Op grad_table = Instr(b, "scatter", {zeros, ids, grads}, Shape(xla::F32, {8, 3}),
                        [&](xla::HloInstructionProto& i) {
                          auto* dn = i.mutable_scatter_dimension_numbers();
                          dn->add_update_window_dims(1);
                          dn->add_inserted_window_dims(0);
                          dn->add_scatter_dims_to_operand_dims(0);
                          dn->set_index_vector_dim(1);
                          i.add_called_computation_ids(add);
                        });
  return b.Build(b.Tuple({rows, grad_table}));
}

// bf16 and f16 chains: every op rounds to its type.
xla::HloModuleProto HalfPrecisionChains() {
  HloBuilder b("half_precision");
  Op x = b.Parameter(0, xla::BF16, {4, 8});
  Op w = b.Parameter(1, xla::BF16, {8, 3});
  Op h = b.Parameter(2, xla::F16, {16});
  Op g = b.Parameter(3, xla::F32, {16});
  const int64_t add_bf16 = b.MakeReducer("add", xla::BF16);
  const int64_t max_f16 = b.MakeReducer("maximum", xla::F16);
  Op y = b.Dot(x, w, {1}, {0});  // accumulates in f32, rounds once
  Op sq = b.Mul(x, x);
  Op mean = b.Div(
      b.Reduce(sq, Instr(b, "convert", {b.ConstantF32(0)}, Shape(xla::BF16, {})), {1}, add_bf16),
      b.Broadcast(b.Convert(b.ConstantF32(8), xla::BF16), {4}, {}));
  Op normed = b.Mul(
      x, b.Broadcast(
             b.Unary("rsqrt",
                     b.Add(mean, b.Broadcast(b.Convert(b.ConstantF32(1e-3f), xla::BF16), {4}, {}))),
             {4, 8}, {0}));
  Op hh = b.Add(b.Mul(h, h), b.Convert(g, xla::F16));
  Op he = b.Exp(h);
  Op hmax = b.Reduce(he, b.Convert(b.ConstantF32(-kInf), xla::F16), {0}, max_f16);
  return b.Build(
      b.Tuple({y, normed, b.Convert(y, xla::F32), hh, he, hmax, b.Convert(hh, xla::BF16)}));
}

xla::HloModuleProto MapAndOtherTypes() {
  HloBuilder b("map_and_types");
  HloBuilder sub("poly");
  Op a = sub.Parameter(0, xla::F32, {});
  Op c = sub.Parameter(1, xla::F32, {});
  const int64_t poly =
      b.AddComputation(sub, sub.Add(sub.Mul(a, a), sub.Mul(c, sub.ConstantF32(3))));
  Op x = b.Parameter(0, xla::F32, {10});
  Op y = b.Parameter(1, xla::F32, {10});
  Op s8 = b.Parameter(2, xla::S8, {10});
  Op u8 = b.Parameter(3, xla::U8, {10});
  Op f64 = b.Parameter(4, xla::F64, {10});
  Op mapped = Instr(b, "map", {x, y}, Shape(xla::F32, {10}), [&](xla::HloInstructionProto& i) {
    i.add_dimensions(0);
    i.add_called_computation_ids(poly);
  });
  return b.Build(b.Tuple({
      mapped,
      b.Add(s8, s8),
      b.Mul(s8,
            b.Broadcast(Instr(b, "convert", {b.ConstantS32(50)}, Shape(xla::S8, {})), {10}, {})),
      b.Sub(u8, b.Broadcast(Instr(b, "convert", {b.ConstantS32(5)}, Shape(xla::U8, {})), {10}, {})),
      b.Convert(s8, xla::F32),
      b.Convert(u8, xla::S32),
      b.Exp(f64),
      b.Div(f64, b.Convert(x, xla::F64)),
      b.Convert(f64, xla::F32),
      b.Unary("sqrt", b.Unary("abs", f64)),
  }));
}

TEST_F(HostVsEvaluatorTest, MlpTrainingStep) {
  // Labels in [0, 9]: the 10 classes.
  ExpectSameResults(MlpTrainingStep(), 1234, InputRanges{0, 9});
}

TEST_F(HostVsEvaluatorTest, BatchDotsWithTransposes) {
  ExpectSameResults(BatchDotsWithTransposes(), 7);
}

TEST_F(HostVsEvaluatorTest, Reductions) { ExpectSameResults(Reductions(), 11); }

TEST_F(HostVsEvaluatorTest, FloatCompareSelectConvertChains) {
  ExpectSameResults(FloatChains(), 21);
}

TEST_F(HostVsEvaluatorTest, IntegerChains) { ExpectSameResults(IntegerChains(), 31); }

TEST_F(HostVsEvaluatorTest, IntegerPowerWithNegativeExponents) {
  ExpectSameResults(IntegerPowerNegativeExponents(), 0);
}

TEST_F(HostVsEvaluatorTest, UnsignedShiftRightArithmetic) {
  auto m = UnsignedShiftRightArithmetic();
  auto exe = runtime_->GetExecutable(m);
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  Tensor x = ZeroTensor(xla::U32, {4});
  Tensor n = ZeroTensor(xla::U32, {4});
  const uint32_t xs[4] = {0xFFFFFFF8u, 8, 0x80000000u, 0x80000000u};
  const uint32_t ns[4] = {1, 1, 31, 40};
  std::memcpy(x.bytes.data(), xs, sizeof xs);
  std::memcpy(n.bytes.data(), ns, sizeof ns);
  // XLA: {0xFFFFFFFC, 4, 0xFFFFFFFF, 0xFFFFFFFF}.
  ExpectSameResults(m, **exe, {x, n});
}

TEST_F(HostVsEvaluatorTest, SliceConcatenateIotaPadDynamicSlice) {
  // Start index in [-2, 5]: clamped at both ends for the [4,6] operand.
  ExpectSameResults(ShapeOps(), 41, InputRanges{-2, 5});
}

TEST_F(HostVsEvaluatorTest, Calls) { ExpectSameResults(Calls(), 51); }

TEST_F(HostVsEvaluatorTest, GatherAndScatterAdd) {
  ExpectSameResults(GatherScatter(), 61, InputRanges{-2, 9});
}

TEST_F(HostVsEvaluatorTest, Bf16AndF16Chains) { ExpectSameResults(HalfPrecisionChains(), 71); }

TEST_F(HostVsEvaluatorTest, MapAndSmallIntegerTypes) {
  ExpectSameResults(MapAndOtherTypes(), 81, InputRanges{-100, 100});
}

// ---- while, rng-bit-generator, Neuron custom-calls, u32 (HLO text) ----

xla::HloModuleProto ParseText(const std::string& text) {
  auto m = hlo::ParseHloModule(text, "test.hlo");
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : xla::HloModuleProto();
}

// Five iterations of a tuple-state loop: an f32 matrix through tanh, a bf16
// vector scaled and shifted (rounded each step), a u32 linear congruential
// sequence (wrapping), a dot inside the body.
constexpr char kWhileLoop[] = R"(
HloModule while_mixed

%cond (s: (s32[], f32[4,3], bf16[3], u32[5])) -> pred[] {
  %s = (s32[], f32[4,3], bf16[3], u32[5]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (s: (s32[], f32[4,3], bf16[3], u32[5])) -> (s32[], f32[4,3], bf16[3], u32[5]) {
  %s = (s32[], f32[4,3], bf16[3], u32[5]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[4,3] get-tuple-element(%s), index=1
  %h = bf16[3] get-tuple-element(%s), index=2
  %u = u32[5] get-tuple-element(%s), index=3
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %w = f32[3,3] constant({{0.5, -0.25, 0.125}, {0.75, 0.5, -0.5}, {-0.125, 0.25, 1}})
  %vw = f32[4,3] dot(%v, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = f32[] constant(0.1)
  %cb = f32[4,3] broadcast(%c), dimensions={}
  %pre = f32[4,3] add(%vw, %cb)
  %v1 = f32[4,3] tanh(%pre)
  %k = bf16[] constant(1.5)
  %kb = bf16[3] broadcast(%k), dimensions={}
  %hk = bf16[3] multiply(%h, %kb)
  %h1 = bf16[3] subtract(%hk, %kb)
  %a = u32[] constant(1664525)
  %ab = u32[5] broadcast(%a), dimensions={}
  %b = u32[] constant(1013904223)
  %bb = u32[5] broadcast(%b), dimensions={}
  %ua = u32[5] multiply(%u, %ab)
  %u1 = u32[5] add(%ua, %bb)
  ROOT %next = (s32[], f32[4,3], bf16[3], u32[5]) tuple(%i1, %v1, %h1, %u1)
}

ENTRY %main (v: f32[4,3], h: bf16[3], u: u32[5]) -> (s32[], f32[4,3], bf16[3], u32[5]) {
  %v = f32[4,3] parameter(0)
  %h = bf16[3] parameter(1)
  %u = u32[5] parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4,3], bf16[3], u32[5]) tuple(%zero, %v, %h, %u)
  ROOT %loop = (s32[], f32[4,3], bf16[3], u32[5]) while(%init), condition=%cond, body=%body
}
)";

// rng-bit-generator of several element types and state sizes, and the
// torch-xla Bernoulli pattern of the BERT graphs (bits >> 9 -> f32 -> compare).
constexpr char kRng[] = R"(
HloModule rng_mixed

ENTRY %main (s2: u64[2], s3: u64[3], p: f32[6,7]) -> (u64[2], u32[6,7], u64[3], u64[5], s32[3,3], u8[7], pred[6,7], u64[3], s16[2]) {
  %s2 = u64[2] parameter(0)
  %s3 = u64[3] parameter(1)
  %p = f32[6,7] parameter(2)
  %r0 = (u64[2], u32[6,7]) rng-bit-generator(%s2), algorithm=rng_default
  %st0 = u64[2] get-tuple-element(%r0), index=0
  %bits = u32[6,7] get-tuple-element(%r0), index=1
  %r1 = (u64[3], u64[5]) rng-bit-generator(%s3), algorithm=rng_philox
  %st1 = u64[3] get-tuple-element(%r1), index=0
  %b64 = u64[5] get-tuple-element(%r1), index=1
  %r2 = (u64[3], s32[3,3]) rng-bit-generator(%st1), algorithm=rng_default
  %b32 = s32[3,3] get-tuple-element(%r2), index=1
  %r3 = (u64[2], u8[7]) rng-bit-generator(%st0), algorithm=rng_default
  %b8 = u8[7] get-tuple-element(%r3), index=1
  %r4 = (u64[3], s16[2]) rng-bit-generator(%s3), algorithm=rng_default
  %st4 = u64[3] get-tuple-element(%r4), index=0
  %b16 = s16[2] get-tuple-element(%r4), index=1
  %nine = u32[] constant(9)
  %nineb = u32[6,7] broadcast(%nine), dimensions={}
  %mant = u32[6,7] shift-right-logical(%bits, %nineb)
  %f = f32[6,7] convert(%mant)
  %scale = f32[] constant(1.1920929e-07)
  %scaleb = f32[6,7] broadcast(%scale), dimensions={}
  %uniform = f32[6,7] multiply(%f, %scaleb)
  %keep = pred[6,7] compare(%uniform, %p), direction=LT
  %st2 = u64[3] get-tuple-element(%r2), index=0
  ROOT %out = (u64[2], u32[6,7], u64[3], u64[5], s32[3,3], u8[7], pred[6,7], u64[3], s16[2]) tuple(%st0, %bits, %st1, %b64, %b32, %b8, %keep, %st2, %b16)
}
)";

// The Neuron custom-calls on f32, bf16 and f16, along every dimension.
constexpr char kNeuronCalls[] = R"(
HloModule neuron_calls

ENTRY %main (x: f32[4,5,6], g: f32[4,5,6], h: bf16[3,8], k: f16[8]) -> (f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], bf16[3,8], bf16[3,8], bf16[3,8], bf16[3,8], f16[8], f16[8]) {
  %x = f32[4,5,6] parameter(0)
  %g = f32[4,5,6] parameter(1)
  %h = bf16[3,8] parameter(2)
  %k = f16[8] parameter(3)
  %gelu = f32[4,5,6] custom-call(%x), custom_call_target="AwsNeuronGelu"
  %dgelu = f32[4,5,6] custom-call(%x), custom_call_target="AwsNeuronGeluBackward"
  %grad = f32[4,5,6] multiply(%g, %dgelu)
  %sm0 = f32[4,5,6] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="0"
  %sm1 = f32[4,5,6] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="1"
  %sm2 = f32[4,5,6] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="2"
  %dsm1 = f32[4,5,6] custom-call(%sm1, %g), custom_call_target="AwsNeuronSoftmaxBackward", backend_config="1"
  %dsm2 = f32[4,5,6] custom-call(%sm2, %g), custom_call_target="AwsNeuronSoftmaxBackward", backend_config="2"
  %hg = bf16[3,8] custom-call(%h), custom_call_target="AwsNeuronGelu"
  %hdg = bf16[3,8] custom-call(%h), custom_call_target="AwsNeuronGeluBackward"
  %hs = bf16[3,8] custom-call(%h), custom_call_target="AwsNeuronSoftmax", backend_config="1"
  %hds = bf16[3,8] custom-call(%hs, %h), custom_call_target="AwsNeuronSoftmaxBackward", backend_config="0"
  %kg = f16[8] custom-call(%k), custom_call_target="AwsNeuronGelu"
  %ks = f16[8] custom-call(%k), custom_call_target="AwsNeuronSoftmax", backend_config="0"
  ROOT %out = (f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], f32[4,5,6], bf16[3,8], bf16[3,8], bf16[3,8], bf16[3,8], f16[8], f16[8]) tuple(%gelu, %grad, %sm0, %sm1, %sm2, %dsm1, %dsm2, %hg, %hdg, %hs, %hds, %kg, %ks)
}
)";

// u32 through the ops that index, reduce, multiply and compare.
constexpr char kU32[] = R"(
HloModule u32_ops

%add (a: u32[], b: u32[]) -> u32[] {
  %a = u32[] parameter(0)
  %b = u32[] parameter(1)
  ROOT %s = u32[] add(%a, %b)
}

%max (a: u32[], b: u32[]) -> u32[] {
  %a = u32[] parameter(0)
  %b = u32[] parameter(1)
  ROOT %m = u32[] maximum(%a, %b)
}

ENTRY %main (x: u32[4,6], y: u32[6,3], i: u32[2]) -> (u32[4,3], u32[4], u32[6], u32[4,6], pred[4,6], f32[4,6], u32[2,6], s32[4,6], u32[4,6]) {
  %x = u32[4,6] parameter(0)
  %y = u32[6,3] parameter(1)
  %i = u32[2] parameter(2)
  %dot = u32[4,3] dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %zero = u32[] constant(0)
  %sum = u32[4] reduce(%x, %zero), dimensions={1}, to_apply=%add
  %mx = u32[6] reduce(%x, %zero), dimensions={0}, to_apply=%max
  %big = u32[] constant(4000000000)
  %bigb = u32[4,6] broadcast(%big), dimensions={}
  %wrap = u32[4,6] add(%x, %bigb)
  %lt = pred[4,6] compare(%wrap, %bigb), direction=LT
  %f = f32[4,6] convert(%wrap)
  %rows = u32[2,6] gather(%x, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}
  %s = s32[4,6] convert(%wrap)
  %three = u32[] constant(3)
  %threeb = u32[4,6] broadcast(%three), dimensions={}
  %div = u32[4,6] divide(%wrap, %threeb)
  ROOT %out = (u32[4,3], u32[4], u32[6], u32[4,6], pred[4,6], f32[4,6], u32[2,6], s32[4,6], u32[4,6]) tuple(%dot, %sum, %mx, %wrap, %lt, %f, %rows, %s, %div)
}
)";

TEST_F(HostVsEvaluatorTest, WhileLoopWithMixedState) { ExpectSameResults(ParseText(kWhileLoop), 91, InputRanges{0, 100}); }

TEST_F(HostVsEvaluatorTest, RngBitGeneratorPhilox) {
  // States spread over the whole u64 range (the counter's carry included).
  ASSERT_NE(runtime_, nullptr);
  auto module = ParseText(kRng);
  auto exe = runtime_->GetExecutable(module);
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  std::mt19937_64 gen(101);
  for (int round = 0; round < 3; ++round) {
    std::vector<Tensor> args = RandomArguments((*exe)->parameters(), 101 + round, InputRanges{0, 100, true});
    for (int a = 0; a < 2; ++a) {
      for (int64_t k = 0; k < args[a].element_count(); ++k) args[a].data<uint64_t>()[k] = gen();
    }
    if (round == 2) args[1].data<uint64_t>()[1] = ~uint64_t{0} - 1;  // the low counter word overflows
    ExpectSameResults(module, **exe, args);
  }
}

TEST_F(HostVsEvaluatorTest, NeuronGeluAndSoftmax) { ExpectSameResults(ParseText(kNeuronCalls), 111); }

TEST_F(HostVsEvaluatorTest, UnsignedThirtyTwoBitOps) {
  ExpectSameResults(ParseText(kU32), 121, InputRanges{0, 1000});
}

// Batch normalization as torch-xla emits it for layer norm (rank 3, feature
// dimension 1) and on f32/bf16 matrices, forward and backward.
constexpr char kBatchNorm[] = R"(
HloModule batch_norm_mixed

ENTRY %main (x: f32[2,16,8], s: f32[16], o: f32[16], gy: f32[2,16,8], h: bf16[12,4], hs: bf16[4]) -> (f32[2,16,8], f32[16], f32[16], f32[2,16,8], f32[16], f32[16], bf16[12,4], bf16[4], bf16[4], bf16[12,4]) {
  %x = f32[2,16,8] parameter(0)
  %s = f32[16] parameter(1)
  %o = f32[16] parameter(2)
  %gy = f32[2,16,8] parameter(3)
  %h = bf16[12,4] parameter(4)
  %hs = bf16[4] parameter(5)
  %bn = (f32[2,16,8], f32[16], f32[16]) batch-norm-training(%x, %s, %o), epsilon=1e-05, feature_index=1
  %y = f32[2,16,8] get-tuple-element(%bn), index=0
  %mean = f32[16] get-tuple-element(%bn), index=1
  %var = f32[16] get-tuple-element(%bn), index=2
  %g = (f32[2,16,8], f32[16], f32[16]) batch-norm-grad(%x, %s, %mean, %var, %gy), epsilon=1e-05, feature_index=1
  %gx = f32[2,16,8] get-tuple-element(%g), index=0
  %gs = f32[16] get-tuple-element(%g), index=1
  %go = f32[16] get-tuple-element(%g), index=2
  %hb = (bf16[12,4], bf16[4], bf16[4]) batch-norm-training(%h, %hs, %hs), epsilon=0.001, feature_index=1
  %hy = bf16[12,4] get-tuple-element(%hb), index=0
  %hm = bf16[4] get-tuple-element(%hb), index=1
  %hv = bf16[4] get-tuple-element(%hb), index=2
  %hi = bf16[12,4] batch-norm-inference(%h, %hs, %hs, %hm, %hv), epsilon=0.001, feature_index=1
  ROOT %out = (f32[2,16,8], f32[16], f32[16], f32[2,16,8], f32[16], f32[16], bf16[12,4], bf16[4], bf16[4], bf16[12,4]) tuple(%y, %mean, %var, %gx, %gs, %go, %hy, %hm, %hv, %hi)
}
)";

TEST_F(HostVsEvaluatorTest, BatchNorm) { ExpectSameResults(ParseText(kBatchNorm), 131); }

// The corpus of real modules (../shared/corpus) is compared in tests/e2e/corpus_test.cc.

}  // namespace
}  // namespace npc::testing
