// The canonical graph key and canonical form (see npc/hlo.h for what they
// include, what they ignore and why).
//
// How: the module is serialized once (deterministically, so map entries are
// sorted by key) and the canonical form is written by walking those bytes in
// the protobuf wire format. Each message is copied field by field; the fields
// that the canonical form leaves out are skipped, the messages that it
// normalizes (shapes, literals, shardings, program shapes) are rewritten, and
// every other field, unknown fields included, is copied byte for byte. No
// per-instruction message is built, so the cost is a few passes over the
// module's bytes plus SHA-256 of the result.
//
// The bytes hashed (format kGraphKeyFormat, see npc/hlo.h):
//   "npc-graph-key/2"
//   Blob(module-level fields)                  normalized HloModuleProto minus computations and schedule
//   per computation, in canonical order:
//     Int(-1)                                   a computation called but absent (invalid module), or
//     Int(number of instructions) Blob(computation-level fields)
//       per instruction, in canonical order:
//         Blob(instruction) List(operands) List(control predecessors) List(called computations)
//       Int(root)
//   when the module has a schedule: Int(number of sequences), then per
//     computation (in canonical order) that has one: Int(its number) List(sequence)
// Int: 8 bytes little-endian; Blob: Int(size) then the bytes; List: Int(count)
// then Ints. A module without an entry computation hashes "npc-graph-key/2"
// followed by "invalid".
#include <openssl/sha.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "npc/hlo.h"

namespace npc::hlo {
namespace {

// --- Protobuf wire format ------------------------------------------------------

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};

struct Field {
  uint32_t number = 0;
  uint32_t type = 0;
  uint64_t varint = 0;       // kVarint
  std::string_view payload;  // kLengthDelimited: the content
  std::string_view whole;    // the tag through the end of the value
};

[[gnu::always_inline]] inline bool ReadVarint(const char*& p, const char* end, uint64_t* out) {
  if (p < end && !(static_cast<uint8_t>(*p) & 0x80)) {  // one byte: most tags, lengths and values
    *out = static_cast<uint8_t>(*p++);
    return true;
  }
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// The fields of one serialized message, in order. The bytes come from
// protobuf's own serializer, so they are well formed; a malformed tail (which
// would be a bug) ends the iteration.
class FieldReader {
 public:
  explicit FieldReader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  [[gnu::always_inline]] inline bool Next(Field* f) {
    if (p_ >= end_) return false;
    const char* start = p_;
    uint64_t tag = 0;
    if (!ReadVarint(p_, end_, &tag) || (tag >> 3) == 0) return Stop();
    f->number = static_cast<uint32_t>(tag >> 3);
    f->type = static_cast<uint32_t>(tag & 7);
    switch (f->type) {
      case kVarint:
        if (!ReadVarint(p_, end_, &f->varint)) return Stop();
        break;
      case kFixed64:
        if (end_ - p_ < 8) return Stop();
        p_ += 8;
        break;
      case kFixed32:
        if (end_ - p_ < 4) return Stop();
        p_ += 4;
        break;
      case kLengthDelimited: {
        uint64_t len = 0;
        if (!ReadVarint(p_, end_, &len) || len > static_cast<uint64_t>(end_ - p_)) return Stop();
        f->payload = std::string_view(p_, static_cast<size_t>(len));
        p_ += len;
        break;
      }
      case kStartGroup:
        if (!SkipGroup(f->number)) return Stop();
        break;
      default:
        return Stop();
    }
    f->whole = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

 private:
  bool Stop() {
    p_ = end_;
    return false;
  }

  // Past the matching end-group tag (unknown groups from old producers).
  bool SkipGroup(uint32_t number) {
    int depth = 1;
    while (p_ < end_) {
      uint64_t tag = 0;
      if (!ReadVarint(p_, end_, &tag)) return false;
      uint64_t v = 0;
      switch (tag & 7) {
        case kVarint:
          if (!ReadVarint(p_, end_, &v)) return false;
          break;
        case kFixed64:
          if (end_ - p_ < 8) return false;
          p_ += 8;
          break;
        case kFixed32:
          if (end_ - p_ < 4) return false;
          p_ += 4;
          break;
        case kLengthDelimited:
          if (!ReadVarint(p_, end_, &v) || v > static_cast<uint64_t>(end_ - p_)) return false;
          p_ += v;
          break;
        case kStartGroup:
          ++depth;
          break;
        case kEndGroup:
          if (--depth == 0) return (tag >> 3) == number;
          break;
        default:
          return false;
      }
    }
    return false;
  }

  const char* p_;
  const char* end_;
};

// Calls fn(value) for each integer of a repeated integer field: one packed
// field or one unpacked element.
template <class Fn>
void ForEachInt(const Field& f, Fn&& fn) {
  if (f.type == kVarint) {
    fn(f.varint);
  } else if (f.type == kLengthDelimited) {
    const char* p = f.payload.data();
    const char* end = p + f.payload.size();
    uint64_t v = 0;
    while (p < end && ReadVarint(p, end, &v)) fn(v);
  }
}

size_t CountInts(const Field& f) {
  if (f.type == kVarint) return 1;
  if (f.type != kLengthDelimited) return 0;
  size_t n = 0;
  for (char c : f.payload) n += (static_cast<uint8_t>(c) & 0x80) == 0;
  return n;
}

// A packed or unpacked repeated field whose values are all 0 (false, DEFAULT).
bool AllZero(const Field& f) {
  if (f.type == kVarint) return f.varint == 0;
  if (f.type != kLengthDelimited) return false;
  for (char c : f.payload) {
    if (c != 0) return false;
  }
  return true;
}

// A packed or unpacked repeated bool field whose values are all true.
bool AllOne(const Field& f) {
  if (f.type == kVarint) return f.varint == 1;
  if (f.type != kLengthDelimited || f.payload.empty()) return false;
  for (char c : f.payload) {
    if (c != 1) return false;
  }
  return true;
}

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, static_cast<size_t>(n));
}

void PutLengthDelimited(std::string* out, uint32_t number, std::string_view content) {
  PutVarint(out, (uint64_t{number} << 3) | kLengthDelimited);
  PutVarint(out, content.size());
  out->append(content);
}

// Copies kept fields to `out`, one append per run of adjacent fields (the
// fields of one message lie one after the other in the input). Flush() before
// writing anything else to `out`.
class Copier {
 public:
  explicit Copier(std::string* out) : out_(out) {}
  ~Copier() { Flush(); }
  Copier(const Copier&) = delete;
  Copier& operator=(const Copier&) = delete;

