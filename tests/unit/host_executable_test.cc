// The host backend's contracts around the ops: clear errors for what it cannot
// compile, deterministic source and artifacts, the loader and argument checks.
#include <gtest/gtest.h>

#include <cstring>

#include "host/host_backend.h"
#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace npc {
namespace {

using hlo::HloBuilder;
using hlo::Op;
using testing::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin: " << (haystack)

Tensor F32(std::vector<int64_t> dims, const std::vector<float>& values) {
  Tensor t = ZeroTensor(xla::F32, std::move(dims));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.element_count());
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out(t.element_count());
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(float));
  return out;
}

// (x + y) * 2 or x * y, with x, y: f32[2,3].
xla::HloModuleProto Elementwise(const std::string& name, const std::string& opcode) {
  HloBuilder b(name);
  Op x = b.Parameter(0, xla::F32, {2, 3}, "x");
  Op y = b.Parameter(1, xla::F32, {2, 3}, "y");
  return b.Build(b.Binary(opcode, x, y));
}

xla::HloInstructionProto Instruction(const std::string& opcode, const std::string& name = "") {
  xla::HloInstructionProto inst;
  inst.set_opcode(opcode);
  if (!name.empty()) inst.set_name(name);
  return inst;
}

// Writes `source` to dir/model.cc and compiles it to dir/model.so; "" on failure.
std::string CompileIn(const std::string& dir, const std::string& source) {
  if (!testing::WriteFile(dir + "/model.cc", source)) return "";
  std::string log;
  auto st = host::CompileSharedObject(host::DefaultCxx(), dir + "/model.cc", dir + "/model.so", &log);
  if (!st) {
    ADD_FAILURE() << st.error().message;
    return "";
  }
  EXPECT_CONTAINS(log, "-std=c++17");
  return dir + "/model.so";
}

TEST(HostBackendTest, UnsupportedOpcodeIsNamed) {
  for (const char* opcode : {"cholesky", "fft", "reduce-window", "sort"}) {
    HloBuilder b("unsupported");
    Op x = b.Parameter(0, xla::F32, {2, 2}, "x");
    Op bad = b.AddInstruction(Instruction(opcode, std::string(opcode) + ".3"), {x},
                              HloBuilder::ArrayShape(xla::F32, {2, 2}));
    auto m = b.Build(b.Add(bad, x));
    auto src = host::GenerateCpp(m);
    ASSERT_FALSE(src.ok()) << opcode;
    EXPECT_CONTAINS(src.error().message, std::string("unsupported opcode '") + opcode + "'");
    EXPECT_CONTAINS(src.error().message, std::string("%") + opcode + ".3");
    EXPECT_CONTAINS(src.error().message, "in computation");
  }
}

TEST(HostBackendTest, CustomCallNamesItsTarget) {
  HloBuilder b("custom");
  Op x = b.Parameter(0, xla::F32, {4}, "x");
  auto cc = Instruction("custom-call", "gelu.2");
  cc.set_custom_call_target("AwsNeuronGeluApprxTanh");
  auto m = b.Build(b.AddInstruction(cc, {x}, HloBuilder::ArrayShape(xla::F32, {4})));
  auto src = host::GenerateCpp(m);
  ASSERT_FALSE(src.ok());
  EXPECT_CONTAINS(src.error().message, "unsupported opcode 'custom-call'");
  EXPECT_CONTAINS(src.error().message, "AwsNeuronGeluApprxTanh");
  EXPECT_CONTAINS(src.error().message, "%gelu.2");
}

TEST(HostBackendTest, UnsupportedOpInsideAReducerIsNamed) {
  HloBuilder r("weird_reducer");
  Op a = r.Parameter(0, xla::F32, {}, "a");
  Op c = r.Parameter(1, xla::F32, {}, "c");
  Op bad = r.AddInstruction(Instruction("cholesky", "chol.9"), {a}, HloBuilder::ArrayShape(xla::F32, {}));
  HloBuilder b("outer");
  Op x = b.Parameter(0, xla::F32, {3}, "x");
  const int64_t rid = b.AddComputation(r, r.Add(bad, c));
  auto m = b.Build(b.Reduce(x, b.ConstantF32(0), {0}, rid));
  auto src = host::GenerateCpp(m);
  ASSERT_FALSE(src.ok());
  EXPECT_CONTAINS(src.error().message, "unsupported opcode 'cholesky'");
  EXPECT_CONTAINS(src.error().message, "%chol.9");
  EXPECT_CONTAINS(src.error().message, "weird_reducer");
}

