// Unit tests of runtime/hlo: reading modules in every binary form, errors
// that name the file, and the canonical graph key.
#include <zlib.h>

#include <gtest/gtest.h>

#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace npc::hlo {
namespace {

using npc::testing::TempDir;
using npc::testing::WriteFile;

// (p0 + p1) * c over f32[2,3], with metadata on every instruction.
xla::HloModuleProto SampleModule(float c = 2.0f, int64_t cols = 3, const std::string& opcode = "add") {
  HloBuilder b("sample");
  Op p0 = b.Parameter(0, xla::F32, {2, cols}, "x");
  Op p1 = b.Parameter(1, xla::F32, {2, cols}, "y");
  Op sum = b.Binary(opcode, p0, p1);
  Op k = b.Broadcast(b.ConstantF32(c), {2, cols}, {});
  xla::HloModuleProto m = b.Build(b.Tuple({b.Mul(sum, k)}));
  for (auto& comp : *m.mutable_computations()) {
    for (auto& inst : *comp.mutable_instructions()) {
      inst.mutable_metadata()->set_op_name("jit(f)/" + inst.name());
      inst.mutable_metadata()->set_source_file("/home/alice/train.py");
      inst.mutable_metadata()->set_source_line(7);
    }
  }
  return m;
}

std::string Gzip(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(ReadHloModule, ReadsModuleWrapperAndGzipForms) {
  TempDir dir;
  xla::HloModuleProto m = SampleModule();
  std::string bytes = m.SerializeAsString();
  xla::HloProto wrapper;
  *wrapper.mutable_hlo_module() = m;

  ASSERT_TRUE(WriteFile(dir.Sub("model.hlo_module.pb"), bytes));
  ASSERT_TRUE(WriteFile(dir.Sub("model.hlo.pb"), wrapper.SerializeAsString()));
  ASSERT_TRUE(WriteFile(dir.Sub("model.hlo_module.pb.gz"), Gzip(bytes)));
  ASSERT_TRUE(WriteFile(dir.Sub("wrapper.pb.gz"), Gzip(wrapper.SerializeAsString())));
  const std::string want = CanonicalGraphKey(m);
  for (const char* name : {"model.hlo_module.pb", "model.hlo.pb", "model.hlo_module.pb.gz", "wrapper.pb.gz"}) {
    auto read = ReadHloModuleFile(dir.Sub(name));
    ASSERT_TRUE(read.ok()) << name << ": " << read.error().message;
    EXPECT_EQ(read->name(), "sample") << name;
    EXPECT_EQ(CanonicalGraphKey(*read), want) << name;
  }
}

TEST(ReadHloModule, CorruptAndTruncatedInputNameTheFile) {
  TempDir dir;
  std::string bytes = SampleModule().SerializeAsString();
  ASSERT_TRUE(WriteFile(dir.Sub("truncated.pb"), bytes.substr(0, bytes.size() / 2)));
  ASSERT_TRUE(WriteFile(dir.Sub("garbage.pb"), "\xff\xff\xff\xff garbage that is not protobuf"));
  ASSERT_TRUE(WriteFile(dir.Sub("empty.pb"), ""));
  ASSERT_TRUE(WriteFile(dir.Sub("bad.gz"), Gzip(bytes).substr(0, 20)));
  for (const char* name : {"truncated.pb", "garbage.pb", "empty.pb", "bad.gz", "absent.pb"}) {
    auto read = ReadHloModuleFile(dir.Sub(name));
    ASSERT_FALSE(read.ok()) << name;
    EXPECT_NE(read.error().message.find(dir.Sub(name)), std::string::npos) << read.error().message;
  }
}

TEST(ValidateModule, RejectsDanglingReferences) {
  xla::HloModuleProto m = SampleModule();
  m.mutable_computations(0)->mutable_instructions(2)->set_operand_ids(0, 9999);
  auto st = ValidateModule(m, "m.pb");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("operand id 9999"), std::string::npos);
  EXPECT_NE(st.error().message.find("m.pb"), std::string::npos);
}

TEST(CanonicalGraphKey, IgnoresNamesIdsMetadataAndOrder) {
  xla::HloModuleProto m = SampleModule();
  const std::string key = CanonicalGraphKey(m);
  EXPECT_EQ(key, CanonicalGraphKey(SampleModule()));
  EXPECT_EQ(key.find_first_not_of("0123456789"), std::string::npos);

  xla::HloModuleProto renamed = m;
  renamed.set_name("other_name");
  renamed.set_id(77);
  for (auto& comp : *renamed.mutable_computations()) {
    comp.set_name("c_" + comp.name());
    for (auto& inst : *comp.mutable_instructions()) {
      inst.set_name("renamed_" + inst.name());
      inst.mutable_metadata()->set_op_name("something else");
      inst.mutable_metadata()->set_source_line(99);
    }
  }
  EXPECT_EQ(CanonicalGraphKey(renamed), key);

  // New ids (shifted by 1000) everywhere, references updated.
  xla::HloModuleProto reid = m;
  for (auto& comp : *reid.mutable_computations()) {
    comp.set_id(comp.id() + 1000);
    comp.set_root_id(comp.root_id() + 1000);
    for (auto& inst : *comp.mutable_instructions()) {
      inst.set_id(inst.id() + 1000);
      for (auto& op : *inst.mutable_operand_ids()) op += 1000;
      for (auto& cc : *inst.mutable_called_computation_ids()) cc += 1000;
    }
  }
  reid.set_entry_computation_id(reid.entry_computation_id() + 1000);
  EXPECT_EQ(CanonicalGraphKey(reid), key);

  // Instructions listed in another order (same dataflow).
  xla::HloModuleProto reordered = m;
  auto* insts = reordered.mutable_computations(reordered.computations_size() - 1)->mutable_instructions();
  std::reverse(insts->begin(), insts->end());
  EXPECT_EQ(CanonicalGraphKey(reordered), key);
}

TEST(CanonicalGraphKey, ChangesWithOpsShapesConstantsAndAttributes) {
  const std::string key = CanonicalGraphKey(SampleModule());
  EXPECT_NE(CanonicalGraphKey(SampleModule(3.0f)), key);                 // constant
  EXPECT_NE(CanonicalGraphKey(SampleModule(2.0f, 4)), key);              // shape
  EXPECT_NE(CanonicalGraphKey(SampleModule(2.0f, 3, "subtract")), key);  // op

  // Operand order matters for non-commutative ops.
  xla::HloModuleProto swapped = SampleModule(2.0f, 3, "subtract");
  for (auto& comp : *swapped.mutable_computations()) {
    for (auto& inst : *comp.mutable_instructions()) {
      if (inst.opcode() == "subtract") std::swap(*inst.mutable_operand_ids()->Mutable(0), *inst.mutable_operand_ids()->Mutable(1));
    }
  }
  EXPECT_NE(CanonicalGraphKey(swapped), CanonicalGraphKey(SampleModule(2.0f, 3, "subtract")));

  // An attribute (the broadcast's dimensions) matters.
  HloBuilder b1("t"), b2("t");
  Op x1 = b1.Parameter(0, xla::F32, {3}, "x");
  Op x2 = b2.Parameter(0, xla::F32, {3}, "x");
  std::string k1 = CanonicalGraphKey(b1.Build(b1.Broadcast(x1, {3, 3}, {0})));
  std::string k2 = CanonicalGraphKey(b2.Build(b2.Broadcast(x2, {3, 3}, {1})));
  EXPECT_NE(k1, k2);
}

TEST(CanonicalGraphKey, DefaultOperandPrecisionEqualsNone) {
  auto dot_module = [](std::vector<xla::PrecisionConfig::Precision> precisions) {
    HloBuilder b("d");
    Op x = b.Parameter(0, xla::F32, {2, 3}, "x");
    Op w = b.Parameter(1, xla::F32, {3, 4}, "w");
    xla::HloModuleProto m = b.Build(b.Dot(x, w, {1}, {0}));
    for (auto& comp : *m.mutable_computations()) {
      for (auto& inst : *comp.mutable_instructions()) {
        if (inst.opcode() != "dot" || precisions.empty()) continue;
        for (auto p : precisions) inst.mutable_precision_config()->add_operand_precision(p);
      }
    }
    return m;
  };
  const std::string none = CanonicalGraphKey(dot_module({}));
  EXPECT_EQ(CanonicalGraphKey(dot_module({xla::PrecisionConfig::DEFAULT, xla::PrecisionConfig::DEFAULT})), none);
  EXPECT_NE(CanonicalGraphKey(dot_module({xla::PrecisionConfig::HIGHEST, xla::PrecisionConfig::DEFAULT})), none);
}

TEST(CanonicalGraphKey, CorpusBinaryModuleIsReadable) {
  const std::string path = std::string(NPC_CORPUS_DIR) + "/jax-binpb/example1.binpb";
  if (!npc::testing::FileExists(path)) GTEST_SKIP() << "corpus absent: " << path << " not found";
  auto m = ReadHloModuleFile(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->name(), "jit_f");
  const auto* entry = EntryComputation(*m);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->name(), "main.5");
  EXPECT_EQ(entry->instructions_size(), 4);
  EXPECT_EQ(ShapeToString(entry->instructions(0).shape()), "f32[]");
}

}  // namespace
}  // namespace npc::hlo