  void Keep(std::string_view field) {
    if (field.data() != end_) {
      Flush();
      start_ = field.data();
    }
    end_ = field.data() + field.size();
  }
  std::string* Flush() {
    if (start_ != end_) out_->append(start_, static_cast<size_t>(end_ - start_));
    start_ = end_ = nullptr;
    return out_;
  }

 private:
  std::string* out_;
  const char* start_ = nullptr;
  const char* end_ = nullptr;
};

// --- Field numbers (runtime/hlo/hlo.proto) --------------------------------------

namespace shape_field {
constexpr uint32_t kDimensions = 3, kTupleShapes = 4, kLayout = 5, kIsDynamicDimension = 6;
}
namespace layout_field {
constexpr uint32_t kMinorToMajor = 1, kDimLevelTypes = 9, kDimUnique = 13, kDimOrdered = 14,
                   kTailPaddingAlignment = 16;
}
namespace literal_field {
constexpr uint32_t kShape = 1, kTupleLiterals = 10;
}
namespace program_shape_field {
constexpr uint32_t kParameters = 1, kResult = 2, kParameterNames = 3;
}
namespace sharding_field {
constexpr uint32_t kTileShape = 2, kTupleShardings = 5, kMetadata = 7, kIotaReshapeDims = 9, kNamedSharding = 14;
}
namespace named_sharding_field {
constexpr uint32_t kMetadata = 6;
}
namespace accuracy_field {
constexpr uint32_t kMode = 1;
}
namespace precision_field {
constexpr uint32_t kOperandPrecision = 1;
}
namespace inst_field {
constexpr uint32_t kName = 1, kOpcode = 2, kShape = 3, kMetadata = 7, kLiteral = 8, kParameterNumber = 9, kWindow = 15,
                   kOutfeedShape = 29, kReplicaGroups = 49, kCollectiveDeviceList = 87, kIotaCollectiveDeviceList = 92,
                   kResultAccuracy = 91, kId = 35, kOperandIds = 36, kControlPredecessorIds = 37,
                   kCalledComputationIds = 38, kSharding = 40, kPrecisionConfig = 51, kDomainEntrySharding = 54,
                   kDomainExitSharding = 55, kOperandShapesWithLayout = 57, kFrontendAttributes = 68,
                   kStatisticsViz = 82, kOriginalValue = 88;
}
namespace comp_field {
constexpr uint32_t kName = 1, kInstructions = 2, kProgramShape = 4, kId = 5, kRootId = 6;
}
namespace module_field {
constexpr uint32_t kName = 1, kEntryComputationName = 2, kComputations = 3, kHostProgramShape = 4, kId = 5,
                   kEntryComputationId = 6, kSchedule = 7, kSpmdOutputSharding = 12, kSpmdParametersShardings = 14,
                   kStackFrameIndex = 17;
}
namespace schedule_field {
constexpr uint32_t kSequences = 1;  // map entry: key = 1, value = 2 (InstructionSequence: 1 = ids)
}

// --- Replica groups ------------------------------------------------------------------

// Expands an iota device list: iota(product(dims)) reshaped to `dims`,
// transposed by `perm`, flattened. False when the list is malformed or longer
// than `max`.
bool ExpandIota(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm, size_t max,
                std::vector<int64_t>* out) {
  if (dims.empty() || perm.size() != dims.size()) return false;
  uint64_t total = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && total > max / static_cast<uint64_t>(d))) return false;
    total *= static_cast<uint64_t>(d);
  }
  if (total > max) return false;
  std::vector<int64_t> stride(dims.size()), tdims(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    stride[i] = s;
    s *= dims[i];
  }
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (perm[i] < 0 || static_cast<size_t>(perm[i]) >= dims.size() || used[static_cast<size_t>(perm[i])]) return false;
    used[static_cast<size_t>(perm[i])] = true;
    tdims[i] = dims[static_cast<size_t>(perm[i])];
  }
  std::vector<int64_t> index(dims.size(), 0);
  out->clear();
  out->reserve(total);
  for (uint64_t n = 0; n < total; ++n) {
    int64_t src = 0;
    for (size_t i = 0; i < dims.size(); ++i) src += index[i] * stride[static_cast<size_t>(perm[i])];
    out->push_back(src);
    for (size_t i = dims.size(); i-- > 0;) {
      if (++index[i] < tdims[i]) break;
      index[i] = 0;
    }
  }
  return true;
}

// The devices of a collective, however the producer wrote them: the legacy
// `replica_groups` (49), `collective_device_list` (87: explicit groups, or
// the retired iota form), or `iota_collective_device_list` (92). They are
// written as one canonical list of explicit groups (field 49 entries) after
// the instruction's other fields, so that the forms XLA versions and the text
// reader write agree. Forms that cannot be expanded (mesh axes, unknown
// fields, too many devices) or that contradict each other are written as
// they came, in field order.
class ReplicaGroups {
 public:
  void Reset() {
    fields_.clear();
  }

  void Add(const Field& f) { fields_.push_back(f); }

