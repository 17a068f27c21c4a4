// `npc explain`'s comparisons: canonical forms instruction by instruction,
// and compiler flags. Modules built with the HLO builder.
#include "generator/explain.h"

#include <gtest/gtest.h>

#include "npc/hlo.h"
#include "npc/hlo_builder.h"

namespace npc::tool {
namespace {

using hlo::HloBuilder;
using hlo::Op;

// f32[n] x -> x * scale + x, with instruction names chosen by `prefix`.
xla::HloModuleProto Module(int64_t n, float scale, const std::string& opcode = "add") {
  HloBuilder b("m");
  Op x = b.Parameter(0, xla::F32, {n}, "x");
  Op s = b.Broadcast(b.ConstantF32(scale), {n}, {});
  return b.Build(b.Binary(opcode, b.Mul(x, s), x));
}

std::string Joined(const ModuleComparison& c) {
  std::string out;
  for (const auto& d : c.details) out += d + "\n";
  return out;
}

TEST(CompareCanonicalForms, EqualModulesHaveNoDifferences) {
  auto a = hlo::CanonicalForm(Module(4, 2.0f));
  auto c = CompareCanonicalForms(a, hlo::CanonicalForm(Module(4, 2.0f)), 10);
  EXPECT_EQ(c.equal, c.total);
  EXPECT_EQ(c.total, 5);  // parameter, constant, broadcast, multiply, add
  EXPECT_TRUE(c.details.empty()) << Joined(c);
}

TEST(CompareCanonicalForms, NamesTheChangedConstant) {
  auto c = CompareCanonicalForms(hlo::CanonicalForm(Module(4, 3.0f)), hlo::CanonicalForm(Module(4, 2.0f)), 10);
  EXPECT_EQ(c.equal, 4);
  ASSERT_EQ(c.details.size(), 1u) << Joined(c);
  EXPECT_NE(c.details[0].find("literal"), std::string::npos) << c.details[0];
  EXPECT_NE(c.details[0].find("2 -> 3"), std::string::npos) << c.details[0];
  EXPECT_NE(c.details[0].find("computation 0 (entry"), std::string::npos) << c.details[0];
}

TEST(CompareCanonicalForms, NamesChangedShapesAndOpcodes) {
  auto shape = CompareCanonicalForms(hlo::CanonicalForm(Module(8, 2.0f)), hlo::CanonicalForm(Module(4, 2.0f)), 10);
  // Every instruction but the scalar constant has another shape.
  EXPECT_EQ(shape.equal, 1);
  ASSERT_EQ(shape.details.size(), 4u) << Joined(shape);
  EXPECT_NE(shape.details[0].find("shape.dimensions[0]: 4 -> 8"), std::string::npos) << Joined(shape);

  auto op = CompareCanonicalForms(hlo::CanonicalForm(Module(4, 2.0f, "subtract")),
                                  hlo::CanonicalForm(Module(4, 2.0f, "add")), 10);
  EXPECT_EQ(op.equal, 4);
  ASSERT_EQ(op.details.size(), 1u) << Joined(op);
  EXPECT_NE(op.details[0].find("opcode: \"add\" -> \"subtract\""), std::string::npos) << op.details[0];
}

TEST(CompareCanonicalForms, DifferentInstructionCountsListWhatEachSideHas) {
  HloBuilder b("m");
  Op x = b.Parameter(0, xla::F32, {4}, "x");
  Op s = b.Broadcast(b.ConstantF32(2.0f), {4}, {});
  auto longer = b.Build(b.Exp(b.Add(b.Mul(x, s), x)));
  auto c = CompareCanonicalForms(hlo::CanonicalForm(longer), hlo::CanonicalForm(Module(4, 2.0f)), 10);
  EXPECT_EQ(c.total, 6);
  ASSERT_EQ(c.details.size(), 1u) << Joined(c);
  EXPECT_NE(c.details[0].find("6 instructions, the cached graph's 5"), std::string::npos) << c.details[0];
  EXPECT_NE(c.details[0].find("only here: exponential f32[4]"), std::string::npos) << c.details[0];
}

TEST(CompareCanonicalForms, DetailsAreCappedAndCounted) {
  auto c = CompareCanonicalForms(hlo::CanonicalForm(Module(8, 2.0f)), hlo::CanonicalForm(Module(4, 2.0f)), 2);
  EXPECT_EQ(c.details.size(), 2u);
  EXPECT_EQ(c.more, 2);
}

TEST(CompareFlags, ListsFlagsOnEachSideAndReordering) {
  auto f = CompareFlags({"--O2", "--target=trn1"}, {"--O1", "--target=trn1"});
  EXPECT_EQ(f.only_wanted, std::vector<std::string>{"--O2"});
  EXPECT_EQ(f.only_cached, std::vector<std::string>{"--O1"});
  EXPECT_FALSE(f.reordered);
  auto r = CompareFlags({"--a", "--b"}, {"--b", "--a"});
  EXPECT_TRUE(r.only_wanted.empty());
  EXPECT_TRUE(r.only_cached.empty());
  EXPECT_TRUE(r.reordered);
  EXPECT_FALSE(CompareFlags({"--a"}, {"--a"}).reordered);
}

}  // namespace
}  // namespace npc::tool
