// The host backend's ops, end to end: HloBuilder -> GenerateCpp -> the real
// C++ compiler -> HostExecutable::Run, checked against values worked out by
// hand. Several ops share one module to keep the number of compiles small.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "host/host_backend.h"
#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "support/batch_norm_case.h"
#include "support/test_support.h"

namespace npc {
namespace {

using hlo::HloBuilder;
using hlo::Op;
using testing::TempDir;
using testing::BatchNormInputs;
using testing::BatchNormOutputs;
using testing::kBatchNormModule;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();

template <class T>
Tensor MakeTensor(xla::PrimitiveType type, std::vector<int64_t> dims, const std::vector<T>& values) {
  Tensor t = ZeroTensor(type, std::move(dims));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.element_count());
  EXPECT_EQ(sizeof(T), static_cast<size_t>(ElementSize(type)));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}
Tensor F32(std::vector<int64_t> dims, const std::vector<float>& v) { return MakeTensor(xla::F32, std::move(dims), v); }
Tensor S32(std::vector<int64_t> dims, const std::vector<int32_t>& v) { return MakeTensor(xla::S32, std::move(dims), v); }

template <class T>
std::vector<T> Values(const Tensor& t) {
  EXPECT_EQ(sizeof(T), static_cast<size_t>(ElementSize(t.type))) << PrimitiveTypeName(t.type);
  std::vector<T> out(t.element_count());
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(T));
  return out;
}

// Element-wise float comparison that treats NaN == NaN.
void ExpectFloats(const Tensor& t, const std::vector<float>& want, float tolerance = 0, const std::string& what = "") {
  auto got = Values<float>(t);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] = " << got[i];
    } else if (tolerance == 0) {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(got[i], want[i], tolerance) << what << " [" << i << "]";
    }
  }
}

class HostCodegenTest : public ::testing::Test {
 protected:
  // Generates, compiles and loads `module`; nullptr (with a test failure) on error.
  std::unique_ptr<host::HostExecutable> Compile(const xla::HloModuleProto& module) {
    auto source = host::GenerateCpp(module);
    if (!source) {
      ADD_FAILURE() << source.error().message;
      return nullptr;
    }
    const std::string dir = tmp_.Sub("m" + std::to_string(count_++));
    if (!testing::WriteFile(dir + "/model.cc", *source)) return nullptr;
    std::string log;
    // NPC_HOST_TEST_CXX overrides the compiler, e.g. "c++ -fsanitize=undefined -fno-sanitize-recover=all".
    const std::string cxx = testing::GetEnv("NPC_HOST_TEST_CXX", host::DefaultCxx());
    auto st = host::CompileSharedObject(cxx, dir + "/model.cc", dir + "/model.so", &log);
    if (!st) {
      ADD_FAILURE() << st.error().message << "\n" << log;
      return nullptr;
    }
    auto exe = host::HostExecutable::Load(dir + "/model.so");
    if (!exe) {
      ADD_FAILURE() << exe.error().message;
      return nullptr;
    }
    return std::move(*exe);
  }

  std::vector<Tensor> CompileAndRun(const xla::HloModuleProto& module, const std::vector<Tensor>& args) {
    auto exe = Compile(module);
    if (!exe) return {};
    auto out = exe->Run(args);
    if (!out) {
      ADD_FAILURE() << out.error().message;
      return {};
    }
    EXPECT_EQ(out->size(), exe->outputs().size());
    return std::move(*out);
  }

  TempDir tmp_{"npc-host-codegen"};
  int count_ = 0;
};

TEST_F(HostCodegenTest, DotTransposeBroadcast) {
  HloBuilder b("dot_transpose_broadcast");
  Op x = b.Parameter(0, xla::F32, {2, 3}, "x");      // 1..6
  Op y = b.Parameter(1, xla::F32, {3, 2}, "y");      // 7..12
  Op l = b.Parameter(2, xla::F32, {2, 2, 3}, "l");   // 1..12
  Op r = b.Parameter(3, xla::F32, {2, 3, 2}, "r");   // 1..12
  Op z = b.Parameter(4, xla::F32, {2, 3, 4}, "z");   // 0..23
  Op v = b.Parameter(5, xla::F32, {3}, "v");         // 1 2 3
  Op u = b.Parameter(6, xla::F32, {2}, "u");         // 10 20
  Op dot = b.Dot(x, y, {1}, {0});
  Op batch_dot = b.Dot(l, r, {2}, {1}, {0}, {0});
  Op yty = b.Dot(y, y, {0}, {0});                        // lhs contracting on its major dim
  Op full = b.Dot(x, b.Reshape(y, {2, 3}), {0, 1}, {0, 1});  // two contracting dims -> scalar
  Op tz = b.Transpose(z, {2, 0, 1});                     // [4,2,3]
  Op bv = b.Broadcast(v, {2, 3}, {1});
  Op bu = b.Broadcast(u, {2, 3}, {0});
  Op bs = b.Broadcast(b.ConstantF32(5), {2, 2}, {});
  Op bx = b.Broadcast(x, {2, 4, 3}, {0, 2});
  Op xxt = b.Dot(x, x, {1}, {1});                        // rhs contracting on its minor dim (x . W^T)
  Op batch_t = b.Dot(l, l, {2}, {2}, {0}, {0});          // per batch L L^T
  auto m = b.Build(b.Tuple({dot, batch_dot, yty, full, tz, bv, bu, bs, bx, xxt, batch_t}));

  std::vector<float> seq12(12), seq24(24);
  for (int i = 0; i < 12; ++i) seq12[i] = static_cast<float>(i + 1);
  for (int i = 0; i < 24; ++i) seq24[i] = static_cast<float>(i);
  auto out = CompileAndRun(m, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 2}, {7, 8, 9, 10, 11, 12}),
                               F32({2, 2, 3}, seq12), F32({2, 3, 2}, seq12), F32({2, 3, 4}, seq24),
                               F32({3}, {1, 2, 3}), F32({2}, {10, 20})});
  ASSERT_EQ(out.size(), 11u);
  // [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{2, 2}));
  ExpectFloats(out[0], {58, 64, 139, 154}, 0, "dot");
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{2, 2, 2}));
  ExpectFloats(out[1], {22, 28, 49, 64, 220, 244, 301, 334}, 0, "batch dot");
  // y^T y with y = [[7,8],[9,10],[11,12]]
  ExpectFloats(out[2], {251, 278, 278, 308}, 0, "y^T y");
  // sum of i * (i + 6) for i = 1..6
  EXPECT_TRUE(out[3].dims.empty());
  ExpectFloats(out[3], {217}, 0, "two contracting dims");
  // out[a][b][c] = z[b][c][a] = 12b + 4c + a
  ASSERT_EQ(out[4].dims, (std::vector<int64_t>{4, 2, 3}));
  auto tz_values = Values<float>(out[4]);
  EXPECT_EQ(tz_values[0 * 6 + 0 * 3 + 0], 0);
  EXPECT_EQ(tz_values[1 * 6 + 0 * 3 + 0], 1);
  EXPECT_EQ(tz_values[2 * 6 + 1 * 3 + 0], 14);
  EXPECT_EQ(tz_values[0 * 6 + 1 * 3 + 1], 16);
  EXPECT_EQ(tz_values[3 * 6 + 1 * 3 + 2], 23);
  for (int a = 0; a < 4; ++a)
    for (int bb = 0; bb < 2; ++bb)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(tz_values[a * 6 + bb * 3 + c], 12 * bb + 4 * c + a);
  ExpectFloats(out[5], {1, 2, 3, 1, 2, 3}, 0, "broadcast [3] -> [2,3] dims {1}");
  ExpectFloats(out[6], {10, 10, 10, 20, 20, 20}, 0, "broadcast [2] -> [2,3] dims {0}");
  ExpectFloats(out[7], {5, 5, 5, 5}, 0, "broadcast scalar");
  ExpectFloats(out[8], {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 5, 6}, 0,
               "broadcast [2,3] -> [2,4,3] dims {0,2}");
  ExpectFloats(out[9], {14, 32, 32, 77}, 0, "x x^T");
  // [[1,2,3],[4,5,6]] and [[7,8,9],[10,11,12]] times their transposes
  ExpectFloats(out[10], {14, 32, 32, 77, 194, 266, 266, 365}, 0, "batch L L^T");
}

