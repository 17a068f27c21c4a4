// Reading HLO modules from bytes and files, validation, shape helpers.
#include <zlib.h>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>

#include <climits>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "hlo/gunzip.h"
#include "hlo/op_checks.h"
#include "hlo/text_reader.h"
#include "npc/hlo.h"

namespace npc::hlo {
namespace {

// libprotobuf logs why a parse failed (e.g. "String field ... contains invalid
// UTF-8 data") on stderr. npc's parses run with a thread-local capture on: the
// message goes into the error npc returns instead. Messages of other parses
// (and of other threads) go to the handler that was installed before.
thread_local std::string* t_protobuf_log = nullptr;
google::protobuf::LogHandler* g_previous_protobuf_handler = nullptr;

void CapturingLogHandler(google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
  if (t_protobuf_log != nullptr && level < google::protobuf::LOGLEVEL_FATAL) {
    if (t_protobuf_log->empty()) *t_protobuf_log = message;
    return;
  }
  if (g_previous_protobuf_handler != nullptr) g_previous_protobuf_handler(level, filename, line, message);
}

// Runs `parse` with libprotobuf's log messages captured into `*log`.
template <class Fn>
bool ParseQuietly(std::string* log, Fn parse) {
  static std::once_flag once;
  std::call_once(once, [] { g_previous_protobuf_handler = google::protobuf::SetLogHandler(&CapturingLogHandler); });
  std::string* saved = t_protobuf_log;
  t_protobuf_log = log;
  bool ok = parse();
  t_protobuf_log = saved;
  return ok;
}

// kMaxHloModuleBytes; smaller in fuzzing builds, where a gzip bomb of 2 GiB
// would only measure the fuzzer's memory limit.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr size_t kMaxInputBytes = size_t{64} << 20;
#else
constexpr size_t kMaxInputBytes = kMaxHloModuleBytes;
#endif

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

bool LooksLikeText(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\r' || bytes[i] == '\t')) ++i;
  return bytes.substr(i, 9) == "HloModule";
}

bool HasComputations(const xla::HloModuleProto& m) {
  if (m.computations_size() == 0) return false;
  for (const auto& c : m.computations()) {
    if (c.instructions_size() == 0) return false;
  }
  return true;
}

// Why `bytes` (which did not parse as an HloModuleProto) are not a module:
// not protobuf at all, or a well-formed protobuf message of another type.
std::string NotAModuleMessage(std::string_view bytes, const std::string& source_name, const std::string& log) {
  google::protobuf::UnknownFieldSet fields;  // any message type: checks only the wire format
  const bool wire_ok = fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  const std::string why = log.empty() ? "" : " (" + log + ")";
  if (!wire_ok) {
    return source_name + ": corrupt or truncated protobuf (" + std::to_string(bytes.size()) +
           " bytes do not parse as HloModuleProto or HloProto)" + why;
  }
  return source_name + ": not an HloModuleProto or HloProto: a well-formed protobuf message of another type (" +
         std::to_string(bytes.size()) + " bytes; e.g. a serialized executable or an HloSnapshot)" + why;
}

constexpr int kMaxShapeNesting = 64;
constexpr int kMaxRank = 128;

int ElementByteSize(xla::PrimitiveType t) {
  switch (t) {
    case xla::C128: return 16;
    case xla::F64: case xla::S64: case xla::U64: case xla::C64: return 8;
    case xla::F32: case xla::S32: case xla::U32: return 4;
    case xla::F16: case xla::BF16: case xla::S16: case xla::U16: return 2;
    default: return 1;
  }
}

// ValidateShape at nesting level `depth` (1 = an instruction's shape).
Status ValidateShapeAt(const xla::ShapeProto& shape, int depth) {
  if (depth > kMaxShapeNesting) {
    return MakeError("shape nested deeper than " + std::to_string(kMaxShapeNesting) + " tuple levels");
  }
  const xla::PrimitiveType type = shape.element_type();
  if (!xla::PrimitiveType_IsValid(type)) return MakeError("unknown element type " + std::to_string(type));
  if (type == xla::TUPLE) {
    if (shape.dimensions_size() != 0) return MakeError("a tuple shape has dimensions");
    for (const auto& element : shape.tuple_shapes()) {
      if (auto st = ValidateShapeAt(element, depth + 1); !st) return st;
    }
    return {};
  }
  if (shape.tuple_shapes_size() != 0) return MakeError("an array shape has tuple elements");
  const int rank = shape.dimensions_size();
  if (rank > kMaxRank) return MakeError("rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank));
  if (shape.is_dynamic_dimension_size() != 0 && shape.is_dynamic_dimension_size() != rank) {
    return MakeError("is_dynamic_dimension has " + std::to_string(shape.is_dynamic_dimension_size()) +
                     " entries for rank " + std::to_string(rank));
  }
  int64_t bytes = ElementByteSize(type);
  for (int i = 0; i < rank; ++i) {
    const int64_t d = shape.dimensions(i);
    // XLA's unbounded dynamic size ('?') is INT64_MIN on a dynamic dimension.
    const bool unbounded = d == INT64_MIN && shape.is_dynamic_dimension_size() == rank && shape.is_dynamic_dimension(i);
    if (unbounded) continue;
    if (d < 0) return MakeError("negative dimension size " + std::to_string(d) + " in " + ShapeToString(shape));
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      return MakeError("shape " + ShapeToString(shape) + " has more bytes than a 64-bit size holds");
    }
  }
  if (shape.has_layout() && shape.layout().minor_to_major_size() != 0) {
    const auto& m2m = shape.layout().minor_to_major();
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    if (m2m.size() != rank) return MakeError("layout of " + ShapeToString(shape) + " does not match its rank");
    for (int64_t d : m2m) {
      if (d < 0 || d >= rank || seen[static_cast<size_t>(d)]) {
        return MakeError("layout of " + ShapeToString(shape) + " is not a permutation of its dimensions");
      }
      seen[static_cast<size_t>(d)] = true;
    }
  }
  return {};
}

}  // namespace

Result<std::string> Gunzip(std::string_view bytes, const std::string& source_name, size_t max_bytes) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return MakeError(source_name + ": cannot start gzip decoder");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = sizeof buf - zs.avail_out;
    if (out.size() + produced > max_bytes) {
      inflateEnd(&zs);
      return MakeError(source_name + ": gzip data inflates to more than " + std::to_string(max_bytes) +
                       " bytes, the largest HLO module npc reads");
    }
    out.append(buf, produced);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return MakeError(source_name + ": corrupt or truncated gzip data" + (zs.msg ? std::string(" (") + zs.msg + ")" : ""));
  }
  return out;
}

