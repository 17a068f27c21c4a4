// Unit tests of runtime/hlo/text_reader: XLA's HLO text format read into
// HloModuleProto. The corpus tests read the real dumps in ../shared/corpus
// (NPC_CORPUS_DIR) and skip, saying so, when it is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <set>

#include "hlo/text_reader.h"
#include "npc/hlo.h"
#include "support/test_support.h"

namespace npc::hlo {
namespace {

namespace fs = std::filesystem;

xla::HloModuleProto Parse(const std::string& text) {
  auto m = ParseHloText(text, "test.hlo");
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return {};
  auto st = ValidateModule(*m, "test.hlo");
  EXPECT_TRUE(st.ok()) << st.error().message;
  return std::move(m).value();
}

std::string ParseError(const std::string& text) {
  auto m = ParseHloText(text, "bad.hlo");
  EXPECT_FALSE(m.ok()) << "parsed, but should not have";
  return m.ok() ? "" : m.error().message;
}

const xla::HloComputationProto* FindComputation(const xla::HloModuleProto& m, const std::string& name) {
  for (const auto& c : m.computations()) {
    if (c.name() == name) return &c;
  }
  return nullptr;
}

const xla::HloInstructionProto* Find(const xla::HloModuleProto& m, const std::string& name) {
  for (const auto& c : m.computations()) {
    for (const auto& i : c.instructions()) {
      if (i.name() == name) return &i;
    }
  }
  ADD_FAILURE() << "no instruction " << name;
  static const xla::HloInstructionProto empty;
  return &empty;
}

const xla::HloInstructionProto* ById(const xla::HloComputationProto& c, int64_t id) {
  for (const auto& i : c.instructions()) {
    if (i.id() == id) return &i;
  }
  return nullptr;
}

std::vector<int64_t> Ints(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// --- Corpus -----------------------------------------------------------------

struct CorpusCounts {
  int computations;
  int instructions;
};

// Counts from PROVENANCE.md.
const std::map<std::string, CorpusCounts>& ExpectedCounts() {
  static const std::map<std::string, CorpusCounts> counts = {
      {"xla-cpu-bench/dlrm_keras_jax_f32_test_step.hlo", {23, 331}},
      {"xla-cpu-bench/graphsage_tf.hlo", {5, 138}},
      {"xla-cpu-bench/layer_norm_1x4096x768_bf16.hlo", {3, 37}},
      {"xla-cpu-bench/mha_block_1x12x128x64_bf16.hlo", {3, 41}},
      {"torch-neuronx/bert__bert_single_graph_1.hlo", {1, 35}},
      {"torch-neuronx/bert__bert_single_graph_2.hlo", {32, 1022}},
      {"torch-neuronx/bert__bert_single_graph_3.hlo", {32, 1062}},
      {"torch-neuronx/bert__bert_single_graph_4.hlo", {38, 866}},
      {"torch-neuronx/bert__bert_single_graph_5.hlo", {38, 926}},
      {"torch-neuronx/gpt__gpt2_tp=1.hlo", {7, 192}},
      {"torch-neuronx/llama__tp_1.hlo", {10, 204}},
      {"torch-neuronx/misc__linear.hlo", {2, 39}},
      {"torch-neuronx/misc__pp_1_layers_2_graph_1.hlo", {3, 34}},
      {"torch-neuronx/misc__pp_1_layers_2_graph_2.hlo", {3, 36}},
      {"torch-neuronx/misc__sharding_batch.hlo", {2, 38}},
      {"torch-neuronx/misc__sharding_fsdp.hlo", {3, 50}},
      {"torch-neuronx/misc__sharding_megatron-lm.hlo", {2, 42}},
      {"torch-neuronx/mlp__dp_mlp_1.hlo", {11, 220}},
      {"torch-neuronx/mlp__mini_mlp_dp.hlo", {6, 109}},
      {"torch-neuronx/mlp__mini_mlp_single.hlo", {5, 92}},
      {"torch-neuronx/mlp__mlp_single_final.hlo", {10, 183}},
      {"torch-neuronx/mlp__single_mlp.hlo", {10, 183}},
      {"torch-neuronx/qwb_linear_model__pp_1_final.hlo", {16, 572}},
      {"torch-neuronx/qwb_linear_model__pp_2_layers_2_rank_0.hlo", {5, 129}},
      {"jax-binpb/example1.txt", {1, 4}},
  };
  return counts;
}

std::string CorpusDir() { return NPC_CORPUS_DIR; }

TEST(HloTextReaderCorpus, EveryTextModuleParses) {
  const std::string dir = CorpusDir();
  if (!fs::is_directory(dir)) GTEST_SKIP() << "corpus absent: " << dir << " not found";
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string rel = fs::relative(e.path(), dir).string();
    if (e.path().extension() == ".hlo" || rel == "jax-binpb/example1.txt") files.push_back(rel);
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  int parsed = 0;
  for (const auto& rel : files) {
    SCOPED_TRACE(rel);
    const std::string text = npc::testing::ReadFile(dir + "/" + rel);
    auto m = ParseHloText(text, rel);
    if (rel == "torch-neuronx/mlp__test.hlo") {
      // An incomplete fragment: its get-tuple-element reads %all-reduce.307,
      // which the fragment does not define.
      ASSERT_FALSE(m.ok());
      EXPECT_EQ(m.error().message,
                "torch-neuronx/mlp__test.hlo:4:174: operand 'all-reduce.307' of 'get-tuple-element.328' is not "
                "defined in computation 'SyncTensorsGraph.405'");
      std::cout << "[corpus] " << rel << ": rejected: " << m.error().message << "\n";
      continue;
    }
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto st = ValidateModule(*m, rel);
    EXPECT_TRUE(st.ok()) << st.error().message;
    int instructions = 0, elided = 0;
    for (const auto& c : m->computations()) {
      instructions += c.instructions_size();
      for (const auto& i : c.instructions()) elided += i.frontend_attributes().map().count(kElidedConstantAttribute);
    }
    std::cout << "[corpus] " << rel << ": module " << m->name() << ", " << m->computations_size()
              << " computations, " << instructions << " instructions"
              << (elided ? ", " + std::to_string(elided) + " elided constants" : "") << "\n";
    auto it = ExpectedCounts().find(rel);
    if (it != ExpectedCounts().end()) {
      EXPECT_EQ(m->computations_size(), it->second.computations);
      EXPECT_EQ(instructions, it->second.instructions);
    }
    // The same text through the format-sniffing entry point.
    auto via_module = ParseHloModule(text, rel);
    EXPECT_TRUE(via_module.ok()) << via_module.error().message;
    ++parsed;
  }
  EXPECT_EQ(parsed, static_cast<int>(ExpectedCounts().size()));
}

TEST(HloTextReaderCorpus, ElidedConstantsAreMarkedWithoutValues) {
  const std::string path = CorpusDir() + "/xla-cpu-bench/graphsage_tf.hlo";
  if (!npc::testing::FileExists(path)) GTEST_SKIP() << "corpus absent: " << path << " not found";
  auto m = ParseHloText(npc::testing::ReadFile(path), path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  int elided = 0;
  for (const auto& c : m->computations()) {
    for (const auto& i : c.instructions()) {
      if (!i.frontend_attributes().map().count(kElidedConstantAttribute)) continue;
      ++elided;
      EXPECT_EQ(i.opcode(), "constant");
      EXPECT_EQ(ShapeToString(i.literal().shape()), ShapeToString(i.shape()));
      EXPECT_EQ(i.literal().f32s_size() + i.literal().s32s_size() + i.literal().bf16s().size(), 0);
    }
  }
  EXPECT_GT(elided, 0);
}

TEST(HloTextReaderCorpus, InputOutputAliasAndCustomCalls) {
  const std::string path = CorpusDir() + "/torch-neuronx/mlp__mini_mlp_dp.hlo";
  if (!npc::testing::FileExists(path)) GTEST_SKIP() << "corpus absent: " << path << " not found";
  auto m = ParseHloText(npc::testing::ReadFile(path), path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->input_output_alias().entries_size(), 2);
  EXPECT_EQ(Ints(m->input_output_alias().entries(0).output_shape_index()), std::vector<int64_t>{0});
  EXPECT_EQ(m->input_output_alias().entries(0).parameter_number(), 4);
  EXPECT_EQ(m->input_output_alias().entries(0).kind(), xla::MUST_ALIAS);
  EXPECT_EQ(m->entry_computation_name(), "SyncTensorsGraph.163");
  int custom_calls = 0;
  for (const auto& c : m->computations()) {
    for (const auto& i : c.instructions()) {
      if (i.opcode() != "custom-call") continue;
      ++custom_calls;
      EXPECT_EQ(i.custom_call_target(), "AwsNeuronTransferWithStaticRing");
      EXPECT_EQ(i.custom_call_api_version(), xla::API_VERSION_UNSPECIFIED);
    }
  }
  EXPECT_EQ(custom_calls, 4);
  // The entry comes last: callees first.
  EXPECT_EQ(m->computations(m->computations_size() - 1).name(), "SyncTensorsGraph.163");
}

TEST(HloTextReaderCorpus, EveryTruncationFailsWithAPosition) {
  const std::string path = CorpusDir() + "/torch-neuronx/misc__pp_1_layers_2_graph_1.hlo";
  if (!npc::testing::FileExists(path)) GTEST_SKIP() << "corpus absent: " << path << " not found";
  const std::string text = npc::testing::ReadFile(path);
  ASSERT_TRUE(ParseHloText(text, "cut.hlo").ok());
  const std::regex form("cut\\.hlo:([0-9]+):([0-9]+): .+");
  // Cuts that end in the final newline still hold the whole module.
  const size_t last = text.find_last_not_of('\n') + 1;
  int cuts = 0;
  for (size_t cut = 0; cut < last; cut += 7, ++cuts) {
    const std::string_view prefix = std::string_view(text).substr(0, cut);
    auto m = ParseHloText(prefix, "cut.hlo");
    if (m.ok()) {
      // A cut right after a computation's '}' is a complete module whose
      // last computation is the entry.
      const size_t end = prefix.find_last_not_of(" \n");
      EXPECT_TRUE(end != std::string_view::npos && prefix[end] == '}') << "cut at " << cut << " parsed";
      continue;
    }
    std::smatch match;
    ASSERT_TRUE(std::regex_match(m.error().message, match, form)) << m.error().message;
    EXPECT_GE(std::stoi(match[1]), 1);
    EXPECT_GE(std::stoi(match[2]), 1);
  }
  EXPECT_GT(cuts, 100);
}

// The text and the binary form of the same JAX module.
void ExpectSameDataflow(const xla::HloComputationProto& a, int64_t ida, const xla::HloComputationProto& b,
                        int64_t idb) {
  const auto* x = ById(a, ida);
  const auto* y = ById(b, idb);
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  SCOPED_TRACE(x->name() + " vs " + y->name());
  EXPECT_EQ(x->opcode(), y->opcode());
  EXPECT_EQ(ShapeToString(x->shape()), ShapeToString(y->shape()));
  EXPECT_EQ(x->parameter_number(), y->parameter_number());
  EXPECT_EQ(x->has_literal(), y->has_literal());
  if (x->has_literal() && y->has_literal()) {
    EXPECT_EQ(ShapeToString(x->literal().shape()), ShapeToString(y->literal().shape()));
    xla::LiteralProto lx = x->literal(), ly = y->literal();
    lx.clear_shape();
    ly.clear_shape();
    EXPECT_EQ(lx.SerializeAsString(), ly.SerializeAsString()) << lx.DebugString() << " vs " << ly.DebugString();
  }
  ASSERT_EQ(x->operand_ids_size(), y->operand_ids_size());
  for (int i = 0; i < x->operand_ids_size(); ++i) ExpectSameDataflow(a, x->operand_ids(i), b, y->operand_ids(i));
}

TEST(HloTextReaderCorpus, TextFormMatchesBinaryForm) {
  const std::string txt = CorpusDir() + "/jax-binpb/example1.txt";
  const std::string bin = CorpusDir() + "/jax-binpb/example1.binpb";
  if (!npc::testing::FileExists(txt) || !npc::testing::FileExists(bin)) {
    GTEST_SKIP() << "corpus absent: " << txt << " / " << bin << " not found";
  }
  auto from_text = ParseHloText(npc::testing::ReadFile(txt), txt);
  ASSERT_TRUE(from_text.ok()) << from_text.error().message;
  xla::HloModuleProto from_binary;
  const std::string bytes = npc::testing::ReadFile(bin);
  ASSERT_TRUE(from_binary.ParseFromString(bytes));

  EXPECT_EQ(from_text->name(), from_binary.name());
  EXPECT_EQ(from_text->entry_computation_name(), from_binary.entry_computation_name());
  const auto* et = EntryComputation(*from_text);
  const auto* eb = EntryComputation(from_binary);
  ASSERT_NE(et, nullptr);
  ASSERT_NE(eb, nullptr);
  EXPECT_EQ(et->instructions_size(), eb->instructions_size());
  ExpectSameDataflow(*et, et->root_id(), *eb, eb->root_id());
  ASSERT_EQ(et->program_shape().parameters_size(), eb->program_shape().parameters_size());
  EXPECT_EQ(ShapeToString(et->program_shape().result()), ShapeToString(eb->program_shape().result()));
  EXPECT_EQ(et->program_shape().parameter_names(0), eb->program_shape().parameter_names(0));
  EXPECT_EQ(ShapeToString(from_text->host_program_shape().result()),
            ShapeToString(from_binary.host_program_shape().result()));
  // Same graph, same canonical key.
  EXPECT_EQ(CanonicalGraphKey(*from_text), CanonicalGraphKey(from_binary));
}

// --- Errors -------------------------------------------------------------------

TEST(HloTextReaderErrors, CutInTheMiddle) {
  const std::string text =
      "HloModule m\n"
      "\n"
      "ENTRY %main {\n"
      "  %p = f32[2]{0} parameter(0)\n"
      "  ROOT %n = f32[2]{0} negate(f32[2]{0} %p";
  EXPECT_EQ(ParseError(text), "bad.hlo:5:42: unexpected end of input, expected ',' or ')' after an operand");
  EXPECT_EQ(ParseError("HloModule m\n\nENTRY %main {\n  %p = f32[2]{0} parameter(0)\n"),
            "bad.hlo:5:1: unexpected end of input, expected an instruction or '}'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  %p = f32[2"),
            "bad.hlo:3:13: unexpected end of input, expected ',' or ']' in a shape");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  %c = f32[2]{0} constant({1, 2"),
            "bad.hlo:3:32: unexpected end of input, expected ',' or '}' in a constant");
  EXPECT_EQ(ParseError("HloModule m\n"), "bad.hlo:2:1: unexpected end of input, expected a computation");
  EXPECT_EQ(ParseError(""), "bad.hlo:1:1: unexpected end of input, expected 'HloModule'");
}

TEST(HloTextReaderErrors, UnknownOpcode) {
  EXPECT_EQ(ParseError("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] frobnicate(p)\n}\n"),
            "bad.hlo:5:18: unknown opcode 'frobnicate'");
}

TEST(HloTextReaderErrors, MalformedShapes) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32[2,x] parameter(0)\n}\n"),
            "bad.hlo:3:13: malformed shape: expected a dimension size, found 'x'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f33[2] parameter(0)\n}\n"),
            "bad.hlo:3:7: malformed shape: unknown element type 'f33'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32 parameter(0)\n}\n"),
            "bad.hlo:3:10: malformed shape: expected '[' after 'f32', found 'parameter'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32[2,3]{0} parameter(0)\n}\n"),
            "bad.hlo:3:17: malformed shape: the layout has 1 dimensions, the shape 2");
}

