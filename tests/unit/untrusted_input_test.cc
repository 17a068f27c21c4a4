// Untrusted input (issue 10): inputs that used to crash npc's readers (stack
// overflow, bad_alloc, unchecked overflow) are clear errors naming the file
// and the position; validation rejects what XLA's verifier rejects for the
// ops the host backend compiles; a protobuf of another type says what it is
// not, without libprotobuf lines on stderr. The fuzzers' reproducers live here
// as strings (see the FuzzFound tests).
#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "hlo/gunzip.h"
#include "hlo/text_reader.h"
#include "host/host_backend.h"
#include "npc/hlo.h"
#include "npc/npc.h"
#include "support/test_support.h"

namespace npc {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin: " << (haystack)

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// The error of parsing `text` as a module; "" (and a test failure) when it parses.
std::string ParseError(const std::string& text, const std::string& name = "in.hlo") {
  auto m = hlo::ParseHloModule(text, name);
  if (m) {
    ADD_FAILURE() << "parsed, expected an error:\n" << text.substr(0, 2000);
    return "";
  }
  return m.error().message;
}

std::string Module(const std::string& body) { return "HloModule m\n\nENTRY e {\n" + body + "}\n"; }

// ---- text reader: depth and size limits ----------------------------------------------

TEST(UntrustedText, DeeplyNestedTupleShapeIsAnErrorNotAStackOverflow) {
  // 600 KB of '(' used to overflow the stack (SIGSEGV).
  const std::string text = Module("  ROOT p = " + Repeat("(", 600000) + "f32[] parameter(0)\n");
  std::string e = ParseError(text);
  EXPECT_CONTAINS(e, "in.hlo:4:");
  EXPECT_CONTAINS(e, "tuple shapes nested deeper than 64 levels");
}

TEST(UntrustedText, DeeplyNestedConstantBracesAreAnError) {
  const std::string text = Module("  ROOT c = f32[1]{0} constant(" + Repeat("{", 600000) + "1" + Repeat("}", 600000) + ")\n");
  std::string e = ParseError(text);
  EXPECT_CONTAINS(e, "in.hlo:4:");
  EXPECT_CONTAINS(e, "constant braces nested deeper than 64 levels");
}

TEST(UntrustedText, DeeplyNestedTupleShardingIsAnError) {
  const std::string text =
      Module("  ROOT p = f32[2]{0} parameter(0), sharding=" + Repeat("{", 100000) + "replicated" + Repeat("}", 100000) + "\n");
  EXPECT_CONTAINS(ParseError(text), "tuple shardings nested deeper than 64 levels");
}

TEST(UntrustedText, NestingWithinTheLimitStillParses) {
  const std::string shape = Repeat("(", 20) + "f32[]" + Repeat(")", 20);
  auto m = hlo::ParseHloText(Module("  ROOT p = " + shape + " parameter(0)\n"), "ok.hlo");
  ASSERT_TRUE(m) << m.error().message;
}

TEST(UntrustedText, HugeIotaDeviceListIsAnErrorNotBadAlloc) {
  // About 100 bytes; used to abort in bad_alloc.
  const std::string text = Module(
      "  p = f32[2]{0} parameter(0)\n"
      "  ROOT r = f32[2]{0} all-reduce(p), replica_groups=[1,4000000000000]<=[4000000000000], to_apply=e\n");
  std::string e = ParseError(text);
  EXPECT_CONTAINS(e, "in.hlo:5:");
  EXPECT_CONTAINS(e, "iota device list longer than 1048576 devices");
}

TEST(UntrustedText, OverflowingIotaDimensionsAreAnError) {
  const std::string text = Module(
      "  ROOT p = f32[2]{0} parameter(0), sharding={devices=[2,1]<=[4294967296,4294967296,4294967296]}\n");
  EXPECT_CONTAINS(ParseError(text), "iota device list longer than");
}

TEST(UntrustedText, IotaReplicaGroupsWhoseProductOverflowsAreAnError) {
  const std::string text = Module(
      "  p = f32[2]{0} parameter(0)\n"
      "  ROOT r = f32[2]{0} all-reduce(p), replica_groups=[4294967296,4294967296]<=[4], to_apply=e\n");
  EXPECT_CONTAINS(ParseError(text), "iota replica groups do not match their device count");
}

TEST(UntrustedText, ConstantWhoseElementCountOverflowsIsAnError) {
  const std::string text =
      Module("  ROOT c = f32[4294967296,4294967296,4294967296]{2,1,0} constant({1})\n");
  EXPECT_CONTAINS(ParseError(text), "more elements than a 64-bit count holds");
}

TEST(UntrustedText, ShapeWhoseByteSizeOverflowsFailsValidation) {
  const std::string text = Module("  ROOT p = f32[4294967296,4294967296]{1,0} parameter(0)\n");
  std::string e = ParseError(text);
  EXPECT_CONTAINS(e, "in.hlo: invalid HLO module");
  EXPECT_CONTAINS(e, "more bytes than a 64-bit size holds");
}

TEST(UntrustedText, StringsMustBeUtf8) {
  // Protobuf string fields must hold UTF-8: such a module could not be
  // written to the cache and read back.
  std::string e = ParseError(Module("  p = f32[2]{0} parameter(0)\n"
                                    "  ROOT c = f32[2]{0} custom-call(p), custom_call_target=\"caf\xe9\"\n"));
  EXPECT_CONTAINS(e, "in.hlo:5:57: string is not valid UTF-8");
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    EXPECT_CONTAINS(ParseError(Module("  ROOT p = f32[2]{0} parameter(0), metadata={op_name=\"" + std::string(bad) +
                                      "\"}\n")),
                    "string is not valid UTF-8");
  }
  auto ok = hlo::ParseHloModule(Module("  ROOT p = f32[2]{0} parameter(0), metadata={op_name=\"caf\xc3\xa9 \xe2\x82\xac "
                                       "\xf0\x9f\x98\x80\"}\n"),
                                "utf8.hlo");
  ASSERT_TRUE(ok) << ok.error().message;
}