  void Write(std::string* out) {
    if (fields_.empty()) return;
    std::vector<std::vector<std::vector<int64_t>>> forms;  // one group list per form present
    std::vector<std::vector<int64_t>> legacy;
    bool has_legacy = false, ok = true;
    for (const Field& f : fields_) {
      if (f.type != kLengthDelimited) {
        ok = false;
        break;
      }
      if (f.number == inst_field::kReplicaGroups) {
        has_legacy = true;
        ok &= ReadGroup(f.payload, &legacy.emplace_back());
      } else if (f.number == inst_field::kCollectiveDeviceList) {
        ok &= ReadDeviceList(f.payload, &forms.emplace_back());
      } else {
        ok &= ReadIota(f.payload, &forms.emplace_back());
      }
    }
    if (has_legacy) forms.push_back(std::move(legacy));
    for (size_t i = 1; ok && i < forms.size(); ++i) ok = forms[i] == forms[0];
    if (!ok || forms.empty()) {
      for (const Field& f : fields_) out->append(f.whole);
      return;
    }
    for (const auto& group : forms[0]) {
      std::string& ids = scratch_;
      ids.clear();
      for (int64_t id : group) PutVarint(&ids, static_cast<uint64_t>(id));
      std::string& msg = scratch2_;
      msg.clear();
      if (!ids.empty()) PutLengthDelimited(&msg, 1, ids);
      PutLengthDelimited(out, inst_field::kReplicaGroups, msg);
    }
  }

 private:
  static constexpr size_t kMaxDevices = size_t{1} << 20;

  // ReplicaGroup: replica_ids = 1.
  static bool ReadGroup(std::string_view bytes, std::vector<int64_t>* group) {
    FieldReader r(bytes);
    Field f;
    while (r.Next(&f)) {
      if (f.number != 1) return false;
      ForEachInt(f, [&](uint64_t v) { group->push_back(static_cast<int64_t>(v)); });
    }
    return true;
  }

  // CollectiveDeviceListProto: replica_groups = 1, iota_replica_group_list = 2.
  static bool ReadDeviceList(std::string_view bytes, std::vector<std::vector<int64_t>>* groups) {
    FieldReader r(bytes);
    Field f;
    bool explicit_groups = false, iota = false;
    while (r.Next(&f)) {
      if (f.type != kLengthDelimited) return false;
      if (f.number == 1) {
        explicit_groups = true;
        if (!ReadGroup(f.payload, &groups->emplace_back())) return false;
      } else if (f.number == 2) {
        if (iota) return false;
        iota = true;
        if (!ReadIota(f.payload, groups)) return false;
      } else {
        return false;
      }
    }
    return !(explicit_groups && iota);
  }

  // IotaReplicaGroupListProto: num_replica_groups = 1, num_devices_per_group
  // = 2, iota_reshape_dims = 3, iota_transpose_perm = 4.
  static bool ReadIota(std::string_view bytes, std::vector<std::vector<int64_t>>* groups) {
    FieldReader r(bytes);
    Field f;
    int64_t num_groups = 0, group_size = 0;
    std::vector<int64_t> dims, perm;
    while (r.Next(&f)) {
      switch (f.number) {
        case 1:
          num_groups = static_cast<int64_t>(f.varint);
          break;
        case 2:
          group_size = static_cast<int64_t>(f.varint);
          break;
        case 3:
          ForEachInt(f, [&](uint64_t v) { dims.push_back(static_cast<int64_t>(v)); });
          break;
        case 4:
          ForEachInt(f, [&](uint64_t v) { perm.push_back(static_cast<int32_t>(v)); });
          break;
        default:
          return false;
      }
    }
    if (perm.empty()) {
      for (size_t i = 0; i < dims.size(); ++i) perm.push_back(static_cast<int64_t>(i));
    }
    std::vector<int64_t> devices;
    if (num_groups < 0 || group_size < 0 || !ExpandIota(dims, perm, kMaxDevices, &devices) ||
        static_cast<uint64_t>(num_groups) * static_cast<uint64_t>(group_size) != devices.size()) {
      return false;
    }
    for (int64_t g = 0; g < num_groups; ++g) {
      groups->emplace_back(devices.begin() + g * group_size, devices.begin() + (g + 1) * group_size);
    }
    return true;
  }

  std::vector<Field> fields_;
  std::string scratch_, scratch2_;
};

// --- Normalized messages ---------------------------------------------------------

// Rewrites the messages that the canonical form normalizes. Each function
// appends the normalized content of one message to `out`.
class Normalizer {
 public:
  // ShapeProto: default layouts ({n-1,...,0}, nothing else set) and all-false
  // is_dynamic_dimension lists are dropped, so that a producer that writes
  // them and one that does not agree.
  void Shape(std::string_view in, std::string* out) {
    FieldReader r(in);
    Field f;
    Copier copy(out);
    size_t rank = 0;
    while (r.Next(&f)) {
      switch (f.number) {
        case shape_field::kDimensions:
          rank += CountInts(f);
          copy.Keep(f.whole);
          break;
        case shape_field::kTupleShapes:
          Nested(f, copy.Flush(), &Normalizer::Shape);
          break;
        case shape_field::kLayout: {
          if (f.type != kLengthDelimited) {
            copy.Keep(f.whole);
            break;
          }
          std::string& layout = Scratch();
          Layout(f.payload, &layout);
          // Dimensions (3) precede the layout (5) in serialized order.
          if (!IsDefaultLayout(layout, rank)) PutLengthDelimited(copy.Flush(), f.number, layout);
          --depth_;
          break;
        }
        case shape_field::kIsDynamicDimension:
          if (AllZero(f)) break;
          copy.Keep(f.whole);
          break;
        default:
          copy.Keep(f.whole);
      }
    }
  }

  // LayoutProto: fields that spell XLA's default for them are dropped:
  // tail_padding_alignment_in_elements 1 (XLA treats 0 and 1 alike; newer
  // XLA writes 1), dim_level_types all DENSE, dim_unique and dim_ordered all
  // true (an empty list means the same).
  void Layout(std::string_view in, std::string* out) {
    FieldReader r(in);
    Field f;
    while (r.Next(&f)) {
      switch (f.number) {
        case layout_field::kTailPaddingAlignment:
          if (f.type == kVarint && f.varint <= 1) continue;
          break;
        case layout_field::kDimLevelTypes:
          if (AllZero(f)) continue;
          break;
        case layout_field::kDimUnique:
        case layout_field::kDimOrdered:
          if (AllOne(f)) continue;
          break;
        default:
          break;
      }
      out->append(f.whole);
    }
  }