const xla::HloComputationProto* EntryComputation(const xla::HloModuleProto& module) {
  if (module.computations_size() == 0) return nullptr;
  if (module.entry_computation_id() != 0 || !module.entry_computation_name().empty()) {
    for (const auto& c : module.computations()) {
      if (module.entry_computation_id() != 0 && c.id() == module.entry_computation_id()) return &c;
    }
    for (const auto& c : module.computations()) {
      if (!module.entry_computation_name().empty() && c.name() == module.entry_computation_name()) return &c;
    }
    // id 0 is a valid computation id in XLA: fall through to a match on it.
    for (const auto& c : module.computations()) {
      if (c.id() == module.entry_computation_id()) return &c;
    }
    return nullptr;
  }
  // XLA serializes computations in post order: the entry comes last.
  return &module.computations(module.computations_size() - 1);
}

Status ValidateShape(const xla::ShapeProto& shape) {
  return ValidateShapeAt(shape, 1);
}

Status ValidateModule(const xla::HloModuleProto& module, const std::string& source_name) {
  auto fail = [&](const std::string& what) { return MakeError(source_name + ": invalid HLO module: " + what); };
  if (module.computations_size() == 0) return fail("no computations");
  std::set<int64_t> computation_ids;
  for (const auto& c : module.computations()) {
    if (!computation_ids.insert(c.id()).second) return fail("duplicate computation id " + std::to_string(c.id()));
  }
  if (EntryComputation(module) == nullptr) {
    return fail("entry computation '" + module.entry_computation_name() + "' (id " +
                std::to_string(module.entry_computation_id()) + ") not found");
  }
  for (const auto& c : module.computations()) {
    const std::string where = "computation '" + c.name() + "'";
    if (c.instructions_size() == 0) return fail(where + " has no instructions");
    std::set<int64_t> ids;
    for (const auto& inst : c.instructions()) {
      if (!ids.insert(inst.id()).second) return fail(where + ": duplicate instruction id " + std::to_string(inst.id()));
    }
    if (!ids.count(c.root_id())) return fail(where + ": root id " + std::to_string(c.root_id()) + " not found");
    for (const auto& inst : c.instructions()) {
      const std::string iwhere = where + ", instruction '" + inst.name() + "'";
      if (inst.opcode().empty()) return fail(iwhere + ": no opcode");
      if (!inst.has_shape() || inst.shape().element_type() == xla::PRIMITIVE_TYPE_INVALID) {
        return fail(iwhere + ": no shape");
      }
      if (auto st = ValidateShape(inst.shape()); !st) return fail(iwhere + ": " + st.error().message);
      for (int64_t op : inst.operand_ids()) {
        if (!ids.count(op)) return fail(iwhere + ": operand id " + std::to_string(op) + " not found");
      }
      for (int64_t op : inst.control_predecessor_ids()) {
        if (!ids.count(op)) return fail(iwhere + ": control predecessor id " + std::to_string(op) + " not found");
      }
      for (int64_t cc : inst.called_computation_ids()) {
        if (!computation_ids.count(cc)) return fail(iwhere + ": called computation id " + std::to_string(cc) + " not found");
      }
    }
    if (auto st = CheckComputationOps(c); !st) return fail(where + ", " + st.error().message);
  }
  return {};
}

