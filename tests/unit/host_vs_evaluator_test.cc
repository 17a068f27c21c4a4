// The host backend (runtime/host/, compiled and run through the public
// runtime API) against the plain HLO evaluator (tests/support/hlo_evaluator.h)
// on seeded random inputs: modules built with HloBuilder covering the host
// backend's ops, and, when present, the real modules of ../shared/corpus.
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

// ---- 16-bit floats (the test's own small codecs) ----

double Bf16ToDouble(uint16_t bits) {
  uint32_t b = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

double HalfToDouble(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1F;
  const int fraction = bits & 0x3FF;
  if (exponent == 0x1F) return fraction ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// Bits of `v`, a value exactly representable as a normal f16 (or zero).
uint16_t ExactHalfBits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (v == 0) return sign;
  int e;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const int fraction = static_cast<int>((m * 2 - 1) * 1024);
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | static_cast<uint16_t>(fraction);
}

// ---- random inputs ----

// Integer inputs are drawn from [lo, hi]; floating-point ones from [-2, 2],
// or (0, 2] with positive_floats.
struct InputRanges {
  int64_t lo = -8;
  int64_t hi = 8;
  bool positive_floats = false;
};

int64_t Uniform(std::mt19937& gen, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(gen() % static_cast<uint32_t>(hi - lo + 1));
}

// A tensor of `spec` with seeded values: f32/f64 k/500 for k in [-1000, 1000]
// (so in [-2, 2]); bf16 k/64 for k in [-128, 128] and f16 k/512 for k in
// [-1024, 1024] (exact in those types); k >= 1 with positive_floats; integers
// in [ints.lo, ints.hi]; pred 0/1.
Tensor RandomTensor(const TensorSpec& spec, std::mt19937& gen, InputRanges ints) {
  Tensor t = ZeroTensor(spec.type, spec.dims);
  // k in [-limit, limit], or [1, limit].
  auto k = [&](int64_t limit) {
    return static_cast<double>(Uniform(gen, ints.positive_floats ? 1 : -limit, limit));
  };
  const int64_t n = t.element_count();
  for (int64_t i = 0; i < n; ++i) {
    switch (spec.type) {
      case xla::F32: t.data<float>()[i] = static_cast<float>(k(1000)) / 500.0f; break;
      case xla::F64: t.data<double>()[i] = k(1000) / 500.0; break;
      case xla::BF16: {
        const float f = static_cast<float>(k(128)) / 64.0f;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        t.data<uint16_t>()[i] = static_cast<uint16_t>(bits >> 16);
        break;
      }
      case xla::F16: t.data<uint16_t>()[i] = ExactHalfBits(k(1024) / 512.0); break;
      case xla::PRED: t.data<uint8_t>()[i] = gen() & 1; break;
      case xla::S8:
        t.data<int8_t>()[i] = static_cast<int8_t>(Uniform(gen, ints.lo, ints.hi));
        break;
      case xla::S16:
        t.data<int16_t>()[i] = static_cast<int16_t>(Uniform(gen, ints.lo, ints.hi));
        break;
      case xla::S32:
        t.data<int32_t>()[i] = static_cast<int32_t>(Uniform(gen, ints.lo, ints.hi));
        break;
      case xla::S64: t.data<int64_t>()[i] = Uniform(gen, ints.lo, ints.hi); break;
      case xla::U8:
        t.data<uint8_t>()[i] =
            static_cast<uint8_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      case xla::U16:
        t.data<uint16_t>()[i] =
            static_cast<uint16_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      case xla::U32:
        t.data<uint32_t>()[i] =
            static_cast<uint32_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      case xla::U64:
        t.data<uint64_t>()[i] =
            static_cast<uint64_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      default: break;  // other types stay zero
    }
  }
  return t;
}

std::vector<Tensor> RandomArguments(const std::vector<TensorSpec>& specs, uint32_t seed,
                                    InputRanges ints = {}) {
  std::mt19937 gen(seed);
  std::vector<Tensor> args;
  for (const auto& spec : specs) args.push_back(RandomTensor(spec, gen, ints));
  return args;
}

// ---- comparison ----

bool IsFloatType(xla::PrimitiveType t) {
  return t == xla::F32 || t == xla::F64 || t == xla::BF16 || t == xla::F16;
}

// Element i of a floating-point tensor as a double.
double FloatAt(const Tensor& t, int64_t i) {
  switch (t.type) {
    case xla::F32: return t.data<float>()[i];
    case xla::F64: return t.data<double>()[i];
    case xla::BF16: return Bf16ToDouble(t.data<uint16_t>()[i]);
    default: return HalfToDouble(t.data<uint16_t>()[i]);  // F16
  }
}

// Element i of an integer or pred tensor as an int64 (u64 as its bits).
int64_t IntAt(const Tensor& t, int64_t i) {
  switch (t.type) {
    case xla::PRED: return t.data<uint8_t>()[i];
    case xla::S8: return t.data<int8_t>()[i];
    case xla::S16: return t.data<int16_t>()[i];
    case xla::S32: return t.data<int32_t>()[i];
    case xla::S64: return t.data<int64_t>()[i];
    case xla::U8: return t.data<uint8_t>()[i];
    case xla::U16: return t.data<uint16_t>()[i];
    case xla::U32: return t.data<uint32_t>()[i];
    default: return static_cast<int64_t>(t.data<uint64_t>()[i]);
  }
}

struct Tolerance {
  double rel;
  double abs;
};

Tolerance ToleranceFor(xla::PrimitiveType t) {
  switch (t) {
    case xla::BF16: return {std::ldexp(1.0, -7), std::ldexp(1.0, -7) * 0.1};
    case xla::F16: return {std::ldexp(1.0, -10), std::ldexp(1.0, -10) * 0.1};
    default: return {1e-5, 1e-6};  // F32, F64
  }
}

struct Comparison {
  bool matched = true;
  std::string first_mismatches;  // up to a few, readable
  int64_t float_values = 0;
  int64_t identical = 0;   // float values equal (or both NaN)
  int64_t nan_values = 0;  // of those, NaN on both sides
  double max_relative_error = 0;
};

// Compares the outputs of the host backend with the evaluator's.
Comparison CompareOutputs(const std::vector<Tensor>& host, const std::vector<Tensor>& ref) {
  Comparison c;
  std::ostringstream why;
  int reported = 0;
  auto mismatch = [&](const std::string& text) {
    c.matched = false;
    if (reported++ < 5) why << "  " << text << "\n";
  };
  if (host.size() != ref.size()) {
    mismatch("host gave " + std::to_string(host.size()) + " outputs, the evaluator " +
             std::to_string(ref.size()));
  }
  for (size_t o = 0; o < std::min(host.size(), ref.size()); ++o) {
    const Tensor& h = host[o];
    const Tensor& r = ref[o];
    if (h.type != r.type || h.dims != r.dims || h.bytes.size() != r.bytes.size()) {
      mismatch("output " + std::to_string(o) + ": host " + PrimitiveTypeName(h.type) + " with " +
               std::to_string(h.element_count()) + " elements, evaluator " +
               PrimitiveTypeName(r.type) + " with " + std::to_string(r.element_count()));
      continue;
    }
    const Tolerance tol = ToleranceFor(r.type);
    for (int64_t i = 0; i < r.element_count(); ++i) {
      if (IsFloatType(r.type)) {
        const double hv = FloatAt(h, i);
        const double rv = FloatAt(r, i);
        ++c.float_values;
        if ((std::isnan(hv) && std::isnan(rv)) || hv == rv) {
          ++c.identical;
          if (std::isnan(rv)) ++c.nan_values;
          continue;
        }
        const double err = std::fabs(hv - rv);
        if (std::isfinite(rv) && std::fabs(rv) > 0) {
          c.max_relative_error = std::max(c.max_relative_error, err / std::fabs(rv));
        }
        if (!(err <= tol.rel * std::fabs(rv) + tol.abs)) {  // NaN/inf mismatches land here too
          std::ostringstream m;
          m.precision(9);
          m << "output " << o << " element " << i << ": host " << hv << ", evaluator " << rv;
          mismatch(m.str());
        }
      } else if (IntAt(h, i) != IntAt(r, i)) {
        mismatch("output " + std::to_string(o) + " element " + std::to_string(i) + ": host " +
                 std::to_string(IntAt(h, i)) + ", evaluator " + std::to_string(IntAt(r, i)));
      }
    }
  }
  c.first_mismatches = why.str();
  return c;
}

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

// ---- the corpus of real modules (../shared/corpus) ----

// The evaluator holds every element in 8 bytes (freeing values after their
// last use); modules whose instructions produce more elements than this in
// total are compiled but not run (llama__tp_1 has ~685M).
constexpr int64_t kMaxCorpusElements = 50'000'000;

int64_t ArrayElements(const xla::ShapeProto& shape) {
  if (shape.element_type() == xla::TUPLE) {
    int64_t n = 0;
    for (const auto& e : shape.tuple_shapes()) n += ArrayElements(e);
    return n;
  }
  return hlo::ElementCount(shape);
}

// Elements produced by all instructions of all computations.
int64_t TotalElements(const xla::HloModuleProto& m) {
  int64_t n = 0;
  for (const auto& c : m.computations()) {
    for (const auto& i : c.instructions()) n += ArrayElements(i.shape());
  }
  return n;
}

// The line of an error message that says why, shortened: the host backend's
// own message when the runtime wraps it (with the compile command and log
// path), else the first line naming something unsupported, else the first.
std::string Reason(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  for (std::string line; std::getline(in, line);) {
    const size_t start = line.find_first_not_of(" \t");
    lines.push_back(start == std::string::npos ? "" : line.substr(start));
  }
  std::string why = lines.empty() ? "" : lines[0];
  auto pick = [&](const std::function<bool(const std::string&)>& wanted) {
    for (const auto& line : lines) {
      if (wanted(line)) {
        why = line;
        return true;
      }
    }
    return false;
  };
  pick([](const std::string& l) { return l.rfind("host backend:", 0) == 0; }) ||
      pick([](const std::string& l) { return l.find("unsupported") != std::string::npos; });
  if (why.size() > 240) why = why.substr(0, 240) + "...";
  return why;
}

TEST_F(HostVsEvaluatorTest, CorpusModules) {
  namespace fs = std::filesystem;
  const fs::path corpus = NPC_CORPUS_DIR;
  if (!fs::is_directory(corpus)) {
    GTEST_SKIP() << "corpus " << corpus.string() << " is absent; nothing to compare";
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(corpus)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() &&
        (ext == ".hlo" || ext == ".txt" || ext == ".pb" || ext == ".binpb")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_NE(runtime_, nullptr);

  bool text_unsupported = false;
  int compared = 0, matched = 0;
  for (const fs::path& path : files) {
    const std::string name = fs::relative(path, corpus).string();
    std::string line = "corpus " + name + ": ";
    auto report = [&]() { std::cout << line << std::endl; };
    // Seconds since the last call (the first: since the start of this module).
    auto last = std::chrono::steady_clock::now();
    auto lap = [&]() {
      const auto now = std::chrono::steady_clock::now();
      const double s = std::chrono::duration<double>(now - last).count();
      last = now;
      std::ostringstream out;
      out.precision(2);
      out << std::fixed << s;
      return out.str();
    };
    std::string timing;

    auto module = hlo::ReadHloModuleFile(path.string());
    if (!module.ok()) {
      if (module.error().message.find("HLO text is not supported") != std::string::npos) {
        text_unsupported = true;
        line += "not parsed (this build reads no HLO text)";
      } else {
        line += "not parsed: " + Reason(module.error().message);
      }
      report();
      continue;
    }
    line += "parsed";
    auto exe = runtime_->GetExecutable(*module);
    if (!exe.ok()) {
      line += ", not compiled: " + Reason(exe.error().message);
      report();
      continue;
    }
    line += " | compiled";
    timing += "compile " + lap() + " s";
    const int64_t elements = TotalElements(*module);
    if (elements > kMaxCorpusElements) {
      line += ", not run: its instructions hold " + std::to_string(elements) +
              " elements, over the evaluator's cap of " + std::to_string(kMaxCorpusElements);
      report();
      continue;
    }
    // Integer inputs (labels, indices) in [0, 7]; floats positive, as the
    // optimizer states, variances and learning rates these graphs take are
    // (negative ones make NaNs that compare equal but test little).
    std::vector<Tensor> args = RandomArguments((*exe)->parameters(), 2024, InputRanges{0, 7, true});
    auto host = (*exe)->Run(args);
    if (!host.ok()) {
      line += ", run failed: " + Reason(host.error().message);
      report();
      ADD_FAILURE() << line;
      continue;
    }
    line += " | ran";
    timing += ", run " + lap() + " s";
    auto ref = EvaluateHlo(*module, args);
    timing += ", evaluate " + lap() + " s";
    if (!ref.ok()) {
      line += ", not evaluated: " + Reason(ref.error().message);
      report();
      continue;
    }
    ++compared;
    Comparison c = CompareOutputs(*host, *ref);
    if (c.matched) {
      ++matched;
      std::ostringstream s;
      s << " | matched (" << c.identical << " of " << c.float_values << " float values identical, "
        << c.nan_values << " of them NaN; max relative error " << c.max_relative_error << "; "
        << timing << ")";
      line += s.str();
    } else {
      line += " | DIFFERS:\n" + c.first_mismatches;
    }
    report();
    EXPECT_TRUE(c.matched) << line;
  }
  std::cout << "corpus: " << files.size() << " files, " << compared << " compared, " << matched
            << " matched" << std::endl;
  if (text_unsupported) {
    GTEST_SKIP()
        << "this build has no HLO text reader: the corpus's text modules were not compared";
  }
}

}  // namespace
}  // namespace npc::testing