  void Literal(std::string_view in, std::string* out) {
    FieldReader r(in);
    Field f;
    while (r.Next(&f)) {
      if (f.number == literal_field::kShape) Nested(f, out, &Normalizer::Shape);
      else if (f.number == literal_field::kTupleLiterals) Nested(f, out, &Normalizer::Literal);
      else out->append(f.whole);
    }
  }

  // OpSharding: `metadata` (where the sharding came from) is dropped; an
  // iota tile assignment (iota_reshape_dims, iota_transpose_perm) is written
  // as the explicit device list it stands for, as older XLA and the text
  // reader write it.
  void Sharding(std::string_view in, std::string* out) {
    if (HasIotaTileAssignment(in)) {
      xla::OpSharding sharding;
      if (sharding.ParseFromArray(in.data(), static_cast<int>(in.size())) && ExpandShardingIota(&sharding)) {
        std::string& bytes = Scratch();
        google::protobuf::io::StringOutputStream stream(&bytes);
        {
          google::protobuf::io::CodedOutputStream coded(&stream);
          coded.SetSerializationDeterministic(true);
          sharding.SerializeToCodedStream(&coded);
        }
        ShardingFields(bytes, out);
        --depth_;
        return;
      }
    }
    ShardingFields(in, out);
  }

  void ShardingFields(std::string_view in, std::string* out) {
    FieldReader r(in);
    Field f;
    while (r.Next(&f)) {
      switch (f.number) {
        case sharding_field::kMetadata:
          break;
        case sharding_field::kTileShape:
          Nested(f, out, &Normalizer::Shape);
          break;
        case sharding_field::kTupleShardings:
          Nested(f, out, &Normalizer::Sharding);
          break;
        case sharding_field::kNamedSharding:
          Nested(f, out, &Normalizer::NamedSharding);
          break;
        default:
          out->append(f.whole);
      }
    }
  }

  // Anywhere in the sharding (tuple elements included).
  static bool HasIotaTileAssignment(std::string_view in) {
    FieldReader r(in);
    Field f;
    while (r.Next(&f)) {
      if (f.number == sharding_field::kIotaReshapeDims) return true;
      if (f.number == sharding_field::kTupleShardings && f.type == kLengthDelimited &&
          HasIotaTileAssignment(f.payload)) {
        return true;
      }
    }
    return false;
  }

  // False when an iota list does not expand (malformed, too long): the
  // sharding is then hashed as written.
  static bool ExpandShardingIota(xla::OpSharding* s) {
    for (auto& t : *s->mutable_tuple_shardings()) {
      if (!ExpandShardingIota(&t)) return false;
    }
    if (s->iota_reshape_dims_size() == 0) return true;
    if (s->tile_assignment_devices_size() != 0) return false;
    std::vector<int64_t> dims(s->iota_reshape_dims().begin(), s->iota_reshape_dims().end());
    std::vector<int64_t> perm(s->iota_transpose_perm().begin(), s->iota_transpose_perm().end());
    if (perm.empty()) {
      for (size_t i = 0; i < dims.size(); ++i) perm.push_back(static_cast<int64_t>(i));
    }
    std::vector<int64_t> devices;
    if (!ExpandIota(dims, perm, size_t{1} << 20, &devices)) return false;
    uint64_t tiles = 1;
    for (int64_t d : s->tile_assignment_dimensions()) tiles *= static_cast<uint64_t>(d);
    if (tiles != devices.size()) return false;
    s->clear_iota_reshape_dims();
    s->clear_iota_transpose_perm();
    for (int64_t d : devices) s->add_tile_assignment_devices(d);
    return true;
  }

  void NamedSharding(std::string_view in, std::string* out) {
    FieldReader r(in);
    Field f;
    while (r.Next(&f)) {
      if (f.number != named_sharding_field::kMetadata) out->append(f.whole);
    }
  }

  // ProgramShapeProto: parameter names are dropped.
  void ProgramShape(std::string_view in, std::string* out) {
    FieldReader r(in);
    Field f;
    while (r.Next(&f)) {
      if (f.number == program_shape_field::kParameterNames) continue;
      if (f.number == program_shape_field::kParameters || f.number == program_shape_field::kResult) {
        Nested(f, out, &Normalizer::Shape);
      } else {
        out->append(f.whole);
      }
    }
  }

  // Field f (a message) with its content rewritten by `fn`. A field of
  // another wire type (not what the schema says) is copied as it is.
  void Nested(const Field& f, std::string* out, void (Normalizer::*fn)(std::string_view, std::string*)) {
    if (f.type != kLengthDelimited) {
      out->append(f.whole);
      return;
    }
    std::string& tmp = Scratch();
    (this->*fn)(f.payload, &tmp);
    PutLengthDelimited(out, f.number, tmp);
    --depth_;
  }

 private:
  static bool IsDefaultLayout(std::string_view layout, size_t rank) {
    FieldReader r(layout);
    Field f;
    size_t i = 0;
    bool ok = true;
    while (ok && r.Next(&f)) {
      if (f.number != layout_field::kMinorToMajor) return false;
      ForEachInt(f, [&](uint64_t v) {
        ok &= i < rank && static_cast<int64_t>(v) == static_cast<int64_t>(rank - 1 - i);
        ++i;
      });
    }
    return ok && (i == 0 || i == rank);
  }

  // A cleared buffer per nesting level (deque: references stay valid).
  std::string& Scratch() {
    if (depth_ == scratch_.size()) scratch_.emplace_back();
    std::string& s = scratch_[depth_++];
    s.clear();
    return s;
  }

  std::deque<std::string> scratch_;
  size_t depth_ = 0;
};

// --- Lookup of ids ---------------------------------------------------------------