TEST_F(HostCodegenTest, FloatElementwise) {
  HloBuilder b("float_elementwise");
  Op a = b.Parameter(0, xla::F32, {4}, "a");  // 1 -2 3.5 0.25
  Op c = b.Parameter(1, xla::F32, {4}, "c");  // 2 4 -0.5 0.25
  Op p = b.Parameter(2, xla::F32, {4}, "p");  // 1 4 0.25 100
  Op q = b.Parameter(3, xla::F32, {4}, "q");  // 3 0.5 -1 0
  Op n = b.Parameter(4, xla::F32, {2}, "n");  // NaN 1
  Op n2 = b.Parameter(5, xla::F32, {2}, "n2");  // 1 NaN
  std::vector<Op> outs = {
      b.Add(a, c), b.Sub(a, c), b.Mul(a, c), b.Div(a, c), b.Max(a, c), b.Binary("minimum", a, c), b.Neg(a),
      b.Unary("abs", a), b.Unary("sign", a), b.Unary("floor", a), b.Unary("ceil", a),
      b.Exp(a),
      b.Log(p), b.Unary("sqrt", p), b.Unary("rsqrt", p), b.Unary("tanh", q), b.Binary("power", p, q),
      b.Unary("logistic", q), b.Max(n, n2), b.Binary("minimum", n, n2)};
  auto m = b.Build(b.Tuple(outs));
  auto out = CompileAndRun(m, {F32({4}, {1, -2, 3.5f, 0.25f}), F32({4}, {2, 4, -0.5f, 0.25f}),
                               F32({4}, {1, 4, 0.25f, 100}), F32({4}, {3, 0.5f, -1, 0}), F32({2}, {kNaN, 1}),
                               F32({2}, {1, kNaN})});
  ASSERT_EQ(out.size(), outs.size());
  ExpectFloats(out[0], {3, 2, 3, 0.5f}, 0, "add");
  ExpectFloats(out[1], {-1, -6, 4, 0}, 0, "subtract");
  ExpectFloats(out[2], {2, -8, -1.75f, 0.0625f}, 0, "multiply");
  ExpectFloats(out[3], {0.5f, -0.5f, -7, 1}, 0, "divide");
  ExpectFloats(out[4], {2, 4, 3.5f, 0.25f}, 0, "maximum");
  ExpectFloats(out[5], {1, -2, -0.5f, 0.25f}, 0, "minimum");
  ExpectFloats(out[6], {-1, 2, -3.5f, -0.25f}, 0, "negate");
  ExpectFloats(out[7], {1, 2, 3.5f, 0.25f}, 0, "abs");
  ExpectFloats(out[8], {1, -1, 1, 1}, 0, "sign");
  ExpectFloats(out[9], {1, -2, 3, 0}, 0, "floor");
  ExpectFloats(out[10], {1, -2, 4, 1}, 0, "ceil");
  ExpectFloats(out[11], {2.7182818f, 0.13533528f, 33.115452f, 1.2840254f}, 1e-5f, "exp");
  ExpectFloats(out[12], {0, 1.3862944f, -1.3862944f, 4.6051702f}, 1e-6f, "log");
  ExpectFloats(out[13], {1, 2, 0.5f, 10}, 0, "sqrt");
  ExpectFloats(out[14], {1, 0.5f, 2, 0.1f}, 1e-7f, "rsqrt");
  ExpectFloats(out[15], {0.99505475f, 0.46211716f, -0.7615942f, 0}, 1e-6f, "tanh");
  ExpectFloats(out[16], {1, 2, 4, 1}, 0, "power");  // 1^3, 4^0.5, 0.25^-1, 100^0
  ExpectFloats(out[17], {0.95257413f, 0.62245935f, 0.26894142f, 0.5f}, 1e-6f, "logistic");
  ExpectFloats(out[18], {kNaN, kNaN}, 0, "maximum propagates NaN");
  ExpectFloats(out[19], {kNaN, kNaN}, 0, "minimum propagates NaN");
}

TEST_F(HostCodegenTest, IntegerArithmeticIsDefined) {
  HloBuilder b("integer_arithmetic");
  Op a = b.Parameter(0, xla::S32, {7}, "a");
  Op c = b.Parameter(1, xla::S32, {7}, "c");
  Op u = b.Parameter(2, xla::U32, {3}, "u");
  Op un = b.Parameter(3, xla::U32, {3}, "un");
  Op pa = b.Compare(a, c, "GT");
  Op pb = b.Compare(a, c, "LT");
  std::vector<Op> outs = {b.Div(a, c), b.Binary("remainder", a, c), b.Add(a, c), b.Mul(a, c), b.Neg(a),
                          b.Binary("power", a, c), b.Binary("shift-right-arithmetic", u, un), b.Add(pa, pb),
                          b.Mul(pa, pb)};
  auto m = b.Build(b.Tuple(outs));
  auto out = CompileAndRun(m, {S32({7}, {7, -7, 7, -7, 5, kIntMin, kIntMax}), S32({7}, {2, 2, -2, -2, 0, -1, 1}),
                               MakeTensor<uint32_t>(xla::U32, {3}, {0xFFFFFFF8u, 8, 0x80000000u}),
                               MakeTensor<uint32_t>(xla::U32, {3}, {1, 1, 40})});
  ASSERT_EQ(out.size(), outs.size());
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{3, -3, -3, 3, -1, kIntMin, kIntMax}));  // x/0 = -1
  EXPECT_EQ(Values<int32_t>(out[1]), (std::vector<int32_t>{1, -1, 1, -1, 5, 0, 0}));                // x%0 = x
  EXPECT_EQ(Values<int32_t>(out[2]), (std::vector<int32_t>{9, -5, 5, -9, 5, kIntMax, kIntMin}));   // wraps
  EXPECT_EQ(Values<int32_t>(out[3]), (std::vector<int32_t>{14, -14, -14, 14, 0, kIntMin, kIntMax}));
  EXPECT_EQ(Values<int32_t>(out[4]), (std::vector<int32_t>{-7, 7, -7, 7, -5, kIntMin, -kIntMax}));
  // 7^2, (-7)^2, 7^-2 = 0, (-7)^-2 = 0, 5^0, INT_MIN^-1 = 0, INT_MAX^1
  EXPECT_EQ(Values<int32_t>(out[5]), (std::vector<int32_t>{49, 49, 0, 0, 1, 0, kIntMax}));
  // Arithmetic shift reads unsigned bits as signed (XLA).
  EXPECT_EQ(Values<uint32_t>(out[6]), (std::vector<uint32_t>{0xFFFFFFFCu, 4, 0xFFFFFFFFu}));
  // On pred, add is or and multiply is and: a > c, a < c per element.
  EXPECT_EQ(Values<uint8_t>(out[7]), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(Values<uint8_t>(out[8]), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0}));
}

TEST_F(HostCodegenTest, IntegerPowerOfMinusOne) {
  HloBuilder b("pow_minus_one");
  Op a = b.Parameter(0, xla::S32, {4}, "a");
  Op c = b.Parameter(1, xla::S32, {4}, "c");
  auto out = CompileAndRun(b.Build(b.Binary("power", a, c)), {S32({4}, {-1, -1, 1, -1}), S32({4}, {3, -1, -5, 0})});
  ASSERT_EQ(out.size(), 1u);
  // XLA: a negative exponent gives 1 for base 1, else 0 (also for base -1).
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{-1, 0, 1, 1}));
}