// Found by npc_fuzz_binary_reader (a corpus module with one byte changed): a
// frontend attribute value that is not UTF-8 made the canonical key's
// serialization print libprotobuf errors; now the reader refuses it. Unquoted
// values and backend_config likewise.
TEST(FuzzFound, FrontendAttributeValueThatIsNotUtf8) {
  const std::string quoted = Module(
      "  ROOT p1.2 = bf16[1]{0} parameter(0), frontend_attributes={neff_input_names=\"inpu\xd1-\xd1t1\"}\n");
  ::testing::internal::CaptureStderr();
  EXPECT_CONTAINS(ParseError(quoted), "in.hlo:4:78: string is not valid UTF-8");
  EXPECT_CONTAINS(ParseError(Module("  ROOT p = f32[] parameter(0), frontend_attributes={k=v\xff}\n")),
                  "in.hlo:4:55: attribute value is not valid UTF-8");
  EXPECT_CONTAINS(ParseError(Module("  p = f32[] parameter(0)\n"
                                    "  ROOT c = f32[] custom-call(p), custom_call_target=\"t\", backend_config={\xff}\n")),
                  "backend_config is not valid UTF-8");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// ---- binary reader ------------------------------------------------------------------

xla::HloModuleProto OneParameterModule(const xla::ShapeProto& shape) {
  xla::HloModuleProto m;
  m.set_name("m");
  auto* c = m.add_computations();
  c->set_name("e");
  c->set_id(1);
  c->set_root_id(2);
  auto* p = c->add_instructions();
  p->set_name("p");
  p->set_id(2);
  p->set_opcode("parameter");
  *p->mutable_shape() = shape;
  m.set_entry_computation_id(1);
  m.set_entry_computation_name("e");
  return m;
}

xla::ShapeProto Array(std::vector<int64_t> dims) {
  xla::ShapeProto s;
  s.set_element_type(xla::F32);
  for (int64_t d : dims) {
    s.add_dimensions(d);
    s.add_is_dynamic_dimension(false);
  }
  return s;
}

TEST(UntrustedBinary, NegativeDimensionFailsValidation) {
  std::string e = ParseError(OneParameterModule(Array({2, -1})).SerializeAsString(), "neg.pb");
  EXPECT_CONTAINS(e, "neg.pb: invalid HLO module");
  EXPECT_CONTAINS(e, "instruction 'p': negative dimension size -1");
}

TEST(UntrustedBinary, OverflowingShapeFailsValidation) {
  std::string e =
      ParseError(OneParameterModule(Array({INT64_MAX / 2, 3})).SerializeAsString(), "big.pb");
  EXPECT_CONTAINS(e, "more bytes than a 64-bit size holds");
}

TEST(UntrustedBinary, UnknownElementTypeAndBadLayoutFailValidation) {
  xla::ShapeProto s = Array({2, 3});
  s.set_element_type(static_cast<xla::PrimitiveType>(999));
  EXPECT_CONTAINS(ParseError(OneParameterModule(s).SerializeAsString()), "unknown element type 999");
  xla::ShapeProto l = Array({2, 3});
  l.mutable_layout()->add_minor_to_major(0);
  l.mutable_layout()->add_minor_to_major(0);
  EXPECT_CONTAINS(ParseError(OneParameterModule(l).SerializeAsString()), "is not a permutation of its dimensions");
}

xla::ShapeProto NestedTuple(int depth) {
  xla::ShapeProto s = Array({2});
  for (int i = 0; i < depth; ++i) {
    xla::ShapeProto t;
    t.set_element_type(xla::TUPLE);
    *t.add_tuple_shapes() = s;
    s = t;
  }
  return s;
}

TEST(UntrustedBinary, DeepTupleShapesAreErrors) {
  // Within libprotobuf's recursion limit, beyond npc's: validation.
  EXPECT_CONTAINS(ParseError(OneParameterModule(NestedTuple(80)).SerializeAsString()),
                  "shape nested deeper than 64 tuple levels");
  // Beyond libprotobuf's recursion limit: the parse fails, no crash, no stderr.
  ::testing::internal::CaptureStderr();
  std::string e = ParseError(OneParameterModule(NestedTuple(1000)).SerializeAsString(), "deep.pb");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_CONTAINS(e, "deep.pb:");
}

TEST(UntrustedBinary, ProtobufOfAnotherTypeSaysWhatItIsNot) {
  // Field 1 holds bytes that are not UTF-8 (as an XLA serialized executable's
  // do), field 2 a varint: a well-formed protobuf of another message type.
  std::string other;
  other += '\x0a';
  other += '\x04';
  other += "\xff\xfe\x00\x01";
  other += '\x10';
  other += '\x07';
  ::testing::internal::CaptureStderr();
  std::string e = ParseError(other, "executable.bin");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "libprotobuf must not print";
  EXPECT_CONTAINS(e, "executable.bin: not an HloModuleProto or HloProto: a well-formed protobuf message of another type");
  // Not protobuf at all: corrupt or truncated.
  ::testing::internal::CaptureStderr();
  e = ParseError(std::string("\x0a\x7f\x01", 3), "cut.pb");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_CONTAINS(e, "cut.pb: corrupt or truncated protobuf");
}

TEST(UntrustedBinary, ProtobufWithoutComputationsSaysWhatItIsNot) {
  xla::HloModuleProto m;
  m.set_name("only a name");
  EXPECT_CONTAINS(ParseError(m.SerializeAsString(), "x.pb"),
                  "x.pb: not an HloModuleProto or HloProto: no computations with instructions");
}

std::string Gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(UntrustedBinary, GzipOutputIsCapped) {
  const std::string bomb = Gzip(std::string(8 << 20, '\0'));  // 8 MiB of zeros, a few KB compressed
  auto capped = hlo::Gunzip(bomb, "bomb.gz", 1 << 20);
  ASSERT_FALSE(capped);
  EXPECT_CONTAINS(capped.error().message, "bomb.gz: gzip data inflates to more than 1048576 bytes");
  auto whole = hlo::Gunzip(bomb, "bomb.gz", 16 << 20);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->size(), size_t{8} << 20);
}