TEST(HostBackendTest, UnsupportedElementTypeIsNamed) {
  HloBuilder b("c64");
  Op x = b.Parameter(0, xla::C64, {4}, "x");
  auto m = b.Build(b.Add(x, x));
  auto src = host::GenerateCpp(m);
  ASSERT_FALSE(src.ok());
  EXPECT_CONTAINS(src.error().message, "unsupported element type 'c64'");
}

TEST(HostBackendTest, ConstantWithWrongValueCountIsAnError) {
  HloBuilder b("bad_constant");
  auto k = Instruction("constant", "k.1");
  k.mutable_literal()->add_f32s(1);
  k.mutable_literal()->add_f32s(2);
  auto m = b.Build(b.AddInstruction(k, {}, HloBuilder::ArrayShape(xla::F32, {3})));
  auto src = host::GenerateCpp(m);
  ASSERT_FALSE(src.ok());
  EXPECT_CONTAINS(src.error().message, "2 f32 values");
  EXPECT_CONTAINS(src.error().message, "%k.1");
}

TEST(HostBackendTest, GenerateCppIsDeterministic) {
  auto make = [] {
    HloBuilder b("det");
    Op x = b.Parameter(0, xla::F32, {2, 3}, "x");
    Op w = b.Parameter(1, xla::F32, {3, 4}, "w");
    Op y = b.Dot(x, w, {1}, {0});
    const int64_t add = b.MakeReducer("add", xla::F32);
    Op s = b.Reduce(y, b.ConstantF32(0.1f), {1}, add);
    return b.Build(b.Tuple({y, s, b.Exp(b.Neg(s))}));
  };
  auto m1 = make(), m2 = make();
  auto a = host::GenerateCpp(m1), b = host::GenerateCpp(m1), c = host::GenerateCpp(m2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
  EXPECT_CONTAINS(*a, "npc_host_run");
}

TEST(HostBackendTest, SameSourceGivesIdenticalArtifactsInDifferentDirectories) {
  auto src = host::GenerateCpp(Elementwise("same", "add"));
  ASSERT_TRUE(src.ok()) << src.error().message;
  TempDir d1("npc-host-a"), d2("npc-host-bb");
  std::string so1 = CompileIn(d1.path(), *src), so2 = CompileIn(d2.path(), *src);
  ASSERT_FALSE(so1.empty());
  ASSERT_FALSE(so2.empty());
  std::string bytes1 = testing::ReadFile(so1), bytes2 = testing::ReadFile(so2);
  EXPECT_FALSE(bytes1.empty());
  EXPECT_TRUE(bytes1 == bytes2) << "artifacts differ between " << so1 << " and " << so2;
  EXPECT_EQ(bytes1.find(d1.path()), std::string::npos) << "the temporary directory is in the artifact";
}

TEST(HostBackendTest, RunChecksArguments) {
  auto src = host::GenerateCpp(Elementwise("checked", "add"));
  ASSERT_TRUE(src.ok());
  TempDir dir("npc-host-args");
  std::string so = CompileIn(dir.path(), *src);
  ASSERT_FALSE(so.empty());
  auto exe = host::HostExecutable::Load(so);
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  const auto& e = **exe;
  ASSERT_EQ(e.parameters().size(), 2u);
  EXPECT_EQ(e.parameters()[0], (host::TensorSpec{xla::F32, {2, 3}}));
  ASSERT_EQ(e.outputs().size(), 1u);
  EXPECT_EQ(e.outputs()[0], (host::TensorSpec{xla::F32, {2, 3}}));
  EXPECT_EQ(e.module_name(), "checked");

  Tensor good = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto ok = e.Run({good, good});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(Floats((*ok)[0]), (std::vector<float>{2, 4, 6, 8, 10, 12}));

  auto few = e.Run({good});
  ASSERT_FALSE(few.ok());
  EXPECT_CONTAINS(few.error().message, "expects 2 arguments, got 1");

  auto dims = e.Run({good, F32({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_FALSE(dims.ok());
  EXPECT_CONTAINS(dims.error().message, "argument 1 is f32[3,2], expected f32[2,3]");

  Tensor ints = ZeroTensor(xla::S32, {2, 3});
  auto type = e.Run({ints, good});
  ASSERT_FALSE(type.ok());
  EXPECT_CONTAINS(type.error().message, "argument 0 is s32[2,3], expected f32[2,3]");

  Tensor short_bytes = good;
  short_bytes.bytes.resize(8);
  auto bytes = e.Run({good, short_bytes});
  ASSERT_FALSE(bytes.ok());
  EXPECT_CONTAINS(bytes.error().message, "holds 8 bytes, expected 24");
}

TEST(HostBackendTest, TupleParametersAreFlattened) {
  HloBuilder b("tuple_param");
  auto shape = HloBuilder::TupleShape({HloBuilder::ArrayShape(xla::F32, {2}), HloBuilder::ArrayShape(xla::F32, {})});
  Op p = b.ParameterWithShape(0, shape, "p");
  Op v = b.GetTupleElement(p, 0);
  Op s = b.GetTupleElement(p, 1);
  auto m = b.Build(b.Tuple({b.Mul(v, b.Broadcast(s, {2}, {})), s}));
  auto src = host::GenerateCpp(m);
  ASSERT_TRUE(src.ok()) << src.error().message;
  TempDir dir("npc-host-tuple");
  std::string so = CompileIn(dir.path(), *src);
  ASSERT_FALSE(so.empty());
  auto exe = host::HostExecutable::Load(so);
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  ASSERT_EQ((*exe)->parameters().size(), 2u);
  EXPECT_EQ((*exe)->parameters()[1], (host::TensorSpec{xla::F32, {}}));
  auto out = (*exe)->Run({F32({2}, {3, 4}), F32({}, {0.5f})});
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1.5f, 2}));
  EXPECT_EQ(Floats((*out)[1]), (std::vector<float>{0.5f}));
}

TEST(HostBackendTest, TwoArtifactsInOneProcess) {
  TempDir d1("npc-host-add"), d2("npc-host-mul");
  auto add_src = host::GenerateCpp(Elementwise("m", "add"));
  auto mul_src = host::GenerateCpp(Elementwise("m", "multiply"));
  ASSERT_TRUE(add_src.ok() && mul_src.ok());
  std::string add_so = CompileIn(d1.path(), *add_src), mul_so = CompileIn(d2.path(), *mul_src);
  ASSERT_FALSE(add_so.empty() || mul_so.empty());
  auto add = host::HostExecutable::Load(add_so);
  auto mul = host::HostExecutable::Load(mul_so);
  ASSERT_TRUE(add.ok() && mul.ok());
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6}), y = F32({2, 3}, {2, 2, 2, 3, 3, 3});
  auto a = (*add)->Run({x, y});
  auto m = (*mul)->Run({x, y});
  ASSERT_TRUE(a.ok() && m.ok());
  EXPECT_EQ(Floats((*a)[0]), (std::vector<float>{3, 4, 5, 7, 8, 9}));
  EXPECT_EQ(Floats((*m)[0]), (std::vector<float>{2, 4, 6, 12, 15, 18}));
  // Unloading one leaves the other working.
  add->reset();
  auto m2 = (*mul)->Run({x, y});
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(Floats((*m2)[0]), (std::vector<float>{2, 4, 6, 12, 15, 18}));
}

