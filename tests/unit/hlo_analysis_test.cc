// Op analysis of HLO modules (npc/hlo_analysis.h): exact opcode, op-key,
// custom-call and element-type counts, reachability, entry parameters and
// outputs, and per-instruction detail, on modules built with the HLO builder
// or written as HLO text, and on a real torch-neuronx dump when the corpus is
// present.
#include "npc/hlo_analysis.h"

#include <gtest/gtest.h>

#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace npc {
namespace {

using Counts = std::map<std::string, int64_t>;

xla::HloModuleProto ParseText(const std::string& text) {
  auto m = hlo::ParseHloModule(text, "test.hlo");
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : xla::HloModuleProto();
}

// x: f32[4,8], labels: s32[4] ->
//   (reduce(x, 0, add over dim 1): f32[4], custom-call "MyKernel"(x): f32[4,8], convert(labels): f32[4])
// plus a computation nobody calls.
xla::HloModuleProto BuilderModule() {
  hlo::HloBuilder b("analysed");
  hlo::Op x = b.Parameter(0, xla::F32, {4, 8}, "x");
  hlo::Op labels = b.Parameter(1, xla::S32, {4}, "labels");
  int64_t add = b.MakeReducer("add", xla::F32);
  hlo::Op sum = b.Reduce(x, b.ConstantF32(0.0f), {1}, add);
  xla::HloInstructionProto cc;
  cc.set_opcode("custom-call");
  cc.set_custom_call_target("MyKernel");
  cc.mutable_metadata()->set_op_type("my_op");
  cc.mutable_metadata()->set_op_name("model/layer0/my_op");
  cc.mutable_metadata()->set_source_file("train.py");
  cc.mutable_metadata()->set_source_line(42);
  hlo::Op kernel = b.AddInstruction(cc, {x}, x.shape);
  hlo::Op converted = b.Convert(labels, xla::F32);
  {
    hlo::HloBuilder unused("never_called");
    hlo::Op p = unused.Parameter(0, xla::S64, {}, "p");
    (void)b.AddComputation(unused, unused.Neg(p));
  }
  return b.Build(b.Tuple({sum, kernel, converted}));
}

TEST(HloAnalysis, CountsOpcodesOfAllAndOfReachableComputations) {
  xla::HloModuleProto m = BuilderModule();
  hlo::ModuleAnalysis a = hlo::AnalyzeModule(m);
  EXPECT_EQ(a.name, "analysed");
  EXPECT_EQ(a.computations, 3);            // entry, add reducer, never_called
  EXPECT_EQ(a.computations_reachable, 2);  // entry, add reducer
  // entry: 2 parameters, constant, reduce, custom-call, convert, tuple = 7;
  // reducer: 2 parameters, add = 3; never_called: parameter, negate = 2.
  EXPECT_EQ(a.instructions, 12);
  EXPECT_EQ(a.instructions_reachable, 10);
  EXPECT_EQ(a.opcodes, (Counts{{"add", 1},
                               {"constant", 1},
                               {"convert", 1},
                               {"custom-call", 1},
                               {"negate", 1},
                               {"parameter", 5},
                               {"reduce", 1},
                               {"tuple", 1}}));
  EXPECT_EQ(a.opcodes_reachable, (Counts{{"add", 1},
                                         {"constant", 1},
                                         {"convert", 1},
                                         {"custom-call", 1},
                                         {"parameter", 4},
                                         {"reduce", 1},
                                         {"tuple", 1}}));
  EXPECT_EQ(a.op_keys.count("custom-call"), 0u);
  EXPECT_EQ(a.op_keys.at("custom-call:MyKernel"), 1);
  EXPECT_EQ(a.op_keys_reachable.at("custom-call:MyKernel"), 1);
  EXPECT_EQ(a.op_keys_reachable.count("negate"), 0u);
  EXPECT_EQ(a.custom_call_targets, (Counts{{"MyKernel", 1}}));
  EXPECT_EQ(a.element_types, (std::vector<std::string>{"f32", "s32", "s64"}));
}

TEST(HloAnalysis, EntryParametersAndOutputs) {
  hlo::ModuleAnalysis a = hlo::AnalyzeModule(BuilderModule());
  ASSERT_EQ(a.parameters.size(), 2u);
  EXPECT_EQ(a.parameters[0].number, 0);
  EXPECT_EQ(a.parameters[0].name, "x");
  EXPECT_EQ(a.parameters[0].shape, "f32[4,8]{1,0}");
  EXPECT_EQ(a.parameters[1].number, 1);
  EXPECT_EQ(a.parameters[1].name, "labels");
  EXPECT_EQ(a.parameters[1].shape, "s32[4]{0}");
  EXPECT_EQ(a.result_shape, "(f32[4]{0}, f32[4,8]{1,0}, f32[4]{0})");
  EXPECT_EQ(a.outputs, (std::vector<std::string>{"f32[4]{0}", "f32[4,8]{1,0}", "f32[4]{0}"}));
  EXPECT_EQ(a.input_output_aliases, 0);
  EXPECT_FALSE(a.elided_constants);
}

TEST(HloAnalysis, InstructionsWithOpKeyCarryShapesAndMetadata) {
  xla::HloModuleProto m = BuilderModule();
  auto found = hlo::InstructionsWithOpKey(m, "custom-call:MyKernel");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].computation, "analysed");
  EXPECT_TRUE(found[0].reachable);
  EXPECT_EQ(found[0].op_key, "custom-call:MyKernel");
  EXPECT_EQ(found[0].shape, "f32[4,8]{1,0}");
  EXPECT_EQ(found[0].operand_shapes, (std::vector<std::string>{"f32[4,8]{1,0}"}));
  EXPECT_EQ(found[0].op_type, "my_op");
  EXPECT_EQ(found[0].op_name, "model/layer0/my_op");
  EXPECT_EQ(found[0].source_file, "train.py");
  EXPECT_EQ(found[0].source_line, 42);

  auto negates = hlo::InstructionsWithOpKey(m, "negate");
  ASSERT_EQ(negates.size(), 1u);
  EXPECT_EQ(negates[0].computation, "never_called");
  EXPECT_FALSE(negates[0].reachable);
  EXPECT_EQ(negates[0].shape, "s64[]");
  EXPECT_TRUE(hlo::InstructionsWithOpKey(m, "while").empty());
}