// ---- validation: what XLA's verifier rejects --------------------------------------------

const char kGatherHeader[] =
    "  a = f32[4,5]{1,0} parameter(0)\n"
    "  i = s32[3,2]{1,0} parameter(1)\n";

TEST(OpValidation, GatherWithDuplicateStartIndexMapIsRejected) {
  // Compiled before and read past the operand: two starts added on dimension 0.
  std::string e = ParseError(Module(std::string(kGatherHeader) +
                                    "  ROOT g = f32[3,1,5]{2,1,0} gather(a, i), offset_dims={1,2}, "
                                    "collapsed_slice_dims={}, start_index_map={0,0}, index_vector_dim=1, "
                                    "slice_sizes={1,5}\n"));
  EXPECT_CONTAINS(e, "in.hlo: invalid HLO module: computation 'e', instruction 'g'");
  EXPECT_CONTAINS(e, "gather start_index_map names dimension 0 twice");
}

TEST(OpValidation, GatherDimensionNumbersOutOfRangeOrUnsortedAreRejected) {
  EXPECT_CONTAINS(ParseError(Module(std::string(kGatherHeader) +
                                    "  ROOT g = f32[3,5]{1,0} gather(a, i), offset_dims={1}, "
                                    "collapsed_slice_dims={0}, start_index_map={0,7}, index_vector_dim=1, "
                                    "slice_sizes={1,5}\n")),
                  "gather start_index_map has dimension 7 out of range [0, 2)");
  EXPECT_CONTAINS(ParseError(Module(std::string(kGatherHeader) +
                                    "  ROOT g = f32[3,1,5]{2,1,0} gather(a, i), offset_dims={2,1}, "
                                    "collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, "
                                    "slice_sizes={1,5}\n")),
                  "gather offset_dims is not sorted");
  EXPECT_CONTAINS(ParseError(Module(std::string(kGatherHeader) +
                                    "  ROOT g = f32[3,5]{1,0} gather(a, i), offset_dims={1}, "
                                    "collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, "
                                    "slice_sizes={1,6}\n")),
                  "gather slice size 6 of dimension 1 exceeds the operand");
  EXPECT_CONTAINS(ParseError(Module(std::string(kGatherHeader) +
                                    "  ROOT g = f32[3,5]{1,0} gather(a, i), offset_dims={1}, "
                                    "collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=3, "
                                    "slice_sizes={1,5}\n")),
                  "gather index_vector_dim 3 out of range [0, 2]");
}