TEST_F(HostCodegenTest, CompareSelectConvert) {
  HloBuilder b("compare_select_convert");
  Op a = b.Parameter(0, xla::F32, {4}, "a");  // 1 2 3 NaN
  Op c = b.Parameter(1, xla::F32, {4}, "c");  // 2 2 2 2
  Op f = b.Parameter(2, xla::F32, {8}, "f");
  Op i = b.Parameter(3, xla::S32, {2}, "i");
  std::vector<Op> outs;
  for (const char* dir : {"EQ", "NE", "LT", "LE", "GT", "GE"}) outs.push_back(b.Compare(a, c, dir));
  outs.push_back(b.Select(b.Compare(a, c, "LT"), a, c));
  outs.push_back(b.Convert(f, xla::S32));
  outs.push_back(b.Convert(i, xla::F32));
  Op as_pred = b.Convert(f, xla::PRED);
  outs.push_back(as_pred);
  outs.push_back(b.Convert(as_pred, xla::S32));
  outs.push_back(b.Convert(f, xla::U8));
  auto m = b.Build(b.Tuple(outs));
  auto out = CompileAndRun(m, {F32({4}, {1, 2, 3, kNaN}), F32({4}, {2, 2, 2, 2}),
                               F32({8}, {-1.5f, -0.5f, 0.5f, 2.9f, kNaN, 3e9f, -3e9f, -0.0f}), S32({2}, {-3, 7})});
  ASSERT_EQ(out.size(), outs.size());
  using P = std::vector<uint8_t>;
  EXPECT_EQ(out[0].type, xla::PRED);
  EXPECT_EQ(Values<uint8_t>(out[0]), (P{0, 1, 0, 0})) << "EQ";
  EXPECT_EQ(Values<uint8_t>(out[1]), (P{1, 0, 1, 1})) << "NE";
  EXPECT_EQ(Values<uint8_t>(out[2]), (P{1, 0, 0, 0})) << "LT";
  EXPECT_EQ(Values<uint8_t>(out[3]), (P{1, 1, 0, 0})) << "LE";
  EXPECT_EQ(Values<uint8_t>(out[4]), (P{0, 0, 1, 0})) << "GT";
  EXPECT_EQ(Values<uint8_t>(out[5]), (P{0, 1, 1, 0})) << "GE";
  ExpectFloats(out[6], {1, 2, 2, 2}, 0, "select");
  // Truncation toward zero; NaN -> 0; out of range clamps.
  EXPECT_EQ(Values<int32_t>(out[7]), (std::vector<int32_t>{-1, 0, 0, 2, 0, kIntMax, kIntMin, 0}));
  ExpectFloats(out[8], {-3, 7}, 0, "s32 -> f32");
  EXPECT_EQ(Values<uint8_t>(out[9]), (P{1, 1, 1, 1, 1, 1, 1, 0})) << "f32 -> pred";
  EXPECT_EQ(Values<int32_t>(out[10]), (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(Values<uint8_t>(out[11]), (P{0, 0, 0, 2, 0, 255, 0, 0})) << "f32 -> u8 clamps";
}

TEST_F(HostCodegenTest, Reduce) {
  HloBuilder b("reduce");
  Op x = b.Parameter(0, xla::F32, {2, 3}, "x");  // [[1,5,3],[4,2,6]]
  const int64_t add = b.MakeReducer("add", xla::F32);
  const int64_t max = b.MakeReducer("maximum", xla::F32);
  Op zero = b.ConstantF32(0);
  Op sum1 = b.Reduce(x, zero, {1}, add);
  Op sum0 = b.Reduce(x, zero, {0}, add);
  Op sum_all = b.Reduce(x, b.ConstantF32(100), {0, 1}, add);
  Op max0 = b.Reduce(x, b.ConstantF32(-kInf), {0}, max);
  Op none = b.Reduce(x, zero, {}, add);  // no dimensions: adds the init to every element

  // Variadic reduce: argmax over dimension 1, reducer (v0, i0, v1, i1) -> (v, i).
  HloBuilder r("argmax");
  Op av = r.Parameter(0, xla::F32, {}, "acc_v");
  Op ai = r.Parameter(1, xla::S32, {}, "acc_i");
  Op xv = r.Parameter(2, xla::F32, {}, "x_v");
  Op xi = r.Parameter(3, xla::S32, {}, "x_i");
  Op take = r.Compare(xv, av, "GT");
  const int64_t argmax = b.AddComputation(r, r.Tuple({r.Select(take, xv, av), r.Select(take, xi, ai)}));
  Op idx = b.Iota(xla::S32, {2, 3}, 1);
  xla::HloInstructionProto reduce;
  reduce.set_opcode("reduce");
  reduce.add_dimensions(1);
  reduce.add_called_computation_ids(argmax);
  Op am = b.AddInstruction(reduce, {x, idx, b.ConstantF32(-kInf), b.ConstantS32(-1)},
                           HloBuilder::TupleShape({HloBuilder::ArrayShape(xla::F32, {2}),
                                                   HloBuilder::ArrayShape(xla::S32, {2})}));
  auto m = b.Build(b.Tuple({sum1, sum0, sum_all, max0, none, b.GetTupleElement(am, 0), b.GetTupleElement(am, 1)}));
  auto out = CompileAndRun(m, {F32({2, 3}, {1, 5, 3, 4, 2, 6})});
  ASSERT_EQ(out.size(), 7u);
  ExpectFloats(out[0], {9, 12}, 0, "sum over dim 1");
  ExpectFloats(out[1], {5, 7, 9}, 0, "sum over dim 0");
  EXPECT_TRUE(out[2].dims.empty());
  ExpectFloats(out[2], {121}, 0, "sum over all, init 100");
  ExpectFloats(out[3], {4, 5, 6}, 0, "max over dim 0");
  ExpectFloats(out[4], {1, 5, 3, 4, 2, 6}, 0, "reduce over no dimensions");
  ExpectFloats(out[5], {5, 6}, 0, "argmax values");
  EXPECT_EQ(Values<int32_t>(out[6]), (std::vector<int32_t>{1, 2})) << "argmax indices";
}

TEST_F(HostCodegenTest, ShapesTuplesAndCall) {
  HloBuilder b("shapes");
  Op x = b.Parameter(0, xla::F32, {2, 3}, "x");  // 1..6
  Op v = b.Parameter(1, xla::F32, {2}, "v");     // 10 20
  Op iota_s = b.Iota(xla::S32, {2, 3}, 1);
  Op iota_f = b.Iota(xla::F32, {3, 2}, 0);
  Op ten = b.Iota(xla::S32, {10}, 0);
  Op strided = b.Slice(ten, {1}, {8}, {3});
  Op sub = b.Slice(x, {0, 1}, {2, 3}, {1, 1});
  Op col = b.Reshape(v, {2, 1});
  Op cat1 = b.Concatenate({col, x}, 1);                                 // [2,4]
  Op cat0 = b.Concatenate({b.Reshape(v, {1, 2}), b.Reshape(v, {1, 2}), b.Reshape(x, {3, 2})}, 0);  // [5,2]
  Op reshaped = b.Reshape(x, {3, 2});
  Op t = b.Tuple({x, v});
  Op gte = b.GetTupleElement(t, 1);

  // A called computation returning a tuple: f(a, s) = (a * s, a + s) with s broadcast.
  HloBuilder f("mul_add");
  Op fa = f.Parameter(0, xla::F32, {2, 3}, "a");
  Op fs = f.Parameter(1, xla::F32, {}, "s");
  Op fsb = f.Broadcast(fs, {2, 3}, {});
  const int64_t fid = b.AddComputation(f, f.Tuple({f.Mul(fa, fsb), f.Add(fa, fsb)}));
  auto shape23 = HloBuilder::ArrayShape(xla::F32, {2, 3});
  Op call = b.Call({x, b.ConstantF32(2)}, fid, HloBuilder::TupleShape({shape23, shape23}));
  auto m = b.Build(b.Tuple({iota_s, iota_f, strided, sub, cat1, cat0, reshaped, gte, b.GetTupleElement(call, 0),
                            b.GetTupleElement(call, 1), t}));
  auto out = CompileAndRun(m, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({2}, {10, 20})});
  ASSERT_EQ(out.size(), 12u);  // the nested tuple t contributes two leaves
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{0, 1, 2, 0, 1, 2})) << "iota s32 dim 1";
  ExpectFloats(out[1], {0, 0, 1, 1, 2, 2}, 0, "iota f32 dim 0");
  EXPECT_EQ(Values<int32_t>(out[2]), (std::vector<int32_t>{1, 4, 7})) << "slice [1:8:3]";
  EXPECT_EQ(out[3].dims, (std::vector<int64_t>{2, 2}));
  ExpectFloats(out[3], {2, 3, 5, 6}, 0, "slice [0:2, 1:3]");
  ExpectFloats(out[4], {10, 1, 2, 3, 20, 4, 5, 6}, 0, "concatenate dim 1");
  ExpectFloats(out[5], {10, 20, 10, 20, 1, 2, 3, 4, 5, 6}, 0, "concatenate dim 0");
  EXPECT_EQ(out[6].dims, (std::vector<int64_t>{3, 2}));
  ExpectFloats(out[6], {1, 2, 3, 4, 5, 6}, 0, "reshape");
  ExpectFloats(out[7], {10, 20}, 0, "get-tuple-element");
  ExpectFloats(out[8], {2, 4, 6, 8, 10, 12}, 0, "call result 0");
  ExpectFloats(out[9], {3, 4, 5, 6, 7, 8}, 0, "call result 1");
  ExpectFloats(out[10], {1, 2, 3, 4, 5, 6}, 0, "tuple leaf 0");
  ExpectFloats(out[11], {10, 20}, 0, "tuple leaf 1");
}

