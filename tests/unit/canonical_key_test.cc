// Regression tests of the canonical graph key (runtime/hlo/canonical_key.cc):
// every field of the schema that can change what a module computes changes
// the key, whether it reaches the module through the text reader or is set in
// the proto directly; names, ids, debug information and equivalent spellings
// do not; unknown fields do.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/unknown_field_set.h>

#include <set>
#include <string>
#include <vector>

#include "hlo/text_reader.h"
#include "npc/hlo.h"
#include "npc/hlo_builder.h"

namespace npc::hlo {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

xla::HloModuleProto ParseText(const std::string& text) {
  auto m = ParseHloText(text, "key_test.hlo");
  EXPECT_TRUE(m.ok()) << m.error().message << "\n" << text;
  return m.ok() ? std::move(*m) : xla::HloModuleProto();
}

std::string KeyOfText(const std::string& text) { return CanonicalGraphKey(ParseText(text)); }

// Replaces the first `from` in `text` by `to`.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// --- Pairs of HLO texts that differ in one attribute -------------------------

struct TextPair {
  const char* what;
  std::string a, b;
};

std::string Module(const std::string& body, const std::string& header = "") {
  return "HloModule m" + header +
         "\n%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
         "  ROOT %s = f32[] add(%x, %y)\n}\n"
         "%lt (x: f32[], y: f32[]) -> pred[] {\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
         "  ROOT %c = pred[] compare(%x, %y), direction=LT\n}\n"
         "ENTRY %main {\n" +
         body + "\n}\n";
}

std::vector<TextPair> TextPairs() {
  const std::string p = "  p = f32[4]{0} parameter(0)\n";
  const std::string m22 = "  p = f32[2,2]{1,0} parameter(0)\n";
  auto pair = [](const char* what, const std::string& text, const std::string& from, const std::string& to) {
    return TextPair{what, text, Replace(text, from, to)};
  };
  std::vector<TextPair> v;
  v.push_back(pair("sort is_stable",
                   Module(p + "  ROOT s = f32[4]{0} sort(p), dimensions={0}, is_stable=true, to_apply=%lt"),
                   "is_stable=true", "is_stable=false"));
  v.push_back(pair("rng distribution",
                   Module("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                          "  ROOT r = f32[4]{0} rng(a, b), distribution=rng_uniform"),
                   "rng_uniform", "rng_normal"));
  v.push_back(pair("fft_type",
                   Module("  p = c64[8]{0} parameter(0)\n  ROOT f = c64[8]{0} fft(p), fft_type=FFT, fft_length={8}"),
                   "fft_type=FFT", "fft_type=IFFT"));
  v.push_back(pair("fft_length",
                   Module("  p = f32[8]{0} parameter(0)\n  ROOT f = c64[5]{0} fft(p), fft_type=RFFT, fft_length={8}"),
                   "fft_length={8}", "fft_length={9}"));
  const std::string topk = Module(p + "  ROOT t = (f32[2]{0}, s32[2]{0}) topk(p), k=2, largest=true");
  v.push_back(pair("topk k", topk, "k=2", "k=3"));
  v.push_back(pair("topk largest", topk, "largest=true", "largest=false"));
  v.push_back(
      pair("source_target_pairs",
           Module(p + "  ROOT c = f32[4]{0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,0}}"),
           "{{0,1},{1,0}}", "{{0,1}}"));
  const std::string ar =
      Module(p + "  ROOT r = f32[4]{0} all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=%add");
  v.push_back(pair("replica_groups", ar, "{{0,1},{2,3}}", "{{0,2},{1,3}}"));
  v.push_back(pair("iota replica_groups", ar, "{{0,1},{2,3}}", "[2,2]<=[2,2]T(1,0)"));
  v.push_back(pair("channel_id", ar, "channel_id=1", "channel_id=2"));
  v.push_back(pair("use_global_device_ids", ar, "channel_id=1,", "channel_id=1, use_global_device_ids=true,"));
  v.push_back(pair("all_reduce_id", ar, "channel_id=1,", "channel_id=1, all_reduce_id=3,"));
  v.push_back(pair("f8e4m3fn constant", Module("  ROOT c = f8e4m3fn[2]{0} constant({1.5, 2})"), "1.5", "1.75"));
  v.push_back(pair("f8e5m2 constant", Module("  ROOT c = f8e5m2[2]{0} constant({1.5, -inf})"), "-inf", "inf"));
  v.push_back(pair("s4 constant", Module("  ROOT c = s4[2]{0} constant({3, -3})"), "-3", "-4"));
  v.push_back(pair("u4 constant", Module("  ROOT c = u4[2]{0} constant({5, 6})"), "6", "15"));
  v.push_back(pair("f4e2m1fn constant", Module("  ROOT c = f4e2m1fn[] constant(1.5)"), "1.5", "-6"));
  const std::string tri = Module(m22 + "  ROOT t = f32[2,2]{1,0} triangular-solve(p, p), left_side=true, lower=true, "
                                       "unit_diagonal=false, transpose_a=NO_TRANSPOSE");
  v.push_back(pair("triangular-solve left_side", tri, "left_side=true", "left_side=false"));
  v.push_back(pair("triangular-solve lower", tri, "lower=true", "lower=false"));
  v.push_back(pair("triangular-solve unit_diagonal", tri, "unit_diagonal=false", "unit_diagonal=true"));
  v.push_back(pair("triangular-solve transpose_a", tri, "NO_TRANSPOSE", "ADJOINT"));
  v.push_back(pair("cholesky lower", Module(m22 + "  ROOT c = f32[2,2]{1,0} cholesky(p), lower=true"), "lower=true",
                   "lower=false"));
  const std::string dot =
      Module(m22 + "  ROOT d = f32[2,2]{1,0} dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}");
  v.push_back(
      pair("dot algorithm", dot, "rhs_contracting_dims={0}", "rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32"));
  v.push_back(pair("dot operand_precision", dot, "rhs_contracting_dims={0}",
                   "rhs_contracting_dims={0}, operand_precision={highest,default}"));
  v.push_back(pair("dot sparsity",
                   Module(m22 + "  m = u16[2,1]{1,0} parameter(1)\n  ROOT d = f32[2,2]{1,0} dot(p, p, m), "
                                "lhs_contracting_dims={1}, rhs_contracting_dims={0}, sparsity=L.1@2:4"),
                   "L.1@2:4", "L.1@1:4"));
  v.push_back(
      pair("ragged-dot dims",
           Module("  a = f32[4,2]{1,0} parameter(0)\n  b = f32[2,2,3]{2,1,0} parameter(1)\n"
                  "  g = s64[2]{0} parameter(2)\n  ROOT r = f32[4,3]{1,0} ragged-dot(a, b, g), "
                  "lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}"),
           "rhs_contracting_dims={1}", "rhs_contracting_dims={2}"));
  v.push_back(pair("result_accuracy", Module(p + "  ROOT e = f32[4]{0} exponential(p)"), "exponential(p)",
                   "exponential(p), result_accuracy={mode=highest}"));
  v.push_back(pair("result_accuracy tolerance",
                   Module(p + "  ROOT e = f32[4]{0} tanh(p), result_accuracy={tolerance={atol=0,rtol=0,ulps=1}}"),
                   "ulps=1", "ulps=2"));
  const std::string cc = Module(p + "  ROOT c = f32[4]{0} custom-call(p), custom_call_target=\"t\"");
  v.push_back(pair("custom-call schedule", cc, "\"t\"", "\"t\", schedule=SCHEDULE_LATEST"));
  v.push_back(pair("custom-call padding_type", cc, "\"t\"", "\"t\", padding_type=PADDING_SAME"));
  v.push_back(pair("custom-call literal", cc, "\"t\"", "\"t\", literal=s32[2] {1, 2}"));
  v.push_back(pair("custom-call api_version", cc, "\"t\"", "\"t\", api_version=API_VERSION_TYPED_FFI"));
  v.push_back(pair("custom-call side effect", cc, "\"t\"", "\"t\", custom_call_has_side_effect=true"));
  v.push_back(pair("custom-call backend_config", cc, "\"t\"", "\"t\", backend_config=\"{}\""));
  v.push_back(pair("send is_host_transfer",
                   Module(p + "  t = token[] after-all()\n  s = (f32[4]{0}, u32[], token[]) send(p, t), channel_id=5, "
                              "is_host_transfer=true\n  ROOT d = token[] send-done(s), channel_id=5"),
                   "is_host_transfer=true", "is_host_transfer=false"));
  v.push_back(pair("call is_composite",
                   Module("  a = f32[] parameter(0)\n  ROOT c = f32[] call(a, a), to_apply=%add, is_composite=true"),
                   "is_composite=true", "is_composite=false"));
  v.push_back(pair("reshape inferred_dimension", Module(m22 + "  ROOT r = f32[4]{0} reshape(p)"), "reshape(p)",
                   "reshape(p), inferred_dimension=0"));
  v.push_back(pair("rng-get-and-update-state delta",
                   Module("  ROOT r = u64[2]{0} rng-get-and-update-state(), delta=16"), "delta=16", "delta=32"));
  v.push_back(pair("infeed_config",
                   Module("  t = token[] after-all()\n  ROOT i = (f32[4]{0}, token[]) infeed(t), infeed_config=\"a\""),
                   "\"a\"", "\"b\""));
  v.push_back(pair("outfeed_config",
                   Module(p + "  t = token[] after-all()\n  ROOT o = token[] outfeed(p, t), outfeed_config=\"a\""),
                   "\"a\"", "\"b\""));
  v.push_back(pair("copy-start cross_program_prefetch_index",
                   Module(p + "  c = (f32[4]{0}, f32[4]{0}, u32[]) copy-start(p), cross_program_prefetch_index=0\n"
                              "  ROOT d = f32[4]{0} copy-done(c)"),
                   "cross_program_prefetch_index=0", "cross_program_prefetch_index=1"));
  v.push_back(pair("domain exit sharding",
                   Module(p + "  ROOT d = f32[4]{0} domain(p), domain={kind=\"sharding\", entry={maximal device=0}, "
                              "exit={maximal device=1}}"),
                   "exit={maximal device=1}", "exit={maximal device=0}"));
  const std::string sh = Module(
      "  p = f32[4,4]{1,0} parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dims={manual}}\n"
      "  ROOT c = f32[4,4]{1,0} copy(p), sharding={replicated shard_as 1}");
  v.push_back(pair("sharding last_tile_dims", sh, "last_tile_dims={manual}", "last_tile_dims={replicated}"));
  v.push_back(pair("sharding shard_as/shard_like", sh, "shard_as 1", "shard_like 1"));
  v.push_back(pair("sharding devices", sh, "0,1,2,3", "3,2,1,0"));
  v.push_back(pair("map computation", Module(p + "  ROOT m = f32[4]{0} map(p, p), dimensions={0}, to_apply=%add"),
                   "to_apply=%add", "to_apply=%lt"));
  v.push_back(
      pair("gather indices_are_sorted",
           Module(m22 + "  i = s32[1,1]{1,0} parameter(1)\n  ROOT g = f32[1,2]{1,0} gather(p, i), offset_dims={1}, "
                        "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}, "
                        "indices_are_sorted=true"),
           "indices_are_sorted=true", "indices_are_sorted=false"));
  // Module header.
  const std::string body = p + "  ROOT n = f32[4]{0} negate(p)";
  v.push_back(pair("buffer_donor", Module(body, ", buffer_donor={ (0, {}) }"), "buffer_donor={ (0, {}) }",
                   "buffer_donor={}"));
  v.push_back(pair("input_output_alias", Module(body, ", input_output_alias={ {}: (0, {}, may-alias) }"), "may-alias",
                   "must-alias"));
  v.push_back(pair("is_scheduled", Module(body, ", is_scheduled=true"), "true", "false"));
  v.push_back(pair("num_partitions", Module(body, ", num_partitions=2"), "num_partitions=2", "num_partitions=4"));
  v.push_back(pair("replica_count", Module(body, ", replica_count=1"), "replica_count=1", "replica_count=8"));
  v.push_back(pair("alias_passthrough_params", Module(body, ", alias_passthrough_params=true"), "true", "false"));
  v.push_back(pair("allow_spmd_sharding_propagation_to_output",
                   Module(body, ", allow_spmd_sharding_propagation_to_output={true}"), "{true}", "{false}"));
  v.push_back(pair("module frontend_attributes", Module(body, ", frontend_attributes={a=\"1\"}"), "\"1\"", "\"2\""));
  v.push_back(pair("entry_computation_layout", Module(body, ", entry_computation_layout={(f32[4]{0})->f32[4]{0}}"),
                   "->f32[4]{0}", "->f32[4]{0:S(1)}"));
  v.push_back(pair("layout tiles", Module("  ROOT p = f32[8,8]{1,0:T(2,4)} parameter(0)"), "T(2,4)", "T(4,2)"));
  v.push_back(pair("layout element size", Module("  ROOT p = f32[8,8]{1,0:E(16)} parameter(0)"), "E(16)", "E(8)"));
  v.push_back(pair("layout memory space", Module("  ROOT p = f32[8,8]{1,0:S(1)} parameter(0)"), "S(1)", "S(2)"));
  v.push_back(pair("execution_thread", Module(body) + "", "ROOT n = f32[4]{0} negate(p)\n}",
                   "ROOT n = f32[4]{0} negate(p)\n}, execution_thread=\"host\""));
  return v;
}

TEST(CanonicalGraphKeyText, EachSemanticAttributeChangesTheKey) {
  for (const auto& t : TextPairs()) {
    EXPECT_NE(KeyOfText(t.a), KeyOfText(t.b)) << t.what << "\n--- a:\n" << t.a << "--- b:\n" << t.b;
  }
}

TEST(CanonicalGraphKeyText, NamesMetadataAndDebugAttributesKeepTheKey) {
  const std::string a = Module(
      "  p = f32[4,4]{1,0} parameter(0), sharding={devices=[2,2]0,1,2,3 metadata={op_name=\"a\"}}\n"
      "  ROOT n = f32[4,4]{1,0} negate(p), metadata={op_type=\"neg\" op_name=\"x/y\" source_file=\"/a.py\" "
      "source_line=3}");
  std::string b = Replace(a, "op_name=\"a\"", "op_name=\"b\"");
  b = Replace(b, "source_line=3", "source_line=4");
  b = Replace(b, "ROOT n =", "ROOT renamed =");
  b = Replace(b, "negate(p), metadata",
              "negate(p), origin={{\"other\"}}, statistics={visualizing_index=0,s=1}, metadata");
  b = Replace(b, "HloModule m", "HloModule other_name");
  EXPECT_EQ(KeyOfText(a), KeyOfText(b));
}

TEST(CanonicalGraphKeyText, EquivalentSpellingsKeepTheKey) {
  // Iota replica groups and the explicit list they stand for; iota device
  // assignments likewise; a default layout written or not.
  const std::string ar = Module(
      "  p = f32[4]{0} parameter(0)\n"
      "  ROOT r = f32[4]{0} all-reduce(p), replica_groups={{0,2},{1,3}}, to_apply=%add");
  EXPECT_EQ(KeyOfText(ar), KeyOfText(Replace(ar, "{{0,2},{1,3}}", "[2,2]<=[2,2]T(1,0)")));
  const std::string sh =
      Module("  p = f32[4,4] parameter(0), sharding={devices=[2,2]0,2,1,3}\n  ROOT c = f32[4,4] copy(p)");
  EXPECT_EQ(KeyOfText(sh), KeyOfText(Replace(sh, "0,2,1,3", "<=[2,2]T(1,0)")));
  EXPECT_EQ(KeyOfText(sh), KeyOfText(Replace(sh, "f32[4,4] parameter", "f32[4,4]{1,0} parameter")));
}

// --- The same fields, set in the proto directly ------------------------------------

// f32[4] p -> negate -> ROOT add(neg, p), built with the builder.
xla::HloModuleProto Base() {
  HloBuilder b("base");
  Op p = b.Parameter(0, xla::F32, {4}, "p");
  return b.Build(b.Add(b.Unary("negate", p), p));
}

xla::HloInstructionProto* Negate(xla::HloModuleProto* m) {
  for (auto& c : *m->mutable_computations()) {
    for (auto& i : *c.mutable_instructions()) {
      if (i.opcode() == "negate") return &i;
    }
  }
  ADD_FAILURE() << "no negate";
  return nullptr;
}

// Sets `f` of `msg` to a value that is neither the default nor a spelling the
// canonical form treats as the default: the last value of an enum, 7 for
// numbers, true, "x", an entry for maps and repeated fields, and for a message
// its first field, recursively.
void SetNonDefault(Message* msg, const FieldDescriptor* f) {
  const Reflection* r = msg->GetReflection();
  if (f->is_map()) {
    Message* entry = r->AddMessage(msg, f);
    const auto* d = entry->GetDescriptor();
    SetNonDefault(entry, d->FindFieldByNumber(1));
    SetNonDefault(entry, d->FindFieldByNumber(2));
    return;
  }
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: rep ? r->AddInt32(msg, f, 7) : r->SetInt32(msg, f, 7); break;
    case FieldDescriptor::CPPTYPE_INT64: rep ? r->AddInt64(msg, f, 7) : r->SetInt64(msg, f, 7); break;
    case FieldDescriptor::CPPTYPE_UINT32: rep ? r->AddUInt32(msg, f, 7) : r->SetUInt32(msg, f, 7); break;
    case FieldDescriptor::CPPTYPE_UINT64: rep ? r->AddUInt64(msg, f, 7) : r->SetUInt64(msg, f, 7); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: rep ? r->AddDouble(msg, f, 7) : r->SetDouble(msg, f, 7); break;
    case FieldDescriptor::CPPTYPE_FLOAT: rep ? r->AddFloat(msg, f, 7) : r->SetFloat(msg, f, 7); break;
    case FieldDescriptor::CPPTYPE_BOOL: rep ? r->AddBool(msg, f, true) : r->SetBool(msg, f, true); break;
    case FieldDescriptor::CPPTYPE_STRING: rep ? r->AddString(msg, f, "x") : r->SetString(msg, f, "x"); break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = f->enum_type();
      const auto* last = e->value(e->value_count() - 1);
      rep ? r->AddEnum(msg, f, last) : r->SetEnum(msg, f, last);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* sub = rep ? r->AddMessage(msg, f) : r->MutableMessage(msg, f);
      SetNonDefault(sub, sub->GetDescriptor()->field(0));
      break;
    }
  }
}