TEST(OpValidation, ValidGatherStillParses) {
  auto m = hlo::ParseHloModule(Module(std::string(kGatherHeader) +
                                      "  ROOT g = f32[3,5]{1,0} gather(a, i), offset_dims={1}, "
                                      "collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, "
                                      "slice_sizes={1,5}\n"),
                               "ok.hlo");
  EXPECT_TRUE(m) << m.error().message;
}

const char kScatterPrefix[] =
    "HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
    "ENTRY e {\n  a = f32[4,5]{1,0} parameter(0)\n  i = s32[3,2]{1,0} parameter(1)\n";

TEST(OpValidation, ScatterThatCouldWritePastItsBufferIsRejected) {
  std::string e = ParseError(std::string(kScatterPrefix) +
                             "  u = f32[3,1,5]{2,1,0} parameter(2)\n"
                             "  ROOT s = f32[4,5]{1,0} scatter(a, i, u), update_window_dims={1,2}, "
                             "inserted_window_dims={}, scatter_dims_to_operand_dims={1,1}, index_vector_dim=1, "
                             "to_apply=add\n}\n");
  EXPECT_CONTAINS(e, "instruction 's': scatter scatter_dims_to_operand_dims names dimension 1 twice");
  e = ParseError(std::string(kScatterPrefix) +
                 "  u = f32[3,6]{1,0} parameter(2)\n"
                 "  ROOT s = f32[4,5]{1,0} scatter(a, i, u), update_window_dims={1}, "
                 "inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, "
                 "to_apply=add\n}\n");
  EXPECT_CONTAINS(e, "scatter update window of size 6 exceeds operand dimension 1");
  e = ParseError(std::string(kScatterPrefix) +
                 "  u = f32[3,5]{1,0} parameter(2)\n"
                 "  ROOT s = f32[4,5]{1,0} scatter(a, i, u), update_window_dims={1}, "
                 "inserted_window_dims={0,0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, "
                 "to_apply=add\n}\n");
  EXPECT_CONTAINS(e, "scatter inserted_window_dims names dimension 0 twice");
}

