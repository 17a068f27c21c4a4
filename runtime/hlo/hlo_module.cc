// Reading HLO modules from bytes and files, validation, shape helpers.
#include <zlib.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "hlo/text_reader.h"
#include "npc/hlo.h"

namespace npc::hlo {
namespace {

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

Result<std::string> Gunzip(std::string_view bytes, const std::string& source_name) {
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
    out.append(buf, sizeof buf - zs.avail_out);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return MakeError(source_name + ": corrupt or truncated gzip data" + (zs.msg ? std::string(" (") + zs.msg + ")" : ""));
  }
  return out;
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

}  // namespace

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
  }
  return {};
}

Result<xla::HloModuleProto> ParseHloModule(std::string_view bytes, const std::string& source_name) {
  if (bytes.empty()) return MakeError(source_name + ": empty file, not an HLO module");
  if (IsGzip(bytes)) {
    auto inflated = Gunzip(bytes, source_name);
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
  // accept it only when it yields a module with computations.
  xla::HloProto wrapper;
  if (wrapper.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) && wrapper.has_hlo_module() &&
      HasComputations(wrapper.hlo_module())) {
    xla::HloModuleProto module = std::move(*wrapper.mutable_hlo_module());
    if (auto st = ValidateModule(module, source_name); !st) return st.error();
    return module;
  }
  xla::HloModuleProto module;
  if (!module.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return MakeError(source_name + ": corrupt or truncated protobuf (" + std::to_string(bytes.size()) +
                     " bytes do not parse as HloModuleProto or HloProto)");
  }
  if (!HasComputations(module)) {
    return MakeError(source_name + ": not an HLO module (no computations with instructions; " +
                     std::to_string(bytes.size()) + " bytes)");
  }
  if (auto st = ValidateModule(module, source_name); !st) return st.error();
  return module;
}

Result<xla::HloModuleProto> ReadHloModuleFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(path + ": cannot open HLO module file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return MakeError(path + ": read error");
  return ParseHloModule(ss.str(), path);
}

int64_t ElementCount(const xla::ShapeProto& shape) {
  if (shape.element_type() == xla::TUPLE) return 0;
  int64_t n = 1;
  for (int64_t d : shape.dimensions()) n *= d;
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
