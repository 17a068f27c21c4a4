// Tests of npc::hlo::HloBuilder: XLA's shape inference, XLA's proto
// conventions (ids, program shapes, layouts, attributes), round trips.
#include "npc/hlo_builder.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "npc/hlo.h"

namespace npc::hlo {
namespace {

std::vector<int64_t> Dims(const xla::ShapeProto& s) {
  return std::vector<int64_t>(s.dimensions().begin(), s.dimensions().end());
}
std::vector<int64_t> MinorToMajor(const xla::ShapeProto& s) {
  return std::vector<int64_t>(s.layout().minor_to_major().begin(),
                              s.layout().minor_to_major().end());
}

const xla::HloInstructionProto* Find(const xla::HloModuleProto& m, int64_t id) {
  for (const auto& c : m.computations()) {
    for (const auto& i : c.instructions()) {
      if (i.id() == id) return &i;
    }
  }
  return nullptr;
}

TEST(HloBuilderTest, ArrayShapeHasRowMajorLayout) {
  auto s = HloBuilder::ArrayShape(xla::F32, {2, 3, 4});
  EXPECT_EQ(s.element_type(), xla::F32);
  EXPECT_EQ(Dims(s), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(MinorToMajor(s), (std::vector<int64_t>{2, 1, 0}));
  auto scalar = HloBuilder::ArrayShape(xla::S32, {});
  EXPECT_TRUE(scalar.has_layout());
  EXPECT_EQ(scalar.layout().minor_to_major_size(), 0);
  auto t = HloBuilder::TupleShape({s, scalar});
  EXPECT_EQ(t.element_type(), xla::TUPLE);
  EXPECT_FALSE(t.has_layout());
  EXPECT_EQ(ShapeToString(t), "(f32[2,3,4]{2,1,0}, s32[])");
}

TEST(HloBuilderTest, DotWithBatchDimensions) {
  HloBuilder b("dot");
  auto x = b.Parameter(0, xla::F32, {8, 5, 3}, "x");  // batch 8, m 5, k 3
  auto y = b.Parameter(1, xla::F32, {3, 8, 7}, "y");  // k 3, batch 8, n 7
  auto d = b.Dot(x, y, {2}, {0}, {0}, {1});
  EXPECT_EQ(Dims(d.shape), (std::vector<int64_t>{8, 5, 7}));
  EXPECT_EQ(MinorToMajor(d.shape), (std::vector<int64_t>{2, 1, 0}));
  auto plain = b.Dot(b.Parameter(2, xla::F32, {4, 3}), b.Parameter(3, xla::F32, {3, 6}), {1}, {0});
  EXPECT_EQ(Dims(plain.shape), (std::vector<int64_t>{4, 6}));
  auto m = b.Build(b.Tuple({d, plain}));
  const auto* dot = Find(m, d.id);
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->opcode(), "dot");
  const auto& dn = dot->dot_dimension_numbers();
  EXPECT_EQ(dn.lhs_contracting_dimensions(0), 2);
  EXPECT_EQ(dn.rhs_contracting_dimensions(0), 0);
  EXPECT_EQ(dn.lhs_batch_dimensions(0), 0);
  EXPECT_EQ(dn.rhs_batch_dimensions(0), 1);
  EXPECT_EQ(dot->operand_ids_size(), 2);
}

TEST(HloBuilderTest, BroadcastReshapeTransposeSliceConcatenate) {
  HloBuilder b("shapes");
  auto v = b.Parameter(0, xla::F32, {4}, "v");
  auto bc = b.Broadcast(v, {3, 4}, {1});
  EXPECT_EQ(Dims(bc.shape), (std::vector<int64_t>{3, 4}));
  auto scalar_bc = b.Broadcast(b.ConstantF32(1.0f), {2, 5}, {});
  EXPECT_EQ(Dims(scalar_bc.shape), (std::vector<int64_t>{2, 5}));
  auto t = b.Transpose(b.Parameter(1, xla::F32, {2, 3, 5}), {2, 0, 1});
  EXPECT_EQ(Dims(t.shape), (std::vector<int64_t>{5, 2, 3}));
  EXPECT_EQ(MinorToMajor(t.shape), (std::vector<int64_t>{2, 1, 0}));
  auto r = b.Reshape(t, {10, 3});
  EXPECT_EQ(Dims(r.shape), (std::vector<int64_t>{10, 3}));
  auto s = b.Slice(r, {1, 0}, {10, 3}, {2, 2});
  EXPECT_EQ(Dims(s.shape), (std::vector<int64_t>{5, 2}));
  auto c = b.Concatenate({bc, b.Broadcast(v, {2, 4}, {1})}, 0);
  EXPECT_EQ(Dims(c.shape), (std::vector<int64_t>{5, 4}));
  auto io = b.Iota(xla::S32, {3, 4}, 1);
  EXPECT_EQ(io.shape.element_type(), xla::S32);
  auto cmp = b.Compare(io, b.Broadcast(b.ConstantS32(2), {3, 4}, {}), "LT");
  EXPECT_EQ(cmp.shape.element_type(), xla::PRED);
  auto conv = b.Convert(cmp, xla::F32);
  EXPECT_EQ(conv.shape.element_type(), xla::F32);
  EXPECT_EQ(Dims(conv.shape), (std::vector<int64_t>{3, 4}));
  auto sel = b.Select(cmp, conv, b.Broadcast(b.ConstantF32(0), {3, 4}, {}));
  auto m = b.Build(b.Tuple({bc, scalar_bc, t, r, s, c, io, cmp, conv, sel}));

  EXPECT_EQ(Find(m, bc.id)->dimensions(0), 1);
  EXPECT_EQ(Find(m, scalar_bc.id)->dimensions_size(), 0);
  EXPECT_EQ(std::vector<int64_t>(Find(m, t.id)->dimensions().begin(), Find(m, t.id)->dimensions().end()),
            (std::vector<int64_t>{2, 0, 1}));
  const auto* slice = Find(m, s.id);
  ASSERT_EQ(slice->slice_dimensions_size(), 2);
  EXPECT_EQ(slice->slice_dimensions(0).start(), 1);
  EXPECT_EQ(slice->slice_dimensions(0).limit(), 10);
  EXPECT_EQ(slice->slice_dimensions(0).stride(), 2);
  EXPECT_EQ(Find(m, c.id)->dimensions(0), 0);
  EXPECT_EQ(Find(m, io.id)->dimensions(0), 1);
  EXPECT_EQ(Find(m, cmp.id)->comparison_direction(), "LT");
}

TEST(HloBuilderTest, ReduceWithReducer) {
  HloBuilder b("reduce");
  auto x = b.Parameter(0, xla::F32, {2, 3, 4}, "x");
  int64_t add = b.MakeReducer("add", xla::F32);
  int64_t max = b.MakeReducer("maximum", xla::F32);
  auto r = b.Reduce(x, b.ConstantF32(0), {1}, add);
  EXPECT_EQ(Dims(r.shape), (std::vector<int64_t>{2, 4}));
  auto all = b.Reduce(x, b.ConstantF32(-1e30f), {0, 1, 2}, max);
  EXPECT_EQ(Dims(all.shape), (std::vector<int64_t>{}));
  auto m = b.Build(b.Tuple({r, all}));
  ASSERT_EQ(m.computations_size(), 3);
  // Callees first, entry last.
  EXPECT_EQ(m.computations(2).id(), m.entry_computation_id());
  EXPECT_EQ(m.computations(0).id(), add);
  EXPECT_EQ(m.computations(1).id(), max);
  const auto* red = Find(m, r.id);
  ASSERT_EQ(red->called_computation_ids_size(), 1);
  EXPECT_EQ(red->called_computation_ids(0), add);
  EXPECT_EQ(red->dimensions(0), 1);
  // The reducer computation: (f32[], f32[]) -> f32[].
  const auto& reducer = m.computations(0);
  EXPECT_EQ(reducer.program_shape().parameters_size(), 2);
  EXPECT_EQ(ShapeToString(reducer.program_shape().result()), "f32[]");
  EXPECT_EQ(Find(m, reducer.root_id())->opcode(), "add");
  EXPECT_TRUE(ValidateModule(m, "reduce").ok());
}

TEST(HloBuilderTest, IdsAndNamesUniqueAcrossModule) {
  HloBuilder sub("body");
  auto p = sub.Parameter(0, xla::F32, {4}, "p");
  auto body_root = sub.Exp(p);
  HloBuilder b("main");
  auto x = b.Parameter(0, xla::F32, {4}, "p");  // same name as the callee's parameter
  int64_t add = b.MakeReducer("add", xla::F32);
  int64_t body = b.AddComputation(sub, body_root);
  auto call = b.Call({x}, body, HloBuilder::ArrayShape(xla::F32, {4}));
  auto sum = b.Reduce(call, b.ConstantF32(0), {0}, add);
  auto m = b.Build(sum);
  std::set<int64_t> ids;
  std::set<std::string> names, comp_names;
  for (const auto& c : m.computations()) {
    EXPECT_TRUE(ids.insert(c.id()).second) << "computation id " << c.id();
    EXPECT_TRUE(comp_names.insert(c.name()).second) << c.name();
    for (const auto& i : c.instructions()) {
      EXPECT_TRUE(ids.insert(i.id()).second) << "instruction id " << i.id();
      EXPECT_TRUE(names.insert(i.name()).second) << i.name();
      EXPECT_FALSE(i.name().empty());
      for (int64_t o : i.operand_ids()) {
        bool local = false;
        for (const auto& j : c.instructions()) local |= j.id() == o;
        EXPECT_TRUE(local) << i.name() << " operand " << o;
      }
    }
  }
  EXPECT_EQ(Find(m, call.id)->called_computation_ids(0), body);
  EXPECT_EQ(Find(m, sum.id)->called_computation_ids(0), add);
  EXPECT_TRUE(ValidateModule(m, "main").ok());
  EXPECT_EQ(m.computations(m.computations_size() - 1).root_id(), sum.id);
  // Default names are "<opcode>.<id>".
  EXPECT_EQ(Find(m, sum.id)->name(), "reduce." + std::to_string(sum.id));
}

TEST(HloBuilderTest, ProgramShapes) {
  HloBuilder b("prog");
  // Parameters created out of order: the program shape follows parameter_number.
  auto y = b.Parameter(1, xla::S32, {3}, "y");
  auto x = b.Parameter(0, xla::F32, {2, 3}, "x");
  auto m = b.Build(b.Tuple({x, y}));
  const auto& entry = m.computations(m.computations_size() - 1);
  EXPECT_EQ(m.entry_computation_name(), entry.name());
  EXPECT_EQ(m.entry_computation_id(), entry.id());
  EXPECT_EQ(m.name(), "prog");
  const auto& ps = entry.program_shape();
  ASSERT_EQ(ps.parameters_size(), 2);
  EXPECT_EQ(ShapeToString(ps.parameters(0)), "f32[2,3]{1,0}");
  EXPECT_EQ(ShapeToString(ps.parameters(1)), "s32[3]{0}");
  EXPECT_EQ(ps.parameter_names(0), "x");
  EXPECT_EQ(ps.parameter_names(1), "y");
  EXPECT_EQ(ShapeToString(ps.result()), "(f32[2,3]{1,0}, s32[3]{0})");
  EXPECT_EQ(m.host_program_shape().SerializeAsString(), ps.SerializeAsString());
  EXPECT_EQ(Find(m, x.id)->parameter_number(), 0);
  EXPECT_EQ(Find(m, y.id)->parameter_number(), 1);
}

TEST(HloBuilderTest, ConstantsCarryLiterals) {
  HloBuilder b("consts");
  auto f = b.ConstantF32(2.5f);
  auto i = b.ConstantS32(-3);
  auto l = b.ConstantS64(1LL << 40);
  auto p = b.ConstantPred(true);
  auto fa = b.ConstantF32Array({2, 2}, {1, 2, 3, 4});
  auto ia = b.ConstantS32Array({3}, {7, 8, 9});
  auto m = b.Build(b.Tuple({f, i, l, p, fa, ia}));
  EXPECT_EQ(Find(m, f.id)->literal().f32s(0), 2.5f);
  EXPECT_EQ(ShapeToString(Find(m, f.id)->literal().shape()), "f32[]");
  EXPECT_EQ(Find(m, i.id)->literal().s32s(0), -3);
  EXPECT_EQ(Find(m, l.id)->literal().s64s(0), 1LL << 40);
  EXPECT_TRUE(Find(m, p.id)->literal().preds(0));
  EXPECT_EQ(Find(m, fa.id)->literal().f32s_size(), 4);
  EXPECT_EQ(ShapeToString(Find(m, fa.id)->literal().shape()), "f32[2,2]{1,0}");
  EXPECT_EQ(Find(m, ia.id)->literal().s32s(2), 9);
}

TEST(HloBuilderTest, GetTupleElementAndAddInstruction) {
  HloBuilder b("gte");
  auto t = b.ParameterWithShape(
      0, HloBuilder::TupleShape({HloBuilder::ArrayShape(xla::F32, {2}),
                                 HloBuilder::ArrayShape(xla::S32, {})}));
  auto e1 = b.GetTupleElement(t, 1);
  EXPECT_EQ(ShapeToString(e1.shape), "s32[]");
  xla::HloInstructionProto custom;
  custom.set_opcode("sort");
  custom.add_dimensions(0);
  auto s = b.AddInstruction(custom, {b.GetTupleElement(t, 0)}, HloBuilder::ArrayShape(xla::F32, {2}));
  auto m = b.Build(b.Tuple({e1, s}));
  EXPECT_EQ(Find(m, e1.id)->tuple_index(), 1);
  EXPECT_EQ(Find(m, s.id)->opcode(), "sort");
  EXPECT_EQ(Find(m, s.id)->operand_ids_size(), 1);
}

TEST(HloBuilderTest, RoundTripsThroughSerialization) {
  HloBuilder b("round_trip");
  auto x = b.Parameter(0, xla::F32, {4, 3}, "x");
  auto w = b.Parameter(1, xla::F32, {3, 2}, "w");
  auto y = b.Dot(x, w, {1}, {0});
  auto s = b.Reduce(y, b.ConstantF32(0), {0, 1}, b.MakeReducer("add", xla::F32));
  auto m = b.Build(b.Tuple({y, s}));
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  xla::HloModuleProto back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.SerializeAsString(), bytes);
  EXPECT_EQ(back.computations_size(), 2);
  EXPECT_EQ(CanonicalGraphKey(back), CanonicalGraphKey(m));
  auto parsed = ParseHloModule(bytes, "round_trip");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->entry_computation_id(), m.entry_computation_id());
}