xla::HloInstructionProto Instruction(const std::string& opcode) {
  xla::HloInstructionProto inst;
  inst.set_opcode(opcode);
  return inst;
}

TEST_F(HostCodegenTest, PadReverseDynamicSliceAndBitOps) {
  HloBuilder b("more_ops");
  Op x = b.Parameter(0, xla::F32, {2, 3}, "x");    // 1..6
  Op k = b.Parameter(1, xla::S32, {}, "k");        // 1
  Op bits = b.Parameter(2, xla::S32, {4}, "bits");  // 1 -8 12 -1
  Op sh = b.Parameter(3, xla::S32, {4}, "sh");      // 1 2 40 31
  auto f32 = [](std::vector<int64_t> d) { return HloBuilder::ArrayShape(xla::F32, d); };

  // pad: low 1 / high 0 / interior 1 on dim 0; low -1 / high 1 on dim 1.
  auto pad = Instruction("pad");
  auto* d0 = pad.mutable_padding_config()->add_dimensions();
  d0->set_edge_padding_low(1);
  d0->set_interior_padding(1);
  auto* d1 = pad.mutable_padding_config()->add_dimensions();
  d1->set_edge_padding_low(-1);
  d1->set_edge_padding_high(1);
  Op padded = b.AddInstruction(pad, {x, b.ConstantF32(0)}, f32({4, 3}));

  auto rev = Instruction("reverse");
  rev.add_dimensions(1);
  Op reversed = b.AddInstruction(rev, {x}, f32({2, 3}));

  auto ds = Instruction("dynamic-slice");
  ds.add_dynamic_slice_sizes(2);
  ds.add_dynamic_slice_sizes(2);
  Op dsliced = b.AddInstruction(ds, {x, b.ConstantS32(0), k}, f32({2, 2}));
  // Start 5 is clamped to 3 - 2 = 1.
  Op dclamped = b.AddInstruction(ds, {x, b.ConstantS32(0), b.ConstantS32(5)}, f32({2, 2}));

  auto dus = Instruction("dynamic-update-slice");
  Op updated = b.AddInstruction(dus, {x, b.ConstantF32Array({1, 2}, {-1, -2}), k, k}, f32({2, 3}));

  auto clamp = Instruction("clamp");
  Op clamped = b.AddInstruction(clamp, {b.ConstantF32(2), x, b.ConstantF32(4.5f)}, f32({2, 3}));

  Op band = b.Binary("and", bits, sh);
  Op bor = b.Binary("or", bits, sh);
  Op bxor = b.Binary("xor", bits, sh);
  Op bnot = b.Unary("not", bits);
  Op shl = b.Binary("shift-left", bits, sh);
  Op shr = b.Binary("shift-right-logical", bits, sh);
  Op sar = b.Binary("shift-right-arithmetic", bits, sh);
  Op pnot = b.Unary("not", b.Compare(bits, sh, "LT"));
  auto m = b.Build(b.Tuple({padded, reversed, dsliced, dclamped, updated, clamped, band, bor, bxor, bnot, shl, shr,
                            sar, pnot}));
  auto out = CompileAndRun(m, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), S32({}, {1}), S32({4}, {1, -8, 12, -1}),
                               S32({4}, {1, 2, 40, 31})});
  ASSERT_EQ(out.size(), 14u);
  ExpectFloats(out[0], {0, 0, 0, 2, 3, 0, 0, 0, 0, 5, 6, 0}, 0, "pad");
  ExpectFloats(out[1], {3, 2, 1, 6, 5, 4}, 0, "reverse dim 1");
  ExpectFloats(out[2], {2, 3, 5, 6}, 0, "dynamic-slice");
  ExpectFloats(out[3], {2, 3, 5, 6}, 0, "dynamic-slice clamps the start");
  ExpectFloats(out[4], {1, 2, 3, 4, -1, -2}, 0, "dynamic-update-slice");
  ExpectFloats(out[5], {2, 2, 3, 4, 4.5f, 4.5f}, 0, "clamp");
  EXPECT_EQ(Values<int32_t>(out[6]), (std::vector<int32_t>{1, 0, 8, 31}));
  EXPECT_EQ(Values<int32_t>(out[7]), (std::vector<int32_t>{1, -6, 44, -1}));
  EXPECT_EQ(Values<int32_t>(out[8]), (std::vector<int32_t>{0, -6, 36, -32}));
  EXPECT_EQ(Values<int32_t>(out[9]), (std::vector<int32_t>{-2, 7, -13, 0}));
  EXPECT_EQ(Values<int32_t>(out[10]), (std::vector<int32_t>{2, -32, 0, kIntMin})) << "shift-left";
  EXPECT_EQ(Values<int32_t>(out[11]), (std::vector<int32_t>{0, 0x3ffffffe, 0, 1})) << "shift-right-logical";
  EXPECT_EQ(Values<int32_t>(out[12]), (std::vector<int32_t>{0, -2, 0, -1})) << "shift-right-arithmetic";
  EXPECT_EQ(Values<uint8_t>(out[13]), (std::vector<uint8_t>{1, 0, 0, 0})) << "not of pred";
}