// Fields the key leaves out (see npc/hlo.h).
const std::set<std::string> kInstructionFieldsOutOfTheKey = {"name", "metadata", "statistics_viz", "original_value"};
// Fields the key re-encodes: changing one changes the graph (a dangling
// reference); that renumbering keeps the key is tested in hlo_test.
const std::set<std::string> kInstructionFieldsReencoded = {"id", "operand_ids", "control_predecessor_ids",
                                                           "called_computation_ids"};

TEST(CanonicalGraphKeyProto, EveryInstructionFieldChangesTheKey) {
  const std::string base = CanonicalGraphKey(Base());
  const auto* d = xla::HloInstructionProto::descriptor();
  int checked = 0;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (kInstructionFieldsReencoded.count(f->name())) continue;
    xla::HloModuleProto m = Base();
    xla::HloInstructionProto* neg = Negate(&m);
    if (kInstructionFieldsOutOfTheKey.count(f->name())) {
      SetNonDefault(neg, f);
      EXPECT_EQ(CanonicalGraphKey(m), base) << f->name() << " is not part of the key";
      continue;
    }
    if (f->name() == "opcode") {
      neg->set_opcode("abs");
    } else if (f->name() == "shape") {
      neg->mutable_shape()->set_element_type(xla::F16);
    } else {
      SetNonDefault(neg, f);
    }
    EXPECT_NE(CanonicalGraphKey(m), base) << "HloInstructionProto." << f->name() << " does not change the key";
    ++checked;
  }
  EXPECT_EQ(checked, d->field_count() - static_cast<int>(kInstructionFieldsOutOfTheKey.size() +
                                                         kInstructionFieldsReencoded.size()));
}