// A while loop (body and condition reachable through the while only), a
// custom-call without a target, an aliased output, tuple-shaped parameter.
constexpr char kWhileText[] = R"(HloModule loop, input_output_alias={ {0}: (0, {}, may-alias) }

%body (s: (s32[], f32[3])) -> (s32[], f32[3]) {
  %s = (s32[], f32[3]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[3]{0}) %s), index=0
  %one = s32[] constant(1)
  %next = s32[] add(s32[] %i, s32[] %one)
  %v = f32[3]{0} get-tuple-element((s32[], f32[3]{0}) %s), index=1
  %v2 = f32[3]{0} multiply(f32[3]{0} %v, f32[3]{0} %v), metadata={op_type="aten__mul" op_name="aten__mul" source_file="loop.py" source_line=7}
  ROOT %t = (s32[], f32[3]{0}) tuple(s32[] %next, f32[3]{0} %v2)
}

%cond (s: (s32[], f32[3])) -> pred[] {
  %s = (s32[], f32[3]{0}) parameter(0)
  %i = s32[] get-tuple-element((s32[], f32[3]{0}) %s), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT
}

ENTRY %main (init: (s32[], f32[3]), h: bf16[2,2]) -> (s32[], f32[3]) {
  %init = (s32[], f32[3]{0}) parameter(0)
  %h = bf16[2,2]{0,1} parameter(1)
  %opaque = bf16[2,2]{0,1} custom-call(bf16[2,2]{0,1} %h), custom_call_target=""
  ROOT %w = (s32[], f32[3]{0}) while((s32[], f32[3]{0}) %init), condition=%cond, body=%body
}
)";

TEST(HloAnalysis, WhileBodyAndConditionAreReachable) {
  xla::HloModuleProto m = ParseText(kWhileText);
  hlo::ModuleAnalysis a = hlo::AnalyzeModule(m);
  EXPECT_EQ(a.name, "loop");
  EXPECT_EQ(a.entry_computation, "main");
  EXPECT_EQ(a.computations, 3);
  EXPECT_EQ(a.computations_reachable, 3);
  EXPECT_EQ(a.instructions, 7 + 4 + 4);
  EXPECT_EQ(a.instructions_reachable, a.instructions);
  EXPECT_EQ(a.opcodes, (Counts{{"add", 1},
                               {"compare", 1},
                               {"constant", 2},
                               {"custom-call", 1},
                               {"get-tuple-element", 3},
                               {"multiply", 1},
                               {"parameter", 4},
                               {"tuple", 1},
                               {"while", 1}}));
  EXPECT_EQ(a.opcodes_reachable, a.opcodes);
  EXPECT_EQ(a.op_keys.at("custom-call:"), 1);  // an empty target is still its own key
  EXPECT_EQ(a.custom_call_targets, (Counts{{"", 1}}));
  EXPECT_EQ(a.element_types, (std::vector<std::string>{"bf16", "f32", "pred", "s32"}));
  ASSERT_EQ(a.parameters.size(), 2u);
  EXPECT_EQ(a.parameters[0].shape, "(s32[], f32[3]{0})");
  EXPECT_EQ(a.parameters[1].shape, "bf16[2,2]{0,1}");
  EXPECT_EQ(a.result_shape, "(s32[], f32[3]{0})");
  EXPECT_EQ(a.outputs, (std::vector<std::string>{"s32[]", "f32[3]{0}"}));
  EXPECT_EQ(a.input_output_aliases, 1);

  auto mul = hlo::InstructionsWithOpKey(m, "multiply");
  ASSERT_EQ(mul.size(), 1u);
  EXPECT_EQ(mul[0].computation, "body");
  EXPECT_EQ(mul[0].name, "v2");
  EXPECT_EQ(mul[0].operand_shapes, (std::vector<std::string>{"f32[3]{0}", "f32[3]{0}"}));
  EXPECT_EQ(mul[0].op_type, "aten__mul");
  EXPECT_EQ(mul[0].source_file, "loop.py");
  EXPECT_EQ(mul[0].source_line, 7);
}