TEST_F(HostCodegenTest, OtherElementTypesAndScalarRoot) {
  HloBuilder b("types");
  Op x = b.Parameter(0, xla::S64, {3}, "x");
  Op big = b.ConstantS64(int64_t{1} << 40);
  Op sum = b.Add(x, b.Broadcast(big, {3}, {}));
  const int64_t add = b.MakeReducer("add", xla::S64);
  Op total = b.Reduce(sum, b.ConstantS64(0), {0}, add);  // a non-tuple scalar root
  auto m = b.Build(total);
  auto out = CompileAndRun(m, {MakeTensor<int64_t>(xla::S64, {3}, {1, 2, -3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].dims.empty());
  EXPECT_EQ(Values<int64_t>(out[0]), (std::vector<int64_t>{3 * (int64_t{1} << 40)}));

  HloBuilder d("f64");
  Op y = d.Parameter(0, xla::F64, {2}, "y");
  Op yy = d.Mul(y, y);
  auto md = d.Build(d.Tuple({yy, d.Convert(yy, xla::F32), d.Convert(d.Convert(y, xla::S32), xla::F64)}));
  auto outd = CompileAndRun(md, {MakeTensor<double>(xla::F64, {2}, {1.5, -0.1})});
  ASSERT_EQ(outd.size(), 3u);
  EXPECT_EQ(Values<double>(outd[0]), (std::vector<double>{2.25, -0.1 * -0.1}));
  ExpectFloats(outd[1], {2.25f, static_cast<float>(-0.1 * -0.1)}, 0, "f64 -> f32");
  EXPECT_EQ(Values<double>(outd[2]), (std::vector<double>{1, 0}));
}

TEST_F(HostCodegenTest, GatherScatter) {
  HloBuilder b("gather_scatter");
  Op x = b.Parameter(0, xla::F32, {4, 3}, "x");  // 0..11
  auto f32 = [](std::vector<int64_t> d) { return HloBuilder::ArrayShape(xla::F32, d); };
  // Embedding lookup: rows 2 and 7 (clamped to 3).
  auto g1 = Instruction("gather");
  g1.mutable_gather_dimension_numbers()->add_offset_dims(1);
  g1.mutable_gather_dimension_numbers()->add_collapsed_slice_dims(0);
  g1.mutable_gather_dimension_numbers()->add_start_index_map(0);
  g1.mutable_gather_dimension_numbers()->set_index_vector_dim(1);
  g1.add_gather_slice_sizes(1);
  g1.add_gather_slice_sizes(3);
  Op rows = b.AddInstruction(g1, {x, b.ConstantS32Array({2}, {2, 7})}, f32({2, 3}));
  // 2x2 windows at (0,1) and (2,0), index vectors along dimension 1 of the indices.
  auto g2 = Instruction("gather");
  g2.mutable_gather_dimension_numbers()->add_offset_dims(1);
  g2.mutable_gather_dimension_numbers()->add_offset_dims(2);
  g2.mutable_gather_dimension_numbers()->add_start_index_map(0);
  g2.mutable_gather_dimension_numbers()->add_start_index_map(1);
  g2.mutable_gather_dimension_numbers()->set_index_vector_dim(1);
  g2.add_gather_slice_sizes(2);
  g2.add_gather_slice_sizes(2);
  Op windows = b.AddInstruction(g2, {x, b.ConstantS32Array({2, 2}, {0, 1, 2, 0})}, f32({2, 2, 2}));

  // Scatter-add of three rows at rows 1, 5 (out of bounds: skipped) and 1.
  const int64_t add = b.MakeReducer("add", xla::F32);
  auto sc = Instruction("scatter");
  sc.mutable_scatter_dimension_numbers()->add_update_window_dims(1);
  sc.mutable_scatter_dimension_numbers()->add_inserted_window_dims(0);
  sc.mutable_scatter_dimension_numbers()->add_scatter_dims_to_operand_dims(0);
  sc.mutable_scatter_dimension_numbers()->set_index_vector_dim(1);
  sc.add_called_computation_ids(add);
  Op added = b.AddInstruction(
      sc, {x, b.ConstantS32Array({3}, {1, 5, 1}), b.ConstantF32Array({3, 3}, {1, 1, 1, 2, 2, 2, 10, 20, 30})},
      f32({4, 3}));
  // Scatter-assign of one row at row 2 (the form torch-xla emits for index_copy).
  HloBuilder assign("assign");
  assign.Parameter(0, xla::F32, {}, "old");
  Op repl = assign.Parameter(1, xla::F32, {}, "new");
  const int64_t assign_id = b.AddComputation(assign, repl);
  auto sa = sc;
  sa.clear_called_computation_ids();
  sa.add_called_computation_ids(assign_id);
  Op assigned = b.AddInstruction(sa, {x, b.ConstantS32Array({1}, {2}), b.ConstantF32Array({1, 3}, {-1, -2, -3})},
                                 f32({4, 3}));
  auto m = b.Build(b.Tuple({rows, windows, added, assigned}));
  std::vector<float> seq(12);
  for (int i = 0; i < 12; ++i) seq[i] = static_cast<float>(i);
  auto out = CompileAndRun(m, {F32({4, 3}, seq)});
  ASSERT_EQ(out.size(), 4u);
  ExpectFloats(out[0], {6, 7, 8, 9, 10, 11}, 0, "gather rows");
  ExpectFloats(out[1], {1, 2, 4, 5, 6, 7, 9, 10}, 0, "gather windows");
  ExpectFloats(out[2], {0, 1, 2, 14, 25, 36, 6, 7, 8, 9, 10, 11}, 0, "scatter add");
  ExpectFloats(out[3], {0, 1, 2, 3, 4, 5, -1, -2, -3, 9, 10, 11}, 0, "scatter assign");
}

TEST_F(HostCodegenTest, SixteenBitFloats) {
  HloBuilder b("sixteen_bit");
  Op x = b.Parameter(0, xla::F32, {3}, "x");
  Op h = b.Parameter(1, xla::F32, {6}, "h");
  Op y = b.Parameter(2, xla::BF16, {2}, "y");   // 1 3
  Op l = b.Parameter(3, xla::BF16, {1, 3}, "l");  // 1 2 3
  Op r = b.Parameter(4, xla::BF16, {3, 1}, "r");  // 1 1 1
  Op bf_round = b.Convert(b.Convert(x, xla::BF16), xla::F32);
  Op f16_round = b.Convert(b.Convert(h, xla::F16), xla::F32);
  Op yy = b.Add(b.Mul(y, y), y);
  auto k = xla::HloInstructionProto();
  k.set_opcode("constant");
  k.mutable_literal()->set_bf16s(std::string("\xc0\x3f", 2));  // 1.5
  Op c = b.AddInstruction(k, {}, HloBuilder::ArrayShape(xla::BF16, {}));
  Op yc = b.Add(y, b.Broadcast(c, {2}, {}));
  Op dot = b.Dot(l, r, {1}, {0});
  const int64_t add = b.MakeReducer("add", xla::BF16);
  auto zero = xla::HloInstructionProto();
  zero.set_opcode("constant");
  zero.mutable_literal()->set_bf16s(std::string("\0\0", 2));
  Op sum = b.Reduce(y, b.AddInstruction(zero, {}, HloBuilder::ArrayShape(xla::BF16, {})), {0}, add);
  auto m = b.Build(b.Tuple({bf_round, f16_round, yy, yc, dot, sum}));
  const float e11 = std::ldexp(1.0f, -11), e24 = std::ldexp(1.0f, -24);
  auto out = CompileAndRun(
      m, {F32({3}, {1 + std::ldexp(1.0f, -8), 1 + 3 * std::ldexp(1.0f, -8), -2.5f}),
          F32({6}, {1 + e11, 1 + 3 * e11, 70000, e24, 0.75f * e24, 0.25f * e24}),
          MakeTensor<uint16_t>(xla::BF16, {2}, {0x3f80, 0x4040}),
          MakeTensor<uint16_t>(xla::BF16, {1, 3}, {0x3f80, 0x4000, 0x4040}),
          MakeTensor<uint16_t>(xla::BF16, {3, 1}, {0x3f80, 0x3f80, 0x3f80})});
  ASSERT_EQ(out.size(), 6u);
  // Round to nearest, ties to even.
  ExpectFloats(out[0], {1, 1.015625f, -2.5f}, 0, "f32 -> bf16 -> f32");
  ExpectFloats(out[1], {1, 1 + 4 * e11, kInf, e24, e24, 0}, 0, "f32 -> f16 -> f32");
  EXPECT_EQ(out[2].type, xla::BF16);
  EXPECT_EQ(Values<uint16_t>(out[2]), (std::vector<uint16_t>{0x4000, 0x4140})) << "y*y + y = 2, 12";
  EXPECT_EQ(Values<uint16_t>(out[3]), (std::vector<uint16_t>{0x4020, 0x4090})) << "y + 1.5 = 2.5, 4.5";
  EXPECT_EQ(Values<uint16_t>(out[4]), (std::vector<uint16_t>{0x40c0})) << "dot = 6";
  EXPECT_EQ(Values<uint16_t>(out[5]), (std::vector<uint16_t>{0x4080})) << "sum = 4";
}

// One replica: all-reduce (variadic, tuple-shaped) and all-gather are identities;
// a replica group of two is refused.
TEST_F(HostCodegenTest, SingleReplicaCollectivesAreIdentities) {
  HloBuilder b("collectives");
  Op x = b.Parameter(0, xla::F32, {2, 2}, "x");
  Op s = b.Parameter(1, xla::F32, {}, "s");
  xla::HloInstructionProto ar;
  ar.set_opcode("all-reduce");
  // No replica groups: all replicas, which is this one.
  Op reduced = b.AddInstruction(ar, {x, s},
                                HloBuilder::TupleShape({HloBuilder::ArrayShape(xla::F32, {2, 2}),
                                                        HloBuilder::ArrayShape(xla::F32, {})}));
  xla::HloInstructionProto ag;
  ag.set_opcode("all-gather");
  ag.add_dimensions(0);
  ag.add_replica_groups()->add_replica_ids(0);
  Op gathered = b.AddInstruction(ag, {b.GetTupleElement(reduced, 0)}, HloBuilder::ArrayShape(xla::F32, {2, 2}));
  xla::HloModuleProto m = b.Build(b.Tuple({gathered, b.GetTupleElement(reduced, 1)}));
  auto out = CompileAndRun(m, {F32({2, 2}, {1, 2, 3, 4}), F32({}, {5})});
  ASSERT_EQ(out.size(), 2u);
  ExpectFloats(out[0], {1, 2, 3, 4});
  ExpectFloats(out[1], {5});

  HloBuilder b2("two_replicas");
  Op y = b2.Parameter(0, xla::F32, {2}, "y");
  xla::HloInstructionProto ar2;
  ar2.set_opcode("all-reduce");
  auto* group = ar2.add_replica_groups();
  group->add_replica_ids(0);
  group->add_replica_ids(1);
  xla::HloModuleProto m2 = b2.Build(b2.AddInstruction(ar2, {y}, HloBuilder::ArrayShape(xla::F32, {2})));
  auto failed = host::GenerateCpp(m2);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("2 participants"), std::string::npos) << failed.error().message;
}

// ---- ops for real framework graphs: while, rng-bit-generator, Neuron custom-calls ----

xla::HloModuleProto Parse(const std::string& text) {
  auto m = hlo::ParseHloModule(text, "test.hlo");
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : xla::HloModuleProto();
}

Tensor U64s(std::vector<int64_t> dims, const std::vector<uint64_t>& v) {
  return MakeTensor(xla::U64, std::move(dims), v);
}

// A tuple-state loop over s32, u32 (wrapping) and bf16 (rounded) values:
// i from 0 to 3; x = x * 3 + 1 in u32; f = f * 2; acc += i * i.
constexpr char kWhileModule[] = R"(
HloModule while_loop

%cond (s: (s32[], u32[], bf16[], s32[])) -> pred[] {
  %s = (s32[], u32[], bf16[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (s: (s32[], u32[], bf16[], s32[])) -> (s32[], u32[], bf16[], s32[]) {
  %s = (s32[], u32[], bf16[], s32[]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = u32[] get-tuple-element(%s), index=1
  %f = bf16[] get-tuple-element(%s), index=2
  %acc = s32[] get-tuple-element(%s), index=3
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %three = u32[] constant(3)
  %uone = u32[] constant(1)
  %x3 = u32[] multiply(%x, %three)
  %x1 = u32[] add(%x3, %uone)
  %two = bf16[] constant(2)
  %f2 = bf16[] multiply(%f, %two)
  %sq = s32[] multiply(%i1, %i1)
  %acc1 = s32[] add(%acc, %sq)
  ROOT %next = (s32[], u32[], bf16[], s32[]) tuple(%i1, %x1, %f2, %acc1)
}

ENTRY %main (x: u32[], f: bf16[]) -> (s32[], u32[], bf16[], s32[]) {
  %x = u32[] parameter(0)
  %f = bf16[] parameter(1)
  %zero = s32[] constant(0)
  %init = (s32[], u32[], bf16[], s32[]) tuple(%zero, %x, %f, %zero)
  ROOT %loop = (s32[], u32[], bf16[], s32[]) while(%init), condition=%cond, body=%body
}
)";

TEST_F(HostCodegenTest, WhileLoopWithTupleState) {
  auto out = CompileAndRun(Parse(kWhileModule), {MakeTensor<uint32_t>(xla::U32, {}, {0xFFFFFFFFu}),
                                                 MakeTensor<uint16_t>(xla::BF16, {}, {0x3FC0})});  // 1.5
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{3}));
  // 0xFFFFFFFF * 3 + 1 = 0xFFFFFFFE, then 0xFFFFFFFB, then 0xFFFFFFF2 (mod 2^32).
  EXPECT_EQ(Values<uint32_t>(out[1]), (std::vector<uint32_t>{0xFFFFFFF2u}));
  EXPECT_EQ(Values<uint16_t>(out[2]), (std::vector<uint16_t>{0x4140})) << "1.5 * 2^3 = 12";
  EXPECT_EQ(Values<int32_t>(out[3]), (std::vector<int32_t>{1 + 4 + 9}));
}

TEST_F(HostCodegenTest, WhileLoopThatNeverRunsItsBody) {
  // The condition is false at once: the result is the initial state.
  auto out = CompileAndRun(Parse(std::string(kWhileModule).replace(std::string(kWhileModule).find("constant(3)"), 11,
                                                                   "constant(0)")),
                           {MakeTensor<uint32_t>(xla::U32, {}, {7}), MakeTensor<uint16_t>(xla::BF16, {}, {0x3FC0})});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{0}));
  EXPECT_EQ(Values<uint32_t>(out[1]), (std::vector<uint32_t>{7}));
  EXPECT_EQ(Values<uint16_t>(out[2]), (std::vector<uint16_t>{0x3FC0}));
}