TEST(CanonicalGraphKeyProto, EveryComputationAndModuleFieldChangesTheKey) {
  const std::string base = CanonicalGraphKey(Base());
  const std::set<std::string> comp_out = {"name", "instructions", "id", "root_id"};
  const auto* cd = xla::HloComputationProto::descriptor();
  for (int i = 0; i < cd->field_count(); ++i) {
    const FieldDescriptor* f = cd->field(i);
    xla::HloModuleProto m = Base();
    auto* entry = m.mutable_computations(m.computations_size() - 1);
    if (comp_out.count(f->name())) continue;  // re-encoded: covered by IgnoresNamesIdsMetadataAndOrder
    SetNonDefault(entry, f);
    EXPECT_NE(CanonicalGraphKey(m), base) << "HloComputationProto." << f->name() << " does not change the key";
  }
  const std::set<std::string> module_out = {"name", "entry_computation_name", "entry_computation_id", "computations",
                                            "id", "stack_frame_index"};
  const auto* md = xla::HloModuleProto::descriptor();
  for (int i = 0; i < md->field_count(); ++i) {
    const FieldDescriptor* f = md->field(i);
    xla::HloModuleProto m = Base();
    if (module_out.count(f->name())) {
      SetNonDefault(&m, f);
      if (f->name() == "name" || f->name() == "id" || f->name() == "stack_frame_index") {
        EXPECT_EQ(CanonicalGraphKey(m), base) << f->name() << " is not part of the key";
      }
      continue;
    }
    if (f->name() == "schedule") {
      // A schedule of the entry computation, in its instructions' order.
      const auto& entry = m.computations(m.computations_size() - 1);
      auto& seq = (*m.mutable_schedule()->mutable_sequences())[entry.id()];
      for (const auto& inst : entry.instructions()) seq.add_instruction_ids(inst.id());
      const std::string scheduled = CanonicalGraphKey(m);
      EXPECT_NE(scheduled, base) << "schedule does not change the key";
      std::swap(*seq.mutable_instruction_ids()->Mutable(0), *seq.mutable_instruction_ids()->Mutable(1));
      EXPECT_NE(CanonicalGraphKey(m), scheduled) << "the schedule's order does not change the key";
      continue;
    }
    SetNonDefault(&m, f);
    EXPECT_NE(CanonicalGraphKey(m), base) << "HloModuleProto." << f->name() << " does not change the key";
  }
}