TEST(HloTextReaderErrors, UndefinedNames) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, q)\n}\n"),
            "bad.hlo:4:25: operand 'q' of 'r' is not defined in computation 'e'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
                       "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=%sum\n}\n"),
            "bad.hlo:5:57: computation 'sum' called by 'r' is not defined");
}

TEST(HloTextReaderErrors, BadConstants) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}\n"),
            "bad.hlo:3:28: constant has 2 values, its shape has 3 elements");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  ROOT c = s8[] constant(128)\n}\n"),
            "bad.hlo:3:26: constant value out of range for s8");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  ROOT c = f16[] constant(1e6)\n}\n"),
            "bad.hlo:3:27: constant value out of range for f16");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  ROOT c = s32[] constant(1.5)\n}\n"),
            "bad.hlo:3:27: expected an integer, found '1.5'");
}

TEST(HloTextReaderErrors, StructuralErrors) {
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  p = f32[] parameter(1)\n}\n"),
            "bad.hlo:4:3: instruction 'p' is defined twice in computation 'e'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n  ROOT q = f32[] parameter(1)\n}\n"),
            "bad.hlo:4:3: computation 'e' has more than one ROOT instruction");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n}\n"), "bad.hlo:2:1: computation 'e' has no instructions");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  a = f32[] negate(b)\n  b = f32[] negate(a)\n}\n"),
            "bad.hlo:3:3: instruction 'a' depends on itself in computation 'e'");
  EXPECT_EQ(ParseError("HloModule m\nENTRY e {\n  p = f32[] parameter(1)\n}\n"),
            "bad.hlo:3:3: computation 'e' has no parameter 0");
  EXPECT_EQ(ParseError("HloModule m\nc {\n  ROOT r = f32[] call(), to_apply=c\n}\n"),
            "bad.hlo:2:1: computation 'c' calls itself (directly or indirectly)");
}