// id -> index. Dense ids (XLA's, the text reader's, the builder's) use an
// array; others a sorted list. Duplicate ids: the last one wins (such a module
// is invalid; the key still has to be computed).
class IdIndex {
 public:
  void Build(const std::vector<int64_t>& ids) {
    dense_.clear();
    sorted_.clear();
    if (ids.empty()) return;
    auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
    min_ = *lo;
    const uint64_t span = static_cast<uint64_t>(*hi) - static_cast<uint64_t>(*lo);
    if (span < 4 * ids.size() + 64) {
      dense_.assign(span + 1, -1);
      for (size_t i = 0; i < ids.size(); ++i)
        dense_[static_cast<uint64_t>(ids[i]) - static_cast<uint64_t>(min_)] = static_cast<int32_t>(i);
      use_dense_ = true;
      return;
    }
    use_dense_ = false;
    sorted_.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) sorted_.push_back({ids[i], static_cast<int32_t>(i)});
    std::stable_sort(sorted_.begin(), sorted_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }

  // The index of `id`, or -1.
  int32_t Find(int64_t id) const {
    if (use_dense_) {
      const uint64_t off = static_cast<uint64_t>(id) - static_cast<uint64_t>(min_);
      return off < dense_.size() ? dense_[off] : -1;
    }
    auto it = std::upper_bound(sorted_.begin(), sorted_.end(), id,
                               [](int64_t v, const auto& e) { return v < e.first; });
    if (it == sorted_.begin() || std::prev(it)->first != id) return -1;
    return std::prev(it)->second;  // last of equal ids
  }

 private:
  bool use_dense_ = true;
  int64_t min_ = 0;
  std::vector<int32_t> dense_;
  std::vector<std::pair<int64_t, int32_t>> sorted_;
};

// --- The canonicalizer -----------------------------------------------------------

// What the canonicalizer hands its sink (see KeySink and FormSink below).
struct InstructionRefs {
  const std::vector<int64_t>* operands;
  const std::vector<int64_t>* control_predecessors;
  const std::vector<int64_t>* called_computations;
};

template <class Sink>
class Canonicalizer {
 public:
  Canonicalizer(const xla::HloModuleProto& module, Sink* sink) : module_(module), sink_(sink) {}

  void Run() {
    {
      const size_t size = module_.ByteSizeLong();
      bytes_.resize(size);
      google::protobuf::io::ArrayOutputStream stream(bytes_.data(), static_cast<int>(size));
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      module_.SerializeWithCachedSizes(&coded);
    }
    sink_->Reserve(bytes_.size());
    ScanModule();
    const int entry = EntryIndex();
    if (entry < 0) {
      sink_->Invalid();
      return;
    }
    // Module-level fields. The host program shape is dropped when it only
    // repeats the entry computation's program shape.
    std::string module_fields;
    for (const Field& f : module_fields_) {
      switch (f.number) {
        case module_field::kHostProgramShape: {
          std::string host, entry_shape;
          norm_.ProgramShape(f.payload, &host);
          if (!comps_[static_cast<size_t>(entry)].program_shape.empty()) {
            norm_.ProgramShape(comps_[static_cast<size_t>(entry)].program_shape, &entry_shape);
            if (host == entry_shape) break;
          }
          PutLengthDelimited(&module_fields, f.number, host);
          break;
        }
        case module_field::kSpmdOutputSharding:
        case module_field::kSpmdParametersShardings:
          norm_.Nested(f, &module_fields, &Normalizer::Sharding);
          break;
        default:
          module_fields.append(f.whole);
      }
    }
    sink_->Module(module_fields);

    ComputationNumber(comps_[static_cast<size_t>(entry)].id);
    for (size_t next = 0; next < queue_.size(); ++next) {
      const int32_t ci = comp_index_.Find(queue_[next]);
      if (ci < 0) {
        sink_->MissingComputation();
        if (!schedule_.empty()) numbers_.emplace_back();
        continue;
      }
      Computation(static_cast<size_t>(ci));
    }
    if (!schedule_.empty()) Schedule();
  }

 private:
  struct ComputationScan {
    int64_t id = 0;
    int64_t root_id = 0;
    std::string_view name;
    std::string_view program_shape;
    std::vector<std::string_view> instructions;
    std::vector<Field> other_fields;  // copied (or normalized) into the computation-level blob
  };

  struct InstructionScan {
    int64_t id = 0;
    int64_t parameter_number = 0;
    bool is_parameter = false;
    uint32_t operands_begin = 0, operands_end = 0;  // into ids_
    uint32_t control_begin = 0, control_end = 0;
    uint32_t calls_begin = 0, calls_end = 0;
    size_t normalized_begin = 0, normalized_end = 0;  // into norm_buf_
  };

  void ScanModule() {
    FieldReader r(bytes_);
    Field f;
    while (r.Next(&f)) {
      switch (f.number) {
        case module_field::kName:
        case module_field::kId:
        case module_field::kStackFrameIndex:
          break;
        case module_field::kEntryComputationName:
          entry_name_ = f.payload;
          break;
        case module_field::kEntryComputationId:
          entry_id_ = static_cast<int64_t>(f.varint);
          break;
        case module_field::kComputations:
          comps_.push_back(ScanComputation(f.payload));
          break;
        case module_field::kSchedule:
          schedule_ = f.payload;
          break;
        default:
          module_fields_.push_back(f);
      }
    }
    std::vector<int64_t> ids;
    ids.reserve(comps_.size());
    for (const auto& c : comps_) ids.push_back(c.id);
    comp_index_.Build(ids);
    comp_number_.assign(comps_.size(), -1);
  }

  static ComputationScan ScanComputation(std::string_view bytes) {
    ComputationScan c;
    FieldReader r(bytes);
    Field f;
    while (r.Next(&f)) {
      switch (f.number) {
        case comp_field::kName:
          c.name = f.payload;
          break;
        case comp_field::kInstructions:
          c.instructions.push_back(f.payload);
          break;
        case comp_field::kProgramShape:
          c.program_shape = f.payload;
          c.other_fields.push_back(f);
          break;
        case comp_field::kId:
          c.id = static_cast<int64_t>(f.varint);
          break;
        case comp_field::kRootId:
          c.root_id = static_cast<int64_t>(f.varint);
          break;
        default:
          c.other_fields.push_back(f);
      }
    }
    return c;
  }

