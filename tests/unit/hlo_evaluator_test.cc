// Tests of the plain HLO evaluator (tests/support/hlo_evaluator.h): each op on
// tiny inputs against values worked out by hand, written in the test.
#include "support/batch_norm_case.h"
#include "support/hlo_evaluator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "npc/hlo.h"
#include "npc/hlo_builder.h"

namespace npc::testing {
namespace {

using hlo::HloBuilder;
using hlo::Op;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();

// ---- tensors ----

template <class T>
Tensor Make(xla::PrimitiveType type, std::vector<int64_t> dims, const std::vector<T>& values) {
  Tensor t = ZeroTensor(type, std::move(dims));
  EXPECT_EQ(static_cast<int64_t>(values.size() * sizeof(T)), static_cast<int64_t>(t.bytes.size()));
  std::memcpy(t.bytes.data(), values.data(), std::min(values.size() * sizeof(T), t.bytes.size()));
  return t;
}
Tensor F32(std::vector<int64_t> dims, const std::vector<float>& v) {
  return Make(xla::F32, dims, v);
}
Tensor F64(std::vector<int64_t> dims, const std::vector<double>& v) {
  return Make(xla::F64, dims, v);
}
Tensor S32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  return Make(xla::S32, dims, v);
}
Tensor S64(std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  return Make(xla::S64, dims, v);
}
Tensor U32(std::vector<int64_t> dims, const std::vector<uint32_t>& v) {
  return Make(xla::U32, dims, v);
}
Tensor Pred(std::vector<int64_t> dims, const std::vector<uint8_t>& v) {
  return Make(xla::PRED, dims, v);
}

template <class T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

// bf16 bits -> float, float -> bf16 bits (truncating; used for exact values).
float FromBf16(uint16_t bits) {
  uint32_t b = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t Bf16Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

// ---- evaluation ----

std::vector<Tensor> Eval(const xla::HloModuleProto& m, const std::vector<Tensor>& args) {
  auto r = EvaluateHlo(m, args);
  if (!r.ok()) {
    ADD_FAILURE() << r.error().message;
    return {};
  }
  return *r;
}

// The single output's values.
template <class T>
std::vector<T> Eval1(const xla::HloModuleProto& m, const std::vector<Tensor>& args) {
  auto outs = Eval(m, args);
  if (outs.size() != 1) {
    ADD_FAILURE() << "expected one output, got " << outs.size();
    return {};
  }
  return Values<T>(outs[0]);
}

std::string EvalError(const xla::HloModuleProto& m, const std::vector<Tensor>& args) {
  auto r = EvaluateHlo(m, args);
  if (r.ok()) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return r.error().message;
}

xla::ShapeProto Shape(xla::PrimitiveType t, const std::vector<int64_t>& dims) {
  return HloBuilder::ArrayShape(t, dims);
}

// An instruction the builder has no helper for.
Op Instr(HloBuilder& b, const std::string& opcode, const std::vector<Op>& operands,
         const xla::ShapeProto& shape,
         const std::function<void(xla::HloInstructionProto&)>& set = nullptr) {
  xla::HloInstructionProto inst;
  inst.set_opcode(opcode);
  if (set) set(inst);
  return b.AddInstruction(std::move(inst), operands, shape);
}

// op(x) over a rank-1 parameter of `type`.
template <class T>
std::vector<T> Unary(const std::string& op, xla::PrimitiveType type, const std::vector<T>& x) {
  HloBuilder b("unary");
  Op p = b.Parameter(0, type, {static_cast<int64_t>(x.size())});
  auto m = b.Build(Instr(b, op, {p}, p.shape));
  return Eval1<T>(m, {Make(type, {static_cast<int64_t>(x.size())}, x)});
}

// op(x, y) over rank-1 parameters of `type`.
template <class T>
std::vector<T> Binary(const std::string& op, xla::PrimitiveType type, const std::vector<T>& x,
                      const std::vector<T>& y) {
  HloBuilder b("binary");
  const int64_t n = static_cast<int64_t>(x.size());
  Op p = b.Parameter(0, type, {n});
  Op q = b.Parameter(1, type, {n});
  auto m = b.Build(b.Binary(op, p, q));
  return Eval1<T>(m, {Make(type, {n}, x), Make(type, {n}, y)});
}

// ---------------------------------------------------------------------------

TEST(HloEvaluatorTest, ParameterConstantAdd) {
  HloBuilder b("affine");
  Op x = b.Parameter(0, xla::F32, {3}, "x");
  Op c = b.ConstantF32Array({3}, {10, 20, 30});
  auto m = b.Build(b.Add(x, c));
  EXPECT_EQ(Eval1<float>(m, {F32({3}, {1, 2, 3})}), (std::vector<float>{11, 22, 33}));
}

TEST(HloEvaluatorTest, FloatBinaryOps) {
  const std::vector<float> x = {1.5f, -2, 0, 7};
  const std::vector<float> y = {0.5f, 4, -3, -2};
  EXPECT_EQ(Binary<float>("add", xla::F32, x, y), (std::vector<float>{2, 2, -3, 5}));
  EXPECT_EQ(Binary<float>("subtract", xla::F32, x, y), (std::vector<float>{1, -6, 3, 9}));
  EXPECT_EQ(Binary<float>("multiply", xla::F32, x, y), (std::vector<float>{0.75f, -8, 0, -14}));
  EXPECT_EQ(Binary<float>("divide", xla::F32, x, y), (std::vector<float>{3, -0.5f, 0, -3.5f}));
  EXPECT_EQ(Binary<float>("maximum", xla::F32, x, y), (std::vector<float>{1.5f, 4, 0, 7}));
  EXPECT_EQ(Binary<float>("minimum", xla::F32, x, y), (std::vector<float>{0.5f, -2, -3, -2}));
  EXPECT_EQ(Binary<float>("remainder", xla::F32, {5.5f, -5.5f, 7, 1}, {2, 2, -3, 0.25f}),
            (std::vector<float>{1.5f, -1.5f, 1, 0}));
  EXPECT_EQ(Binary<float>("power", xla::F32, {2, 9, 4, 5}, {10, 0.5f, -1, 0}),
            (std::vector<float>{1024, 3, 0.25f, 1}));
  // maximum/minimum propagate NaN.
  auto mx = Binary<float>("maximum", xla::F32, {kNaN, 1}, {1, kNaN});
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  auto mn = Binary<float>("minimum", xla::F32, {kNaN, 1}, {1, kNaN});
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
}

TEST(HloEvaluatorTest, FloatUnaryOps) {
  EXPECT_EQ(Unary<float>("negate", xla::F32, {1.5f, -2, 0}), (std::vector<float>{-1.5f, 2, -0.0f}));
  EXPECT_EQ(Unary<float>("abs", xla::F32, {1.5f, -2, -0.0f}), (std::vector<float>{1.5f, 2, 0}));
  EXPECT_EQ(Unary<float>("sign", xla::F32, {3, -0.5f, 0}), (std::vector<float>{1, -1, 0}));
  EXPECT_EQ(Unary<float>("floor", xla::F32, {1.5f, -1.5f, 2}), (std::vector<float>{1, -2, 2}));
  EXPECT_EQ(Unary<float>("ceil", xla::F32, {1.5f, -1.5f, 2}), (std::vector<float>{2, -1, 2}));
  EXPECT_EQ(Unary<float>("exponential", xla::F32, {0, -kInf}), (std::vector<float>{1, 0}));
  EXPECT_EQ(Unary<float>("log", xla::F32, {1, 0}), (std::vector<float>{0, -kInf}));
  EXPECT_EQ(Unary<float>("sqrt", xla::F32, {4, 2.25f, 0}), (std::vector<float>{2, 1.5f, 0}));
  EXPECT_EQ(Unary<float>("rsqrt", xla::F32, {4, 0.25f}), (std::vector<float>{0.5f, 2}));
  EXPECT_EQ(Unary<float>("tanh", xla::F32, {0, kInf, -kInf}), (std::vector<float>{0, 1, -1}));
  EXPECT_EQ(Unary<float>("logistic", xla::F32, {0, kInf, -kInf}), (std::vector<float>{0.5f, 1, 0}));
  EXPECT_EQ(Unary<float>("round-nearest-afz", xla::F32, {0.5f, 1.5f, 2.5f, -2.5f}),
            (std::vector<float>{1, 2, 3, -3}));
  EXPECT_EQ(Unary<float>("round-nearest-even", xla::F32, {0.5f, 1.5f, 2.5f, -2.5f}),
            (std::vector<float>{0, 2, 2, -2}));
  // Transcendentals give the C library's float results: e^1 and log(2) as floats.
  EXPECT_EQ(Unary<float>("exponential", xla::F32, {1})[0], std::exp(1.0f));
  EXPECT_FLOAT_EQ(Unary<float>("exponential", xla::F32, {1})[0], 2.7182817f);
  EXPECT_FLOAT_EQ(Unary<float>("log", xla::F32, {2})[0], 0.6931472f);
  auto s = Unary<float>("sqrt", xla::F32, {-1});
  EXPECT_TRUE(std::isnan(s[0]));
}

TEST(HloEvaluatorTest, F32ResultsAreFloats) {
  // 2^24 + 1 is not a float: every f32 result is a float, so
  // (16777216 + 1) - 16777216 is 0; in f64 it is 1. (Dot and reduce below
  // show that accumulations are in float too.)
  HloBuilder b("float_math");
  Op x = b.Parameter(0, xla::F32, {1});
  Op y = b.Parameter(1, xla::F32, {1});
  auto m = b.Build(b.Sub(b.Add(x, y), x));
  EXPECT_EQ(Eval1<float>(m, {F32({1}, {16777216.0f}), F32({1}, {1.0f})}),
            (std::vector<float>{0.0f}));
  // f64 keeps it.
  HloBuilder d("double_math");
  Op dx = d.Parameter(0, xla::F64, {1});
  Op dy = d.Parameter(1, xla::F64, {1});
  auto dm = d.Build(d.Sub(d.Add(dx, dy), dx));
  EXPECT_EQ(Eval1<double>(dm, {F64({1}, {16777216.0}), F64({1}, {1.0})}),
            (std::vector<double>{1.0}));
  EXPECT_EQ(Binary<double>("add", xla::F64, {0.1}, {0.2}), (std::vector<double>{0.1 + 0.2}));
}

TEST(HloEvaluatorTest, IntegerArithmeticWrapsAndFollowsXla) {
  EXPECT_EQ(Binary<int32_t>("add", xla::S32, {kMax32, 5}, {1, -7}),
            (std::vector<int32_t>{kMin32, -2}));
  EXPECT_EQ(Binary<int32_t>("multiply", xla::S32, {65536, -3}, {65536, 4}),
            (std::vector<int32_t>{0, -12}));
  // Division truncates toward zero; x / 0 = -1; INT_MIN / -1 = INT_MIN.
  EXPECT_EQ(Binary<int32_t>("divide", xla::S32, {7, -7, 7, 5, kMin32}, {2, 2, -2, 0, -1}),
            (std::vector<int32_t>{3, -3, -3, -1, kMin32}));
  // Remainder has the dividend's sign; x % 0 = x; INT_MIN % -1 = 0.
  EXPECT_EQ(Binary<int32_t>("remainder", xla::S32, {7, -7, 7, 5, kMin32}, {3, 3, -3, 0, -1}),
            (std::vector<int32_t>{1, -1, 1, 5, 0}));
  EXPECT_EQ(Binary<int32_t>("maximum", xla::S32, {3, -3}, {-4, 4}), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(Binary<int32_t>("minimum", xla::S32, {3, -3}, {-4, 4}), (std::vector<int32_t>{-4, -3}));
  // Integer power: XLA gives 1 for base 1 or exponent 0, 0 for other negative exponents.
  EXPECT_EQ(
      Binary<int32_t>("power", xla::S32, {3, 2, 1, -1, -1, -2, 0, 2}, {4, -1, -5, -1, 3, 3, 0, 31}),
      (std::vector<int32_t>{81, 0, 1, 0, -1, -8, 1, kMin32}));
  EXPECT_EQ(Unary<int32_t>("negate", xla::S32, {5, kMin32}), (std::vector<int32_t>{-5, kMin32}));
  EXPECT_EQ(Unary<int32_t>("abs", xla::S32, {-5, kMin32}), (std::vector<int32_t>{5, kMin32}));
  EXPECT_EQ(Unary<int32_t>("sign", xla::S32, {-5, 0, 9}), (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(Unary<int32_t>("popcnt", xla::S32, {7, -1}), (std::vector<int32_t>{3, 32}));
  EXPECT_EQ(Unary<int32_t>("count-leading-zeros", xla::S32, {1, 0, -1}),
            (std::vector<int32_t>{31, 32, 0}));
  // Unsigned: wraps modulo 2^32; x / 0 is the maximum.
  EXPECT_EQ(Binary<uint32_t>("subtract", xla::U32, {0, 10}, {1, 3}),
            (std::vector<uint32_t>{4294967295u, 7}));
  EXPECT_EQ(Binary<uint32_t>("divide", xla::U32, {4294967295u, 9}, {2, 0}),
            (std::vector<uint32_t>{2147483647u, 4294967295u}));
  EXPECT_EQ(Binary<int64_t>("multiply", xla::S64, {int64_t{1} << 40, -3}, {1 << 20, 5}),
            (std::vector<int64_t>{int64_t{1} << 60, -15}));
}

TEST(HloEvaluatorTest, BitwiseAndShiftOps) {
  EXPECT_EQ(Binary<int32_t>("and", xla::S32, {12, -1}, {10, 5}), (std::vector<int32_t>{8, 5}));
  EXPECT_EQ(Binary<int32_t>("or", xla::S32, {12, 0}, {10, 0}), (std::vector<int32_t>{14, 0}));
  EXPECT_EQ(Binary<int32_t>("xor", xla::S32, {12, -1}, {10, 0}), (std::vector<int32_t>{6, -1}));
  EXPECT_EQ(Unary<int32_t>("not", xla::S32, {0, 5}), (std::vector<int32_t>{-1, -6}));
  EXPECT_EQ(Binary<int32_t>("shift-left", xla::S32, {1, 3, 1, 1}, {4, 30, 32, -1}),
            (std::vector<int32_t>{16, -1073741824, 0, 0}));
  EXPECT_EQ(Binary<int32_t>("shift-right-logical", xla::S32, {-8, 64, -8}, {1, 3, 32}),
            (std::vector<int32_t>{2147483644, 8, 0}));
  EXPECT_EQ(Binary<int32_t>("shift-right-arithmetic", xla::S32, {-8, 64, -8, 8}, {1, 3, 40, 40}),
            (std::vector<int32_t>{-4, 8, -1, 0}));
  EXPECT_EQ(Binary<uint32_t>("shift-right-logical", xla::U32, {0x80000000u}, {31}),
            (std::vector<uint32_t>{1}));
  // pred: logical.
  EXPECT_EQ(Binary<uint8_t>("and", xla::PRED, {0, 0, 1, 1}, {0, 1, 0, 1}),
            (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Binary<uint8_t>("or", xla::PRED, {0, 0, 1, 1}, {0, 1, 0, 1}),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Binary<uint8_t>("xor", xla::PRED, {0, 0, 1, 1}, {0, 1, 0, 1}),
            (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Unary<uint8_t>("not", xla::PRED, {0, 1}), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Binary<uint8_t>("add", xla::PRED, {0, 0, 1, 1}, {0, 1, 0, 1}),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Binary<uint8_t>("multiply", xla::PRED, {0, 0, 1, 1}, {0, 1, 0, 1}),
            (std::vector<uint8_t>{0, 0, 0, 1}));
  // Arithmetic shift of an unsigned type: the bits shifted as signed.
  EXPECT_EQ(Binary<uint32_t>("shift-right-arithmetic", xla::U32, {0xFFFFFFF8u, 8, 0x80000000u},
                             {1, 1, 40}),
            (std::vector<uint32_t>{0xFFFFFFFCu, 4, 0xFFFFFFFFu}));
}

TEST(HloEvaluatorTest, CompareSelectClamp) {
  auto compare = [](const std::string& dir, const std::vector<float>& x,
                    const std::vector<float>& y, const std::string& type = "") {
    HloBuilder b("compare");
    const int64_t n = static_cast<int64_t>(x.size());
    Op p = b.Parameter(0, xla::F32, {n});
    Op q = b.Parameter(1, xla::F32, {n});
    Op c = b.Compare(p, q, dir);
    if (!type.empty()) {
      c = Instr(b, "compare", {p, q}, Shape(xla::PRED, {n}), [&](xla::HloInstructionProto& i) {
        i.set_comparison_direction(dir);
        i.set_comparison_type(type);
      });
    }
    return Eval1<uint8_t>(b.Build(c), {F32({n}, x), F32({n}, y)});
  };
  const std::vector<float> x = {1, 2, 3, kNaN};
  const std::vector<float> y = {2, 2, 2, kNaN};
  EXPECT_EQ(compare("EQ", x, y), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(compare("NE", x, y), (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(compare("LT", x, y), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(compare("LE", x, y), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(compare("GT", x, y), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(compare("GE", x, y), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(compare("EQ", {0.0f}, {-0.0f}), (std::vector<uint8_t>{1}));
  // Total order: -0 < +0, NaN equals itself and is above +inf.
  EXPECT_EQ(compare("LT", {-0.0f, kInf, kNaN}, {0.0f, kNaN, kNaN}, "TOTALORDER"),
            (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(compare("EQ", {-0.0f, kNaN}, {0.0f, kNaN}, "TOTALORDER"), (std::vector<uint8_t>{0, 1}));

  // Signed vs unsigned comparison of the same bits.
  {
    HloBuilder b("compare_ints");
    Op p = b.Parameter(0, xla::S32, {1});
    Op q = b.Parameter(1, xla::U32, {1});
    Op zs = b.ConstantS32Array({1}, {0});
    Op zu = b.Convert(zs, xla::U32);
    auto m = b.Build(b.Tuple({b.Compare(p, zs, "LT"), b.Compare(q, zu, "LT")}));
    auto outs = Eval(m, {S32({1}, {-1}), U32({1}, {0xFFFFFFFFu})});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(Values<uint8_t>(outs[0]), (std::vector<uint8_t>{1}));
    EXPECT_EQ(Values<uint8_t>(outs[1]), (std::vector<uint8_t>{0}));
  }

  {
    HloBuilder b("select");
    Op p = b.Parameter(0, xla::PRED, {3});
    Op t = b.Parameter(1, xla::S32, {3});
    Op f = b.Parameter(2, xla::S32, {3});
    auto m = b.Build(b.Select(p, t, f));
    EXPECT_EQ(
        Eval1<int32_t>(m, {Pred({3}, {1, 0, 1}), S32({3}, {1, 2, 3}), S32({3}, {-1, -2, -3})}),
        (std::vector<int32_t>{1, -2, 3}));
  }
  {
    // clamp(min, x, max) with scalar bounds and with array bounds.
    HloBuilder b("clamp");
    Op x = b.Parameter(0, xla::F32, {4});
    Op lo = b.ConstantF32(-1);
    Op hi = b.ConstantF32(2);
    Op scalar_bounds = Instr(b, "clamp", {lo, x, hi}, Shape(xla::F32, {4}));
    Op lo_arr = b.ConstantF32Array({4}, {0, 0, 0, 0});
    Op hi_arr = b.ConstantF32Array({4}, {1, 1, 1, 10});
    Op array_bounds = Instr(b, "clamp", {lo_arr, x, hi_arr}, Shape(xla::F32, {4}));
    auto outs =
        Eval(b.Build(b.Tuple({scalar_bounds, array_bounds})), {F32({4}, {-5, 0.5f, 3, kNaN})});
    ASSERT_EQ(outs.size(), 2u);
    auto a = Values<float>(outs[0]);
    EXPECT_EQ(a[0], -1);
    EXPECT_EQ(a[1], 0.5f);
    EXPECT_EQ(a[2], 2);
    EXPECT_TRUE(std::isnan(a[3]));
    auto c = Values<float>(outs[1]);
    EXPECT_EQ(c[0], 0);
    EXPECT_EQ(c[1], 0.5f);
    EXPECT_EQ(c[2], 1);
    EXPECT_TRUE(std::isnan(c[3]));
  }
}

TEST(HloEvaluatorTest, Convert) {
  {
    // f32 -> s32 truncates toward zero, saturates, NaN -> 0.
    HloBuilder b("f32_to_s32");
    Op x = b.Parameter(0, xla::F32, {6});
    auto m = b.Build(b.Convert(x, xla::S32));
    EXPECT_EQ(Eval1<int32_t>(m, {F32({6}, {2.7f, -2.7f, 1e10f, -1e10f, kNaN, -0.5f})}),
              (std::vector<int32_t>{2, -2, kMax32, kMin32, 0, 0}));
  }
  {
    // s32 -> f32 rounds to nearest even: 2^24 + 1 -> 2^24, 2^24 + 3 -> 2^24 + 4.
    HloBuilder b("s32_to_f32");
    Op x = b.Parameter(0, xla::S32, {3});
    auto m = b.Build(b.Convert(x, xla::F32));
    EXPECT_EQ(Eval1<float>(m, {S32({3}, {16777217, 16777219, -3})}),
              (std::vector<float>{16777216.0f, 16777220.0f, -3.0f}));
  }
  {
    HloBuilder b("to_pred_and_back");
    Op x = b.Parameter(0, xla::F32, {4});
    Op p = b.Convert(x, xla::PRED);
    auto m = b.Build(b.Tuple({p, b.Convert(p, xla::F32), b.Convert(p, xla::S32)}));
    auto outs = Eval(m, {F32({4}, {0, -0.0f, 0.25f, -3})});
    ASSERT_EQ(outs.size(), 3u);
    EXPECT_EQ(Values<uint8_t>(outs[0]), (std::vector<uint8_t>{0, 0, 1, 1}));
    EXPECT_EQ(Values<float>(outs[1]), (std::vector<float>{0, 0, 1, 1}));
    EXPECT_EQ(Values<int32_t>(outs[2]), (std::vector<int32_t>{0, 0, 1, 1}));
  }
  {
    // Integer conversions wrap; widening sign-extends (signed) or zero-extends (unsigned).
    HloBuilder b("ints");
    Op x = b.Parameter(0, xla::S64, {2});
    Op y = b.Parameter(1, xla::U32, {1});
    Op z = b.Parameter(2, xla::S32, {1});
    auto m =
        b.Build(b.Tuple({b.Convert(x, xla::S32), b.Convert(y, xla::S32), b.Convert(y, xla::S64),
                         b.Convert(z, xla::S64), b.Convert(z, xla::U32)}));
    auto outs =
        Eval(m, {S64({2}, {(int64_t{1} << 32) + 5, -1}), U32({1}, {0xFFFFFFFEu}), S32({1}, {-2})});
    ASSERT_EQ(outs.size(), 5u);
    EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{5, -1}));
    EXPECT_EQ(Values<int32_t>(outs[1]), (std::vector<int32_t>{-2}));
    EXPECT_EQ(Values<int64_t>(outs[2]), (std::vector<int64_t>{4294967294}));
    EXPECT_EQ(Values<int64_t>(outs[3]), (std::vector<int64_t>{-2}));
    EXPECT_EQ(Values<uint32_t>(outs[4]), (std::vector<uint32_t>{0xFFFFFFFEu}));
  }
  {
    // f32 -> bf16 rounds to nearest, ties to even; bf16 -> f32 is exact.
    // bf16 has 8 significant bits: next to 1.0 are 1.0078125 and 1.015625.
    HloBuilder b("bf16");
    Op x = b.Parameter(0, xla::F32, {5});
    Op h = b.Convert(x, xla::BF16);
    auto m = b.Build(b.Tuple({h, b.Convert(h, xla::F32)}));
    auto outs = Eval(m, {F32({5}, {1.00390625f, 1.01171875f, 1.005f, -3.0f, 65536.5f})});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(outs[0].type, xla::BF16);
    EXPECT_EQ(Values<uint16_t>(outs[0]),
              (std::vector<uint16_t>{Bf16Bits(1.0f), Bf16Bits(1.015625f), Bf16Bits(1.0078125f),
                                     Bf16Bits(-3.0f), Bf16Bits(65536.0f)}));
    EXPECT_EQ(Values<float>(outs[1]),
              (std::vector<float>{1.0f, 1.015625f, 1.0078125f, -3.0f, 65536.0f}));
  }
  {
    // f64 -> f32 rounds; f32 -> f64 is exact.
    HloBuilder b("f64");
    Op x = b.Parameter(0, xla::F64, {1});
    Op f = b.Convert(x, xla::F32);
    auto m = b.Build(b.Tuple({f, b.Convert(f, xla::F64)}));
    auto outs = Eval(m, {F64({1}, {0.1})});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(Values<float>(outs[0]), (std::vector<float>{0.1f}));
    EXPECT_EQ(Values<double>(outs[1]), (std::vector<double>{static_cast<double>(0.1f)}));
  }
}

TEST(HloEvaluatorTest, F16ConvertAndArithmetic) {
  // f16 has 11 significant bits; 65504 is the largest value; 2^-24 the smallest subnormal.
  HloBuilder b("f16");
  Op x = b.Parameter(0, xla::F32, {7});
  Op h = b.Convert(x, xla::F16);
  auto m = b.Build(b.Tuple({h, b.Convert(b.Add(h, h), xla::F32)}));
  const float tiny = std::ldexp(1.0f, -25);
  auto outs = Eval(
      m,
      {F32({7}, {1.0f + std::ldexp(1.0f, -11), 65519.0f, 65520.0f, tiny, 3 * tiny, -2.0f, 0.1f})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].type, xla::F16);
  // 1 + 2^-11: tie -> 1.0 (0x3C00); 65519 -> 65504 (0x7BFF); 65520 -> inf;
  // 2^-25: tie -> 0; 3 * 2^-25: tie -> 2^-23 (0x0002); -2 (0xC000); 0.1 -> 0x2E66.
  EXPECT_EQ(Values<uint16_t>(outs[0]),
            (std::vector<uint16_t>{0x3C00, 0x7BFF, 0x7C00, 0x0000, 0x0002, 0xC000, 0x2E66}));
  // h + h in f16: 65504 + 65504 overflows to inf; 0.1 -> 0.199951171875.
  auto doubled = Values<float>(outs[1]);
  ASSERT_EQ(doubled.size(), 7u);
  EXPECT_EQ(doubled[0], 2.0f);
  EXPECT_EQ(doubled[1], kInf);
  EXPECT_EQ(doubled[4], std::ldexp(1.0f, -22));
  EXPECT_EQ(doubled[6], 0.199951171875f);
}

TEST(HloEvaluatorTest, NeuronTransferCustomCallIsTheIdentity) {
  HloBuilder b("transfer");
  Op x = b.Parameter(0, xla::F32, {2});
  Op c = Instr(b, "custom-call", {x}, Shape(xla::F32, {2}), [](xla::HloInstructionProto& i) {
    i.set_custom_call_target("AwsNeuronTransferWithStaticRing");
  });
  EXPECT_EQ(Eval1<float>(b.Build(b.Neg(c)), {F32({2}, {1, -2})}), (std::vector<float>{-1, 2}));
}

TEST(HloEvaluatorTest, Bf16ArithmeticRoundsOnStore) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  // 1.0078125 + 2^-8 is halfway to 1.015625 (even) -> 1.015625.
  HloBuilder b("bf16_add");
  Op x = b.Parameter(0, xla::BF16, {2});
  Op y = b.Parameter(1, xla::BF16, {2});
  auto m = b.Build(b.Add(x, y));
  Tensor tx = Make<uint16_t>(xla::BF16, {2}, {Bf16Bits(1.0f), Bf16Bits(1.0078125f)});
  Tensor ty = Make<uint16_t>(xla::BF16, {2}, {Bf16Bits(0.00390625f), Bf16Bits(0.00390625f)});
  auto out = Eval1<uint16_t>(m, {tx, ty});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(FromBf16(out[0]), 1.0f);
  EXPECT_EQ(FromBf16(out[1]), 1.015625f);
}

TEST(HloEvaluatorTest, BitcastConvert) {
  HloBuilder b("bitcast");
  Op x = b.Parameter(0, xla::F32, {3});
  Op as_s32 = Instr(b, "bitcast-convert", {x}, Shape(xla::S32, {3}));
  Op as_u32 = Instr(b, "bitcast-convert", {x}, Shape(xla::U32, {3}));
  Op back = Instr(b, "bitcast-convert", {as_s32}, Shape(xla::F32, {3}));
  auto outs = Eval(b.Build(b.Tuple({as_s32, as_u32, back})), {F32({3}, {1.0f, -0.0f, -2.0f})});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{0x3F800000, kMin32, -1073741824}));
  EXPECT_EQ(Values<uint32_t>(outs[1]),
            (std::vector<uint32_t>{0x3F800000u, 0x80000000u, 0xC0000000u}));
  EXPECT_EQ(Values<float>(outs[2]), (std::vector<float>{1.0f, -0.0f, -2.0f}));
  EXPECT_TRUE(std::signbit(Values<float>(outs[2])[1]));
}

TEST(HloEvaluatorTest, BroadcastReshapeTranspose) {
  HloBuilder b("shapes");
  Op s = b.ConstantF32(7);
  Op row = b.Parameter(0, xla::F32, {3});
  Op col = b.Parameter(1, xla::F32, {2});
  Op m23 = b.Parameter(2, xla::F32, {2, 3});
  auto m = b.Build(
      b.Tuple({b.Broadcast(s, {2, 2}, {}), b.Broadcast(row, {2, 3}, {1}),
               b.Broadcast(col, {2, 3}, {0}), b.Reshape(m23, {3, 2}), b.Transpose(m23, {1, 0})}));
  auto outs = Eval(m, {F32({3}, {1, 2, 3}), F32({2}, {10, 20}), F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_EQ(Values<float>(outs[0]), (std::vector<float>{7, 7, 7, 7}));
  EXPECT_EQ(Values<float>(outs[1]), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(Values<float>(outs[2]), (std::vector<float>{10, 10, 10, 20, 20, 20}));
  EXPECT_EQ(outs[3].dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<float>(outs[3]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(outs[4].dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<float>(outs[4]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(HloEvaluatorTest, TransposeRank3) {
  // x[i][j][k] = 100i + 10j + k over [2,3,2]; permutation {2,0,1}: out[k][i][j].
  HloBuilder b("transpose3");
  Op x = b.Parameter(0, xla::S32, {2, 3, 2});
  auto m = b.Build(b.Transpose(x, {2, 0, 1}));
  std::vector<int32_t> in;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) in.push_back(100 * i + 10 * j + k);
  EXPECT_EQ(Eval1<int32_t>(m, {S32({2, 3, 2}, in)}),
            (std::vector<int32_t>{0, 10, 20, 100, 110, 120, 1, 11, 21, 101, 111, 121}));
}

TEST(HloEvaluatorTest, Dot) {
  {
    // [2,3] x [3,2] matrix product.
    HloBuilder b("matmul");
    Op x = b.Parameter(0, xla::F32, {2, 3});
    Op w = b.Parameter(1, xla::F32, {3, 2});
    auto m = b.Build(b.Dot(x, w, {1}, {0}));
    EXPECT_EQ(Eval1<float>(m, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 2}, {1, 0, 0, 1, 1, 1})}),
              (std::vector<float>{4, 5, 10, 11}));
  }
  {
    // x^T y contracting dimension 0 of both: [3,2]^T [3,1] -> [2,1].
    HloBuilder b("xty");
    Op x = b.Parameter(0, xla::S32, {3, 2});
    Op y = b.Parameter(1, xla::S32, {3, 1});
    auto m = b.Build(b.Dot(x, y, {0}, {0}));
    EXPECT_EQ(Eval1<int32_t>(m, {S32({3, 2}, {1, 2, 3, 4, 5, 6}), S32({3, 1}, {1, 10, 100})}),
              (std::vector<int32_t>{531, 642}));
  }
  {
    // Batch dot with the batch dimension not leading on the rhs:
    // lhs [2(b),1,2], rhs [2,2(b)] (contract lhs 2 with rhs 0) -> [2(b),1].
    HloBuilder b("batch");
    Op l = b.Parameter(0, xla::F32, {2, 1, 2});
    Op r = b.Parameter(1, xla::F32, {2, 2});
    auto m = b.Build(b.Dot(l, r, {2}, {0}, {0}, {1}));
    // batch 0: [1,2].[r00,r10] = 1*1 + 2*3 = 7; batch 1: [3,4].[r01,r11] = 3*2 + 4*4 = 22.
    EXPECT_EQ(Eval1<float>(m, {F32({2, 1, 2}, {1, 2, 3, 4}), F32({2, 2}, {1, 2, 3, 4})}),
              (std::vector<float>{7, 22}));
  }
  {
    // Outer product (no contracting dims) and a dot with two contracting dims.
    HloBuilder b("outer");
    Op u = b.Parameter(0, xla::F32, {2});
    Op v = b.Parameter(1, xla::F32, {3});
    Op p = b.Parameter(2, xla::F32, {2, 2});
    auto m = b.Build(b.Tuple({b.Dot(u, v, {}, {}), b.Dot(p, p, {0, 1}, {1, 0})}));
    auto outs = Eval(m, {F32({2}, {1, 2}), F32({3}, {1, 10, 100}), F32({2, 2}, {1, 2, 3, 4})});
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_EQ(Values<float>(outs[0]), (std::vector<float>{1, 10, 100, 2, 20, 200}));
    // sum_ij p[i][j] * p[j][i] = 1 + 2*3 + 3*2 + 16 = 29.
    EXPECT_EQ(Values<float>(outs[1]), (std::vector<float>{29}));
  }
  {
    // Accumulation in float, in contracting order: 1e8 + 1 rounds back to 1e8.
    HloBuilder b("order");
    Op x = b.Parameter(0, xla::F32, {2, 3});
    Op ones = b.Broadcast(b.ConstantF32(1), {3}, {});
    auto m = b.Build(b.Dot(x, ones, {1}, {0}));
    EXPECT_EQ(Eval1<float>(m, {F32({2, 3}, {1e8f, 1, -1e8f, 1e8f, -1e8f, 1})}),
              (std::vector<float>{0, 1}));
  }
}

TEST(HloEvaluatorTest, ReduceAddAndMax) {
  HloBuilder b("reduce");
  Op x = b.Parameter(0, xla::F32, {2, 3});
  int64_t add = b.MakeReducer("add", xla::F32);
  int64_t max = b.MakeReducer("maximum", xla::F32);
  Op zero = b.ConstantF32(0);
  Op neg_inf = b.ConstantF32(-kInf);
  auto m = b.Build(b.Tuple({b.Reduce(x, zero, {0}, add), b.Reduce(x, zero, {1}, add),
                            b.Reduce(x, zero, {0, 1}, add), b.Reduce(x, neg_inf, {1}, max),
                            b.Reduce(x, b.ConstantF32(100), {0}, add)}));
  auto outs = Eval(m, {F32({2, 3}, {1, 2, 3, 4, 5, -6})});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_EQ(Values<float>(outs[0]), (std::vector<float>{5, 7, -3}));
  EXPECT_EQ(Values<float>(outs[1]), (std::vector<float>{6, 3}));
  EXPECT_EQ(Values<float>(outs[2]), (std::vector<float>{9}));
  EXPECT_EQ(Values<float>(outs[3]), (std::vector<float>{3, 5}));
  EXPECT_EQ(Values<float>(outs[4]), (std::vector<float>{105, 107, 97}));
}

TEST(HloEvaluatorTest, ReduceOrderIsRowMajorIntoInit) {
  // Float sums in row-major order: (((0 + 1e8) + 1) - 1e8) = 0, while
  // (((0 + 1e8) - 1e8) + 1) = 1.
  HloBuilder b("order");
  Op x = b.Parameter(0, xla::F32, {2, 3});
  int64_t add = b.MakeReducer("add", xla::F32);
  auto m = b.Build(b.Reduce(x, b.ConstantF32(0), {1}, add));
  EXPECT_EQ(Eval1<float>(m, {F32({2, 3}, {1e8f, 1, -1e8f, 1e8f, -1e8f, 1})}),
            (std::vector<float>{0, 1}));

  // A reducer that is not a plain binary op, evaluated by recursion:
  // f(acc, x) = acc * 2 + x, over [1, 2, 3] from 0: ((0*2+1)*2+2)*2+3 = 11.
  // Over both dims of [[1,2],[3,4]] in row-major order: 1, 4, 11, 26.
  HloBuilder r("horner");
  HloBuilder sub("acc2x");
  Op acc = sub.Parameter(0, xla::S32, {});
  Op elem = sub.Parameter(1, xla::S32, {});
  Op root = sub.Add(sub.Mul(acc, sub.ConstantS32(2)), elem);
  int64_t horner = r.AddComputation(sub, root);
  Op v = r.Parameter(0, xla::S32, {3});
  Op w = r.Parameter(1, xla::S32, {2, 2});
  auto rm = r.Build(r.Tuple(
      {r.Reduce(v, r.ConstantS32(0), {0}, horner), r.Reduce(w, r.ConstantS32(0), {0, 1}, horner)}));
  auto outs = Eval(rm, {S32({3}, {1, 2, 3}), S32({2, 2}, {1, 2, 3, 4})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{11}));
  EXPECT_EQ(Values<int32_t>(outs[1]), (std::vector<int32_t>{26}));

  // The reducer's parameter order matters: g(acc, x) = x - acc over [1, 2, 3]
  // from 0: 1 - 0 = 1, 2 - 1 = 1, 3 - 1 = 2.
  HloBuilder s("swapped");
  HloBuilder sub2("x_minus_acc");
  Op a2 = sub2.Parameter(0, xla::S32, {});
  Op e2 = sub2.Parameter(1, xla::S32, {});
  int64_t swapped = s.AddComputation(sub2, sub2.Sub(e2, a2));
  Op sv = s.Parameter(0, xla::S32, {3});
  auto sm = s.Build(s.Reduce(sv, s.ConstantS32(0), {0}, swapped));
  EXPECT_EQ(Eval1<int32_t>(sm, {S32({3}, {1, 2, 3})}), (std::vector<int32_t>{2}));
}

TEST(HloEvaluatorTest, VariadicReduceArgmax) {
  // reduce((values, indices), (-inf, -1)) with reducer picking the larger
  // value (the first on ties): argmax per row.
  HloBuilder b("argmax");
  HloBuilder sub("argmax_reducer");
  Op av = sub.Parameter(0, xla::F32, {});
  Op ai = sub.Parameter(1, xla::S32, {});
  Op bv = sub.Parameter(2, xla::F32, {});
  Op bi = sub.Parameter(3, xla::S32, {});
  Op take_a = sub.Compare(av, bv, "GE");
  Op root = sub.Tuple({sub.Select(take_a, av, bv), sub.Select(take_a, ai, bi)});
  int64_t reducer = b.AddComputation(sub, root);

  Op x = b.Parameter(0, xla::F32, {2, 4});
  Op idx = b.Iota(xla::S32, {2, 4}, 1);
  Op init_v = b.ConstantF32(-kInf);
  Op init_i = b.ConstantS32(-1);
  auto out_shape = HloBuilder::TupleShape({Shape(xla::F32, {2}), Shape(xla::S32, {2})});
  Op r = Instr(b, "reduce", {x, idx, init_v, init_i}, out_shape, [&](xla::HloInstructionProto& i) {
    i.add_dimensions(1);
    i.add_called_computation_ids(reducer);
  });
  auto outs = Eval(b.Build(r), {F32({2, 4}, {1, 5, 2, 5, -1, -3, -0.5f, -2})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(Values<float>(outs[0]), (std::vector<float>{5, -0.5f}));
  EXPECT_EQ(Values<int32_t>(outs[1]), (std::vector<int32_t>{1, 2}));
}

TEST(HloEvaluatorTest, Iota) {
  HloBuilder b("iota");
  auto m = b.Build(b.Tuple({b.Iota(xla::S32, {2, 3}, 0), b.Iota(xla::F32, {2, 3}, 1)}));
  auto outs = Eval(m, {});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(Values<float>(outs[1]), (std::vector<float>{0, 1, 2, 0, 1, 2}));
}

TEST(HloEvaluatorTest, TupleAndGetTupleElementFlattenDepthFirst) {
  HloBuilder b("tuples");
  Op x = b.Parameter(0, xla::S32, {2});
  Op y = b.Parameter(1, xla::F32, {});
  Op inner = b.Tuple({y, x});
  Op outer = b.Tuple({x, inner});
  Op again = b.GetTupleElement(b.GetTupleElement(outer, 1), 0);
  auto m = b.Build(b.Tuple({outer, again}));
  auto outs = Eval(m, {S32({2}, {4, 5}), F32({}, {2.5f})});
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(Values<float>(outs[1]), (std::vector<float>{2.5f}));
  EXPECT_TRUE(outs[1].dims.empty());
  EXPECT_EQ(Values<int32_t>(outs[2]), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(Values<float>(outs[3]), (std::vector<float>{2.5f}));
}

TEST(HloEvaluatorTest, TupleParameterTakesFlattenedArguments) {
  HloBuilder b("tuple_param");
  auto shape = HloBuilder::TupleShape({Shape(xla::F32, {2}), Shape(xla::F32, {2})});
  Op p = b.ParameterWithShape(0, shape);
  Op q = b.Parameter(1, xla::F32, {2});
  auto m = b.Build(b.Add(b.Mul(b.GetTupleElement(p, 0), b.GetTupleElement(p, 1)), q));
  EXPECT_EQ(Eval1<float>(m, {F32({2}, {1, 2}), F32({2}, {3, 4}), F32({2}, {10, 20})}),
            (std::vector<float>{13, 28}));
}

TEST(HloEvaluatorTest, SliceConcatenateReverse) {
  HloBuilder b("slices");
  Op x = b.Parameter(0, xla::S32, {3, 4});
  Op s1 = b.Slice(x, {0, 1}, {3, 4}, {2, 2});  // rows 0,2; cols 1,3
  Op s2 = b.Slice(x, {1, 0}, {2, 2}, {1, 1});  // row 1, cols 0,1
  Op c0 = b.Concatenate({s2, s1}, 0);
  Op c1 = b.Concatenate({s1, s1}, 1);
  Op rev = Instr(b, "reverse", {x}, Shape(xla::S32, {3, 4}),
                 [](xla::HloInstructionProto& i) { i.add_dimensions(1); });
  auto m = b.Build(b.Tuple({s1, c0, c1, rev}));
  auto outs = Eval(m, {S32({3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23})});
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs[0].dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{1, 3, 21, 23}));
  EXPECT_EQ(outs[1].dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<int32_t>(outs[1]), (std::vector<int32_t>{10, 11, 1, 3, 21, 23}));
  EXPECT_EQ(outs[2].dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Values<int32_t>(outs[2]), (std::vector<int32_t>{1, 3, 1, 3, 21, 23, 21, 23}));
  EXPECT_EQ(Values<int32_t>(outs[3]),
            (std::vector<int32_t>{3, 2, 1, 0, 13, 12, 11, 10, 23, 22, 21, 20}));
}

TEST(HloEvaluatorTest, Call) {
  // f(a, b) = a * b + a, called twice.
  HloBuilder b("call");
  HloBuilder sub("f");
  Op a = sub.Parameter(0, xla::F32, {2});
  Op c = sub.Parameter(1, xla::F32, {2});
  int64_t f = b.AddComputation(sub, sub.Add(sub.Mul(a, c), a));
  Op x = b.Parameter(0, xla::F32, {2});
  Op y = b.Parameter(1, xla::F32, {2});
  Op once = b.Call({x, y}, f, Shape(xla::F32, {2}));
  Op twice = b.Call({once, y}, f, Shape(xla::F32, {2}));
  auto m = b.Build(twice);
  // once = {1*3+1, 2*4+2} = {4, 10}; twice = {4*3+4, 10*4+10} = {16, 50}.
  EXPECT_EQ(Eval1<float>(m, {F32({2}, {1, 2}), F32({2}, {3, 4})}), (std::vector<float>{16, 50}));
}

TEST(HloEvaluatorTest, Pad) {
  auto pad = [](std::vector<int64_t> low, std::vector<int64_t> high, std::vector<int64_t> interior,
                std::vector<int64_t> out_dims) {
    HloBuilder b("pad");
    Op x = b.Parameter(0, xla::S32, {2, 2});
    Op v = b.ConstantS32(0);
    Op p = Instr(b, "pad", {x, v}, Shape(xla::S32, out_dims), [&](xla::HloInstructionProto& i) {
      for (size_t d = 0; d < 2; ++d) {
        auto* pd = i.mutable_padding_config()->add_dimensions();
        pd->set_edge_padding_low(low[d]);
        pd->set_edge_padding_high(high[d]);
        pd->set_interior_padding(interior[d]);
      }
    });
    return Eval1<int32_t>(b.Build(p), {S32({2, 2}, {1, 2, 3, 4})});
  };
  // Edge padding: one row above, one column right.
  EXPECT_EQ(pad({1, 0}, {0, 1}, {0, 0}, {3, 3}), (std::vector<int32_t>{0, 0, 0, 1, 2, 0, 3, 4, 0}));
  // Interior padding of 1 in both dims: [[1,0,2],[0,0,0],[3,0,4]].
  EXPECT_EQ(pad({0, 0}, {0, 0}, {1, 1}, {3, 3}), (std::vector<int32_t>{1, 0, 2, 0, 0, 0, 3, 0, 4}));
  // Negative low padding removes the first row; in dim 1 interior padding
  // gives [3,0,4] and high padding -1 cuts it to [3,0].
  EXPECT_EQ(pad({-1, 0}, {0, -1}, {0, 1}, {1, 2}), (std::vector<int32_t>{3, 0}));
}

TEST(HloEvaluatorTest, DynamicSliceAndUpdateClampStarts) {
  HloBuilder b("dynamic");
  Op x = b.Parameter(0, xla::S32, {4});
  Op start = b.Parameter(1, xla::S32, {});
  Op u = b.Parameter(2, xla::S32, {2});
  Op ds = Instr(b, "dynamic-slice", {x, start}, Shape(xla::S32, {2}),
                [](xla::HloInstructionProto& i) { i.add_dynamic_slice_sizes(2); });
  Op dus = Instr(b, "dynamic-update-slice", {x, u, start}, Shape(xla::S32, {4}));
  auto m = b.Build(b.Tuple({ds, dus}));
  auto run = [&](int32_t s) {
    return Eval(m, {S32({4}, {10, 11, 12, 13}), S32({}, {s}), S32({2}, {-1, -2})});
  };
  auto in_range = run(1);
  ASSERT_EQ(in_range.size(), 2u);
  EXPECT_EQ(Values<int32_t>(in_range[0]), (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(Values<int32_t>(in_range[1]), (std::vector<int32_t>{10, -1, -2, 13}));
  auto too_big = run(3);  // clamped to 2
  ASSERT_EQ(too_big.size(), 2u);
  EXPECT_EQ(Values<int32_t>(too_big[0]), (std::vector<int32_t>{12, 13}));
  EXPECT_EQ(Values<int32_t>(too_big[1]), (std::vector<int32_t>{10, 11, -1, -2}));
  auto negative = run(-5);  // clamped to 0
  ASSERT_EQ(negative.size(), 2u);
  EXPECT_EQ(Values<int32_t>(negative[0]), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(Values<int32_t>(negative[1]), (std::vector<int32_t>{-1, -2, 12, 13}));

  // Rank 2 with two scalar start indices.
  HloBuilder b2("dynamic2");
  Op y = b2.Parameter(0, xla::S32, {3, 3});
  Op i0 = b2.ConstantS32(1);
  Op i1 = b2.ConstantS32(2);
  Op ds2 = Instr(b2, "dynamic-slice", {y, i0, i1}, Shape(xla::S32, {2, 2}),
                 [](xla::HloInstructionProto& i) {
                   i.add_dynamic_slice_sizes(2);
                   i.add_dynamic_slice_sizes(2);
                 });
  // Column start 2 is clamped to 1: rows 1..2, cols 1..2.
  EXPECT_EQ(Eval1<int32_t>(b2.Build(ds2), {S32({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8})}),
            (std::vector<int32_t>{4, 5, 7, 8}));
}

TEST(HloEvaluatorTest, GatherRows) {
  // Embedding lookup: table [4,2], ids [3] -> [3,2] (offset dim 1, collapsed 0).
  HloBuilder b("gather");
  Op table = b.Parameter(0, xla::F32, {4, 2});
  Op ids = b.Parameter(1, xla::S32, {3});
  Op g = Instr(b, "gather", {table, ids}, Shape(xla::F32, {3, 2}), [](xla::HloInstructionProto& i) {
    auto* dn = i.mutable_gather_dimension_numbers();
    dn->add_offset_dims(1);
    dn->add_collapsed_slice_dims(0);
    dn->add_start_index_map(0);
    dn->set_index_vector_dim(1);
    i.add_gather_slice_sizes(1);
    i.add_gather_slice_sizes(2);
  });
  // Index 7 is clamped to 3 (the last row).
  EXPECT_EQ(
      Eval1<float>(b.Build(g), {F32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}), S32({3}, {2, 0, 7})}),
      (std::vector<float>{20, 21, 0, 1, 30, 31}));
}

TEST(HloEvaluatorTest, GatherWindows) {
  // 2x2 windows of a [3,3] operand at (row, col) start pairs; index_vector_dim 1;
  // the output's offset dims are 1 and 2: out [2,2,2].
  HloBuilder b("gather2");
  Op x = b.Parameter(0, xla::S32, {3, 3});
  Op starts = b.Parameter(1, xla::S32, {2, 2});
  Op g =
      Instr(b, "gather", {x, starts}, Shape(xla::S32, {2, 2, 2}), [](xla::HloInstructionProto& i) {
        auto* dn = i.mutable_gather_dimension_numbers();
        dn->add_offset_dims(1);
        dn->add_offset_dims(2);
        dn->add_start_index_map(0);
        dn->add_start_index_map(1);
        dn->set_index_vector_dim(1);
        i.add_gather_slice_sizes(2);
        i.add_gather_slice_sizes(2);
      });
  EXPECT_EQ(Eval1<int32_t>(b.Build(g),
                           {S32({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}), S32({2, 2}, {0, 0, 1, 1})}),
            (std::vector<int32_t>{0, 1, 3, 4, 4, 5, 7, 8}));
}

// scatter of `updates` rows into a [4,2] operand at row `indices`.
xla::HloModuleProto ScatterRows(const std::string& combiner_op) {
  HloBuilder b("scatter");
  HloBuilder sub("combine");
  Op old_value = sub.Parameter(0, xla::F32, {});
  Op update = sub.Parameter(1, xla::F32, {});
  Op root = combiner_op == "replace" ? sub.Unary("copy", update)
                                     : sub.Binary(combiner_op, old_value, update);
  int64_t combiner = b.AddComputation(sub, root);
  Op operand = b.Parameter(0, xla::F32, {4, 2});
  Op indices = b.Parameter(1, xla::S32, {3});
  Op updates = b.Parameter(2, xla::F32, {3, 2});
  Op s = Instr(b, "scatter", {operand, indices, updates}, Shape(xla::F32, {4, 2}),
               [&](xla::HloInstructionProto& i) {
                 auto* dn = i.mutable_scatter_dimension_numbers();
                 dn->add_update_window_dims(1);
                 dn->add_inserted_window_dims(0);
                 dn->add_scatter_dims_to_operand_dims(0);
                 dn->set_index_vector_dim(1);
                 i.add_called_computation_ids(combiner);
               });
  return b.Build(s);
}

TEST(HloEvaluatorTest, ScatterAddAccumulatesDuplicatesAndSkipsOutOfBounds) {
  // Rows 1, 1 and 9 (out of bounds: skipped).
  auto outs =
      Eval1<float>(ScatterRows("add"), {F32({4, 2}, {0, 0, 1, 1, 2, 2, 3, 3}), S32({3}, {1, 1, 9}),
                                        F32({3, 2}, {10, 20, 100, 200, 1000, 2000})});
  EXPECT_EQ(outs, (std::vector<float>{0, 0, 111, 221, 2, 2, 3, 3}));
  // A combiner that just takes the update: the last update to a row wins.
  auto replaced = Eval1<float>(ScatterRows("replace"),
                               {F32({4, 2}, {0, 0, 1, 1, 2, 2, 3, 3}), S32({3}, {3, 0, 3}),
                                F32({3, 2}, {10, 20, 100, 200, 1000, 2000})});
  EXPECT_EQ(replaced, (std::vector<float>{100, 200, 1, 1, 2, 2, 1000, 2000}));
}

TEST(HloEvaluatorTest, WhileLoop) {
  // (i, sum) = (0, 0); while i < 5: sum += i; i += 1.  -> (5, 10)
  auto state = HloBuilder::TupleShape({Shape(xla::S32, {}), Shape(xla::S32, {})});
  HloBuilder b("while");
  HloBuilder cond2("cond");
  Op cs = cond2.ParameterWithShape(0, state);
  Op cond_root = cond2.Compare(cond2.GetTupleElement(cs, 0), cond2.ConstantS32(5), "LT");
  int64_t cond_id = b.AddComputation(cond2, cond_root);
  HloBuilder body("body");
  Op bs = body.ParameterWithShape(0, state);
  Op i = body.GetTupleElement(bs, 0);
  Op sum = body.GetTupleElement(bs, 1);
  Op body_root = body.Tuple({body.Add(i, body.ConstantS32(1)), body.Add(sum, i)});
  int64_t body_id = b.AddComputation(body, body_root);

  Op init = b.Tuple({b.ConstantS32(0), b.ConstantS32(0)});
  Op w = Instr(b, "while", {init}, state, [&](xla::HloInstructionProto& inst) {
    inst.add_called_computation_ids(body_id);  // XLA: body first, then condition
    inst.add_called_computation_ids(cond_id);
  });
  auto outs = Eval(b.Build(w), {});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(Values<int32_t>(outs[0]), (std::vector<int32_t>{5}));
  EXPECT_EQ(Values<int32_t>(outs[1]), (std::vector<int32_t>{10}));
}

// ---- rng-bit-generator, Neuron custom-calls, single-replica collectives ----

xla::HloModuleProto Parse(const std::string& text) {
  auto m = hlo::ParseHloModule(text, "test.hlo");
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : xla::HloModuleProto();
}

Tensor U64(std::vector<int64_t> dims, const std::vector<uint64_t>& v) { return Make(xla::U64, dims, v); }

// XLA's Philox bit generator, checked with Random123's published Philox4x32-10
// known-answer vectors (counter words, key words -> output words):
//   (0,0,0,0), (0,0) -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   (ffffffff x4), (ffffffff x2) -> 408f276d 41c83b0e a20bc7c6 6d5451fd
//   (243f6a88 85a308d3 13198a2e 03707344), (a4093822 299f31d0)
//     -> d16cfe09 94fdcceb 5001e420 24126ea1
TEST(HloEvaluatorTest, RngBitGeneratorPhiloxKnownAnswers) {
  auto rng = [](const std::string& state, const std::string& bits, const std::string& alg) {
    return Parse("HloModule rng\nENTRY %main (s: " + state + ") -> (" + state + ", " + bits + ") {\n  %s = " + state +
                 " parameter(0)\n  ROOT %r = (" + state + ", " + bits + ") rng-bit-generator(%s), algorithm=" + alg +
                 "\n}\n");
  };
  const uint64_t ones = ~uint64_t{0};
  {
    auto out = Eval(rng("u64[3]", "u32[4]", "rng_philox"), {U64({3}, {0, 0, 0})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Values<uint64_t>(out[0]), (std::vector<uint64_t>{0, 1, 0}));
    EXPECT_EQ(Values<uint32_t>(out[1]), (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  }
  {
    // u64[3]: {key, counter low, counter high}.
    auto out = Eval(rng("u64[3]", "u32[4]", "rng_default"),
                    {U64({3}, {0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Values<uint32_t>(out[1]), (std::vector<uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  }
  {
    // u64[2]: {key, counter low}; the counter's high word is the key.
    auto out = Eval(rng("u64[2]", "u32[4]", "rng_default"), {U64({2}, {ones, ones})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Values<uint32_t>(out[1]), (std::vector<uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
    EXPECT_EQ(Values<uint64_t>(out[0]), (std::vector<uint64_t>{ones, 0}));
  }
  {
    // 64-bit elements: two words each, low word first.
    auto out = Eval(rng("u64[3]", "u64[2]", "rng_default"), {U64({3}, {0, 0, 0})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Values<uint64_t>(out[1]), (std::vector<uint64_t>{0xe169c58d6627e8d5ull, 0x9b00dbd8bc57ac4cull}));
    EXPECT_EQ(Values<uint64_t>(out[0]), (std::vector<uint64_t>{0, 1, 0}));
  }
  {
    // Five words take two blocks; the low counter word carries into the high one.
    auto out = Eval(rng("u64[3]", "u32[5]", "rng_default"), {U64({3}, {7, ones, 5})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Values<uint64_t>(out[0]), (std::vector<uint64_t>{7, 1, 6}));
    // Element 4 is word 0 of the next block, i.e. of counter (6:0).
    auto next = Eval(rng("u64[3]", "u32[4]", "rng_default"), {U64({3}, {7, 0, 6})});
    ASSERT_EQ(next.size(), 2u);
    EXPECT_EQ(Values<uint32_t>(out[1])[4], Values<uint32_t>(next[1])[0]);
  }
  std::string e = EvalError(rng("u64[2]", "u32[4]", "rng_three_fry"), {U64({2}, {0, 0})});
  EXPECT_NE(e.find("RNG_THREE_FRY is not supported"), std::string::npos) << e;
}

// Phi(1) = 0.8413447460685429, phi(1) = 0.24197072451914337,
// Phi(2) = 0.9772498680518208, phi(2) = 0.05399096651318806.
TEST(HloEvaluatorTest, NeuronGeluAndSoftmax) {
  auto m = Parse(R"(
HloModule neuron
ENTRY %main (x: f32[2,3], y: f32[1,3], dy: f32[1,3]) -> (f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[1,3]) {
  %x = f32[2,3] parameter(0)
  %y = f32[1,3] parameter(1)
  %dy = f32[1,3] parameter(2)
  %gelu = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronGelu"
  %dgelu = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronGeluBackward"
  %sm1 = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="1"
  %sm0 = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="0"
  %dsm = f32[1,3] custom-call(%y, %dy), custom_call_target="AwsNeuronSoftmaxBackward", backend_config="1"
  ROOT %out = (f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[1,3]) tuple(%gelu, %dgelu, %sm1, %sm0, %dsm)
}
)");
  auto out = Eval(m, {F32({2, 3}, {1, 2, -1, 0, -2, 0}), F32({1, 3}, {0.2f, 0.3f, 0.5f}), F32({1, 3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 5u);
  auto near = [](const Tensor& t, const std::vector<double>& want, double tol, const char* what) {
    auto got = Values<float>(t);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
  };
  near(out[0], {0.8413447461, 1.9544997361, -0.1586552539, 0, -0.0455002639, 0}, 1e-6, "gelu");
  near(out[1],
       {0.8413447461 + 0.2419707245, 0.9772498681 + 2 * 0.0539909665, 0.1586552539 - 0.2419707245, 0.5,
        0.0227501319 - 2 * 0.0539909665, 0.5},
       2e-6, "gelu backward");
  // Along dimension 1: (1, 2, -1) and (0, -2, 0).
  const double s = std::exp(-1.0) + 1 + std::exp(-3.0), t = 2 + std::exp(-2.0);
  near(out[2], {std::exp(-1.0) / s, 1 / s, std::exp(-3.0) / s, 1 / t, std::exp(-2.0) / t, 1 / t}, 1e-6, "softmax d=1");
  // Along dimension 0: columns (1, 0), (2, -2), (-1, 0).
  near(out[3],
       {1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(-4.0)), std::exp(-1.0) / (1 + std::exp(-1.0)),
        std::exp(-1.0) / (1 + std::exp(-1.0)), std::exp(-4.0) / (1 + std::exp(-4.0)), 1 / (1 + std::exp(-1.0))},
       1e-6, "softmax d=0");
  // y * (dy - sum(dy * y)) with sum = 2.3.
  near(out[4], {-0.26, -0.09, 0.35}, 1e-6, "softmax backward");

  auto bad = Parse(R"(
HloModule neuron
ENTRY %main (x: f32[2,3]) -> f32[2,3] {
  %x = f32[2,3] parameter(0)
  ROOT %sm = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="3"
}
)");
  std::string e = EvalError(bad, {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_NE(e.find("backend_config '3' is not a dimension"), std::string::npos) << e;
}

TEST(HloEvaluatorTest, SingleReplicaCollectivesAreIdentities) {
  auto m = Parse(R"(
HloModule collectives
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[2], y: bf16[]) -> ((f32[2], bf16[]), f32[2]) {
  %x = f32[2] parameter(0)
  %y = bf16[] parameter(1)
  %ar = (f32[2], bf16[]) all-reduce(%x, %y), replica_groups={}, to_apply=%add
  %ag = f32[2] all-gather(%x), replica_groups={{0},{1}}, dimensions={0}
  ROOT %out = ((f32[2], bf16[]), f32[2]) tuple(%ar, %ag)
}
)");
  auto out = Eval(m, {F32({2}, {1.5f, -2}), Make<uint16_t>(xla::BF16, {}, {0x4040})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(Values<uint16_t>(out[1]), (std::vector<uint16_t>{0x4040}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{1.5f, -2}));
}

// The hand-worked case of support/batch_norm_case.h.
TEST(HloEvaluatorTest, BatchNormTrainingInferenceAndGrad) {
  std::vector<Tensor> args;
  for (const auto& in : BatchNormInputs()) args.push_back(F32(in.dims, in.values));
  auto out = Eval(Parse(kBatchNormModule), args);
  ASSERT_EQ(out.size(), BatchNormOutputs().size());
  for (size_t o = 0; o < out.size(); ++o) {
    const auto& want = BatchNormOutputs()[o];
    auto got = Values<float>(out[o]);
    ASSERT_EQ(got.size(), want.values.size()) << want.what;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want.values[i], 1e-6) << want.what << " [" << i << "]";
  }
}

TEST(HloEvaluatorTest, ConstantsOfEveryType) {
  HloBuilder b("constants");
  auto constant = [&](xla::PrimitiveType t, std::vector<int64_t> dims,
                      const std::function<void(xla::LiteralProto&)>& fill) {
    return Instr(b, "constant", {}, Shape(t, dims), [&](xla::HloInstructionProto& i) {
      *i.mutable_literal()->mutable_shape() = Shape(t, dims);
      fill(*i.mutable_literal());
    });
  };
  Op p = constant(xla::PRED, {2}, [](xla::LiteralProto& l) {
    l.add_preds(true);
    l.add_preds(false);
  });
  Op s64 = constant(xla::S64, {1}, [](xla::LiteralProto& l) { l.add_s64s(-(int64_t{1} << 40)); });
  Op u32 = constant(xla::U32, {1}, [](xla::LiteralProto& l) { l.add_u32s(4000000000u); });
  Op f64 = constant(xla::F64, {1}, [](xla::LiteralProto& l) { l.add_f64s(0.1); });
  Op bf16 = constant(xla::BF16, {2}, [](xla::LiteralProto& l) {
    // 1.5 = 0x3FC0, -2 = 0xC000, little-endian.
    l.set_bf16s(std::string("\xC0\x3F\x00\xC0", 4));
  });
  auto outs = Eval(b.Build(b.Tuple({p, s64, u32, f64, bf16})), {});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_EQ(Values<uint8_t>(outs[0]), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Values<int64_t>(outs[1]), (std::vector<int64_t>{-(int64_t{1} << 40)}));
  EXPECT_EQ(Values<uint32_t>(outs[2]), (std::vector<uint32_t>{4000000000u}));
  EXPECT_EQ(Values<double>(outs[3]), (std::vector<double>{0.1}));
  EXPECT_EQ(Values<uint16_t>(outs[4]), (std::vector<uint16_t>{0x3FC0, 0xC000}));
}

TEST(HloEvaluatorTest, ErrorsNameTheProblem) {
  {
    HloBuilder b("custom");
    Op x = b.Parameter(0, xla::F32, {2});
    Op c = Instr(b, "custom-call", {x}, Shape(xla::F32, {2}),
                 [](xla::HloInstructionProto& i) { i.set_custom_call_target("Foo"); });
    std::string e = EvalError(b.Build(c), {F32({2}, {1, 2})});
    EXPECT_NE(e.find("unsupported opcode 'custom-call'"), std::string::npos) << e;
    EXPECT_NE(e.find("in computation custom"), std::string::npos) << e;
  }
  {
    // An unsupported op inside a called computation names that computation.
    HloBuilder b("outer");
    HloBuilder sub("inner");
    Op a = sub.Parameter(0, xla::F32, {2});
    Op s = Instr(sub, "sort", {a}, Shape(xla::F32, {2}));
    int64_t inner = b.AddComputation(sub, s);
    Op x = b.Parameter(0, xla::F32, {2});
    std::string e =
        EvalError(b.Build(b.Call({x}, inner, Shape(xla::F32, {2}))), {F32({2}, {1, 2})});
    EXPECT_NE(e.find("unsupported opcode 'sort'"), std::string::npos) << e;
    EXPECT_NE(e.find("in computation inner"), std::string::npos) << e;
  }
  {
    HloBuilder b("f8");
    Op x = b.Parameter(0, xla::F32, {2});
    std::string e = EvalError(b.Build(b.Convert(x, xla::F8E5M2)), {F32({2}, {1, 2})});
    EXPECT_NE(e.find("unsupported element type f8e5m2"), std::string::npos) << e;
  }
  {
    HloBuilder b("args");
    Op x = b.Parameter(0, xla::F32, {2});
    auto m = b.Build(b.Neg(x));
    EXPECT_NE(EvalError(m, {}).find("too few arguments"), std::string::npos);
    EXPECT_NE(EvalError(m, {F32({3}, {1, 2, 3})}).find("argument 0 is f32[3]"), std::string::npos);
    EXPECT_NE(EvalError(m, {F32({2}, {1, 2}), F32({2}, {1, 2})}).find("2 arguments for 1"),
              std::string::npos);
  }
  {
    // A constant the text reader saw elided ({...}): values unknown.
    HloBuilder b("elided");
    Op c = Instr(b, "constant", {}, Shape(xla::F32, {3}), [](xla::HloInstructionProto& i) {
      *i.mutable_literal()->mutable_shape() = Shape(xla::F32, {3});
      (*i.mutable_frontend_attributes()->mutable_map())["npc_elided_constant"] = "true";
    });
    std::string e = EvalError(b.Build(c), {});
    EXPECT_NE(e.find("elided"), std::string::npos) << e;
  }
  {
    HloBuilder b("gelu");
    Op x = b.Parameter(0, xla::F32, {2});
    Op c = Instr(b, "custom-call", {x}, Shape(xla::F32, {2}),
                 [](xla::HloInstructionProto& i) { i.set_custom_call_target("AwsNeuronGeluApprxTanh"); });
    std::string e = EvalError(b.Build(c), {F32({2}, {1, 2})});
    EXPECT_NE(e.find("unsupported opcode 'custom-call' (target 'AwsNeuronGeluApprxTanh')"),
              std::string::npos)
        << e;
  }
  {
    // A literal whose value count does not match its shape.
    HloBuilder b("short_literal");
    Op c = Instr(b, "constant", {}, Shape(xla::F32, {3}), [](xla::HloInstructionProto& i) {
      *i.mutable_literal()->mutable_shape() = Shape(xla::F32, {3});
      i.mutable_literal()->add_f32s(1);
    });
    std::string e = EvalError(b.Build(c), {});
    EXPECT_NE(e.find("holds 1 values, expected 3"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace npc::testing