TEST(OpValidation, OutOfRangeDimensionNumbersAreRejected) {
  const std::string p = "  a = f32[4,5]{1,0} parameter(0)\n  z = f32[] constant(0)\n";
  EXPECT_CONTAINS(ParseError("HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                             "  ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n" + p +
                             "  ROOT r = f32[4]{0} reduce(a, z), dimensions={2}, to_apply=add\n}\n"),
                  "reduce dimensions has dimension 2 out of range [0, 2)");
  EXPECT_CONTAINS(ParseError(Module(p + "  ROOT t = f32[5,4]{1,0} transpose(a), dimensions={1,1}\n")),
                  "transpose dimensions names dimension 1 twice");
  EXPECT_CONTAINS(ParseError(Module(p + "  ROOT b = f32[4,5,6]{2,1,0} broadcast(a), dimensions={0,3}\n")),
                  "broadcast dimensions has dimension 3 out of range [0, 3)");
  EXPECT_CONTAINS(ParseError(Module(p + "  ROOT r = f32[4,5]{1,0} reverse(a), dimensions={-1}\n")),
                  "reverse dimensions has dimension -1 out of range");
  EXPECT_CONTAINS(ParseError(Module(p + "  ROOT c = f32[4,10]{1,0} concatenate(a, a), dimensions={2}\n")),
                  "concatenate dimension has dimension 2 out of range");
  EXPECT_CONTAINS(ParseError(Module("  ROOT i = s32[4]{0} iota(), iota_dimension=1\n")),
                  "iota dimension has dimension 1 out of range [0, 1)");
  EXPECT_CONTAINS(ParseError(Module(p + "  ROOT s = f32[4,3]{1,0} slice(a), slice={[0:4], [3:6]}\n")),
                  "slice [3:6:1] of dimension 1 does not fit the operand (size 5)");
  EXPECT_CONTAINS(ParseError(Module(p + "  ROOT d = f32[4,4]{1,0} dot(a, a), lhs_contracting_dims={1,1}, "
                                        "rhs_contracting_dims={1,0}\n")),
                  "dot lhs batch/contracting dimensions names dimension 1 twice");
  EXPECT_CONTAINS(ParseError(Module(p + "  t = (f32[4,5]{1,0}) tuple(a)\n"
                                        "  ROOT g = f32[4,5]{1,0} get-tuple-element(t), index=1\n")),
                  "get-tuple-element index 1 out of range [0, 1)");
  EXPECT_CONTAINS(ParseError(Module(p + "  i = s32[] constant(0)\n"
                                        "  ROOT d = f32[5,5]{1,0} dynamic-slice(a, i, i), dynamic_slice_sizes={5,5}\n")),
                  "dynamic-slice sizes: size 5 of dimension 0 exceeds the operand");
}

TEST(OpValidation, CodegenValidatesModulesItIsGivenDirectly) {
  // A module built in memory (not read through ParseHloModule) with the
  // duplicate start_index_map: the host backend refuses it too.
  auto m = hlo::ParseHloText(Module(std::string(kGatherHeader) +
                                    "  ROOT g = f32[3,1,5]{2,1,0} gather(a, i), offset_dims={1,2}, "
                                    "collapsed_slice_dims={}, start_index_map={0,0}, index_vector_dim=1, "
                                    "slice_sizes={1,5}\n"),
                             "direct.hlo");
  ASSERT_TRUE(m) << m.error().message;
  auto src = host::GenerateCpp(*m);
  ASSERT_FALSE(src);
  EXPECT_CONTAINS(src.error().message, "start_index_map names dimension 0 twice");
}