  // As EntryComputation(): by id, else by name, else the last computation.
  int EntryIndex() const {
    if (comps_.empty()) return -1;
    if (entry_id_ != 0 || !entry_name_.empty()) {
      for (size_t i = 0; i < comps_.size(); ++i) {
        if (entry_id_ != 0 && comps_[i].id == entry_id_) return static_cast<int>(i);
      }
      for (size_t i = 0; i < comps_.size(); ++i) {
        if (!entry_name_.empty() && comps_[i].name == entry_name_) return static_cast<int>(i);
      }
      for (size_t i = 0; i < comps_.size(); ++i) {
        if (comps_[i].id == entry_id_) return static_cast<int>(i);
      }
      return -1;
    }
    return static_cast<int>(comps_.size()) - 1;
  }

  // The canonical number of a computation: the order in which it is first
  // reached from the entry.
  int64_t ComputationNumber(int64_t id) {
    const int32_t ci = comp_index_.Find(id);
    if (ci >= 0) {
      int64_t& number = comp_number_[static_cast<size_t>(ci)];
      if (number < 0) {
        number = static_cast<int64_t>(queue_.size());
        queue_.push_back(id);
      }
      return number;
    }
    for (const auto& [missing_id, number] : missing_numbers_) {
      if (missing_id == id) return number;
    }
    const int64_t number = static_cast<int64_t>(queue_.size());
    missing_numbers_.push_back({id, number});
    queue_.push_back(id);
    return number;
  }

  // The canonical number of a computation already reached, or -1.
  int64_t ReachedNumber(int64_t id) const {
    const int32_t ci = comp_index_.Find(id);
    return ci < 0 ? -1 : comp_number_[static_cast<size_t>(ci)];
  }

  void Computation(size_t ci) {
    const ComputationScan& c = comps_[ci];
    const size_t n = c.instructions.size();
    insts_.assign(n, InstructionScan{});
    ids_.clear();
    std::vector<int64_t> inst_ids(n);
    norm_buf_.clear();
    for (size_t i = 0; i < n; ++i) {
      InstructionScan& s = insts_[i];
      s.normalized_begin = norm_buf_.size();
      ScanAndNormalizeInstruction(c.instructions[i], &s, &norm_buf_);
      s.normalized_end = norm_buf_.size();
      inst_ids[i] = s.id;
    }
    inst_index_.Build(inst_ids);

    // Order: parameters by number, then post order from the root (operands,
    // then control predecessors), then whatever is left in listed order.
    order_.clear();
    visited_.assign(n, 0);
    params_.clear();
    for (size_t i = 0; i < n; ++i) {
      if (insts_[i].is_parameter) params_.push_back(static_cast<int32_t>(i));
    }
    std::stable_sort(params_.begin(), params_.end(), [&](int32_t a, int32_t b) {
      return insts_[static_cast<size_t>(a)].parameter_number < insts_[static_cast<size_t>(b)].parameter_number;
    });
    for (int32_t p : params_) {
      // A parameter whose id another instruction shadows is not reachable by id.
      if (inst_index_.Find(insts_[static_cast<size_t>(p)].id) == p && !visited_[static_cast<size_t>(p)]) {
        visited_[static_cast<size_t>(p)] = 1;
        order_.push_back(p);
      }
    }
    Visit(inst_index_.Find(c.root_id));
    for (size_t i = 0; i < n; ++i) Visit(inst_index_.Find(insts_[i].id));

    number_.assign(n, -1);
    for (size_t k = 0; k < order_.size(); ++k) number_[static_cast<size_t>(order_[k])] = static_cast<int64_t>(k);
    auto number_of = [&](int64_t id) -> int64_t {
      int32_t i = inst_index_.Find(id);
      return i < 0 ? -1 : number_[static_cast<size_t>(i)];
    };

    std::string fields;
    for (const Field& f : c.other_fields) {
      if (f.number == comp_field::kProgramShape) norm_.Nested(f, &fields, &Normalizer::ProgramShape);
      else fields.append(f.whole);
    }
    sink_->BeginComputation(ci, order_.size(), fields);
    for (int32_t i : order_) {
      const InstructionScan& s = insts_[static_cast<size_t>(i)];
      const std::string_view normalized(norm_buf_.data() + s.normalized_begin, s.normalized_end - s.normalized_begin);
      operands_.clear();
      control_.clear();
      calls_.clear();
      for (uint32_t k = s.operands_begin; k < s.operands_end; ++k) operands_.push_back(number_of(ids_[k]));
      for (uint32_t k = s.control_begin; k < s.control_end; ++k) control_.push_back(number_of(ids_[k]));
      for (uint32_t k = s.calls_begin; k < s.calls_end; ++k) calls_.push_back(ComputationNumber(ids_[k]));
      sink_->Instruction(static_cast<size_t>(i), normalized, InstructionRefs{&operands_, &control_, &calls_});
    }
    sink_->EndComputation(number_of(c.root_id));

    if (!schedule_.empty()) {
      // Kept for the schedule: id -> canonical number, per canonical computation.
      std::vector<std::pair<int64_t, int64_t>> map;
      map.reserve(order_.size());
      for (int32_t i : order_) map.push_back({insts_[static_cast<size_t>(i)].id, number_[static_cast<size_t>(i)]});
      std::sort(map.begin(), map.end());
      numbers_.push_back(std::move(map));
    }
  }

  void Visit(int32_t start) {
    if (start < 0 || visited_[static_cast<size_t>(start)]) return;
    visited_[static_cast<size_t>(start)] = 1;
    stack_.clear();
    stack_.push_back({start, 0});
    while (!stack_.empty()) {
      auto& [i, next] = stack_.back();
      const InstructionScan& s = insts_[static_cast<size_t>(i)];
      const uint32_t n_ops = s.operands_end - s.operands_begin;
      const uint32_t n_all = n_ops + (s.control_end - s.control_begin);
      if (next < n_all) {
        const int64_t child_id = next < n_ops ? ids_[s.operands_begin + next] : ids_[s.control_begin + next - n_ops];
        ++next;
        const int32_t child = inst_index_.Find(child_id);
        if (child >= 0 && !visited_[static_cast<size_t>(child)]) {
          visited_[static_cast<size_t>(child)] = 1;
          stack_.push_back({child, 0});
        }
      } else {
        order_.push_back(i);
        stack_.pop_back();
      }
    }
  }