TEST(CanonicalGraphKeyProto, UnknownFieldsChangeTheKey) {
  const std::string base = CanonicalGraphKey(Base());
  {
    xla::HloModuleProto m = Base();
    Negate(&m)->GetReflection()->MutableUnknownFields(Negate(&m))->AddVarint(1999, 1);
    EXPECT_NE(CanonicalGraphKey(m), base) << "an unknown field of an instruction";
  }
  {
    xla::HloModuleProto m = Base();
    auto* shape = Negate(&m)->mutable_shape();
    shape->GetReflection()->MutableUnknownFields(shape)->AddLengthDelimited(77, "abc");
    EXPECT_NE(CanonicalGraphKey(m), base) << "an unknown field of a shape";
  }
  {
    xla::HloModuleProto m = Base();
    m.GetReflection()->MutableUnknownFields(&m)->AddVarint(22, 5);
    EXPECT_NE(CanonicalGraphKey(m), base) << "an unknown field of the module";
  }
  {
    // Kept through a serialize / parse round trip, as a cache entry stores it.
    xla::HloModuleProto m = Base();
    Negate(&m)->GetReflection()->MutableUnknownFields(Negate(&m))->AddVarint(1999, 1);
    xla::HloModuleProto back;
    ASSERT_TRUE(back.ParseFromString(m.SerializeAsString()));
    EXPECT_EQ(CanonicalGraphKey(back), CanonicalGraphKey(m));
  }
}

