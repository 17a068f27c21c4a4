// Host buffers exchanged with compiled artifacts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto

namespace npc {

// A dense array in host memory.
//
// Shape: `dims` (row-major: the last dimension varies fastest; an empty `dims`
// is a scalar). Element type: an XLA PrimitiveType. `bytes` holds
// ElementCount(dims) * ElementSize(type) bytes, little-endian, in row-major
// order. PRED is one byte per element (0 or 1); BF16 and F16 two bytes.
struct Tensor {
  xla::PrimitiveType type = xla::PRIMITIVE_TYPE_INVALID;
  std::vector<int64_t> dims;
  std::vector<std::byte> bytes;

  int64_t element_count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  template <class T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

// Size in bytes of one element of `type`; 0 for TUPLE, TOKEN, OPAQUE_TYPE and
// types npc does not store densely.
int64_t ElementSize(xla::PrimitiveType type);

// XLA's lower-case name of `type` ("f32", "pred", "bf16"); "invalid" when unknown.
std::string PrimitiveTypeName(xla::PrimitiveType type);

// A zero-filled tensor of the given array shape.
Tensor ZeroTensor(xla::PrimitiveType type, std::vector<int64_t> dims);

}  // namespace npc