TEST(HostBackendTest, LoadErrorsNameTheFile) {
  TempDir dir("npc-host-load");
  auto missing = host::HostExecutable::Load(dir.Sub("absent.so"));
  ASSERT_FALSE(missing.ok());
  EXPECT_CONTAINS(missing.error().message, dir.Sub("absent.so"));

  ASSERT_TRUE(testing::WriteFile(dir.Sub("text.so"), "not a shared object\n"));
  auto text = host::HostExecutable::Load(dir.Sub("text.so"));
  ASSERT_FALSE(text.ok());
  EXPECT_CONTAINS(text.error().message, dir.Sub("text.so"));

  // A real shared object that is not an artifact.
  std::string so = CompileIn(dir.Sub("other"), "extern \"C\" int something(void) { return 1; }\n");
  ASSERT_FALSE(so.empty());
  auto other = host::HostExecutable::Load(so);
  ASSERT_FALSE(other.ok());
  EXPECT_CONTAINS(other.error().message, so);
  EXPECT_CONTAINS(other.error().message, "not a host artifact");
}

TEST(HostBackendTest, CompilerFailureIsReported) {
  TempDir dir("npc-host-cc");
  ASSERT_TRUE(testing::WriteFile(dir.Sub("model.cc"), "this is not C++;\n"));
  std::string log;
  auto st = host::CompileSharedObject(host::DefaultCxx(), dir.Sub("model.cc"), dir.Sub("model.so"), &log);
  ASSERT_FALSE(st.ok());
  EXPECT_CONTAINS(st.error().message, "C++ compiler failed");
  EXPECT_CONTAINS(st.error().message, "model.cc");
  EXPECT_CONTAINS(log, "-shared");
  EXPECT_FALSE(testing::FileExists(dir.Sub("model.so")));

  auto none = host::CompileSharedObject(dir.Sub("no-such-compiler"), dir.Sub("model.cc"), dir.Sub("model.so"), &log);
  ASSERT_FALSE(none.ok());
  EXPECT_CONTAINS(none.error().message, "no-such-compiler");
}

}  // namespace
}  // namespace npc