// --- Targeted cases -------------------------------------------------------------

TEST(HloTextReader, TupleShapesWithIndexComments) {
  auto m = Parse(R"(HloModule t, is_scheduled=true

ENTRY %e (p: (f32[2], s32[])) -> (f32[2], /*index=1*/(s32[], pred[<=4])) {
  %p = (f32[2]{0}, /*index=1*/s32[]) parameter(0)
  %a = f32[2]{0} get-tuple-element((f32[2]{0}, /*index=1*/s32[]) %p), index=0
  %b = s32[] get-tuple-element(%p), index=1
  %k = pred[<=4]{0} parameter(1)
  ROOT %t = (f32[2]{0}, /*index=1*/(s32[], pred[<=4]{0})) tuple(%a, /*index=1*/%bt)
  %bt = (s32[], pred[<=4]{0}) tuple(%b, %k)
}
)");
  const auto* t = Find(m, "t");
  EXPECT_EQ(ShapeToString(t->shape()), "(f32[2]{0}, (s32[], pred[4]{0}))");
  ASSERT_EQ(t->shape().tuple_shapes_size(), 2);
  const auto& inner = t->shape().tuple_shapes(1);
  ASSERT_EQ(inner.tuple_shapes_size(), 2);
  EXPECT_EQ(inner.tuple_shapes(1).element_type(), xla::PRED);
  ASSERT_EQ(inner.tuple_shapes(1).is_dynamic_dimension_size(), 1);
  EXPECT_TRUE(inner.tuple_shapes(1).is_dynamic_dimension(0));
  EXPECT_EQ(Find(m, "a")->tuple_index(), 0);
  EXPECT_EQ(Find(m, "b")->tuple_index(), 1);
  // ROOT wins over "last"; the forward reference to %bt resolves.
  const auto& e = m.computations(0);
  EXPECT_EQ(e.root_id(), t->id());
  EXPECT_EQ(t->operand_ids(1), Find(m, "bt")->id());
  // Stored operands first, as XLA stores instructions: %bt before %t.
  std::vector<std::string> order;
  for (const auto& i : e.instructions()) order.push_back(i.name());
  EXPECT_EQ(order, (std::vector<std::string>{"p", "a", "b", "k", "bt", "t"}));
  EXPECT_EQ(ShapeToString(e.program_shape().result()), ShapeToString(t->shape()));
  ASSERT_EQ(e.program_shape().parameters_size(), 2);
  EXPECT_EQ(ShapeToString(e.program_shape().parameters(0)), "(f32[2]{0}, s32[])");
}

TEST(HloTextReader, SliceAndPadAndDynamicSlice) {
  auto m = Parse(R"(HloModule s
ENTRY e {
  p = f32[4,6]{1,0} parameter(0)
  s = f32[1,2]{1,0} slice(p), slice={[0:1], [2:6:2]}
  z = f32[] constant(0)
  pd = f32[3,5]{1,0} pad(s, z), padding=1_1x-1_2_1
  i = s32[] constant(1)
  ROOT ds = f32[1,2]{1,0} dynamic-slice(p, i, i), dynamic_slice_sizes={1,2}
}
)");
  const auto* s = Find(m, "s");
  ASSERT_EQ(s->slice_dimensions_size(), 2);
  EXPECT_EQ(s->slice_dimensions(0).start(), 0);
  EXPECT_EQ(s->slice_dimensions(0).limit(), 1);
  EXPECT_EQ(s->slice_dimensions(0).stride(), 1);
  EXPECT_EQ(s->slice_dimensions(1).start(), 2);
  EXPECT_EQ(s->slice_dimensions(1).limit(), 6);
  EXPECT_EQ(s->slice_dimensions(1).stride(), 2);
  const auto& pc = Find(m, "pd")->padding_config();
  ASSERT_EQ(pc.dimensions_size(), 2);
  EXPECT_EQ(pc.dimensions(0).edge_padding_low(), 1);
  EXPECT_EQ(pc.dimensions(0).edge_padding_high(), 1);
  EXPECT_EQ(pc.dimensions(1).edge_padding_low(), -1);
  EXPECT_EQ(pc.dimensions(1).edge_padding_high(), 2);
  EXPECT_EQ(pc.dimensions(1).interior_padding(), 1);
  EXPECT_EQ(Ints(Find(m, "ds")->dynamic_slice_sizes()), (std::vector<int64_t>{1, 2}));
}