  // One pass over an instruction: its id, parameter number and references
  // (written separately) into `s`, and its normalized bytes appended to
  // `out`: the instruction without its name, id, references, metadata,
  // statistics_viz and original_value; shapes, literals and shardings
  // normalized; an empty frontend_attributes or window, an all-DEFAULT
  // precision_config and a DEFAULT result_accuracy dropped; replica groups in
  // any of their forms written as one list (see ReplicaGroups).
  void ScanAndNormalizeInstruction(std::string_view bytes, InstructionScan* s, std::string* out) {
    FieldReader r(bytes);
    Field f;
    // Serialized in field-number order: operands (36), control predecessors
    // (37) and called computations (38) each form one run.
    auto append = [&](const Field& field, uint32_t* begin, uint32_t* end) {
      if (*begin == *end) *begin = *end = static_cast<uint32_t>(ids_.size());
      ForEachInt(field, [&](uint64_t v) { ids_.push_back(static_cast<int64_t>(v)); });
      *end = static_cast<uint32_t>(ids_.size());
    };
    groups_.Reset();
    Copier copy(out);
    while (r.Next(&f)) {
      switch (f.number) {
        case inst_field::kOpcode:
          s->is_parameter = f.payload == "parameter";
          copy.Keep(f.whole);
          break;
        case inst_field::kParameterNumber:
          s->parameter_number = static_cast<int64_t>(f.varint);
          copy.Keep(f.whole);
          break;
        case inst_field::kId:
          s->id = static_cast<int64_t>(f.varint);
          break;
        case inst_field::kOperandIds:
          append(f, &s->operands_begin, &s->operands_end);
          break;
        case inst_field::kControlPredecessorIds:
          append(f, &s->control_begin, &s->control_end);
          break;
        case inst_field::kCalledComputationIds:
          append(f, &s->calls_begin, &s->calls_end);
          break;
        case inst_field::kName:
        case inst_field::kMetadata:
        case inst_field::kStatisticsViz:
        case inst_field::kOriginalValue:
          break;
        case inst_field::kShape:
        case inst_field::kOutfeedShape:
        case inst_field::kOperandShapesWithLayout:
          norm_.Nested(f, copy.Flush(), &Normalizer::Shape);
          break;
        case inst_field::kLiteral:
          norm_.Nested(f, copy.Flush(), &Normalizer::Literal);
          break;
        case inst_field::kSharding:
        case inst_field::kDomainEntrySharding:
        case inst_field::kDomainExitSharding:
          norm_.Nested(f, copy.Flush(), &Normalizer::Sharding);
          break;
        case inst_field::kFrontendAttributes:
        case inst_field::kWindow:  // a window without dimensions is no window
          if (f.type == kLengthDelimited && f.payload.empty()) break;
          copy.Keep(f.whole);
          break;
        case inst_field::kPrecisionConfig:
          if (f.type == kLengthDelimited && AllDefaultPrecision(f.payload)) break;
          copy.Keep(f.whole);
          break;
        case inst_field::kResultAccuracy:
          if (f.type == kLengthDelimited && IsDefaultAccuracy(f.payload)) break;
          copy.Keep(f.whole);
          break;
        case inst_field::kReplicaGroups:
        case inst_field::kCollectiveDeviceList:
        case inst_field::kIotaCollectiveDeviceList:
          groups_.Add(f);
          break;
        default:
          copy.Keep(f.whole);
      }
    }
    groups_.Write(copy.Flush());
  }

  // A result_accuracy of mode DEFAULT (or empty): what XLA assumes without one.
  static bool IsDefaultAccuracy(std::string_view accuracy) {
    FieldReader r(accuracy);
    Field f;
    while (r.Next(&f)) {
      if (f.number != accuracy_field::kMode || f.type != kVarint || f.varint != 0) return false;
    }
    return true;
  }

  // Producers write either no precision config or one DEFAULT per operand
  // (and no algorithm): the same thing.
  static bool AllDefaultPrecision(std::string_view config) {
    FieldReader r(config);
    Field f;
    while (r.Next(&f)) {
      if (f.number != precision_field::kOperandPrecision || !AllZero(f)) return false;
    }
    return true;
  }

  // The schedule, re-encoded: for each computation in canonical order that
  // has a sequence, its canonical number and the canonical numbers of the
  // sequence (-1: an id that is not an instruction of it).
  void Schedule() {
    std::vector<std::pair<int64_t, std::vector<int64_t>>> sequences;
    FieldReader r(schedule_);
    Field f;
    while (r.Next(&f)) {
      if (f.number != schedule_field::kSequences || f.type != kLengthDelimited) continue;
      int64_t comp_id = 0;
      std::vector<int64_t> ids;
      FieldReader entry(f.payload);
      Field e;
      while (entry.Next(&e)) {
        if (e.number == 1) comp_id = static_cast<int64_t>(e.varint);
        if (e.number == 2 && e.type == kLengthDelimited) {
          FieldReader seq(e.payload);
          Field s;
          while (seq.Next(&s)) {
            if (s.number == 1) ForEachInt(s, [&](uint64_t v) { ids.push_back(static_cast<int64_t>(v)); });
          }
        }
      }
      sequences.push_back({comp_id, std::move(ids)});
    }
    std::vector<std::pair<int64_t, std::vector<int64_t>>> canonical;
    for (auto& [comp_id, ids] : sequences) {
      const int64_t number = ReachedNumber(comp_id);
      if (number < 0 || static_cast<size_t>(number) >= numbers_.size()) continue;  // not reached from the entry
      const auto& map = numbers_[static_cast<size_t>(number)];
      std::vector<int64_t> seq;
      seq.reserve(ids.size());
      for (int64_t id : ids) {
        auto it = std::lower_bound(map.begin(), map.end(), std::pair<int64_t, int64_t>{id, INT64_MIN});
        seq.push_back(it != map.end() && it->first == id ? it->second : -1);
      }
      canonical.push_back({number, std::move(seq)});
    }
    std::sort(canonical.begin(), canonical.end());
    sink_->Schedule(canonical);
  }