Result<xla::HloModuleProto> ParseHloModule(std::string_view bytes, const std::string& source_name) {
  if (bytes.empty()) return MakeError(source_name + ": empty file, not an HLO module");
  if (bytes.size() > kMaxInputBytes) {
    return MakeError(source_name + ": " + std::to_string(bytes.size()) + " bytes, more than the " +
                     std::to_string(kMaxInputBytes) + " bytes of the largest HLO module npc reads");
  }
  if (IsGzip(bytes)) {
    auto inflated = Gunzip(bytes, source_name, kMaxInputBytes);
    if (!inflated) return inflated.error();
    if (IsGzip(*inflated)) return MakeError(source_name + ": nested gzip data is not an HLO module");
    return ParseHloModule(*inflated, source_name);
  }
  if (LooksLikeText(bytes)) {
    auto module = ParseHloText(bytes, source_name);
    if (!module) return module.error();
    if (auto st = ValidateModule(*module, source_name); !st) return st.error();
    return module;
  }
  // An HloProto wraps the module in field 1; an HloModuleProto has its name
  // in field 1. Both are length-delimited, so try the wrapper first and
  // accept it only when it yields a module with computations. Nesting is
  // bounded by libprotobuf's recursion limit (100 messages deep).
  const int size = static_cast<int>(bytes.size());
  std::string wrapper_log, module_log;
  xla::HloProto wrapper;
  if (ParseQuietly(&wrapper_log, [&] { return wrapper.ParseFromArray(bytes.data(), size); }) &&
      wrapper.has_hlo_module() && HasComputations(wrapper.hlo_module())) {
    xla::HloModuleProto module = std::move(*wrapper.mutable_hlo_module());
    if (auto st = ValidateModule(module, source_name); !st) return st.error();
    return module;
  }
  xla::HloModuleProto module;
  if (!ParseQuietly(&module_log, [&] { return module.ParseFromArray(bytes.data(), size); })) {
    return MakeError(NotAModuleMessage(bytes, source_name, module_log));
  }
  if (!HasComputations(module)) {
    return MakeError(source_name + ": not an HloModuleProto or HloProto: no computations with instructions (" +
                     std::to_string(bytes.size()) + " bytes of another message type?)");
  }
  if (auto st = ValidateModule(module, source_name); !st) return st.error();
  return module;
}

Result<xla::HloModuleProto> ReadHloModuleFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(path + ": cannot open HLO module file");
  std::string bytes;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    bytes.append(buf, static_cast<size_t>(in.gcount()));
    if (bytes.size() > kMaxInputBytes) {
      return MakeError(path + ": more than " + std::to_string(kMaxInputBytes) +
                       " bytes, larger than the largest HLO module npc reads");
    }
  }
  if (in.bad()) return MakeError(path + ": read error");
  return ParseHloModule(bytes, path);
}

int64_t ElementCount(const xla::ShapeProto& shape) {
  if (shape.element_type() == xla::TUPLE) return 0;
  int64_t n = 1;
  for (int64_t d : shape.dimensions()) {
    if (d < 0) return 0;
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

std::string ShapeToString(const xla::ShapeProto& shape) {
  std::string out;
  if (shape.element_type() == xla::TUPLE) {
    out = "(";
    for (int i = 0; i < shape.tuple_shapes_size(); ++i) {
      if (i) out += ", ";
      out += ShapeToString(shape.tuple_shapes(i));
    }
    return out + ")";
  }
  std::string type = xla::PrimitiveType_Name(shape.element_type());
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (shape.element_type() == xla::TOKEN) return "token[]";
  out = type + "[";
  for (int i = 0; i < shape.dimensions_size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape.dimensions(i));
  }
  out += "]";
  if (shape.has_layout() && shape.dimensions_size() > 0) {
    out += "{";
    for (int i = 0; i < shape.layout().minor_to_major_size(); ++i) {
      if (i) out += ",";
      out += std::to_string(shape.layout().minor_to_major(i));
    }
    out += "}";
  }
  return out;
}

}  // namespace npc::hlo