TEST(OpValidation, CorpusModulesStillValidate) {
  const std::string corpus = NPC_CORPUS_DIR;
  if (!std::filesystem::is_directory(corpus)) GTEST_SKIP() << "no corpus at " << corpus;
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(corpus)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".hlo" && ext != ".binpb")) continue;
    // A corpus file may not parse at all (mlp__test.hlo is cut short); none
    // may fail validation.
    auto m = hlo::ReadHloModuleFile(e.path().string());
    if (!m) {
      EXPECT_EQ(m.error().message.find("invalid HLO module"), std::string::npos) << m.error().message;
    }
    n += m ? 1 : 0;
  }
  EXPECT_GT(n, 20);
}

// ---- host backend: start indices -----------------------------------------------------

// dynamic-slice of f32[300] at a u8/u16 start index: the index is clamped to
// 299, not to 299 truncated to the index type (43 for u8).
float SliceAt(const std::string& index_type, uint64_t index) {
  const std::string text = Module("  a = f32[300]{0} parameter(0)\n  i = " + index_type +
                                  "[] parameter(1)\n  ROOT d = f32[1]{0} dynamic-slice(a, i), dynamic_slice_sizes={1}\n");
  auto m = hlo::ParseHloModule(text, "ds.hlo");
  EXPECT_TRUE(m) << m.error().message;
  if (!m) return -1;
  auto src = host::GenerateCpp(*m);
  EXPECT_TRUE(src) << src.error().message;
  if (!src) return -1;
  testing::TempDir dir;
  EXPECT_TRUE(testing::WriteFile(dir.path() + "/model.cc", *src));
  std::string log;
  auto st = host::CompileSharedObject(host::DefaultCxx(), dir.path() + "/model.cc", dir.path() + "/model.so", &log);
  EXPECT_TRUE(st) << st.error().message;
  auto exe = host::HostExecutable::Load(dir.path() + "/model.so");
  EXPECT_TRUE(exe) << exe.error().message;
  if (!exe) return -1;
  Tensor a = ZeroTensor(xla::F32, {300});
  for (int k = 0; k < 300; ++k) {
    float v = static_cast<float>(k);
    std::memcpy(a.bytes.data() + 4 * k, &v, 4);
  }
  const xla::PrimitiveType t = index_type == "u8" ? xla::U8 : index_type == "u16" ? xla::U16 : xla::U64;
  Tensor i = ZeroTensor(t, {});
  std::memcpy(i.bytes.data(), &index, i.bytes.size());  // little-endian: the low bytes
  auto out = (*exe)->Run({a, i});
  EXPECT_TRUE(out) << out.error().message;
  if (!out) return -1;
  float r;
  std::memcpy(&r, (*out)[0].bytes.data(), 4);
  return r;
}

TEST(HostStartIndex, UnsignedIndicesAreClampedAgainstTheFullLimit) {
  EXPECT_EQ(SliceAt("u8", 50), 50.0f);    // was 299: 50 > u8(299) = 43
  EXPECT_EQ(SliceAt("u8", 255), 255.0f);
  EXPECT_EQ(SliceAt("u16", 298), 298.0f);
  EXPECT_EQ(SliceAt("u16", 65535), 299.0f);
  EXPECT_EQ(SliceAt("u64", ~uint64_t{0}), 299.0f);  // not negative as s64
}

// ---- the C API: no exception escapes, pointers are checked ---------------------------------