TEST(HloAnalysis, ElidedConstantsAreFlagged) {
  hlo::ModuleAnalysis a = hlo::AnalyzeModule(
      ParseText("HloModule e\nENTRY %m () -> s32[15] {\n  ROOT %c = s32[15]{0} constant({...})\n}\n"));
  EXPECT_TRUE(a.elided_constants);
  EXPECT_EQ(a.opcodes, (Counts{{"constant", 1}}));
  EXPECT_TRUE(a.parameters.empty());
  EXPECT_EQ(a.outputs, (std::vector<std::string>{"s32[15]{0}"}));
}

TEST(HloAnalysis, ElementTypeNames) {
  EXPECT_EQ(hlo::ElementTypeName(xla::F32), "f32");
  EXPECT_EQ(hlo::ElementTypeName(xla::BF16), "bf16");
  EXPECT_EQ(hlo::ElementTypeName(xla::PRED), "pred");
  EXPECT_EQ(hlo::ElementTypeName(xla::TOKEN), "token");
  EXPECT_EQ(hlo::ElementTypeName(xla::OPAQUE_TYPE), "opaque");
  EXPECT_EQ(hlo::ElementTypeName(xla::F8E4M3FN), "f8e4m3fn");
}

// The counts PROVENANCE.md lists for this dump (counted there independently
// from the text), plus the entry signature read off the module's header.
TEST(HloAnalysisCorpus, TorchNeuronxMiniMlpTrainingStep) {
  const std::string path = std::string(NPC_CORPUS_DIR) + "/torch-neuronx/mlp__mini_mlp_single.hlo";
  if (!testing::FileExists(path)) GTEST_SKIP() << "corpus absent: " << path << " not found";
  auto m = hlo::ReadHloModuleFile(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  hlo::ModuleAnalysis a = hlo::AnalyzeModule(*m);
  EXPECT_EQ(a.name, "SyncTensorsGraph.142");
  EXPECT_EQ(a.computations, 5);
  EXPECT_EQ(a.instructions, 92);
  EXPECT_EQ(a.opcodes, (Counts{{"add", 7},
                               {"broadcast", 20},
                               {"compare", 6},
                               {"constant", 14},
                               {"custom-call", 4},
                               {"divide", 2},
                               {"dot", 2},
                               {"iota", 2},
                               {"multiply", 7},
                               {"negate", 2},
                               {"parameter", 13},
                               {"reduce", 4},
                               {"select", 6},
                               {"transpose", 2},
                               {"tuple", 1}}));
  EXPECT_EQ(a.custom_call_targets, (Counts{{"AwsNeuronTransferWithStaticRing", 4}}));
  EXPECT_EQ(a.op_keys.at("custom-call:AwsNeuronTransferWithStaticRing"), 4);
  EXPECT_EQ(a.element_types, (std::vector<std::string>{"f32", "pred", "s64"}));
  std::vector<std::string> params;
  for (const auto& p : a.parameters) params.push_back(p.shape);
  EXPECT_EQ(params,
            (std::vector<std::string>{"f32[]", "s64[32]{0}", "f32[10]{0}", "f32[10,784]{1,0}", "f32[32,784]{1,0}"}));
  EXPECT_EQ(a.outputs, (std::vector<std::string>{"f32[10,784]{1,0}", "f32[10]{0}", "f32[32,784]{1,0}", "s64[32]{0}",
                                                 "f32[32,10]{1,0}", "f32[]", "f32[10]{0}", "f32[10,784]{1,0}"}));
  EXPECT_EQ(a.input_output_aliases, 4);
  auto rings = hlo::InstructionsWithOpKey(*m, "custom-call:AwsNeuronTransferWithStaticRing");
  ASSERT_EQ(rings.size(), 4u);
  EXPECT_EQ(rings[0].op_type, "xla___op_TransferWithStaticRingTransfer");
  EXPECT_EQ(rings[0].source_line, 44);
}

}  // namespace
}  // namespace npc