TEST(CanonicalGraphKeyProto, DebugInformationAndIdsKeepTheKey) {
  const std::string base = CanonicalGraphKey(Base());
  xla::HloModuleProto m = Base();
  m.set_name("renamed");
  m.set_id(123);
  m.mutable_stack_frame_index()->add_file_names("/a.py");
  auto* entry = m.mutable_computations(m.computations_size() - 1);
  entry->set_name("renamed_entry");
  entry->mutable_program_shape()->set_parameter_names(0, "renamed_p");
  *m.mutable_host_program_shape() = entry->program_shape();
  for (auto& inst : *entry->mutable_instructions()) {
    inst.set_name(inst.name() + "_x");
    inst.mutable_metadata()->set_op_name("x");
    inst.mutable_metadata()->set_stack_frame_id(3);
    inst.mutable_statistics_viz()->set_stat_index_to_visualize(1);
    inst.mutable_original_value()->set_is_synthetic_call(true);
  }
  EXPECT_EQ(CanonicalGraphKey(m), base);

  // Sharding metadata is debug information; the sharding itself is not.
  xla::HloModuleProto s1 = Base(), s2 = Base();
  Negate(&s1)->mutable_sharding()->set_type(xla::OpSharding::MAXIMAL);
  *Negate(&s2)->mutable_sharding() = Negate(&s1)->sharding();
  Negate(&s2)->mutable_sharding()->add_metadata()->set_op_name("from here");
  EXPECT_EQ(CanonicalGraphKey(s1), CanonicalGraphKey(s2));
  EXPECT_NE(CanonicalGraphKey(s1), base);
}