// rng-bit-generator is XLA's Philox: the results are Random123's published
// Philox4x32-10 known-answer vectors (counter, key -> output):
//   (0,0,0,0), (0,0) -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   (ffffffff x4), (ffffffff x2) -> 408f276d 41c83b0e a20bc7c6 6d5451fd
//   (243f6a88 85a308d3 13198a2e 03707344), (a4093822 299f31d0)
//     -> d16cfe09 94fdcceb 5001e420 24126ea1
constexpr char kRngModule[] = R"(
HloModule rng

ENTRY %main (s3: u64[3], s2: u64[2], c: u64[3]) -> (u64[3], u32[4], u64[3], u64[2], u64[2], u32[4], u64[3], u32[5], u64[3], u16[9]) {
  %s3 = u64[3] parameter(0)
  %s2 = u64[2] parameter(1)
  %c = u64[3] parameter(2)
  %r0 = (u64[3], u32[4]) rng-bit-generator(%s3), algorithm=rng_philox
  %a = u64[3] get-tuple-element(%r0), index=0
  %b = u32[4] get-tuple-element(%r0), index=1
  %r1 = (u64[3], u64[2]) rng-bit-generator(%s3), algorithm=rng_default
  %c1 = u64[3] get-tuple-element(%r1), index=0
  %d = u64[2] get-tuple-element(%r1), index=1
  %r2 = (u64[2], u32[4]) rng-bit-generator(%s2), algorithm=rng_default
  %e = u64[2] get-tuple-element(%r2), index=0
  %f = u32[4] get-tuple-element(%r2), index=1
  %r3 = (u64[3], u32[5]) rng-bit-generator(%c), algorithm=rng_default
  %g = u64[3] get-tuple-element(%r3), index=0
  %h = u32[5] get-tuple-element(%r3), index=1
  %r4 = (u64[3], u16[9]) rng-bit-generator(%s3), algorithm=rng_default
  %i = u64[3] get-tuple-element(%r4), index=0
  %j = u16[9] get-tuple-element(%r4), index=1
  ROOT %out = (u64[3], u32[4], u64[3], u64[2], u64[2], u32[4], u64[3], u32[5], u64[3], u16[9]) tuple(%a, %b, %c1, %d, %e, %f, %g, %h, %i, %j)
}
)";