TEST(HloTextReader, DotDimensionsAndPrecision) {
  auto m = Parse(R"(HloModule d
ENTRY e {
  a = f32[8,2,3]{2,1,0} parameter(0)
  b = f32[8,3,4]{2,1,0} parameter(1)
  d1 = f32[8,2,4]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  ROOT d2 = f32[8,2,4]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={high,highest}
}
)");
  const auto& dn = Find(m, "d1")->dot_dimension_numbers();
  EXPECT_EQ(Ints(dn.lhs_batch_dimensions()), std::vector<int64_t>{0});
  EXPECT_EQ(Ints(dn.lhs_contracting_dimensions()), std::vector<int64_t>{2});
  EXPECT_EQ(Ints(dn.rhs_batch_dimensions()), std::vector<int64_t>{0});
  EXPECT_EQ(Ints(dn.rhs_contracting_dimensions()), std::vector<int64_t>{1});
  // XLA's parser: one DEFAULT per operand when operand_precision is absent.
  ASSERT_EQ(Find(m, "d1")->precision_config().operand_precision_size(), 2);
  EXPECT_EQ(Find(m, "d1")->precision_config().operand_precision(0), xla::PrecisionConfig::DEFAULT);
  ASSERT_EQ(Find(m, "d2")->precision_config().operand_precision_size(), 2);
  EXPECT_EQ(Find(m, "d2")->precision_config().operand_precision(0), xla::PrecisionConfig::HIGH);
  EXPECT_EQ(Find(m, "d2")->precision_config().operand_precision(1), xla::PrecisionConfig::HIGHEST);
}

TEST(HloTextReader, GatherAndScatterDimensions) {
  auto m = Parse(R"(HloModule g
%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %a = f32[] add(f32[] %x, f32[] %y)
}
ENTRY e {
  t = f32[30522,16]{1,0} parameter(0)
  i = u32[2048]{0} parameter(1)
  g = f32[2048,16]{1,0} gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}, indices_are_sorted=true
  j = s64[2048,1]{1,0} parameter(2)
  ROOT s = f32[30522,16]{1,0} scatter(t, j, g), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=%sum
}
)");
  const auto* g = Find(m, "g");
  EXPECT_EQ(Ints(g->gather_dimension_numbers().offset_dims()), std::vector<int64_t>{1});
  EXPECT_EQ(Ints(g->gather_dimension_numbers().collapsed_slice_dims()), std::vector<int64_t>{0});
  EXPECT_EQ(Ints(g->gather_dimension_numbers().start_index_map()), std::vector<int64_t>{0});
  EXPECT_EQ(g->gather_dimension_numbers().index_vector_dim(), 1);
  EXPECT_EQ(Ints(g->gather_slice_sizes()), (std::vector<int64_t>{1, 16}));
  EXPECT_TRUE(g->indices_are_sorted());
  const auto* s = Find(m, "s");
  EXPECT_EQ(Ints(s->scatter_dimension_numbers().update_window_dims()), std::vector<int64_t>{1});
  EXPECT_EQ(Ints(s->scatter_dimension_numbers().inserted_window_dims()), std::vector<int64_t>{0});
  EXPECT_EQ(Ints(s->scatter_dimension_numbers().scatter_dims_to_operand_dims()), std::vector<int64_t>{0});
  EXPECT_EQ(s->scatter_dimension_numbers().index_vector_dim(), 1);
  EXPECT_TRUE(s->unique_indices());
  ASSERT_EQ(s->called_computation_ids_size(), 1);
  EXPECT_EQ(s->called_computation_ids(0), FindComputation(m, "sum")->id());
}

TEST(HloTextReader, ElidedConstantIsMarked) {
  auto m = Parse(R"(HloModule c
ENTRY e {
  ROOT c = s32[15]{0} constant({...})
}
)");
  const auto* c = Find(m, "c");
  EXPECT_EQ(c->frontend_attributes().map().at(kElidedConstantAttribute), "true");
  EXPECT_EQ(ShapeToString(c->literal().shape()), "s32[15]{0}");
  EXPECT_EQ(c->literal().s32s_size(), 0);
}

