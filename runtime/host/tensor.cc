// npc::Tensor helpers (runtime/include/npc/tensor.h).
#include "npc/tensor.h"

#include <cctype>

namespace npc {

int64_t ElementSize(xla::PrimitiveType type) {
  switch (type) {
    case xla::PRED:
    case xla::S8:
    case xla::U8:
    case xla::F8E5M2:
    case xla::F8E4M3FN:
      return 1;
    case xla::S16:
    case xla::U16:
    case xla::F16:
    case xla::BF16:
      return 2;
    case xla::S32:
    case xla::U32:
    case xla::F32:
      return 4;
    case xla::S64:
    case xla::U64:
    case xla::F64:
    case xla::C64:
      return 8;
    case xla::C128:
      return 16;
    default:  // TUPLE, TOKEN, OPAQUE_TYPE, S4/U4 (packed), invalid
      return 0;
  }
}

std::string PrimitiveTypeName(xla::PrimitiveType type) {
  switch (type) {
    case xla::PRED: return "pred";
    case xla::S8: return "s8";
    case xla::S16: return "s16";
    case xla::S32: return "s32";
    case xla::S64: return "s64";
    case xla::U8: return "u8";
    case xla::U16: return "u16";
    case xla::U32: return "u32";
    case xla::U64: return "u64";
    case xla::F16: return "f16";
    case xla::F32: return "f32";
    case xla::F64: return "f64";
    case xla::TUPLE: return "tuple";
    case xla::OPAQUE_TYPE: return "opaque";
    case xla::C64: return "c64";
    case xla::BF16: return "bf16";
    case xla::TOKEN: return "token";
    case xla::C128: return "c128";
    case xla::F8E5M2: return "f8e5m2";
    case xla::F8E4M3FN: return "f8e4m3fn";
    case xla::S4: return "s4";
    case xla::U4: return "u4";
    default: return "invalid";
  }
}

Tensor ZeroTensor(xla::PrimitiveType type, std::vector<int64_t> dims) {
  Tensor t;
  t.type = type;
  t.dims = std::move(dims);
  t.bytes.assign(static_cast<size_t>(t.element_count() * ElementSize(type)), std::byte{0});
  return t;
}

}  // namespace npc