TEST_F(HostCodegenTest, RngBitGeneratorIsXlasPhilox) {
  const uint64_t ones = ~uint64_t{0};
  // s3 = {key 0, counter 0}; s2 = {key ~0, counter low ~0} (the high word is the key);
  // c: a counter whose low word carries into the high word.
  auto out = CompileAndRun(Parse(kRngModule), {U64s({3}, {0, 0, 0}), U64s({2}, {ones, ones}),
                                               U64s({3}, {0x299f31d0a4093822ull, ones, 5})});
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(Values<uint32_t>(out[1]), (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Values<uint64_t>(out[0]), (std::vector<uint64_t>{0, 1, 0})) << "one block used";
  // 64-bit bits take two words each, low word first.
  EXPECT_EQ(Values<uint64_t>(out[3]), (std::vector<uint64_t>{0xe169c58d6627e8d5ull, 0x9b00dbd8bc57ac4cull}));
  EXPECT_EQ(Values<uint64_t>(out[2]), (std::vector<uint64_t>{0, 1, 0}));
  EXPECT_EQ(Values<uint32_t>(out[5]), (std::vector<uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Values<uint64_t>(out[4]), (std::vector<uint64_t>{ones, 0})) << "u64[2]: {key, counter low + 1}";
  // Two blocks: counters (5:~0) and (6:0); the new counter is (6:1).
  EXPECT_EQ(Values<uint64_t>(out[6]), (std::vector<uint64_t>{0x299f31d0a4093822ull, 1, 6}));
  EXPECT_EQ(Values<uint32_t>(out[7]).size(), 5u);
  // 16-bit bits are the low halves of 32-bit words; 9 of them take 3 blocks.
  const auto halves = Values<uint16_t>(out[9]);
  ASSERT_EQ(halves.size(), 9u);
  EXPECT_EQ((std::vector<uint16_t>(halves.begin(), halves.begin() + 4)),
            (std::vector<uint16_t>{0xe8d5, 0xc58d, 0xac4c, 0xdbd8}));
  EXPECT_EQ(Values<uint64_t>(out[8]), (std::vector<uint64_t>{0, 3, 0}));

  // The third known-answer vector, and the block after a counter: block 1 of
  // counter c is block 0 of counter c + 1.
  auto kat3 = CompileAndRun(Parse(kRngModule), {U64s({3}, {0x299f31d0a4093822ull, 0x85a308d3243f6a88ull,
                                                           0x0370734413198a2eull}),
                                                U64s({2}, {0, 0}), U64s({3}, {0, 1, 0})});
  ASSERT_EQ(kat3.size(), 10u);
  EXPECT_EQ(Values<uint32_t>(kat3[1]), (std::vector<uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  // s2 = {0, 0}: key 0, counter 0 (high word = key = 0): the first vector again.
  EXPECT_EQ(Values<uint32_t>(kat3[5]), (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  const auto after = Values<uint32_t>(kat3[7]);  // counter 1
  ASSERT_EQ(after.size(), 5u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(halves[4 + k], static_cast<uint16_t>(after[k])) << "element " << 4 + k << " of counter 0 is element "
                                                               << k << " of counter 1";
  }
}

TEST_F(HostCodegenTest, RngBitGeneratorRefusesThreeFry) {
  auto m = Parse(R"(
HloModule rng3
ENTRY %main (s: u64[2]) -> (u64[2], u32[4]) {
  %s = u64[2] parameter(0)
  ROOT %r = (u64[2], u32[4]) rng-bit-generator(%s), algorithm=rng_three_fry
}
)");
  auto src = host::GenerateCpp(m);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.error().message.find("rng_three_fry is not supported"), std::string::npos) << src.error().message;
  EXPECT_NE(src.error().message.find("%r"), std::string::npos) << src.error().message;
  auto failures = host::UnsupportedOpcodes(m);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_TRUE(failures.count("rng-bit-generator"));
}

constexpr char kNeuronModule[] = R"(
HloModule neuron_custom_calls

ENTRY %main (x: f32[2,3], y: f32[1,3], dy: f32[1,3], h: bf16[3]) -> (f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[1,3], bf16[3], bf16[3]) {
  %x = f32[2,3] parameter(0)
  %y = f32[1,3] parameter(1)
  %dy = f32[1,3] parameter(2)
  %h = bf16[3] parameter(3)
  %gelu = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronGelu"
  %dgelu = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronGeluBackward"
  %sm1 = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="1"
  %sm0 = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="0"
  %dsm = f32[1,3] custom-call(%y, %dy), custom_call_target="AwsNeuronSoftmaxBackward", backend_config="1"
  %hgelu = bf16[3] custom-call(%h), custom_call_target="AwsNeuronGelu"
  %hsm = bf16[3] custom-call(%h), custom_call_target="AwsNeuronSoftmax", backend_config="0"
  ROOT %out = (f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[1,3], bf16[3], bf16[3]) tuple(%gelu, %dgelu, %sm1, %sm0, %dsm, %hgelu, %hsm)
}
)";

// Values: Phi(1) = 0.8413447460685429, phi(1) = exp(-1/2)/sqrt(2 pi) =
// 0.24197072451914337, Phi(2) = 0.9772498680518208, phi(2) = 0.05399096651318806.
TEST_F(HostCodegenTest, NeuronGeluAndSoftmax) {
  auto out = CompileAndRun(Parse(kNeuronModule),
                           {F32({2, 3}, {1, 2, 3, 0, -1, 0}), F32({1, 3}, {0.2f, 0.3f, 0.5f}), F32({1, 3}, {1, 2, 3}),
                            MakeTensor<uint16_t>(xla::BF16, {3}, {0x3F80, 0x0000, 0xBF80})});  // 1, 0, -1
  ASSERT_EQ(out.size(), 7u);
  // GELU(x) = x * Phi(x).
  ExpectFloats(out[0], {0.8413447f, 2 * 0.9772499f, 2.9959503f, 0, -0.1586553f, 0}, 1e-6f, "gelu");
  // dGELU/dx = Phi(x) + x * phi(x): Phi(3) = 0.9986501, phi(3) = 0.0044318.
  ExpectFloats(out[1],
               {0.8413447f + 0.2419707f, 0.9772499f + 2 * 0.0539910f, 0.9986501f + 3 * 0.0044318f, 0.5f,
                0.1586553f - 0.2419707f, 0.5f},
               2e-6f, "gelu backward");
  // Softmax along dimension 1: row (1,2,3) -> e^(k-3) / (e^-2 + e^-1 + 1); row (0,-1,0).
  const float s = 0.1353353f + 0.3678794f + 1;
  const float t = 2 + 0.3678794f;
  ExpectFloats(out[2], {0.1353353f / s, 0.3678794f / s, 1 / s, 1 / t, 0.3678794f / t, 1 / t}, 1e-6f, "softmax d=1");
  // Along dimension 0: columns (1,0), (2,-1), (3,0).
  ExpectFloats(out[3],
               {1 / (1 + 0.3678794f), 1 / (1 + 0.0497871f), 1 / (1 + 0.0497871f), 0.3678794f / (1 + 0.3678794f),
                0.0497871f / (1 + 0.0497871f), 0.0497871f / (1 + 0.0497871f)},
               1e-6f, "softmax d=0");
  // y * (dy - sum(dy * y)), sum = 0.2 + 0.6 + 1.5 = 2.3.
  ExpectFloats(out[4], {-0.26f, -0.09f, 0.35f}, 1e-6f, "softmax backward");
  // bf16: computed in f32, rounded once: GELU(1) = 0.84134 -> 0.83984375 (0x3F57),
  // GELU(-1) = -0.158655 -> -0.158203125 (0xBE22); softmax of (1, 0, -1):
  // 0.665241 -> 0.6640625 (0x3F2A), 0.244728 -> 0.24511719 (0x3E7B), 0.090031 -> 0.08984375 (0x3DB8).
  EXPECT_EQ(Values<uint16_t>(out[5]), (std::vector<uint16_t>{0x3F57, 0x0000, 0xBE22}));
  EXPECT_EQ(Values<uint16_t>(out[6]), (std::vector<uint16_t>{0x3F2A, 0x3E7B, 0x3DB8}));
}

TEST_F(HostCodegenTest, NeuronCustomCallErrorsAreClear) {
  auto error = [](const std::string& body) {
    auto m = hlo::ParseHloModule("HloModule bad\nENTRY %main (x: f32[2,3]) -> f32[2,3] {\n  %x = f32[2,3] parameter(0)\n" +
                                     body + "\n}\n",
                                 "bad.hlo");
    EXPECT_TRUE(m.ok()) << m.error().message;
    auto src = host::GenerateCpp(*m);
    EXPECT_FALSE(src.ok());
    return src.ok() ? std::string() : src.error().message;
  };
  EXPECT_NE(error(R"(ROOT %s = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax")")
                .find("AwsNeuronSoftmax needs the dimension it normalises as its backend_config"),
            std::string::npos);
  EXPECT_NE(error(R"(ROOT %s = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronSoftmax", backend_config="2")")
                .find("has '2'"),
            std::string::npos);
  EXPECT_NE(error(R"(ROOT %s = f32[2,3] custom-call(%x), custom_call_target="AwsNeuronGeluApprxTanh")")
                .find("unsupported opcode 'custom-call' (custom_call_target AwsNeuronGeluApprxTanh)"),
            std::string::npos);
  EXPECT_NE(error(R"(ROOT %s = f32[2,3] custom-call(%x, %x), custom_call_target="AwsNeuronGelu")")
                .find("expects 1 operands, has 2"),
            std::string::npos);
}

TEST_F(HostCodegenTest, ElidedConstantIsNamedNotMadeUp) {
  auto m = Parse(R"(
HloModule elided
ENTRY %main (x: s32[15]) -> s32[15] {
  %x = s32[15] parameter(0)
  %table = s32[15] constant({...})
  ROOT %sum = s32[15] add(%x, %table)
}
)");
  auto src = host::GenerateCpp(m);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.error().message.find("constant %table s32[15]"), std::string::npos) << src.error().message;
  EXPECT_NE(src.error().message.find("elided"), std::string::npos) << src.error().message;
  auto failures = host::UnsupportedOpcodes(m);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures["constant"].find("%table"), std::string::npos);
}

// The hand-worked case of support/batch_norm_case.h.
TEST_F(HostCodegenTest, BatchNormTrainingInferenceAndGrad) {
  std::vector<Tensor> args;
  for (const auto& in : BatchNormInputs()) args.push_back(F32(in.dims, in.values));
  auto out = CompileAndRun(Parse(kBatchNormModule), args);
  ASSERT_EQ(out.size(), BatchNormOutputs().size());
  for (size_t o = 0; o < out.size(); ++o) ExpectFloats(out[o], BatchNormOutputs()[o].values, 1e-6f, BatchNormOutputs()[o].what);
}

// UnsupportedOpcodes checks every instruction, not only the first failing one.
TEST(HostUnsupportedOpcodes, ListsEveryUnsupportedOpcodeWithItsInstruction) {
  HloBuilder b("mixed");
  Op x = b.Parameter(0, xla::F32, {4, 4}, "x");
  xla::HloInstructionProto chol;
  chol.set_opcode("cholesky");
  Op c = b.AddInstruction(chol, {x}, HloBuilder::ArrayShape(xla::F32, {4, 4}));
  xla::HloInstructionProto gelu;
  gelu.set_opcode("custom-call");
  gelu.set_custom_call_target("NotARealTarget");
  Op g = b.AddInstruction(gelu, {b.Add(c, x)}, HloBuilder::ArrayShape(xla::F32, {4, 4}));
  xla::HloModuleProto m = b.Build(b.Unary("tanh", g));

  auto failures = host::UnsupportedOpcodes(m);
  ASSERT_EQ(failures.size(), 2u);
  ASSERT_TRUE(failures.count("cholesky"));
  EXPECT_NE(failures["cholesky"].find("unsupported opcode 'cholesky'"), std::string::npos) << failures["cholesky"];
  ASSERT_TRUE(failures.count("custom-call:NotARealTarget"));
  EXPECT_NE(failures["custom-call:NotARealTarget"].find("NotARealTarget"), std::string::npos);
  EXPECT_FALSE(host::GenerateCpp(m).ok());
}

TEST(HostUnsupportedOpcodes, EmptyForACompilableModuleAndListsAreConsistent) {
  HloBuilder b("fine");
  Op x = b.Parameter(0, xla::F32, {3}, "x");
  xla::HloModuleProto m = b.Build(b.Unary("tanh", b.Add(x, x)));
  EXPECT_TRUE(host::UnsupportedOpcodes(m).empty());
  ASSERT_TRUE(host::GenerateCpp(m).ok());
  auto supported = host::SupportedOpcodes();
  EXPECT_TRUE(std::is_sorted(supported.begin(), supported.end()));
  for (const char* op : {"add", "dot", "reduce", "gather", "tanh", "while", "rng-bit-generator", "all-reduce",
                         "custom-call:AwsNeuronTransferWithStaticRing", "custom-call:AwsNeuronGelu",
                         "custom-call:AwsNeuronGeluBackward", "custom-call:AwsNeuronSoftmax",
                         "custom-call:AwsNeuronSoftmaxBackward", "batch-norm-training", "batch-norm-grad"}) {
    EXPECT_TRUE(std::binary_search(supported.begin(), supported.end(), std::string(op))) << op;
  }
  EXPECT_FALSE(std::binary_search(supported.begin(), supported.end(), std::string("cholesky")));
  EXPECT_FALSE(std::binary_search(supported.begin(), supported.end(), std::string("custom-call:AwsNeuronGeluApprxTanh")));
}

}  // namespace
}  // namespace npc