TEST(HloTextReader, InputOutputAliasHeader) {
  auto m = Parse(
      "HloModule m, is_scheduled=true, input_output_alias={ {0}: (1, {}, must-alias), {1, 2}: (0, {3}, may-alias), "
      "{2}: (2, {}) }, entry_computation_layout={(f32[2]{0}, f32[2]{0}, f32[2]{0})->(f32[2]{0}, f32[2]{0}, "
      "f32[2]{0})}, frontend_attributes={a=\"b\"}\n"
      "ENTRY e {\n  p0 = f32[2] parameter(0)\n  p1 = f32[2] parameter(1)\n  p2 = f32[2] parameter(2)\n"
      "  ROOT t = (f32[2], f32[2], f32[2]) tuple(p0, p1, p2)\n}\n");
  const auto& alias = m.input_output_alias();
  ASSERT_EQ(alias.entries_size(), 3);
  EXPECT_EQ(Ints(alias.entries(0).output_shape_index()), std::vector<int64_t>{0});
  EXPECT_EQ(alias.entries(0).parameter_number(), 1);
  EXPECT_TRUE(alias.entries(0).parameter_shape_index().empty());
  EXPECT_EQ(alias.entries(0).kind(), xla::MUST_ALIAS);
  EXPECT_EQ(Ints(alias.entries(1).output_shape_index()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Ints(alias.entries(1).parameter_shape_index()), std::vector<int64_t>{3});
  EXPECT_EQ(alias.entries(1).kind(), xla::MAY_ALIAS);
  EXPECT_EQ(alias.entries(2).kind(), xla::MAY_ALIAS);
  EXPECT_EQ(m.host_program_shape().parameters_size(), 3);
  EXPECT_EQ(m.entry_computation_name(), "e");
  // No layout in the text: XLA's default layout.
  EXPECT_EQ(ShapeToString(Find(m, "p0")->shape()), "f32[2]{0}");
}

TEST(HloTextReader, OldStyleInlineOperandShapes) {
  auto m = Parse(R"(HloModule SyncTensorsGraph.9

%AddComputation.3 (x.4: f32[], y.5: f32[]) -> f32[] {
  %x.4 = f32[] parameter(0)
  %y.5 = f32[] parameter(1)
  ROOT %add.6 = f32[] add(f32[] %x.4, f32[] %y.5)
}

ENTRY %SyncTensorsGraph.9 (p0.1: f32[2,3]) -> (f32[2]) {
  %p0.1 = f32[2,3]{1,0} parameter(0), metadata={op_type="xla__device_data" op_name="xla__device_data" source_file="/a/b.py" source_line=44}
  %constant.2 = f32[] constant(0), metadata={op_type="aten__sum" op_name="aten__sum"}
  %reduce.7 = f32[2]{0} reduce(f32[2,3]{1,0} %p0.1, f32[] %constant.2), dimensions={1}, to_apply=%AddComputation.3
  ROOT %tuple.8 = (f32[2]{0}) tuple(f32[2]{0} %reduce.7)
}
)");
  ASSERT_EQ(m.computations_size(), 2);
  EXPECT_EQ(m.entry_computation_name(), "SyncTensorsGraph.9");
  const auto* r = Find(m, "reduce.7");
  ASSERT_EQ(r->operand_ids_size(), 2);
  EXPECT_EQ(r->operand_ids(0), Find(m, "p0.1")->id());
  EXPECT_EQ(r->operand_ids(1), Find(m, "constant.2")->id());
  EXPECT_EQ(Ints(r->dimensions()), std::vector<int64_t>{1});
  EXPECT_EQ(r->called_computation_ids(0), FindComputation(m, "AddComputation.3")->id());
  const auto& md = Find(m, "p0.1")->metadata();
  EXPECT_EQ(md.op_type(), "xla__device_data");
  EXPECT_EQ(md.source_file(), "/a/b.py");
  EXPECT_EQ(md.source_line(), 44);
  const auto* add = FindComputation(m, "AddComputation.3");
  EXPECT_EQ(add->program_shape().parameter_names(0), "x");
  EXPECT_EQ(ShapeToString(add->program_shape().result()), "f32[]");
  EXPECT_EQ(m.host_program_shape().parameters_size(), 1);
}

TEST(HloTextReader, FloatSpecialsAndNegativeConstants) {
  auto m = Parse(R"(HloModule k
ENTRY e {
  a = f32[] constant(-1.5)
  b = f32[] constant(-inf)
  c = f32[] constant(nan)
  d = f32[] constant(-nan)
  n = f32[] constant(nan(0x1))
  f = f32[5]{0} constant({1, -2.5e-3, inf, 1e-12, 0x1p-2})
  g = f64[2]{0} constant({-0.1, 3})
  h = s64[2]{0} constant({-100, 9223372036854775807})
  i = u64[] constant(18446744073709551615)
  j = pred[3]{0} constant({true, false, 1})
  k = s8[2]{0} constant({-128, 127})
  l = u8[2]{0} constant({0, 255})
  m2 = s32[2,2]{1,0} constant({ { 1, 2 }, { -3, 4 } })
  o = c64[] constant((1, -2))
  q = u32[] constant(4294967295)
  ROOT t = pred[] constant(true)
}
)");
  EXPECT_EQ(Find(m, "a")->literal().f32s(0), -1.5f);
  EXPECT_TRUE(std::isinf(Find(m, "b")->literal().f32s(0)) && Find(m, "b")->literal().f32s(0) < 0);
  EXPECT_EQ(Bits(Find(m, "c")->literal().f32s(0)), 0x7fc00000u);
  EXPECT_EQ(Bits(Find(m, "d")->literal().f32s(0)), 0xffc00000u);
  EXPECT_EQ(Bits(Find(m, "n")->literal().f32s(0)), 0x7f800001u);
  const auto& f = Find(m, "f")->literal();
  ASSERT_EQ(f.f32s_size(), 5);
  EXPECT_EQ(f.f32s(1), -2.5e-3f);
  EXPECT_TRUE(std::isinf(f.f32s(2)));
  EXPECT_EQ(f.f32s(3), 1e-12f);
  EXPECT_EQ(f.f32s(4), 0.25f);
  EXPECT_EQ(Find(m, "g")->literal().f64s(0), -0.1);
  EXPECT_EQ(Find(m, "h")->literal().s64s(0), -100);
  EXPECT_EQ(Find(m, "h")->literal().s64s(1), INT64_MAX);
  EXPECT_EQ(Find(m, "i")->literal().u64s(0), UINT64_MAX);
  const auto& j = Find(m, "j")->literal();
  ASSERT_EQ(j.preds_size(), 3);
  EXPECT_TRUE(j.preds(0));
  EXPECT_FALSE(j.preds(1));
  EXPECT_TRUE(j.preds(2));
  EXPECT_EQ(Hex(Find(m, "k")->literal().s8s()), "807f");
  EXPECT_EQ(Hex(Find(m, "l")->literal().u8s()), "00ff");
  const auto& m2 = Find(m, "m2")->literal();
  ASSERT_EQ(m2.s32s_size(), 4);
  EXPECT_EQ(m2.s32s(2), -3);
  EXPECT_EQ(ShapeToString(m2.shape()), "s32[2,2]{1,0}");
  const auto& o = Find(m, "o")->literal();
  ASSERT_EQ(o.c64s_size(), 2);
  EXPECT_EQ(o.c64s(1), -2.0f);
  EXPECT_EQ(Find(m, "q")->literal().u32s(0), 4294967295u);
  EXPECT_TRUE(Find(m, "t")->literal().preds(0));
}

TEST(HloTextReader, Bf16AndF16Constants) {
  auto m = Parse(R"(HloModule b
ENTRY e {
  a = bf16[4]{0} constant({1, -2.5, 0.1, -inf})
  h = f16[4]{0} constant({1, 65504, 1e-07, nan})
  ROOT s = s16[2]{0} constant({-2, 258})
}
)");
  // bf16: 1 = 0x3f80, -2.5 = 0xc020, 0.1 rounds to 0x3dcd, -inf = 0xff80 (little-endian).
  EXPECT_EQ(Hex(Find(m, "a")->literal().bf16s()), "803f20c0cd3d80ff");
  // f16: 1 = 0x3c00, 65504 = 0x7bff, 1e-7 rounds to the subnormal 0x0002, nan = 0x7e00.
  EXPECT_EQ(Hex(Find(m, "h")->literal().f16s()), "003cff7b0200007e");
  EXPECT_EQ(Hex(Find(m, "s")->literal().s16s()), "feff0201");
}

TEST(HloTextReader, CalledComputationOrder) {
  auto m = Parse(R"(HloModule w
%cond (c: (s32[])) -> pred[] {
  %c = (s32[]) parameter(0)
  %v = s32[] get-tuple-element(%c), index=0
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(%v, %ten), direction=LT
}
%body (b: (s32[])) -> (s32[]) {
  %b = (s32[]) parameter(0)
  %x = s32[] get-tuple-element(%b), index=0
  %one = s32[] constant(1)
  %y = s32[] add(%x, %one)
  ROOT %t = (s32[]) tuple(%y)
}
%yes (a: f32[]) -> f32[] {
  ROOT %a = f32[] parameter(0)
}
%no (a: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  ROOT %n = f32[] negate(%a)
}
ENTRY %main {
  %i = (s32[]) parameter(0)
  %w = (s32[]) while(%i), condition=%cond, body=%body
  %p = pred[] parameter(1)
  %f = f32[] parameter(2)
  %c1 = f32[] conditional(%p, %f, %f), false_computation=%no, true_computation=%yes
  %k = s32[] parameter(3)
  %c2 = f32[] conditional(%k, %f, %f), branch_computations={%no, %yes}
  %fl = f32[] parameter(4)
  %cmp = pred[] compare(%fl, %fl), direction=EQ, type=TOTALORDER
  ROOT %r = (f32[], f32[]) tuple(%c1, %c2)
}
)");
  const auto id = [&](const char* name) { return FindComputation(m, name)->id(); };
  // XLA stores while's called computations as [body, condition].
  EXPECT_EQ(Ints(Find(m, "w")->called_computation_ids()), (std::vector<int64_t>{id("body"), id("cond")}));
  EXPECT_EQ(Ints(Find(m, "c1")->called_computation_ids()), (std::vector<int64_t>{id("yes"), id("no")}));
  EXPECT_EQ(Ints(Find(m, "c2")->called_computation_ids()), (std::vector<int64_t>{id("no"), id("yes")}));
  EXPECT_EQ(Find(m, "lt")->comparison_direction(), "LT");
  EXPECT_EQ(Find(m, "lt")->comparison_type(), "SIGNED");  // XLA's default for s32
  EXPECT_EQ(Find(m, "cmp")->comparison_type(), "TOTALORDER");
  EXPECT_EQ(m.entry_computation_name(), "main");
}

TEST(HloTextReader, ShardingAndCollectives) {
  auto m = Parse(R"(HloModule sh
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY e {
  p0 = f32[4,4]{1,0} parameter(0), sharding={replicated}
  p1 = f32[4,4]{1,0} parameter(1), sharding={devices=[2,1]0,1}
  p2 = f32[4,4]{1,0} parameter(2), sharding={maximal device=1}
  p3 = f32[4,4]{1,0} parameter(3), sharding={devices=[2,2]<=[2,2]T(1,0)}
  p4 = f32[4,4]{1,0} parameter(4), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
  t = (f32[4,4]{1,0}, f32[4,4]{1,0}) tuple(p0, p1), sharding={{replicated}, {maximal device=0}}
  ar = f32[4,4]{1,0} all-reduce(p0), channel_id=2, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=%add
  ar2 = f32[4,4]{1,0} all-reduce(p0), replica_groups={}, constrain_layout=true, to_apply=%add
  ag = f32[8,4]{1,0} all-gather(p0), replica_groups=[2,2]<=[4], dimensions={0}
  ROOT r = f32[4,4]{1,0} add(ar, ar2)
}
)");
  EXPECT_EQ(Find(m, "p0")->sharding().type(), xla::OpSharding::REPLICATED);
  const auto& s1 = Find(m, "p1")->sharding();
  EXPECT_EQ(s1.type(), xla::OpSharding::OTHER);
  EXPECT_EQ(Ints(s1.tile_assignment_dimensions()), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Ints(s1.tile_assignment_devices()), (std::vector<int64_t>{0, 1}));
  const auto& s2 = Find(m, "p2")->sharding();
  EXPECT_EQ(s2.type(), xla::OpSharding::MAXIMAL);
  EXPECT_EQ(Ints(s2.tile_assignment_devices()), std::vector<int64_t>{1});
  EXPECT_EQ(Ints(Find(m, "p3")->sharding().tile_assignment_devices()), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_TRUE(Find(m, "p4")->sharding().replicate_on_last_tile_dim());
  const auto& st = Find(m, "t")->sharding();
  EXPECT_EQ(st.type(), xla::OpSharding::TUPLE);
  ASSERT_EQ(st.tuple_shardings_size(), 2);
  EXPECT_EQ(st.tuple_shardings(1).type(), xla::OpSharding::MAXIMAL);
  const auto* ar = Find(m, "ar");
  EXPECT_EQ(ar->channel_id(), 2);
  EXPECT_TRUE(ar->use_global_device_ids());
  ASSERT_EQ(ar->replica_groups_size(), 2);
  EXPECT_EQ(Ints(ar->replica_groups(1).replica_ids()), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Find(m, "ar2")->replica_groups_size(), 0);
  EXPECT_TRUE(Find(m, "ar2")->constrain_layout());
  const auto* ag = Find(m, "ag");
  ASSERT_EQ(ag->replica_groups_size(), 2);
  EXPECT_EQ(Ints(ag->replica_groups(0).replica_ids()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Ints(ag->dimensions()), std::vector<int64_t>{0});
}

TEST(HloTextReader, CustomCallAttributesAndUnknownAttributes) {
  auto m = Parse(R"(HloModule cc
ENTRY e {
  p = f32[16]{0} parameter(0), parameter_replication={false}, frontend_attributes={neff_input_names="input0",_xla_x="a,b"}
  a = f32[16]{0} custom-call(f32[16]{0} %p), custom_call_target="AwsNeuronGelu", api_version=API_VERSION_UNSPECIFIED
  b = f32[16]{0} custom-call(a), custom_call_target="foo", backend_config="{\"k\": \"v\\n\"}", custom_call_has_side_effect=true, operand_layout_constraints={f32[16]{0}}, output_to_operand_aliasing={{}: (0, {})}
  c = f32[16]{0} custom-call(b), custom_call_target="bar", backend_config={"x":{"y":[1,2]}}, schedule=SCHEDULE_LATEST
  ROOT r = f32[16]{0} iota(), iota_dimension=0, origin={{"r"}}, statistics={visualizing_index=1,stat-1=33.0}
}
)");
  const auto* p = Find(m, "p");
  EXPECT_EQ(p->frontend_attributes().map().at("neff_input_names"), "input0");
  EXPECT_EQ(p->frontend_attributes().map().at("_xla_x"), "a,b");
  ASSERT_EQ(p->parameter_replication().replicated_at_leaf_buffers_size(), 1);
  EXPECT_FALSE(p->parameter_replication().replicated_at_leaf_buffers(0));
  const auto* a = Find(m, "a");
  EXPECT_EQ(a->custom_call_target(), "AwsNeuronGelu");
  EXPECT_EQ(a->custom_call_api_version(), xla::API_VERSION_UNSPECIFIED);
  const auto* b = Find(m, "b");
  EXPECT_EQ(b->backend_config(), "{\"k\": \"v\\n\"}");  // \\n in the text: an escaped backslash
  EXPECT_TRUE(b->custom_call_has_side_effect());
  EXPECT_EQ(b->custom_call_api_version(), xla::API_VERSION_ORIGINAL);  // XLA's default
  ASSERT_EQ(b->operand_shapes_with_layout_size(), 1);
  ASSERT_EQ(b->output_operand_aliasing_size(), 1);
  EXPECT_EQ(b->output_operand_aliasing(0).operand_index(), 0);
  EXPECT_EQ(Find(m, "c")->backend_config(), "{\"x\":{\"y\":[1,2]}}");
  EXPECT_EQ(Find(m, "c")->custom_call_schedule(), xla::SCHEDULE_LATEST);
  EXPECT_EQ(Ints(Find(m, "r")->dimensions()), std::vector<int64_t>{0});
  EXPECT_TRUE(b->constrain_layout());  // operand_layout_constraints make it layout-constrained, as in XLA
}

// Attributes that change what the module computes are read, never skipped;
// an attribute npc does not know is refused, naming it and its place.
TEST(HloTextReaderErrors, UnknownAndMisplacedAttributesAreRefused) {
  const std::string base =
      "HloModule m\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)ATTR\n}\n";
  auto with = [&](const std::string& attr) {
    std::string t = base;
    t.replace(t.find("ATTR"), 4, attr);
    return t;
  };
  std::string e = ParseError(with(", mystery={a={b}, \"c,d\", [e]}"));
  EXPECT_NE(e.find("bad.hlo:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown attribute 'mystery'"), std::string::npos) << e;
  e = ParseError(with(", is_stable=true"));
  EXPECT_NE(e.find("'is_stable' is not an attribute of negate"), std::string::npos) << e;
  e = ParseError(with(", metadata={op_name=\"a\"}, metadata={op_name=\"b\"}"));
  EXPECT_NE(e.find("given twice"), std::string::npos) << e;
  e = ParseError("HloModule m, some_config=3\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n");
  EXPECT_NE(e.find("bad.hlo:1:14: unknown module attribute 'some_config'"), std::string::npos) << e;
  e = ParseError("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}, color=\"red\"\n");
  EXPECT_NE(e.find("unknown computation attribute 'color'"), std::string::npos) << e;
  e = ParseError(with(", sharding={devices=[2]0,1 colour=3}"));
  EXPECT_NE(e.find("unknown sharding attribute 'colour'"), std::string::npos) << e;
  e = ParseError("HloModule m\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT s = f32[4]{0} rng(p, p)\n}\n");
  EXPECT_NE(e.find("rng needs distribution="), std::string::npos) << e;
  e = ParseError("HloModule m\nENTRY e {\n  ROOT c = f8e4m3fn[] constant(500)\n}\n");
  EXPECT_NE(e.find("out of range for f8e4m3fn"), std::string::npos) << e;
  e = ParseError("HloModule m\nENTRY e {\n  ROOT c = s4[] constant(8)\n}\n");
  EXPECT_NE(e.find("out of range for s4"), std::string::npos) << e;
  e = ParseError("HloModule m\nENTRY e {\n  ROOT c = f4e2m1fn[] constant(inf)\n}\n");
  EXPECT_NE(e.find("inf is not a value of type f4e2m1fn"), std::string::npos) << e;
  e = ParseError("HloModule m\nENTRY e {\n  ROOT p = f32[4]{0:D(C)} parameter(0)\n}\n");
  EXPECT_NE(e.find("bad.hlo:3:21: layout detail 'D' is not read by npc"), std::string::npos) << e;
  e = ParseError("HloModule m, entry_computation_layout={(f32[4]{0}, f32[])->f32[4]{0}}\n"
                 "ENTRY e {\n  ROOT p = f32[4]{0} parameter(0)\n}\n");
  EXPECT_NE(e.find("bad.hlo:1:39: entry_computation_layout has 2 parameters, the entry computation 1"),
            std::string::npos)
      << e;
}

TEST(HloTextReader, LayoutDetails) {
  auto m = Parse(R"(HloModule l
ENTRY e {
  ROOT p = f32[8,256]{1,0:T(8,128)(2,1)L(4)E(16)S(1)M(8)} parameter(0)
}
)");
  const auto& layout = Find(m, "p")->shape().layout();
  ASSERT_EQ(layout.tiles_size(), 2);
  EXPECT_EQ(Ints(layout.tiles(0).dimensions()), (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(Ints(layout.tiles(1).dimensions()), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(layout.tail_padding_alignment_in_elements(), 4);
  EXPECT_EQ(layout.element_size_in_bits(), 16);
  EXPECT_EQ(layout.memory_space(), 1);
  EXPECT_EQ(layout.dynamic_shape_metadata_prefix_bytes(), 8);
}

TEST(HloTextReader, AttributesThatChangeSemanticsAreRead) {
  auto m = Parse(
      R"(HloModule attrs, is_scheduled=true, buffer_donor={ (1, {}) }, num_partitions=4, replica_count=1, frontend_attributes={k="v"}
%lt (x: f32[], y: f32[]) -> pred[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %c = pred[] compare(%x, %y), direction=LT
}
ENTRY e {
  p = f32[4]{0} parameter(0)
  q = f32[2,2]{1,0} parameter(1)
  s = f32[4]{0} sort(p), dimensions={0}, is_stable=true, to_apply=%lt
  r = f32[4]{0} rng(p, p), distribution=rng_normal
  c = c64[8]{0} parameter(2)
  f = c64[8]{0} fft(c), fft_type=IFFT, fft_length={8}
  t = (f32[2]{0}, s32[2]{0}) topk(p), k=2
  cp = f32[4]{0} collective-permute(p), channel_id=3, source_target_pairs={{0,1},{1,0}}
  ts = f32[2,2]{1,0} triangular-solve(q, q), left_side=true, lower=true, transpose_a=TRANSPOSE
  ch = f32[2,2]{1,0} cholesky(q), lower=true
  d = f32[2,2]{1,0} dot(q, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32
  e1 = f32[4]{0} exponential(p), result_accuracy={mode=highest}
  sh = f32[4]{0} copy(p), sharding={devices=[2,2]0,1,2,3 last_tile_dims={manual} shard_like 7 metadata={op_name="x"}}
  k8 = f8e4m3fn[4]{0} constant({1.5, -448, 0.001, nan})
  k5 = f8e5m2[2]{0} constant({-inf, 3})
  k4 = s4[3]{0} constant({-8, 7, -1})
  u4 = u4[2]{0} constant({15, 0})
  f4 = f4e2m1fn[2]{0} constant({-6, 0.5})
  e8 = f8e8m0fnu[2]{0} constant({1, 0.25})
  ROOT tu = (f32[4]{0}, f32[4]{0}) tuple(s, r)
}
)");
  EXPECT_TRUE(Find(m, "s")->is_stable());
  EXPECT_EQ(Find(m, "r")->distribution(), xla::RNG_NORMAL);
  EXPECT_EQ(Find(m, "f")->fft_type(), xla::IFFT);
  EXPECT_EQ(Ints(Find(m, "f")->fft_length()), std::vector<int64_t>{8});
  EXPECT_EQ(Find(m, "t")->k(), 2);
  EXPECT_TRUE(Find(m, "t")->largest());  // XLA's default
  const auto* cp = Find(m, "cp");
  EXPECT_EQ(cp->channel_id(), 3);
  ASSERT_EQ(cp->source_target_pairs_size(), 2);
  EXPECT_EQ(cp->source_target_pairs(1).source(), 1);
  EXPECT_EQ(cp->source_target_pairs(1).target(), 0);
  const auto& tso = Find(m, "ts")->triangular_solve_options();
  EXPECT_TRUE(tso.left_side());
  EXPECT_TRUE(tso.lower());
  EXPECT_FALSE(tso.unit_diagonal());
  EXPECT_EQ(tso.transpose_a(), xla::TriangularSolveOptions::TRANSPOSE);
  EXPECT_TRUE(Find(m, "ch")->cholesky_options().lower());
  EXPECT_EQ(Find(m, "d")->precision_config().algorithm(), xla::PrecisionConfig::ALG_DOT_BF16_BF16_F32);
  EXPECT_EQ(Find(m, "d")->precision_config().operand_precision_size(), 2);
  EXPECT_EQ(Find(m, "e1")->result_accuracy().mode(), xla::ResultAccuracy::HIGHEST);
  const auto& sh = Find(m, "sh")->sharding();
  ASSERT_EQ(sh.last_tile_dims_size(), 1);
  EXPECT_EQ(sh.last_tile_dims(0), xla::OpSharding::MANUAL);
  EXPECT_TRUE(sh.is_shard_group());
  EXPECT_EQ(sh.shard_group_id(), 7);
  EXPECT_EQ(sh.shard_group_type(), xla::OpSharding::LIKE);
  EXPECT_EQ(sh.metadata_size(), 0);  // debug information, not read
  // f8e4m3fn: 1.5 = 0 0111 100; -448 = 1 1111 110; 0.001 -> smallest subnormal 2^-9 = 0 0000 001; nan = 0 1111 111.
  EXPECT_EQ(Hex(Find(m, "k8")->literal().f8e4m3fns()), "3cfe017f");
  EXPECT_EQ(Hex(Find(m, "k5")->literal().f8e5m2s()), "fc42");  // -inf, 3 = 0 10000 10
  EXPECT_EQ(Hex(Find(m, "k4")->literal().s4s()), "08070f");   // one byte each, low 4 bits
  EXPECT_EQ(Hex(Find(m, "u4")->literal().u4s()), "0f00");
  EXPECT_EQ(Hex(Find(m, "f4")->literal().f4e2m1fns()), "0f01");  // -6 = 1 11 1; 0.5 = the subnormal 0 00 1
  EXPECT_EQ(Hex(Find(m, "e8")->literal().f8e8m0fnus()), "7f7d");  // 2^0, 2^-2
  // The header.
  ASSERT_EQ(m.buffer_donor().entries_size(), 1);
  EXPECT_EQ(m.buffer_donor().entries(0).parameter_number(), 1);
  EXPECT_EQ(m.frontend_attributes().map().at("k"), "v");
  EXPECT_EQ(m.frontend_attributes().map().at(std::string(kModuleConfigAttributePrefix) + "num_partitions"), "4");
  EXPECT_EQ(m.frontend_attributes().map().count(std::string(kModuleConfigAttributePrefix) + "replica_count"), 0u);
  const auto* entry = EntryComputation(m);
  ASSERT_NE(entry, nullptr);
  ASSERT_EQ(m.schedule().sequences().count(entry->id()), 1u);
  const auto& seq = m.schedule().sequences().at(entry->id()).instruction_ids();
  EXPECT_EQ(seq.size(), entry->instructions_size());
  EXPECT_TRUE(std::is_sorted(seq.begin(), seq.end()));  // text order
}

TEST(HloTextReader, WindowConvolutionAndBatchNorm) {
  auto m = Parse(R"(HloModule cv
ENTRY e {
  x = f32[1,8,8,3]{3,2,1,0} parameter(0)
  k = f32[3,3,3,16]{3,2,1,0} parameter(1)
  c = f32[1,4,4,16]{3,2,1,0} convolution(x, k), window={size=3x3 stride=2x2 pad=0_1x1_1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f
  o = f32[16]{0} parameter(2)
  bn = (f32[1,4,4,16]{3,2,1,0}, f32[16]{0}, f32[16]{0}) batch-norm-training(c, o, o), epsilon=1e-12, feature_index=3
  rp = f32[16]{0} reduce-precision(o), exponent_bits=5, mantissa_bits=10
  s = u64[2]{0} parameter(3)
  ROOT rng = (u64[2]{0}, u32[4]{0}) rng-bit-generator(s), algorithm=rng_philox
}
)");
  const auto* c = Find(m, "c");
  ASSERT_EQ(c->window().dimensions_size(), 2);
  EXPECT_EQ(c->window().dimensions(0).size(), 3);
  EXPECT_EQ(c->window().dimensions(0).stride(), 2);
  EXPECT_EQ(c->window().dimensions(0).padding_low(), 0);
  EXPECT_EQ(c->window().dimensions(0).padding_high(), 1);
  EXPECT_EQ(c->window().dimensions(1).padding_low(), 1);
  EXPECT_EQ(c->window().dimensions(1).window_dilation(), 1);
  EXPECT_EQ(c->window().dimensions(1).base_dilation(), 1);
  EXPECT_TRUE(c->window().dimensions(1).window_reversal());
  const auto& dn = c->convolution_dimension_numbers();
  EXPECT_EQ(dn.input_batch_dimension(), 0);
  EXPECT_EQ(dn.input_feature_dimension(), 3);
  EXPECT_EQ(Ints(dn.input_spatial_dimensions()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(dn.kernel_input_feature_dimension(), 2);
  EXPECT_EQ(dn.kernel_output_feature_dimension(), 3);
  EXPECT_EQ(Ints(dn.kernel_spatial_dimensions()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(dn.output_feature_dimension(), 3);
  EXPECT_EQ(c->feature_group_count(), 1);
  EXPECT_EQ(c->batch_group_count(), 1);
  EXPECT_FLOAT_EQ(Find(m, "bn")->epsilon(), 1e-12f);
  EXPECT_EQ(Find(m, "bn")->feature_index(), 3);
  EXPECT_EQ(Find(m, "rp")->exponent_bits(), 5);
  EXPECT_EQ(Find(m, "rp")->mantissa_bits(), 10);
  EXPECT_EQ(Find(m, "rng")->rng_algorithm(), xla::RNG_PHILOX);
}

TEST(HloTextReader, IdsAreUniqueAndCalleesComeFirst) {
  auto m = Parse(R"(HloModule o
ENTRY %main {
  %p = f32[] parameter(0)
  ROOT %c = f32[] call(%p), to_apply=%callee
}
%callee (x: f32[]) -> f32[] {
  ROOT %x = f32[] parameter(0)
}
)");
  ASSERT_EQ(m.computations_size(), 2);
  EXPECT_EQ(m.computations(0).name(), "callee");
  EXPECT_EQ(m.computations(1).name(), "main");
  EXPECT_EQ(m.entry_computation_name(), "main");
  EXPECT_EQ(m.entry_computation_id(), m.computations(1).id());
  std::set<int64_t> ids;
  for (const auto& c : m.computations()) {
    EXPECT_TRUE(ids.insert(c.id()).second);
    for (const auto& i : c.instructions()) EXPECT_TRUE(ids.insert(i.id()).second);
  }
}

}  // namespace
}  // namespace npc::hlo