  const xla::HloModuleProto& module_;
  Sink* sink_;
  std::string bytes_;
  Normalizer norm_;

  std::string_view entry_name_;
  int64_t entry_id_ = 0;
  std::string_view schedule_;
  std::vector<Field> module_fields_;
  std::vector<ComputationScan> comps_;
  IdIndex comp_index_;
  std::vector<int64_t> queue_;  // computation ids in canonical order
  std::vector<int64_t> comp_number_;  // per comps_ entry: its canonical number, -1 until reached
  std::vector<std::pair<int64_t, int64_t>> missing_numbers_;  // ids of absent computations
  std::vector<std::vector<std::pair<int64_t, int64_t>>> numbers_;  // per canonical computation, for the schedule

  // Per computation, reused.
  std::vector<InstructionScan> insts_;
  std::vector<int64_t> ids_;
  IdIndex inst_index_;
  std::vector<int32_t> order_, params_;
  std::vector<char> visited_;
  std::vector<int64_t> number_;
  std::vector<std::pair<int32_t, uint32_t>> stack_;
  std::string norm_buf_;  // the normalized instructions of the current computation
  ReplicaGroups groups_;
  std::vector<int64_t> operands_, control_, calls_;
};

// --- Sinks -------------------------------------------------------------------------

// Writes the bytes that CanonicalGraphKey hashes.
class KeySink {
 public:
  KeySink() { out_.append(kGraphKeyFormat); }

  void Reserve(size_t module_bytes) { out_.reserve(module_bytes + module_bytes / 4 + 64); }
  void Invalid() { out_.append("invalid"); }
  void Module(std::string_view fields) { Blob(fields); }
  void MissingComputation() { Int(-1); }
  void BeginComputation(size_t, size_t instructions, std::string_view fields) {
    Int(static_cast<int64_t>(instructions));
    Blob(fields);
  }
  void Instruction(size_t, std::string_view normalized, const InstructionRefs& refs) {
    Blob(normalized);
    List(*refs.operands);
    List(*refs.control_predecessors);
    List(*refs.called_computations);
  }
  void EndComputation(int64_t root) { Int(root); }
  void Schedule(const std::vector<std::pair<int64_t, std::vector<int64_t>>>& sequences) {
    Int(static_cast<int64_t>(sequences.size()));
    for (const auto& [number, seq] : sequences) {
      Int(number);
      List(seq);
    }
  }

  const std::string& bytes() const { return out_; }

 private:
  static void Store(char* p, int64_t v) {
    const uint64_t u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((u >> (8 * i)) & 0xff);
  }
  void Int(int64_t v) {
    char buf[8];
    Store(buf, v);
    out_.append(buf, 8);
  }
  void Blob(std::string_view b) {
    Int(static_cast<int64_t>(b.size()));
    out_.append(b);
  }
  void List(const std::vector<int64_t>& v) {
    char buf[8 * 16];
    Store(buf, static_cast<int64_t>(v.size()));
    size_t n = 8;
    for (int64_t x : v) {
      if (n == sizeof buf) {
        out_.append(buf, n);
        n = 0;
      }
      Store(buf + n, x);
      n += 8;
    }
    out_.append(buf, n);
  }

  std::string out_;
};

// Builds the CanonicalModule that npc explain compares.
class FormSink {
 public:
  explicit FormSink(const xla::HloModuleProto& module) : module_(module) {}

  void Reserve(size_t) {}
  void Invalid() {}
  void Module(std::string_view fields) { out.module.ParseFromArray(fields.data(), static_cast<int>(fields.size())); }
  void MissingComputation() {
    CanonicalComputation c;
    c.missing = true;
    out.computations.push_back(std::move(c));
  }
  void BeginComputation(size_t index, size_t instructions, std::string_view fields) {
    comp_ = &module_.computations(static_cast<int>(index));
    CanonicalComputation c;
    c.name = comp_->name();
    c.normalized.ParseFromArray(fields.data(), static_cast<int>(fields.size()));
    c.instructions.reserve(instructions);
    out.computations.push_back(std::move(c));
  }
  void Instruction(size_t index, std::string_view normalized, const InstructionRefs& refs) {
    CanonicalInstruction ci;
    ci.name = comp_->instructions(static_cast<int>(index)).name();
    ci.normalized.ParseFromArray(normalized.data(), static_cast<int>(normalized.size()));
    ci.operands = *refs.operands;
    ci.control_predecessors = *refs.control_predecessors;
    ci.called_computations = *refs.called_computations;
    out.computations.back().instructions.push_back(std::move(ci));
  }
  void EndComputation(int64_t root) { out.computations.back().root = root; }
  void Schedule(const std::vector<std::pair<int64_t, std::vector<int64_t>>>& sequences) {
    out.has_schedule = true;
    for (const auto& [number, seq] : sequences) out.computations[static_cast<size_t>(number)].schedule = seq;
  }

  CanonicalModule out;

 private:
  const xla::HloModuleProto& module_;
  const xla::HloComputationProto* comp_ = nullptr;
};

}  // namespace

CanonicalModule CanonicalForm(const xla::HloModuleProto& module) {
  FormSink sink(module);
  Canonicalizer<FormSink>(module, &sink).Run();
  return std::move(sink.out);
}

std::string CanonicalGraphKey(const xla::HloModuleProto& module) {
  KeySink sink;
  Canonicalizer<KeySink>(module, &sink).Run();
  const std::string& canonical = sink.bytes();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), digest);
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | digest[i];
  return std::to_string(key);
}

}  // namespace npc::hlo