TEST(CanonicalGraphKeyProto, DeviceListFormsAgree) {
  auto module = [](auto set_groups) {
    HloBuilder b("c");
    Op p = b.Parameter(0, xla::F32, {4}, "p");
    xla::HloModuleProto m = b.Build(b.Unary("negate", p));
    xla::HloInstructionProto* neg = Negate(&m);
    neg->set_opcode("all-gather");
    set_groups(neg);
    return CanonicalGraphKey(m);
  };
  const std::string legacy = module([](xla::HloInstructionProto* i) {
    for (auto group : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, 3}}) {
      auto* g = i->add_replica_groups();
      for (int64_t id : group) g->add_replica_ids(id);
    }
  });
  const std::string explicit_list = module([](xla::HloInstructionProto* i) {
    for (auto group : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, 3}}) {
      auto* g = i->mutable_collective_device_list()->add_replica_groups();
      for (int64_t id : group) g->add_replica_ids(id);
    }
  });
  auto iota = [](xla::IotaReplicaGroupListProto* l) {
    l->set_num_replica_groups(2);
    l->set_num_devices_per_group(2);
    l->add_iota_reshape_dims(2);
    l->add_iota_reshape_dims(2);
    l->add_iota_transpose_perm(1);
    l->add_iota_transpose_perm(0);
  };
  const std::string iota_92 =
      module([&](xla::HloInstructionProto* i) { iota(i->mutable_iota_collective_device_list()); });
  const std::string iota_87 = module([&](xla::HloInstructionProto* i) {
    iota(i->mutable_collective_device_list()->mutable_iota_replica_group_list());
  });
  EXPECT_EQ(explicit_list, legacy);
  EXPECT_EQ(iota_92, legacy);
  EXPECT_EQ(iota_87, legacy);
  const std::string other = module([](xla::HloInstructionProto* i) {
    auto* g = i->add_replica_groups();
    g->add_replica_ids(0);
    g->add_replica_ids(1);
  });
  EXPECT_NE(other, legacy);

  // Sharding: an iota tile assignment and its explicit device list.
  xla::HloModuleProto a = Base(), b = Base();
  auto* sa = Negate(&a)->mutable_sharding();
  sa->set_type(xla::OpSharding::OTHER);
  sa->add_tile_assignment_dimensions(2);
  sa->add_tile_assignment_dimensions(2);
  *Negate(&b)->mutable_sharding() = *sa;
  for (int64_t d : {0, 2, 1, 3}) sa->add_tile_assignment_devices(d);
  auto* sb = Negate(&b)->mutable_sharding();
  sb->add_iota_reshape_dims(2);
  sb->add_iota_reshape_dims(2);
  sb->add_iota_transpose_perm(1);
  sb->add_iota_transpose_perm(0);
  EXPECT_EQ(CanonicalGraphKey(a), CanonicalGraphKey(b));
}

// The key of a fixed module under format npc-graph-key/2. If this changes,
// the canonical form changed: bump kGraphKeyFormat (every key changes anyway)
// and update the value here.
TEST(CanonicalGraphKeyProto, FormatIsStable) {
  EXPECT_STREQ(kGraphKeyFormat, "npc-graph-key/2");
  EXPECT_EQ(CanonicalGraphKey(Base()), "16515687906183771630");
}

}  // namespace
}  // namespace npc::hlo