TEST(CApiChecks, NullPointersAreErrorsNotCrashes) {
  char error[256] = "";
  EXPECT_NE(npc_runtime_create(nullptr, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "npc_runtime_create: out is NULL");
  npc_executable* exe = reinterpret_cast<npc_executable*>(0x1);
  EXPECT_NE(npc_runtime_get_executable(nullptr, "x", 1, nullptr, &exe, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "runtime is NULL");
  EXPECT_EQ(exe, nullptr);
  EXPECT_NE(npc_runtime_get_executable(nullptr, "x", 1, nullptr, nullptr, nullptr, 0), 0);  // no error buffer
  EXPECT_NE(npc_executable_run(nullptr, nullptr, nullptr, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "npc_executable_run: executable is NULL");
  EXPECT_EQ(npc_executable_num_parameters(nullptr), 0u);
  EXPECT_EQ(npc_executable_num_outputs(nullptr), 0u);
  EXPECT_EQ(npc_executable_parameter_shape(nullptr, 0, nullptr, nullptr, 0), -1);
  EXPECT_EQ(npc_executable_output_shape(nullptr, 0, nullptr, nullptr, 0), -1);
  npc_counters counters{1, 2, 3, 4, 5};
  npc_runtime_counters(nullptr, &counters);
  EXPECT_EQ(counters.hits + counters.misses + counters.compiles + counters.failed_compiles + counters.extracted, 0);
  npc_runtime_counters(nullptr, nullptr);
  npc_runtime_destroy(nullptr);
  npc_executable_destroy(nullptr);
}

TEST(CApiChecks, BadInputAndNullBuffersAreErrors) {
  testing::TempDir dir;
  setenv("NEURON_COMPILE_CACHE_URL", dir.path().c_str(), 1);
  char error[512] = "";
  npc_runtime* rt = nullptr;
  ASSERT_EQ(npc_runtime_create(&rt, error, sizeof error), 0) << error;
  unsetenv("NEURON_COMPILE_CACHE_URL");
  npc_executable* exe = nullptr;
  EXPECT_NE(npc_runtime_get_executable(rt, nullptr, 10, nullptr, &exe, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "hlo_bytes is NULL");
  // Input that used to overflow the stack: an error through the C API too.
  const std::string deep = Module("  ROOT p = " + Repeat("(", 100000) + "f32[] parameter(0)\n");
  EXPECT_NE(npc_runtime_get_executable(rt, deep.data(), deep.size(), nullptr, &exe, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "nested deeper than 64 levels");
  const std::string ok = Module("  p = f32[2]{0} parameter(0)\n  ROOT a = f32[2]{0} add(p, p)\n");
  ASSERT_EQ(npc_runtime_get_executable(rt, ok.data(), ok.size(), nullptr, &exe, error, sizeof error), 0) << error;
  float in[2] = {1, 2}, out[2] = {0, 0};
  const void* inputs[1] = {nullptr};
  void* outputs[1] = {out};
  EXPECT_NE(npc_executable_run(exe, inputs, outputs, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "inputs[0] is NULL");
  inputs[0] = in;
  outputs[0] = nullptr;
  EXPECT_NE(npc_executable_run(exe, inputs, outputs, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "outputs[0] is NULL");
  EXPECT_NE(npc_executable_run(exe, nullptr, outputs, error, sizeof error), 0);
  EXPECT_CONTAINS(error, "inputs is NULL");
  outputs[0] = out;
  ASSERT_EQ(npc_executable_run(exe, inputs, outputs, error, sizeof error), 0) << error;
  EXPECT_EQ(out[1], 4.0f);
  // As npc.h documents: one runtime and one executable used from several
  // threads at once (lookups are hits now; runs have their own buffers).
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      char err[256];
      for (int k = 0; k < 20; ++k) {
        npc_executable* mine = nullptr;
        if (npc_runtime_get_executable(rt, ok.data(), ok.size(), nullptr, &mine, err, sizeof err) != 0) ++failures;
        float x[2] = {static_cast<float>(t), static_cast<float>(k)}, y[2] = {0, 0};
        const void* ins[1] = {x};
        void* outs[1] = {y};
        if (npc_executable_run(k % 2 ? exe : mine, ins, outs, err, sizeof err) != 0 || y[0] != 2 * x[0] ||
            y[1] != 2 * x[1]) {
          ++failures;
        }
        npc_executable_destroy(mine);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  npc_executable_destroy(exe);
  npc_runtime_destroy(rt);
}

}  // namespace
}  // namespace npc