TEST(HloBuilderTest, SameGraphSameKey) {
  auto make = [](float c) {
    HloBuilder b("k");
    auto x = b.Parameter(0, xla::F32, {4}, "x");
    return b.Build(b.Add(x, b.Broadcast(b.ConstantF32(c), {4}, {})));
  };
  EXPECT_EQ(CanonicalGraphKey(make(1)), CanonicalGraphKey(make(1)));
  EXPECT_NE(CanonicalGraphKey(make(1)), CanonicalGraphKey(make(2)));
}

using HloBuilderDeathTest = ::testing::Test;

TEST(HloBuilderDeathTest, ShapeMismatchAborts) {
  EXPECT_DEATH(
      {
        HloBuilder b("bad");
        b.Add(b.Parameter(0, xla::F32, {2}), b.Parameter(1, xla::F32, {3}));
      },
      "add of f32\\[2\\]\\{0\\} and f32\\[3\\]\\{0\\}");
  EXPECT_DEATH(
      {
        HloBuilder b("bad");
        b.Dot(b.Parameter(0, xla::F32, {2, 3}), b.Parameter(1, xla::F32, {4, 5}), {1}, {0});
      },
      "contracting dimension sizes differ");
  EXPECT_DEATH(
      {
        HloBuilder b("bad");
        b.Broadcast(b.Parameter(0, xla::F32, {3}), {3, 4}, {1});
      },
      "does not match");
  EXPECT_DEATH(
      {
        HloBuilder b("bad");
        b.Reshape(b.Parameter(0, xla::F32, {3}), {2, 2});
      },
      "element counts differ");
  EXPECT_DEATH(
      {
        HloBuilder a("a");
        HloBuilder b("b");
        b.Neg(a.Parameter(0, xla::F32, {3}));
      },
      "not an instruction of this builder");
}

}  // namespace
}  // namespace npc::hlo
