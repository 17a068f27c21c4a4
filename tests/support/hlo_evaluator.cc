// The plain HLO evaluator (see hlo_evaluator.h).
//
// Layout of this file:
//  1. element types, rounding, index helpers;
//  2. Value: an array (or a tuple of values) and its conversions to and from
//     Tensor and LiteralProto;
//  3. elementwise kernels (unary, binary, compare, convert), typed in C++;
//  4. the Evaluator: walks a computation in dataflow order and evaluates each
//     instruction; one member function per group of opcodes;
//  5. EvaluateHlo.
#include "support/hlo_evaluator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "hlo/text_reader.h"  // kElidedConstantAttribute
#include "npc/hlo.h"

namespace npc::testing {
namespace {

using xla::HloComputationProto;
using xla::HloInstructionProto;
using xla::PrimitiveType;
using xla::ShapeProto;

// ---------------------------------------------------------------------------
// 1. Element types, rounding, indices
// ---------------------------------------------------------------------------

bool IsFloat(PrimitiveType t) {
  return t == xla::F32 || t == xla::F64 || t == xla::BF16 || t == xla::F16;
}

// Types whose arithmetic is done in C++ float: f32, and bf16/f16 (computed in
// float, rounded to their type on store).
bool ComputesInFloat(PrimitiveType t) { return t == xla::F32 || t == xla::BF16 || t == xla::F16; }

bool IsInteger(PrimitiveType t) {
  switch (t) {
    case xla::S8:
    case xla::S16:
    case xla::S32:
    case xla::S64:
    case xla::U8:
    case xla::U16:
    case xla::U32:
    case xla::U64: return true;
    default: return false;
  }
}

bool IsSupportedType(PrimitiveType t) { return t == xla::PRED || IsInteger(t) || IsFloat(t); }

std::string TypeName(PrimitiveType t) { return PrimitiveTypeName(t); }

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Calls `fn` with a value of the C++ type of the integer type `t` (int8_t for
// s8, ..., uint64_t for u64). Callers check IsInteger(t) first.
template <class Fn>
decltype(auto) WithIntegerType(PrimitiveType t, Fn&& fn) {
  switch (t) {
    case xla::S8: return fn(int8_t{});
    case xla::S16: return fn(int16_t{});
    case xla::S32: return fn(int32_t{});
    case xla::S64: return fn(int64_t{});
    case xla::U8: return fn(uint8_t{});
    case xla::U16: return fn(uint16_t{});
    case xla::U32: return fn(uint32_t{});
    default: return fn(uint64_t{});
  }
}

// bfloat16 is the upper half of a float; rounding keeps the nearest value,
// ties to even; NaN stays a (quiet) NaN with its sign.
float RoundToBf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) {
    bits = (bits | 0x00400000u) & 0xFFFF0000u;
  } else {
    const uint32_t lsb = (bits >> 16) & 1u;
    bits = (bits + 0x7FFFu + lsb) & 0xFFFF0000u;
  }
  return std::bit_cast<float>(bits);
}

// IEEE half (1 sign, 5 exponent, 10 fraction bits): `v` rounded to the
// nearest half value, ties to even, by rounding v to a multiple of the spacing
// of half values around it (exact in double). Overflow gives infinity.
double RoundToHalf(double v) {
  if (std::isnan(v)) return v;
  const double a = std::fabs(v);
  // 65504 is the largest half; halfway to the next power of two (65536) and
  // beyond rounds to infinity.
  if (a >= 65520.0) return std::copysign(std::numeric_limits<double>::infinity(), v);
  int e;
  std::frexp(a, &e);                          // a in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, -14);  // below 2^-14: subnormal spacing 2^-24
  const double spacing = std::ldexp(1.0, exponent - 10);
  return std::copysign(std::nearbyint(a / spacing) * spacing, v);
}

double HalfBitsToValue(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1F;
  const int fraction = bits & 0x3FF;
  if (exponent == 0x1F) {
    return fraction != 0 ? std::copysign(std::numeric_limits<double>::quiet_NaN(), sign)
                         : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// Bits of a value exactly representable as a half (see RoundToHalf).
uint16_t HalfValueToBits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7E00;
  if (std::isinf(v)) return sign | 0x7C00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a / std::ldexp(1.0, -24));
  int e;
  std::frexp(a, &e);  // a = 1.f * 2^(e-1)
  const int biased = e - 1 + 15;
  const int fraction = static_cast<int>((a / std::ldexp(1.0, e - 1) - 1.0) * 1024);
  return sign | static_cast<uint16_t>(biased << 10) | static_cast<uint16_t>(fraction);
}

// `v` rounded to the floating-point type `t`, held in a double. bf16 and f16
// go through float first (as C++/Eigen conversions from double do).
double RoundToType(PrimitiveType t, double v) {
  switch (t) {
    case xla::F32: return static_cast<float>(v);
    case xla::BF16: return RoundToBf16(static_cast<float>(v));
    case xla::F16: return RoundToHalf(static_cast<float>(v));
    default: return v;  // F64
  }
}

// `v` wrapped (two's complement) to the integer type `t`; 0/1 for pred. An
// unsigned 64-bit value is held as its bits.
int64_t WrapToType(PrimitiveType t, int64_t v) {
  switch (t) {
    case xla::PRED: return v != 0;
    case xla::S8: return static_cast<int8_t>(v);
    case xla::S16: return static_cast<int16_t>(v);
    case xla::S32: return static_cast<int32_t>(v);
    case xla::U8: return static_cast<uint8_t>(v);
    case xla::U16: return static_cast<uint16_t>(v);
    case xla::U32: return static_cast<uint32_t>(v);
    default: return v;  // S64, U64
  }
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Row-major position of `index` in an array of `dims`.
int64_t Linear(const std::vector<int64_t>& dims, const std::vector<int64_t>& index) {
  int64_t pos = 0;
  for (size_t d = 0; d < dims.size(); ++d) pos = pos * dims[d] + index[d];
  return pos;
}

// Advances `index` to the next index of `dims` in row-major order (the last
// dimension fastest); false when it wrapped around past the last one.
bool NextIndex(const std::vector<int64_t>& dims, std::vector<int64_t>& index) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

// Calls fn(index) for every index of `dims` in row-major order: once for a
// scalar (no dims), never when some dimension is 0.
template <class Fn>
void ForEachIndex(const std::vector<int64_t>& dims, Fn&& fn) {
  if (Product(dims) == 0) return;
  std::vector<int64_t> index(dims.size(), 0);
  do {
    fn(index);
  } while (NextIndex(dims, index));
}

std::vector<int64_t> DimsOf(const ShapeProto& shape) {
  return std::vector<int64_t>(shape.dimensions().begin(), shape.dimensions().end());
}

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& field) {
  return std::vector<int64_t>(field.begin(), field.end());
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// ---------------------------------------------------------------------------
// 2. Values
// ---------------------------------------------------------------------------

struct Value {
  PrimitiveType type = xla::PRIMITIVE_TYPE_INVALID;  // TUPLE for a tuple
  std::vector<int64_t> dims;                         // arrays only
  std::vector<double> floats;   // bf16/f32/f64 elements, each exactly representable in `type`
  std::vector<int64_t> ints;    // pred (0/1) and integer elements, wrapped to `type`
  std::vector<Value> elements;  // tuples only

  bool is_tuple() const { return type == xla::TUPLE; }
  int64_t count() const { return Product(dims); }
};

// The storage of large arrays dropped during one evaluation (at most two of
// each kind), reused for the next arrays: fresh memory costs a page fault per
// page, which dominates on large modules. Active only inside EvaluateHlo on
// this thread, and emptied when it returns.
struct StoragePool {
  bool active = false;
  std::vector<std::vector<double>> floats;
  std::vector<std::vector<int64_t>> ints;
};
thread_local StoragePool storage_pool;

constexpr size_t kPooledElements = size_t{1} << 20;

template <class T>
void TakeStorage(std::vector<std::vector<T>>& pooled, std::vector<T>& into, int64_t n) {
  if (storage_pool.active && static_cast<size_t>(n) >= kPooledElements) {
    for (size_t i = 0; i < pooled.size(); ++i) {
      if (pooled[i].capacity() >= static_cast<size_t>(n)) {
        into = std::move(pooled[i]);
        pooled.erase(pooled.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  into.assign(n, T{0});
}

template <class T>
void GiveStorage(std::vector<std::vector<T>>& pooled, std::vector<T>& from) {
  if (storage_pool.active && from.capacity() >= kPooledElements && pooled.size() < 2) {
    pooled.push_back(std::move(from));
  }
}

Value MakeArray(PrimitiveType type, std::vector<int64_t> dims) {
  Value v;
  v.type = type;
  v.dims = std::move(dims);
  if (IsFloat(type)) {
    TakeStorage(storage_pool.floats, v.floats, v.count());
  } else {
    TakeStorage(storage_pool.ints, v.ints, v.count());
  }
  return v;
}

// Hands the storage of a value no longer needed to the pool.
void Recycle(Value& v) {
  GiveStorage(storage_pool.floats, v.floats);
  GiveStorage(storage_pool.ints, v.ints);
  for (Value& e : v.elements) Recycle(e);
}

Value MakeTuple(std::vector<Value> elements) {
  Value v;
  v.type = xla::TUPLE;
  v.elements = std::move(elements);
  return v;
}

// to[j] = from[i]; both arrays of the same element type.
void CopyElement(const Value& from, int64_t i, Value& to, int64_t j) {
  if (IsFloat(from.type)) {
    to.floats[j] = from.floats[i];
  } else {
    to.ints[j] = from.ints[i];
  }
}

// The element at row-major position `pos` as a scalar value.
Value ScalarAt(const Value& v, int64_t pos) {
  Value s = MakeArray(v.type, {});
  CopyElement(v, pos, s, 0);
  return s;
}

std::string Describe(const Value& v) {
  if (v.is_tuple()) {
    std::string s = "(";
    for (size_t i = 0; i < v.elements.size(); ++i) s += (i ? ", " : "") + Describe(v.elements[i]);
    return s + ")";
  }
  return TypeName(v.type) + DimsString(v.dims);
}

// Whether `v` has the type and dims of `shape` (recursively for tuples).
bool Matches(const Value& v, const ShapeProto& shape) {
  if (shape.element_type() == xla::TUPLE) {
    if (!v.is_tuple() || static_cast<int>(v.elements.size()) != shape.tuple_shapes_size()) {
      return false;
    }
    for (int i = 0; i < shape.tuple_shapes_size(); ++i) {
      if (!Matches(v.elements[i], shape.tuple_shapes(i))) return false;
    }
    return true;
  }
  return v.type == shape.element_type() && v.dims == DimsOf(shape);
}

template <class T>
T Load(const std::byte* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

template <class T>
void Store(std::byte* p, T x) {
  std::memcpy(p, &x, sizeof x);
}

Result<Value> ValueFromTensor(const Tensor& t) {
  if (!IsSupportedType(t.type)) {
    return MakeError("unsupported element type " + TypeName(t.type));
  }
  const int64_t n = t.element_count();
  const int64_t size = ElementSize(t.type);
  if (static_cast<int64_t>(t.bytes.size()) != n * size) {
    return MakeError("tensor " + TypeName(t.type) + DimsString(t.dims) + " holds " +
                     std::to_string(t.bytes.size()) + " bytes, expected " +
                     std::to_string(n * size));
  }
  Value v = MakeArray(t.type, t.dims);
  for (int64_t i = 0; i < n; ++i) {
    const std::byte* p = t.bytes.data() + i * size;
    switch (t.type) {
      case xla::PRED: v.ints[i] = Load<uint8_t>(p) != 0; break;
      case xla::S8: v.ints[i] = Load<int8_t>(p); break;
      case xla::S16: v.ints[i] = Load<int16_t>(p); break;
      case xla::S32: v.ints[i] = Load<int32_t>(p); break;
      case xla::S64: v.ints[i] = Load<int64_t>(p); break;
      case xla::U8: v.ints[i] = Load<uint8_t>(p); break;
      case xla::U16: v.ints[i] = Load<uint16_t>(p); break;
      case xla::U32: v.ints[i] = Load<uint32_t>(p); break;
      case xla::U64: v.ints[i] = static_cast<int64_t>(Load<uint64_t>(p)); break;
      case xla::F32: v.floats[i] = Load<float>(p); break;
      case xla::F64: v.floats[i] = Load<double>(p); break;
      case xla::BF16:
        v.floats[i] = std::bit_cast<float>(static_cast<uint32_t>(Load<uint16_t>(p)) << 16);
        break;
      case xla::F16: v.floats[i] = HalfBitsToValue(Load<uint16_t>(p)); break;
      default: break;
    }
  }
  return v;
}

Tensor TensorFromValue(const Value& v) {
  Tensor t = ZeroTensor(v.type, v.dims);
  const int64_t n = v.count();
  const int64_t size = ElementSize(v.type);
  for (int64_t i = 0; i < n; ++i) {
    std::byte* p = t.bytes.data() + i * size;
    switch (v.type) {
      case xla::PRED: Store<uint8_t>(p, v.ints[i] != 0); break;
      case xla::S8: Store<int8_t>(p, static_cast<int8_t>(v.ints[i])); break;
      case xla::S16: Store<int16_t>(p, static_cast<int16_t>(v.ints[i])); break;
      case xla::S32: Store<int32_t>(p, static_cast<int32_t>(v.ints[i])); break;
      case xla::S64: Store<int64_t>(p, v.ints[i]); break;
      case xla::U8: Store<uint8_t>(p, static_cast<uint8_t>(v.ints[i])); break;
      case xla::U16: Store<uint16_t>(p, static_cast<uint16_t>(v.ints[i])); break;
      case xla::U32: Store<uint32_t>(p, static_cast<uint32_t>(v.ints[i])); break;
      case xla::U64: Store<uint64_t>(p, static_cast<uint64_t>(v.ints[i])); break;
      case xla::F32: Store<float>(p, static_cast<float>(v.floats[i])); break;
      case xla::F64: Store<double>(p, v.floats[i]); break;
      case xla::BF16:
        Store<uint16_t>(p, static_cast<uint16_t>(
                               std::bit_cast<uint32_t>(static_cast<float>(v.floats[i])) >> 16));
        break;
      case xla::F16: Store<uint16_t>(p, HalfValueToBits(v.floats[i])); break;
      default: break;
    }
  }
  return t;
}

// Little-endian packed values of `width` bytes (LiteralProto's bytes fields).
template <class T>
std::vector<T> UnpackBytes(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = Load<T>(reinterpret_cast<const std::byte*>(bytes.data()) + i * sizeof(T));
  }
  return out;
}

Result<Value> ValueFromLiteral(const xla::LiteralProto& literal, const ShapeProto& shape) {
  const PrimitiveType t = shape.element_type();
  if (t == xla::TUPLE) {
    if (literal.tuple_literals_size() != shape.tuple_shapes_size()) {
      return MakeError("tuple literal has " + std::to_string(literal.tuple_literals_size()) +
                       " elements, the shape " + hlo::ShapeToString(shape) + " has " +
                       std::to_string(shape.tuple_shapes_size()));
    }
    std::vector<Value> elements;
    for (int i = 0; i < shape.tuple_shapes_size(); ++i) {
      auto e = ValueFromLiteral(literal.tuple_literals(i), shape.tuple_shapes(i));
      if (!e.ok()) return e.error();
      elements.push_back(std::move(*e));
    }
    return MakeTuple(std::move(elements));
  }
  if (!IsSupportedType(t)) return MakeError("unsupported element type " + TypeName(t));
  Value v = MakeArray(t, DimsOf(shape));
  const int64_t n = v.count();
  // Copies the literal's values into v, after checking their count.
  auto fill = [&](const auto& values) -> Status {
    if (static_cast<int64_t>(values.size()) != n) {
      return MakeError("literal of shape " + hlo::ShapeToString(shape) + " holds " +
                       std::to_string(values.size()) + " values, expected " + std::to_string(n));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (IsFloat(t)) {
        v.floats[i] = RoundToType(t, static_cast<double>(values[i]));
      } else {
        v.ints[i] = WrapToType(t, static_cast<int64_t>(values[i]));
      }
    }
    return {};
  };
  Status s;
  switch (t) {
    case xla::PRED: s = fill(literal.preds()); break;
    case xla::S8: s = fill(UnpackBytes<int8_t>(literal.s8s())); break;
    case xla::U8: s = fill(UnpackBytes<uint8_t>(literal.u8s())); break;
    case xla::S16: s = fill(UnpackBytes<int16_t>(literal.s16s())); break;
    case xla::U16: s = fill(UnpackBytes<uint16_t>(literal.u16s())); break;
    case xla::S32: s = fill(literal.s32s()); break;
    case xla::S64: s = fill(literal.s64s()); break;
    case xla::U32: s = fill(literal.u32s()); break;
    case xla::U64: s = fill(literal.u64s()); break;
    case xla::F32: s = fill(literal.f32s()); break;
    case xla::F64: s = fill(literal.f64s()); break;
    case xla::BF16: {
      std::vector<float> values;
      for (uint16_t bits : UnpackBytes<uint16_t>(literal.bf16s())) {
        values.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
      }
      s = fill(values);
      break;
    }
    case xla::F16: {
      std::vector<double> values;
      for (uint16_t bits : UnpackBytes<uint16_t>(literal.f16s()))
        values.push_back(HalfBitsToValue(bits));
      s = fill(values);
      break;
    }
    default: break;
  }
  if (!s.ok()) return s.error();
  return v;
}

// ---------------------------------------------------------------------------
// 3. Elementwise kernels
// ---------------------------------------------------------------------------

// out[io] = op(a[ia], b[ib]): computes one element of a binary op.
using BinaryKernel = std::function<void(const Value& a, int64_t ia, const Value& b, int64_t ib,
                                        Value& out, int64_t io)>;
// out[io] = op(a[ia]).
using UnaryKernel = std::function<void(const Value& a, int64_t ia, Value& out, int64_t io)>;

// Floating-point binary ops in the arithmetic type F (float for f32 and bf16,
// double for f64); nullptr when `op` is not one of them.
template <class F>
std::function<F(F, F)> FloatBinaryFn(const std::string& op) {
  if (op == "add") return [](F a, F b) { return a + b; };
  if (op == "subtract") return [](F a, F b) { return a - b; };
  if (op == "multiply") return [](F a, F b) { return a * b; };
  if (op == "divide") return [](F a, F b) { return a / b; };
  if (op == "remainder") return [](F a, F b) { return std::fmod(a, b); };
  if (op == "power") return [](F a, F b) { return std::pow(a, b); };
  if (op == "atan2") return [](F a, F b) { return std::atan2(a, b); };
  if (op == "maximum") {
    return [](F a, F b) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a < b ? b : a;
    };
  }
  if (op == "minimum") {
    return [](F a, F b) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return b < a ? b : a;
    };
  }
  return nullptr;
}

// Integer binary ops in the C++ type T of the element type. Wrapping
// arithmetic is done in uint64_t and truncated to T (the same result modulo
// 2^bits, without C++'s signed-overflow undefined behaviour).
template <class T>
std::function<T(T, T)> IntegerBinaryFn(const std::string& op) {
  using U = std::make_unsigned_t<T>;
  constexpr uint64_t kBits = sizeof(T) * 8;
  auto wide = [](T x) { return static_cast<uint64_t>(static_cast<U>(x)); };
  if (op == "add") return [wide](T a, T b) { return static_cast<T>(wide(a) + wide(b)); };
  if (op == "subtract") return [wide](T a, T b) { return static_cast<T>(wide(a) - wide(b)); };
  if (op == "multiply") return [wide](T a, T b) { return static_cast<T>(wide(a) * wide(b)); };
  if (op == "divide") {
    return [](T a, T b) -> T {
      if (b == 0) return static_cast<T>(-1);  // all bits set: -1, or the unsigned maximum
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == -1) return a;
      }
      return static_cast<T>(a / b);
    };
  }
  if (op == "remainder") {
    return [](T a, T b) -> T {
      if (b == 0) return a;
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == -1) return 0;
      }
      return static_cast<T>(a % b);
    };
  }
  if (op == "maximum") return [](T a, T b) { return std::max(a, b); };
  if (op == "minimum") return [](T a, T b) { return std::min(a, b); };
  if (op == "and") return [](T a, T b) { return static_cast<T>(a & b); };
  if (op == "or") return [](T a, T b) { return static_cast<T>(a | b); };
  if (op == "xor") return [](T a, T b) { return static_cast<T>(a ^ b); };
  if (op == "power") {
    // XLA: 1^x = 1 and x^0 = 1; a negative exponent gives 0 (for base != 1);
    // otherwise exponentiation by squaring, wrapping.
    return [wide](T a, T b) -> T {
      if (a == 1 || b == 0) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) return 0;
      }
      uint64_t result = 1;
      uint64_t base = wide(a);
      uint64_t exponent = wide(b);
      while (exponent != 0) {
        if (exponent & 1) result *= base;
        base *= base;
        exponent >>= 1;
      }
      return static_cast<T>(result);
    };
  }
  if (op == "shift-left") {
    return [wide](T a, T b) -> T {
      if (wide(b) >= kBits) return 0;
      return static_cast<T>(wide(a) << wide(b));
    };
  }
  if (op == "shift-right-logical") {
    return [wide](T a, T b) -> T {
      if (wide(b) >= kBits) return 0;
      return static_cast<T>(wide(a) >> wide(b));
    };
  }
  if (op == "shift-right-arithmetic") {
    return [wide](T a, T b) -> T {
      using S = std::make_signed_t<T>;
      const S signed_a = static_cast<S>(a);
      if (wide(b) >= kBits) return static_cast<T>(signed_a < 0 ? -1 : 0);
      return static_cast<T>(signed_a >> wide(b));
    };
  }
  return nullptr;
}

// pred ops; add and multiply are XLA's bool arithmetic (or, and).
std::function<bool(bool, bool)> PredBinaryFn(const std::string& op) {
  if (op == "and" || op == "minimum" || op == "multiply")
    return [](bool a, bool b) { return a && b; };
  if (op == "or" || op == "maximum" || op == "add") return [](bool a, bool b) { return a || b; };
  if (op == "xor") return [](bool a, bool b) { return a != b; };
  return nullptr;
}

Result<BinaryKernel> MakeBinaryKernel(const std::string& op, PrimitiveType type) {
  const Error unsupported =
      MakeError("unsupported element type " + TypeName(type) + " for '" + op + "'");
  if (ComputesInFloat(type)) {
    auto fn = FloatBinaryFn<float>(op);
    if (!fn) return unsupported;
    return BinaryKernel([fn, type](const Value& a, int64_t ia, const Value& b, int64_t ib,
                                   Value& out, int64_t io) {
      out.floats[io] =
          RoundToType(type, fn(static_cast<float>(a.floats[ia]), static_cast<float>(b.floats[ib])));
    });
  }
  if (type == xla::F64) {
    auto fn = FloatBinaryFn<double>(op);
    if (!fn) return unsupported;
    return BinaryKernel([fn](const Value& a, int64_t ia, const Value& b, int64_t ib, Value& out,
                             int64_t io) { out.floats[io] = fn(a.floats[ia], b.floats[ib]); });
  }
  if (type == xla::PRED) {
    auto fn = PredBinaryFn(op);
    if (!fn) return unsupported;
    return BinaryKernel([fn](const Value& a, int64_t ia, const Value& b, int64_t ib, Value& out,
                             int64_t io) { out.ints[io] = fn(a.ints[ia] != 0, b.ints[ib] != 0); });
  }
  if (IsInteger(type)) {
    return WithIntegerType(type, [&](auto tag) -> Result<BinaryKernel> {
      using T = decltype(tag);
      auto fn = IntegerBinaryFn<T>(op);
      if (!fn) return unsupported;
      return BinaryKernel(
          [fn](const Value& a, int64_t ia, const Value& b, int64_t ib, Value& out, int64_t io) {
            out.ints[io] =
                static_cast<int64_t>(fn(static_cast<T>(a.ints[ia]), static_cast<T>(b.ints[ib])));
          });
    });
  }
  return unsupported;
}

const std::set<std::string>& BinaryOpcodes() {
  static const std::set<std::string> kOps = {"add",
                                             "subtract",
                                             "multiply",
                                             "divide",
                                             "remainder",
                                             "maximum",
                                             "minimum",
                                             "power",
                                             "atan2",
                                             "and",
                                             "or",
                                             "xor",
                                             "shift-left",
                                             "shift-right-logical",
                                             "shift-right-arithmetic"};
  return kOps;
}

template <class F>
std::function<F(F)> FloatUnaryFn(const std::string& op) {
  if (op == "negate") return [](F a) { return -a; };
  if (op == "abs") return [](F a) { return std::fabs(a); };
  if (op == "sign") {
    return [](F a) -> F {
      if (std::isnan(a)) return a;
      if (a > 0) return 1;
      if (a < 0) return -1;
      return a;  // +0 or -0
    };
  }
  if (op == "floor") return [](F a) { return std::floor(a); };
  if (op == "ceil") return [](F a) { return std::ceil(a); };
  if (op == "round-nearest-afz") return [](F a) { return std::round(a); };
  if (op == "round-nearest-even") return [](F a) { return std::nearbyint(a); };
  if (op == "exponential") return [](F a) { return std::exp(a); };
  if (op == "exponential-minus-one") return [](F a) { return std::expm1(a); };
  if (op == "log") return [](F a) { return std::log(a); };
  if (op == "log-plus-one") return [](F a) { return std::log1p(a); };
  if (op == "logistic") return [](F a) { return F(1) / (F(1) + std::exp(-a)); };
  if (op == "tanh") return [](F a) { return std::tanh(a); };
  if (op == "sqrt") return [](F a) { return std::sqrt(a); };
  if (op == "rsqrt") return [](F a) { return F(1) / std::sqrt(a); };
  if (op == "cbrt") return [](F a) { return std::cbrt(a); };
  if (op == "sine") return [](F a) { return std::sin(a); };
  if (op == "cosine") return [](F a) { return std::cos(a); };
  if (op == "tan") return [](F a) { return std::tan(a); };
  if (op == "erf") return [](F a) { return std::erf(a); };
  if (op == "copy") return [](F a) { return a; };
  return nullptr;
}

template <class T>
std::function<T(T)> IntegerUnaryFn(const std::string& op) {
  using U = std::make_unsigned_t<T>;
  constexpr int kBits = sizeof(T) * 8;
  auto wide = [](T x) { return static_cast<uint64_t>(static_cast<U>(x)); };
  if (op == "negate") return [wide](T a) { return static_cast<T>(uint64_t{0} - wide(a)); };
  if (op == "abs") {
    return [wide](T a) -> T {
      if constexpr (std::is_signed_v<T>) {
        if (a < 0) return static_cast<T>(uint64_t{0} - wide(a));
      }
      return a;
    };
  }
  if (op == "sign") return [](T a) { return static_cast<T>((T(0) < a) - (a < T(0))); };
  if (op == "not") return [wide](T a) { return static_cast<T>(~wide(a)); };
  if (op == "popcnt") return [wide](T a) { return static_cast<T>(std::popcount(wide(a))); };
  if (op == "count-leading-zeros") {
    return [wide](T a) { return static_cast<T>(std::countl_zero(wide(a)) - (64 - kBits)); };
  }
  if (op == "copy") return [](T a) { return a; };
  return nullptr;
}

const std::set<std::string>& UnaryOpcodes() {
  static const std::set<std::string> kOps = {"negate",
                                             "abs",
                                             "sign",
                                             "not",
                                             "floor",
                                             "ceil",
                                             "round-nearest-afz",
                                             "round-nearest-even",
                                             "exponential",
                                             "exponential-minus-one",
                                             "log",
                                             "log-plus-one",
                                             "logistic",
                                             "tanh",
                                             "sqrt",
                                             "rsqrt",
                                             "cbrt",
                                             "sine",
                                             "cosine",
                                             "tan",
                                             "erf",
                                             "popcnt",
                                             "count-leading-zeros",
                                             "copy"};
  return kOps;
}

Result<UnaryKernel> MakeUnaryKernel(const std::string& op, PrimitiveType type) {
  const Error unsupported =
      MakeError("unsupported element type " + TypeName(type) + " for '" + op + "'");
  if (ComputesInFloat(type)) {
    auto fn = FloatUnaryFn<float>(op);
    if (!fn) return unsupported;
    return UnaryKernel([fn, type](const Value& a, int64_t ia, Value& out, int64_t io) {
      out.floats[io] = RoundToType(type, fn(static_cast<float>(a.floats[ia])));
    });
  }
  if (type == xla::F64) {
    auto fn = FloatUnaryFn<double>(op);
    if (!fn) return unsupported;
    return UnaryKernel([fn](const Value& a, int64_t ia, Value& out, int64_t io) {
      out.floats[io] = fn(a.floats[ia]);
    });
  }
  if (type == xla::PRED) {
    if (op != "not" && op != "copy") return unsupported;
    const bool invert = op == "not";
    return UnaryKernel([invert](const Value& a, int64_t ia, Value& out, int64_t io) {
      out.ints[io] = invert ? a.ints[ia] == 0 : a.ints[ia] != 0;
    });
  }
  if (IsInteger(type)) {
    return WithIntegerType(type, [&](auto tag) -> Result<UnaryKernel> {
      using T = decltype(tag);
      auto fn = IntegerUnaryFn<T>(op);
      if (!fn) return unsupported;
      return UnaryKernel([fn](const Value& a, int64_t ia, Value& out, int64_t io) {
        out.ints[io] = static_cast<int64_t>(fn(static_cast<T>(a.ints[ia])));
      });
    });
  }
  return unsupported;
}

template <class T>
bool CompareValues(const std::string& direction, T a, T b) {
  if (direction == "EQ") return a == b;
  if (direction == "NE") return a != b;
  if (direction == "LT") return a < b;
  if (direction == "LE") return a <= b;
  if (direction == "GT") return a > b;
  return a >= b;  // GE (checked by the caller)
}

// A key whose signed integer order is IEEE 754 totalOrder:
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
int64_t TotalOrderKey(PrimitiveType type, double v) {
  if (type == xla::F64) {
    const int64_t bits = std::bit_cast<int64_t>(v);
    return bits < 0 ? bits ^ std::numeric_limits<int64_t>::max() : bits;
  }
  const int32_t bits = std::bit_cast<int32_t>(static_cast<float>(v));
  return bits < 0 ? bits ^ std::numeric_limits<int32_t>::max() : bits;
}

// One element converted from the type of `in` to `to` (XLA's convert).
void ConvertElement(const Value& in, int64_t i, PrimitiveType to, Value& out, int64_t o) {
  const PrimitiveType from = in.type;
  if (IsFloat(from)) {
    const double v = in.floats[i];
    if (IsFloat(to)) {
      out.floats[o] = RoundToType(to, v);
    } else if (to == xla::PRED) {
      out.ints[o] = v != 0;
    } else {
      // Toward zero; NaN gives 0; out of range saturates.
      out.ints[o] = WithIntegerType(to, [&](auto tag) -> int64_t {
        using T = decltype(tag);
        if (std::isnan(v)) return 0;
        const double t = std::trunc(v);
        if (t <= static_cast<double>(std::numeric_limits<T>::min())) {
          return static_cast<int64_t>(std::numeric_limits<T>::min());
        }
        if (t >= static_cast<double>(std::numeric_limits<T>::max())) {
          return static_cast<int64_t>(std::numeric_limits<T>::max());
        }
        return static_cast<int64_t>(static_cast<T>(t));
      });
    }
    return;
  }
  // From pred or an integer type: the value in its own C++ type.
  if (IsFloat(to)) {
    double converted;
    if (from == xla::PRED) {
      converted = in.ints[i] != 0 ? 1.0 : 0.0;
    } else {
      converted = WithIntegerType(from, [&](auto tag) -> double {
        using T = decltype(tag);
        const T x = static_cast<T>(in.ints[i]);
        // f32/bf16 convert through float (one rounding for f32, as C++ does).
        return to == xla::F64 ? static_cast<double>(x) : static_cast<double>(static_cast<float>(x));
      });
    }
    out.floats[o] = RoundToType(to, converted);
  } else {
    out.ints[o] = WrapToType(to, in.ints[i]);
  }
}

using Operands = std::vector<const Value*>;

// ---- rng-bit-generator: XLA's Philox bit generator ----
//
// The counter is a 128-bit number; block j of the output stream is
// Philox4x32-10(counter + j, key), four 32-bit words, least significant word
// of the counter first. The stream's words are used in order: one per element
// of 32 bits or less (its low bits), two per 64-bit element (low word first).

using Uint128 = unsigned __int128;

// One Philox4x32-10 block: 10 rounds, the key bumped by the Weyl constants
// after each.
std::array<uint32_t, 4> PhiloxBlock(Uint128 counter, uint64_t key) {
  uint32_t c[4];
  for (int i = 0; i < 4; ++i) c[i] = static_cast<uint32_t>(counter >> (32 * i));
  uint32_t k[2] = {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)};
  for (int round = 0; round < 10; ++round) {
    const uint64_t lo_product = uint64_t{0xD2511F53} * c[0];
    const uint64_t hi_product = uint64_t{0xCD9E8D57} * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(hi_product >> 32) ^ c[1] ^ k[0],
                              static_cast<uint32_t>(hi_product),
                              static_cast<uint32_t>(lo_product >> 32) ^ c[3] ^ k[1],
                              static_cast<uint32_t>(lo_product)};
    std::copy(next, next + 4, c);
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return {c[0], c[1], c[2], c[3]};
}

Result<Value> RngBitGenerator(const HloInstructionProto& inst, const Value& state) {
  if (inst.rng_algorithm() != xla::RNG_DEFAULT && inst.rng_algorithm() != xla::RNG_PHILOX) {
    return MakeError("rng-bit-generator algorithm " + xla::RandomAlgorithm_Name(inst.rng_algorithm()) +
                     " is not supported (Philox only)");
  }
  if (state.is_tuple() || state.type != xla::U64 || state.dims.size() != 1 ||
      (state.dims[0] != 2 && state.dims[0] != 3)) {
    return MakeError("rng-bit-generator state " + Describe(state) + " is not u64[2] or u64[3]");
  }
  const ShapeProto& shape = inst.shape();
  if (shape.element_type() != xla::TUPLE || shape.tuple_shapes_size() != 2 ||
      !IsInteger(shape.tuple_shapes(1).element_type())) {
    return MakeError("rng-bit-generator result " + hlo::ShapeToString(shape) + " is not (state, integer bits)");
  }
  const uint64_t key = static_cast<uint64_t>(state.ints[0]);
  // XLA's expander: a u64[3] state holds {key, counter low, counter high}; a
  // u64[2] state is reversed into the counter, so its high word is the key.
  const uint64_t low = static_cast<uint64_t>(state.ints[1]);
  const uint64_t high = state.dims[0] == 3 ? static_cast<uint64_t>(state.ints[2]) : key;
  const Uint128 counter = (static_cast<Uint128>(high) << 64) | low;

  const PrimitiveType type = shape.tuple_shapes(1).element_type();
  Value bits = MakeArray(type, DimsOf(shape.tuple_shapes(1)));
  const bool wide = ElementSize(type) == 8;
  const int64_t words = bits.count() * (wide ? 2 : 1);
  const int64_t blocks = (words + 3) / 4;
  std::vector<uint32_t> stream;
  stream.reserve(blocks * 4);
  for (int64_t j = 0; j < blocks; ++j) {
    for (uint32_t word : PhiloxBlock(counter + static_cast<Uint128>(j), key)) stream.push_back(word);
  }
  for (int64_t e = 0; e < bits.count(); ++e) {
    if (wide) {
      bits.ints[e] = static_cast<int64_t>(uint64_t{stream[2 * e]} | (uint64_t{stream[2 * e + 1]} << 32));
    } else {
      bits.ints[e] = WrapToType(type, stream[e]);
    }
  }
  const Uint128 next = counter + static_cast<Uint128>(blocks);
  Value new_state = MakeArray(xla::U64, state.dims);
  new_state.ints[0] = static_cast<int64_t>(key);
  new_state.ints[1] = static_cast<int64_t>(static_cast<uint64_t>(next));
  if (state.dims[0] == 3) new_state.ints[2] = static_cast<int64_t>(static_cast<uint64_t>(next >> 64));
  return MakeTuple({std::move(new_state), std::move(bits)});
}

// ---- Neuron custom-calls ----

// Computes `fn` in float (f32, bf16, f16) or double (f64) and rounds to the
// result type.
template <class Fn>
double InComputeType(PrimitiveType t, double x, Fn&& fn) {
  if (t == xla::F64) return fn(x);
  return RoundToType(t, fn(static_cast<float>(x)));
}

// GELU x * Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2, and its derivative
// Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi).
Result<Value> NeuronGelu(const HloInstructionProto& inst, const Value& x, bool derivative) {
  if (!IsFloat(x.type)) return MakeError(inst.custom_call_target() + " of " + Describe(x));
  Value out = MakeArray(x.type, x.dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    out.floats[i] = InComputeType(x.type, x.floats[i], [derivative](auto v) {
      using F = decltype(v);
      const F phi_cdf = F(0.5) * (F(1) + std::erf(v / std::sqrt(F(2))));
      if (!derivative) return v * phi_cdf;
      const F density = std::exp(-v * v / F(2)) / std::sqrt(F(2) * F(3.14159265358979323846));
      return phi_cdf + v * density;
    });
  }
  return out;
}

// Softmax along the dimension named by backend_config (a decimal number):
// forward exp(x - max) / sum exp(x - max); backward (y, dy) y * (dy - sum(dy * y)).
// Computed in float (double for f64) along the dimension in index order, rounded once.
Result<Value> NeuronSoftmax(const HloInstructionProto& inst, const Operands& ops, bool backward) {
  const std::string& cfg = inst.backend_config();
  const Value& first = *ops[0];
  if (!IsFloat(first.type)) return MakeError(inst.custom_call_target() + " of " + Describe(first));
  for (const Value* v : ops) {
    if (v->type != first.type || v->dims != first.dims) return MakeError("softmax operands differ in shape");
  }
  if (cfg.empty() || cfg.size() > 9 || !std::all_of(cfg.begin(), cfg.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoll(cfg) >= static_cast<int64_t>(first.dims.size())) {
    return MakeError(inst.custom_call_target() + " backend_config '" + cfg + "' is not a dimension of " +
                     Describe(first));
  }
  const size_t axis = static_cast<size_t>(std::stoll(cfg));
  Value out = MakeArray(first.type, first.dims);
  std::vector<int64_t> rows = first.dims;
  rows[axis] = 1;
  auto run = [&](auto zero) {
    using F = decltype(zero);
    ForEachIndex(rows, [&](const std::vector<int64_t>& start) {
      std::vector<int64_t> index = start;
      auto at = [&](const Value& v, int64_t k) {
        index[axis] = k;
        return static_cast<F>(v.floats[Linear(v.dims, index)]);
      };
      const int64_t n = first.dims[axis];
      if (!backward) {
        F m = -std::numeric_limits<F>::infinity();
        for (int64_t k = 0; k < n; ++k) {
          const F x = at(first, k);
          if (std::isnan(x) || x > m) m = std::isnan(m) ? m : x;
        }
        F sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += std::exp(at(first, k) - m);
        for (int64_t k = 0; k < n; ++k) {
          const F y = std::exp(at(first, k) - m) / sum;
          out.floats[Linear(out.dims, index)] = RoundToType(first.type, y);
        }
      } else {
        const Value& y = *ops[0];
        const Value& dy = *ops[1];
        F sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += at(dy, k) * at(y, k);
        for (int64_t k = 0; k < n; ++k) {
          const F dx = at(y, k) * (at(dy, k) - sum);
          out.floats[Linear(out.dims, index)] = RoundToType(first.type, dx);
        }
      }
    });
  };
  if (first.type == xla::F64) {
    run(0.0);
  } else {
    run(0.0f);
  }
  return out;
}

// ---- batch normalization (XLA's operation semantics) ----
//
// Per feature l of dimension feature_index, over the m elements with that
// feature index in row-major order; float (double for f64) arithmetic, each
// result rounded once. training: mean = sum(x)/m, var = sum((x-mean)^2)/m,
// y = scale*(x-mean)/sqrt(var+eps) + offset; inference: the same with the given
// mean and var; grad: d = sum(gy)/m, c = sum(gy*(x-mean))/(var+eps)/m,
// gx = scale/sqrt(var+eps) * (gy - d - c*(x-mean)),
// gscale = sum(gy*(x-mean))/sqrt(var+eps), goffset = sum(gy).
Result<Value> BatchNorm(const HloInstructionProto& inst, const Operands& ops) {
  const std::string& op = inst.opcode();
  const Value& x = *ops[0];
  if (!IsFloat(x.type)) return MakeError(op + " of " + Describe(x));
  const int64_t fd = inst.feature_index();
  if (fd < 0 || fd >= static_cast<int64_t>(x.dims.size())) {
    return MakeError(op + " feature_index " + std::to_string(fd) + " out of range for " + Describe(x));
  }
  const int64_t features = x.dims[fd];
  for (size_t i = 1; i < ops.size(); ++i) {
    const bool like_x = op == "batch-norm-grad" && i == 4;
    if (ops[i]->type != x.type || ops[i]->dims != (like_x ? x.dims : std::vector<int64_t>{features})) {
      return MakeError(op + " operand " + std::to_string(i) + " " + Describe(*ops[i]) + " does not fit " +
                       Describe(x));
    }
  }
  Value y = MakeArray(x.type, x.dims);
  Value second = MakeArray(x.type, {features});
  Value third = MakeArray(x.type, {features});
  auto run = [&](auto zero) {
    using F = decltype(zero);
    const F m = static_cast<F>(x.count() / std::max<int64_t>(features, 1));
    const F eps = static_cast<F>(inst.epsilon());
    std::vector<int64_t> others = x.dims;
    others[fd] = 1;
    for (int64_t l = 0; l < features; ++l) {
      // Row-major positions of feature l.
      std::vector<int64_t> positions;
      ForEachIndex(others, [&](const std::vector<int64_t>& index) {
        std::vector<int64_t> full = index;
        full[fd] = l;
        positions.push_back(Linear(x.dims, full));
      });
      auto xv = [&](int64_t p) { return static_cast<F>(x.floats[p]); };
      auto vec = [&](size_t i) { return static_cast<F>(ops[i]->floats[l]); };
      if (op == "batch-norm-grad") {
        const Value& gy = *ops[4];
        const F mean = vec(2), var = vec(3);
        F sum_gy = 0, sum_gyx = 0;
        for (int64_t p : positions) {
          sum_gy += static_cast<F>(gy.floats[p]);
          sum_gyx += static_cast<F>(gy.floats[p]) * (xv(p) - mean);
        }
        const F d = sum_gy / m;
        const F c = sum_gyx / (var + eps) / m;
        const F k = vec(1) / std::sqrt(var + eps);
        for (int64_t p : positions) {
          y.floats[p] = RoundToType(x.type, k * (static_cast<F>(gy.floats[p]) - d - c * (xv(p) - mean)));
        }
        second.floats[l] = RoundToType(x.type, sum_gyx / std::sqrt(var + eps));
        third.floats[l] = RoundToType(x.type, sum_gy);
        continue;
      }
      F mean, var;
      if (op == "batch-norm-training") {
        F sum = 0;
        for (int64_t p : positions) sum += xv(p);
        mean = sum / m;
        F sq = 0;
        for (int64_t p : positions) sq += (xv(p) - mean) * (xv(p) - mean);
        var = sq / m;
        second.floats[l] = RoundToType(x.type, mean);
        third.floats[l] = RoundToType(x.type, var);
      } else {
        mean = vec(3);
        var = vec(4);
      }
      for (int64_t p : positions) {
        y.floats[p] = RoundToType(x.type, vec(1) * (xv(p) - mean) / std::sqrt(var + eps) + vec(2));
      }
    }
  };
  if (x.type == xla::F64) {
    run(0.0);
  } else {
    run(0.0f);
  }
  if (op == "batch-norm-inference") return y;
  return MakeTuple({std::move(y), std::move(second), std::move(third)});
}

// ---------------------------------------------------------------------------
// 4. The evaluator
// ---------------------------------------------------------------------------


constexpr int64_t kMaxWhileIterations = 10'000'000;
constexpr int kMaxCallDepth = 200;

class Evaluator {
 public:
  explicit Evaluator(const xla::HloModuleProto& module) {
    for (const auto& c : module.computations()) computations_[c.id()] = &c;
  }

  // Evaluates computation `c` with `args` as its parameters.
  // Each parameter's value is moved out of `args` (a computation has one
  // parameter instruction per number).
  Result<Value> Run(const HloComputationProto& c, std::vector<Value> args);

 private:
  // The instructions of a computation reachable from its root, operands
  // before users, and how many times each is used as an operand.
  struct Plan {
    std::vector<const HloInstructionProto*> order;
    std::map<int64_t, int> uses;
  };

  Result<const Plan*> GetPlan(const HloComputationProto& c);
  Result<const HloComputationProto*> Callee(const HloInstructionProto& inst, int index) const;
  Result<Value> Evaluate(const HloInstructionProto& inst, const Operands& ops,
                         std::vector<Value>& args);

  // Op groups.
  Result<Value> Unary(const HloInstructionProto& inst, const Value& a);
  Result<Value> Binary(const HloInstructionProto& inst, const Value& a, const Value& b);
  Result<Value> Compare(const HloInstructionProto& inst, const Value& a, const Value& b);
  Result<Value> Select(const Value& pred, const Value& on_true, const Value& on_false);
  Result<Value> Clamp(const Value& lo, const Value& x, const Value& hi);
  Result<Value> Convert(const Value& a, PrimitiveType to);
  Result<Value> BitcastConvert(const Value& a, PrimitiveType to);
  Result<Value> Iota(const HloInstructionProto& inst);
  Result<Value> Broadcast(const HloInstructionProto& inst, const Value& a);
  Result<Value> Reshape(const HloInstructionProto& inst, const Value& a);
  Result<Value> Transpose(const HloInstructionProto& inst, const Value& a);
  Result<Value> Reverse(const HloInstructionProto& inst, const Value& a);
  Result<Value> Slice(const HloInstructionProto& inst, const Value& a);
  Result<Value> Concatenate(const HloInstructionProto& inst, const Operands& ops);
  Result<Value> Pad(const HloInstructionProto& inst, const Value& a, const Value& pad_value);
  Result<Value> DynamicSlice(const HloInstructionProto& inst, const Operands& ops);
  Result<Value> DynamicUpdateSlice(const Operands& ops);
  Result<Value> Gather(const HloInstructionProto& inst, const Value& operand, const Value& indices);
  Result<Value> Scatter(const HloInstructionProto& inst, const Operands& ops);
  Result<Value> Dot(const HloInstructionProto& inst, const Value& lhs, const Value& rhs);
  Result<Value> Reduce(const HloInstructionProto& inst, const Operands& ops);
  Result<Value> Map(const HloInstructionProto& inst, const Operands& ops);
  Result<Value> While(const HloInstructionProto& inst, const Value& init);
  Result<Value> Conditional(const HloInstructionProto& inst, const Operands& ops);

  // Applies the scalar computation `c` to (accumulators..., elements...) and
  // returns the new accumulators (reduce, scatter): `c` returns one scalar, or
  // a tuple of them.
  Result<std::vector<Value>> Combine(const HloComputationProto& c, std::vector<Value> args,
                                     size_t results);

  // When `c` is `root = <binary op>(p0, p1)` (or `(p1, p0)`) on scalars of
  // `type`, the kernel that computes it directly: kernel(acc, elem). Used by
  // reduce and scatter to skip a full computation call per element; it gives
  // the same results as calling `c`.
  std::optional<BinaryKernel> DirectBinaryCombiner(const HloComputationProto& c,
                                                   PrimitiveType type) const;

  std::map<int64_t, const HloComputationProto*> computations_;
  std::map<int64_t, Plan> plans_;
  int depth_ = 0;
};

// Adds the instruction and computation to an error message, once (the
// innermost instruction of a nested computation names itself).
Error InContext(const Error& e, const HloInstructionProto& inst, const HloComputationProto& c) {
  if (e.message.find(" (instruction %") != std::string::npos) return e;
  return MakeError("hlo evaluator: " + e.message + " (instruction %" + inst.name() +
                   " in computation " + c.name() + ")");
}

Result<const Evaluator::Plan*> Evaluator::GetPlan(const HloComputationProto& c) {
  auto found = plans_.find(c.id());
  if (found != plans_.end()) return &found->second;

  std::map<int64_t, const HloInstructionProto*> by_id;
  for (const auto& inst : c.instructions()) by_id[inst.id()] = &inst;
  if (!by_id.count(c.root_id())) {
    return MakeError("hlo evaluator: computation " + c.name() + " has no root instruction");
  }
  // Depth-first post order from the root, with an explicit stack.
  Plan plan;
  std::set<int64_t> done;
  std::set<int64_t> on_stack = {c.root_id()};
  std::vector<std::pair<int64_t, int>> stack = {{c.root_id(), 0}};
  while (!stack.empty()) {
    const int64_t id = stack.back().first;
    const int next = stack.back().second;
    const HloInstructionProto* inst = by_id.at(id);
    if (next < inst->operand_ids_size()) {
      ++stack.back().second;
      const int64_t operand = inst->operand_ids(next);
      if (!by_id.count(operand)) {
        return MakeError("hlo evaluator: operand id " + std::to_string(operand) +
                         " of instruction %" + inst->name() + " is not in computation " + c.name());
      }
      if (done.count(operand)) continue;
      if (on_stack.count(operand)) {
        return MakeError("hlo evaluator: computation " + c.name() + " has a cycle through %" +
                         inst->name());
      }
      on_stack.insert(operand);
      stack.push_back({operand, 0});
    } else {
      plan.order.push_back(inst);
      done.insert(id);
      on_stack.erase(id);
      stack.pop_back();
    }
  }
  for (const auto* inst : plan.order) {
    for (int64_t operand : inst->operand_ids()) ++plan.uses[operand];
  }
  return &plans_.emplace(c.id(), std::move(plan)).first->second;
}

Result<Value> Evaluator::Run(const HloComputationProto& c, std::vector<Value> args) {
  if (depth_ >= kMaxCallDepth) {
    return MakeError("hlo evaluator: computations nested more than " +
                     std::to_string(kMaxCallDepth) + " deep (in " + c.name() + ")");
  }
  auto plan = GetPlan(c);
  if (!plan.ok()) return plan.error();
  std::map<int64_t, Value> values;
  std::map<int64_t, int> remaining_uses = (*plan)->uses;
  for (const HloInstructionProto* inst : (*plan)->order) {
    Operands ops;
    for (int64_t id : inst->operand_ids()) ops.push_back(&values.at(id));
    ++depth_;
    Result<Value> result = Evaluate(*inst, ops, args);
    --depth_;
    if (!result.ok()) return InContext(result.error(), *inst, c);
    if (!Matches(*result, inst->shape())) {
      return InContext(
          MakeError("result " + Describe(*result) + " does not match the instruction's shape " +
                    hlo::ShapeToString(inst->shape())),
          *inst, c);
    }
    values[inst->id()] = std::move(*result);
    // Drop values no later instruction reads.
    for (int64_t id : inst->operand_ids()) {
      if (--remaining_uses[id] == 0 && id != c.root_id()) {
        Recycle(values.at(id));
        values.erase(id);
      }
    }
  }
  return std::move(values.at(c.root_id()));
}

Result<const HloComputationProto*> Evaluator::Callee(const HloInstructionProto& inst,
                                                     int index) const {
  if (index >= inst.called_computation_ids_size()) {
    return MakeError("'" + inst.opcode() + "' needs called computation " + std::to_string(index) +
                     ", it has " + std::to_string(inst.called_computation_ids_size()));
  }
  auto it = computations_.find(inst.called_computation_ids(index));
  if (it == computations_.end()) {
    return MakeError("called computation id " + std::to_string(inst.called_computation_ids(index)) +
                     " does not exist");
  }
  return it->second;
}

Status ExpectOperands(const HloInstructionProto& inst, const Operands& ops, size_t n) {
  if (ops.size() != n) {
    return MakeError("'" + inst.opcode() + "' needs " + std::to_string(n) + " operands, has " +
                     std::to_string(ops.size()));
  }
  for (const Value* v : ops) {
    if (v->is_tuple()) return MakeError("'" + inst.opcode() + "' of a tuple operand");
  }
  return {};
}

// An integer scalar (or element `pos`) read as an index.
Result<int64_t> IndexValue(const Value& v, int64_t pos = 0) {
  if (!IsInteger(v.type)) return MakeError("index of type " + TypeName(v.type));
  if (v.type == xla::U64 && v.ints[pos] < 0) return std::numeric_limits<int64_t>::max();
  return v.ints[pos];
}

Result<Value> Evaluator::Evaluate(const HloInstructionProto& inst, const Operands& ops,
                                  std::vector<Value>& args) {
  const std::string& op = inst.opcode();
  const PrimitiveType type = inst.shape().element_type();
  // `n` array operands.
  auto check = [&](size_t n) { return ExpectOperands(inst, ops, n); };

  if (op == "parameter") {
    const int64_t n = inst.parameter_number();
    if (n < 0 || n >= static_cast<int64_t>(args.size())) {
      return MakeError("parameter " + std::to_string(n) + " of " + std::to_string(args.size()));
    }
    return std::move(args[n]);
  }
  if (op == "constant") {
    if (inst.frontend_attributes().map().count(hlo::kElidedConstantAttribute)) {
      return MakeError("constant with elided values (printed as {...}): its values are unknown");
    }
    return ValueFromLiteral(inst.literal(), inst.shape());
  }
  if (UnaryOpcodes().count(op)) {
    if (Status s = check(1); !s.ok()) return s.error();
    return Unary(inst, *ops[0]);
  }
  if (op == "is-finite") {
    if (Status s = check(1); !s.ok()) return s.error();
    if (!IsFloat(ops[0]->type)) return MakeError("is-finite of " + Describe(*ops[0]));
    Value out = MakeArray(xla::PRED, ops[0]->dims);
    for (int64_t i = 0; i < out.count(); ++i) out.ints[i] = std::isfinite(ops[0]->floats[i]);
    return out;
  }
  if (BinaryOpcodes().count(op)) {
    if (Status s = check(2); !s.ok()) return s.error();
    return Binary(inst, *ops[0], *ops[1]);
  }
  if (op == "compare") {
    if (Status s = check(2); !s.ok()) return s.error();
    return Compare(inst, *ops[0], *ops[1]);
  }
  if (op == "select") {
    if (Status s = check(3); !s.ok()) return s.error();
    return Select(*ops[0], *ops[1], *ops[2]);
  }
  if (op == "clamp") {
    if (Status s = check(3); !s.ok()) return s.error();
    return Clamp(*ops[0], *ops[1], *ops[2]);
  }
  if (op == "convert") {
    if (Status s = check(1); !s.ok()) return s.error();
    return Convert(*ops[0], type);
  }
  if (op == "bitcast-convert") {
    if (Status s = check(1); !s.ok()) return s.error();
    return BitcastConvert(*ops[0], type);
  }
  if (op == "iota") return Iota(inst);
  if (op == "broadcast") {
    if (Status s = check(1); !s.ok()) return s.error();
    return Broadcast(inst, *ops[0]);
  }
  if (op == "reshape") {
    if (Status s = check(1); !s.ok()) return s.error();
    return Reshape(inst, *ops[0]);
  }
  if (op == "transpose") {
    if (Status s = check(1); !s.ok()) return s.error();
    return Transpose(inst, *ops[0]);
  }
  if (op == "reverse") {
    if (Status s = check(1); !s.ok()) return s.error();
    return Reverse(inst, *ops[0]);
  }
  if (op == "slice") {
    if (Status s = check(1); !s.ok()) return s.error();
    return Slice(inst, *ops[0]);
  }
  if (op == "concatenate") {
    if (ops.empty()) return MakeError("concatenate of no operands");
    if (Status s = check(ops.size()); !s.ok()) return s.error();
    return Concatenate(inst, ops);
  }
  if (op == "pad") {
    if (Status s = check(2); !s.ok()) return s.error();
    return Pad(inst, *ops[0], *ops[1]);
  }
  if (op == "dynamic-slice") {
    if (ops.size() < 2) return MakeError("dynamic-slice needs start indices");
    if (Status s = check(ops.size()); !s.ok()) return s.error();
    return DynamicSlice(inst, ops);
  }
  if (op == "dynamic-update-slice") {
    if (ops.size() < 3) return MakeError("dynamic-update-slice needs start indices");
    if (Status s = check(ops.size()); !s.ok()) return s.error();
    return DynamicUpdateSlice(ops);
  }
  if (op == "gather") {
    if (Status s = check(2); !s.ok()) return s.error();
    return Gather(inst, *ops[0], *ops[1]);
  }
  if (op == "scatter") {
    if (ops.size() < 3 || ops.size() % 2 == 0) {
      return MakeError("scatter needs N operands, indices and N updates");
    }
    if (Status s = check(ops.size()); !s.ok()) return s.error();
    return Scatter(inst, ops);
  }
  if (op == "dot") {
    if (Status s = check(2); !s.ok()) return s.error();
    return Dot(inst, *ops[0], *ops[1]);
  }
  if (op == "reduce") {
    if (ops.empty() || ops.size() % 2 != 0) return MakeError("reduce needs N inputs and N inits");
    if (Status s = check(ops.size()); !s.ok()) return s.error();
    return Reduce(inst, ops);
  }
  if (op == "map") {
    if (ops.empty()) return MakeError("map of no operands");
    if (Status s = check(ops.size()); !s.ok()) return s.error();
    return Map(inst, ops);
  }
  if (op == "tuple") {
    std::vector<Value> elements;
    for (const Value* v : ops) elements.push_back(*v);
    return MakeTuple(std::move(elements));
  }
  if (op == "get-tuple-element") {
    if (ops.size() != 1 || !ops[0]->is_tuple()) {
      return MakeError("get-tuple-element needs one tuple operand");
    }
    const int64_t i = inst.tuple_index();
    if (i < 0 || i >= static_cast<int64_t>(ops[0]->elements.size())) {
      return MakeError("tuple index " + std::to_string(i) + " out of range for " +
                       Describe(*ops[0]));
    }
    return ops[0]->elements[i];
  }
  if (op == "opt-barrier") {
    if (ops.size() != 1) return MakeError("opt-barrier needs one operand");
    return *ops[0];
  }
  if (op == "call" || op == "fusion") {
    auto callee = Callee(inst, 0);
    if (!callee.ok()) return callee.error();
    std::vector<Value> call_args;
    for (const Value* v : ops) call_args.push_back(*v);
    return Run(**callee, std::move(call_args));
  }
  if (op == "custom-call" && inst.custom_call_target() == "AwsNeuronTransferWithStaticRing") {
    // torch-neuronx's hint that a weight stays on the device: the identity.
    if (ops.size() != 1) return MakeError("AwsNeuronTransferWithStaticRing needs one operand");
    return *ops[0];
  }
  if (op == "all-reduce" || op == "all-gather" || op == "reduce-scatter") {
    // One replica: each operand unchanged (replica groups of one member, or none).
    for (const auto& group : inst.replica_groups()) {
      if (group.replica_ids_size() > 1) return MakeError(op + " with more than one participant");
    }
    if (ops.size() == 1 && inst.shape().element_type() != xla::TUPLE) return *ops[0];
    std::vector<Value> elements;
    for (const Value* v : ops) elements.push_back(*v);
    return MakeTuple(std::move(elements));
  }
  if (op == "custom-call" && (inst.custom_call_target() == "AwsNeuronGelu" ||
                              inst.custom_call_target() == "AwsNeuronGeluBackward")) {
    if (Status s = check(1); !s.ok()) return s.error();
    return NeuronGelu(inst, *ops[0], inst.custom_call_target() == "AwsNeuronGeluBackward");
  }
  if (op == "custom-call" && inst.custom_call_target() == "AwsNeuronSoftmax") {
    if (Status s = check(1); !s.ok()) return s.error();
    return NeuronSoftmax(inst, ops, false);
  }
  if (op == "custom-call" && inst.custom_call_target() == "AwsNeuronSoftmaxBackward") {
    if (Status s = check(2); !s.ok()) return s.error();
    return NeuronSoftmax(inst, ops, true);
  }
  if (op == "batch-norm-training" || op == "batch-norm-inference" || op == "batch-norm-grad") {
    if (Status s = check(op == "batch-norm-training" ? 3 : 5); !s.ok()) return s.error();
    return BatchNorm(inst, ops);
  }
  if (op == "rng-bit-generator") {
    if (Status s = check(1); !s.ok()) return s.error();
    return RngBitGenerator(inst, *ops[0]);
  }
  if (op == "custom-call") {
    return MakeError("unsupported opcode 'custom-call' (target '" + inst.custom_call_target() +
                     "')");
  }
  if (op == "while") {
    if (ops.size() != 1) return MakeError("while needs one operand");
    return While(inst, *ops[0]);
  }
  if (op == "conditional") {
    if (ops.empty()) return MakeError("conditional needs a predicate or branch index");
    return Conditional(inst, ops);
  }
  return MakeError("unsupported opcode '" + op + "'");
}

Result<Value> Evaluator::Unary(const HloInstructionProto& inst, const Value& a) {
  auto kernel = MakeUnaryKernel(inst.opcode(), a.type);
  if (!kernel.ok()) return kernel.error();
  Value out = MakeArray(a.type, a.dims);
  for (int64_t i = 0; i < out.count(); ++i) (*kernel)(a, i, out, i);
  return out;
}

Result<Value> Evaluator::Binary(const HloInstructionProto& inst, const Value& a, const Value& b) {
  if (a.type != b.type || a.dims != b.dims) {
    return MakeError("operands " + Describe(a) + " and " + Describe(b) + " differ");
  }
  auto kernel = MakeBinaryKernel(inst.opcode(), a.type);
  if (!kernel.ok()) return kernel.error();
  Value out = MakeArray(a.type, a.dims);
  for (int64_t i = 0; i < out.count(); ++i) (*kernel)(a, i, b, i, out, i);
  return out;
}

Result<Value> Evaluator::Compare(const HloInstructionProto& inst, const Value& a, const Value& b) {
  if (a.type != b.type || a.dims != b.dims) {
    return MakeError("compare of " + Describe(a) + " and " + Describe(b));
  }
  const std::string& dir = inst.comparison_direction();
  static const std::set<std::string> kDirections = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  if (!kDirections.count(dir)) return MakeError("comparison direction '" + dir + "'");
  const bool total_order = inst.comparison_type() == "TOTALORDER";
  Value out = MakeArray(xla::PRED, a.dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    bool r;
    if (IsFloat(a.type)) {
      r = total_order ? CompareValues(dir, TotalOrderKey(a.type, a.floats[i]),
                                      TotalOrderKey(a.type, b.floats[i]))
                      : CompareValues(dir, a.floats[i], b.floats[i]);
    } else if (a.type == xla::U64) {
      r = CompareValues(dir, static_cast<uint64_t>(a.ints[i]), static_cast<uint64_t>(b.ints[i]));
    } else {
      r = CompareValues(dir, a.ints[i], b.ints[i]);  // every other type fits in int64
    }
    out.ints[i] = r;
  }
  return out;
}

Result<Value> Evaluator::Select(const Value& pred, const Value& on_true, const Value& on_false) {
  if (pred.type != xla::PRED || on_true.type != on_false.type || on_true.dims != on_false.dims ||
      (!pred.dims.empty() && pred.dims != on_true.dims)) {
    return MakeError("select of " + Describe(pred) + ", " + Describe(on_true) + ", " +
                     Describe(on_false));
  }
  Value out = MakeArray(on_true.type, on_true.dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const bool p = pred.ints[pred.dims.empty() ? 0 : i] != 0;
    CopyElement(p ? on_true : on_false, i, out, i);
  }
  return out;
}

Result<Value> Evaluator::Clamp(const Value& lo, const Value& x, const Value& hi) {
  auto fits = [&](const Value& bound) {
    return bound.type == x.type && (bound.dims.empty() || bound.dims == x.dims);
  };
  if (!fits(lo) || !fits(hi) || x.type == xla::PRED) {
    return MakeError("clamp of " + Describe(lo) + ", " + Describe(x) + ", " + Describe(hi));
  }
  // clamp = minimum(maximum(x, lo), hi), with maximum/minimum's semantics.
  auto max_kernel = MakeBinaryKernel("maximum", x.type);
  auto min_kernel = MakeBinaryKernel("minimum", x.type);
  if (!max_kernel.ok()) return max_kernel.error();
  if (!min_kernel.ok()) return min_kernel.error();
  Value out = MakeArray(x.type, x.dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    (*max_kernel)(x, i, lo, lo.dims.empty() ? 0 : i, out, i);
    (*min_kernel)(out, i, hi, hi.dims.empty() ? 0 : i, out, i);
  }
  return out;
}

Result<Value> Evaluator::Convert(const Value& a, PrimitiveType to) {
  if (!IsSupportedType(to)) return MakeError("unsupported element type " + TypeName(to));
  Value out = MakeArray(to, a.dims);
  for (int64_t i = 0; i < out.count(); ++i) ConvertElement(a, i, to, out, i);
  return out;
}

Result<Value> Evaluator::BitcastConvert(const Value& a, PrimitiveType to) {
  if (!IsSupportedType(to)) return MakeError("unsupported element type " + TypeName(to));
  if (ElementSize(a.type) != ElementSize(to) || a.type == xla::PRED || to == xla::PRED) {
    return MakeError("bitcast-convert from " + TypeName(a.type) + " to " + TypeName(to) +
                     " (only between types of the same bit width)");
  }
  // The bytes of the value, read back as the new type.
  Tensor t = TensorFromValue(a);
  t.type = to;
  return ValueFromTensor(t);
}

Result<Value> Evaluator::Iota(const HloInstructionProto& inst) {
  const PrimitiveType type = inst.shape().element_type();
  if (!IsSupportedType(type)) return MakeError("unsupported element type " + TypeName(type));
  const std::vector<int64_t> dims = DimsOf(inst.shape());
  if (inst.dimensions_size() != 1 || inst.dimensions(0) < 0 ||
      inst.dimensions(0) >= static_cast<int64_t>(dims.size())) {
    return MakeError("iota needs one iota dimension within the shape's rank");
  }
  const int64_t d = inst.dimensions(0);
  Value out = MakeArray(type, dims);
  ForEachIndex(dims, [&](const std::vector<int64_t>& index) {
    const int64_t pos = Linear(dims, index);
    if (IsFloat(type)) {
      out.floats[pos] = RoundToType(type, static_cast<double>(index[d]));
    } else {
      out.ints[pos] = WrapToType(type, index[d]);
    }
  });
  return out;
}

Result<Value> Evaluator::Broadcast(const HloInstructionProto& inst, const Value& a) {
  const std::vector<int64_t> out_dims = DimsOf(inst.shape());
  const std::vector<int64_t> map = ToVector(inst.dimensions());
  if (map.size() != a.dims.size()) {
    return MakeError("broadcast of " + Describe(a) + " needs one dimension per operand dimension");
  }
  for (size_t j = 0; j < map.size(); ++j) {
    if (map[j] < 0 || map[j] >= static_cast<int64_t>(out_dims.size()) ||
        (a.dims[j] != out_dims[map[j]] && a.dims[j] != 1)) {
      return MakeError("broadcast of " + Describe(a) + " to " + DimsString(out_dims) +
                       " with dimensions " + DimsString(map));
    }
  }
  Value out = MakeArray(a.type, out_dims);
  std::vector<int64_t> in_index(a.dims.size());
  ForEachIndex(out_dims, [&](const std::vector<int64_t>& index) {
    for (size_t j = 0; j < map.size(); ++j) in_index[j] = a.dims[j] == 1 ? 0 : index[map[j]];
    CopyElement(a, Linear(a.dims, in_index), out, Linear(out_dims, index));
  });
  return out;
}

Result<Value> Evaluator::Reshape(const HloInstructionProto& inst, const Value& a) {
  const std::vector<int64_t> out_dims = DimsOf(inst.shape());
  if (Product(out_dims) != a.count()) {
    return MakeError("reshape of " + Describe(a) + " to " + DimsString(out_dims));
  }
  Value out = a;  // row-major order is unchanged
  out.dims = out_dims;
  return out;
}

Result<Value> Evaluator::Transpose(const HloInstructionProto& inst, const Value& a) {
  const std::vector<int64_t> perm = ToVector(inst.dimensions());
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = perm.size() == a.dims.size();
  for (size_t i = 0; is_permutation && i < sorted.size(); ++i) {
    is_permutation = sorted[i] == static_cast<int64_t>(i);
  }
  if (!is_permutation) {
    return MakeError("transpose of " + Describe(a) + " by " + DimsString(perm));
  }
  std::vector<int64_t> out_dims;
  for (int64_t p : perm) out_dims.push_back(a.dims[p]);
  Value out = MakeArray(a.type, out_dims);
  std::vector<int64_t> in_index(a.dims.size());
  ForEachIndex(out_dims, [&](const std::vector<int64_t>& index) {
    for (size_t i = 0; i < perm.size(); ++i) in_index[perm[i]] = index[i];
    CopyElement(a, Linear(a.dims, in_index), out, Linear(out_dims, index));
  });
  return out;
}

Result<Value> Evaluator::Reverse(const HloInstructionProto& inst, const Value& a) {
  const std::vector<int64_t> reversed = ToVector(inst.dimensions());
  for (int64_t d : reversed) {
    if (d < 0 || d >= static_cast<int64_t>(a.dims.size())) {
      return MakeError("reverse of " + Describe(a) + " in dimensions " + DimsString(reversed));
    }
  }
  Value out = MakeArray(a.type, a.dims);
  std::vector<int64_t> in_index;
  ForEachIndex(a.dims, [&](const std::vector<int64_t>& index) {
    in_index = index;
    for (int64_t d : reversed) in_index[d] = a.dims[d] - 1 - index[d];
    CopyElement(a, Linear(a.dims, in_index), out, Linear(a.dims, index));
  });
  return out;
}

Result<Value> Evaluator::Slice(const HloInstructionProto& inst, const Value& a) {
  const size_t rank = a.dims.size();
  if (inst.slice_dimensions_size() != static_cast<int>(rank)) {
    return MakeError("slice of " + Describe(a) + " needs start/limit/stride for each dimension");
  }
  std::vector<int64_t> start(rank), stride(rank), out_dims(rank);
  for (size_t d = 0; d < rank; ++d) {
    const auto& sd = inst.slice_dimensions(d);
    start[d] = sd.start();
    stride[d] = sd.stride() == 0 ? 1 : sd.stride();
    if (sd.start() < 0 || sd.limit() < sd.start() || sd.limit() > a.dims[d] || stride[d] < 0) {
      return MakeError("slice of " + Describe(a) + ": dimension " + std::to_string(d) +
                       " out of bounds");
    }
    out_dims[d] = (sd.limit() - sd.start() + stride[d] - 1) / stride[d];
  }
  Value out = MakeArray(a.type, out_dims);
  std::vector<int64_t> in_index(rank);
  ForEachIndex(out_dims, [&](const std::vector<int64_t>& index) {
    for (size_t d = 0; d < rank; ++d) in_index[d] = start[d] + index[d] * stride[d];
    CopyElement(a, Linear(a.dims, in_index), out, Linear(out_dims, index));
  });
  return out;
}

Result<Value> Evaluator::Concatenate(const HloInstructionProto& inst, const Operands& ops) {
  const Value& first = *ops[0];
  if (inst.dimensions_size() != 1 || inst.dimensions(0) < 0 ||
      inst.dimensions(0) >= static_cast<int64_t>(first.dims.size())) {
    return MakeError("concatenate needs one dimension within the operands' rank");
  }
  const int64_t dim = inst.dimensions(0);
  std::vector<int64_t> out_dims = first.dims;
  out_dims[dim] = 0;
  for (const Value* v : ops) {
    bool ok = v->type == first.type && v->dims.size() == first.dims.size();
    for (size_t d = 0; ok && d < first.dims.size(); ++d) {
      ok = static_cast<int64_t>(d) == dim || v->dims[d] == first.dims[d];
    }
    if (!ok) {
      return MakeError("concatenate of " + Describe(first) + " and " + Describe(*v) +
                       " in dimension " + std::to_string(dim));
    }
    out_dims[dim] += v->dims[dim];
  }
  Value out = MakeArray(first.type, out_dims);
  int64_t offset = 0;
  for (const Value* v : ops) {
    ForEachIndex(v->dims, [&](const std::vector<int64_t>& index) {
      std::vector<int64_t> out_index = index;
      out_index[dim] += offset;
      CopyElement(*v, Linear(v->dims, index), out, Linear(out_dims, out_index));
    });
    offset += v->dims[dim];
  }
  return out;
}

Result<Value> Evaluator::Pad(const HloInstructionProto& inst, const Value& a,
                             const Value& pad_value) {
  const size_t rank = a.dims.size();
  if (pad_value.type != a.type || !pad_value.dims.empty() ||
      inst.padding_config().dimensions_size() != static_cast<int>(rank)) {
    return MakeError("pad of " + Describe(a) + " with " + Describe(pad_value) +
                     " needs a scalar of the same type and a padding config per dimension");
  }
  std::vector<int64_t> low(rank), interior(rank), out_dims(rank);
  for (size_t d = 0; d < rank; ++d) {
    const auto& pd = inst.padding_config().dimensions(d);
    low[d] = pd.edge_padding_low();
    interior[d] = pd.interior_padding();
    if (interior[d] < 0) return MakeError("pad with negative interior padding");
    // Interior padding goes between elements, then edge padding (which may
    // be negative: it removes elements) on both sides.
    const int64_t dilated = a.dims[d] == 0 ? 0 : a.dims[d] + (a.dims[d] - 1) * interior[d];
    out_dims[d] = pd.edge_padding_low() + dilated + pd.edge_padding_high();
    if (out_dims[d] < 0) return MakeError("pad to a negative size");
  }
  Value out = MakeArray(a.type, out_dims);
  for (int64_t i = 0; i < out.count(); ++i) CopyElement(pad_value, 0, out, i);
  std::vector<int64_t> out_index(rank);
  ForEachIndex(a.dims, [&](const std::vector<int64_t>& index) {
    for (size_t d = 0; d < rank; ++d) {
      out_index[d] = low[d] + index[d] * (interior[d] + 1);
      if (out_index[d] < 0 || out_index[d] >= out_dims[d]) return;  // cut off by negative padding
    }
    CopyElement(a, Linear(a.dims, index), out, Linear(out_dims, out_index));
  });
  return out;
}

// Start indices of dynamic-slice / dynamic-update-slice: ops[first..] are
// one scalar per dimension, or (older HLO) one rank-1 array of them.
Result<std::vector<int64_t>> StartIndices(const Operands& ops, size_t first, size_t rank) {
  std::vector<int64_t> start;
  if (ops.size() == first + 1 && ops[first]->dims.size() == 1 &&
      ops[first]->dims[0] == static_cast<int64_t>(rank)) {
    for (size_t d = 0; d < rank; ++d) {
      auto v = IndexValue(*ops[first], d);
      if (!v.ok()) return v.error();
      start.push_back(*v);
    }
    return start;
  }
  if (ops.size() != first + rank) {
    return MakeError("needs " + std::to_string(rank) + " start indices, has " +
                     std::to_string(ops.size() - first));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (!ops[first + d]->dims.empty()) return MakeError("start index is not a scalar");
    auto v = IndexValue(*ops[first + d]);
    if (!v.ok()) return v.error();
    start.push_back(*v);
  }
  return start;
}

Result<Value> Evaluator::DynamicSlice(const HloInstructionProto& inst, const Operands& ops) {
  const Value& a = *ops[0];
  const size_t rank = a.dims.size();
  auto start = StartIndices(ops, 1, rank);
  if (!start.ok()) return start.error();
  const std::vector<int64_t> sizes = ToVector(inst.dynamic_slice_sizes());
  if (sizes.size() != rank) return MakeError("dynamic-slice needs a slice size per dimension");
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0 || sizes[d] > a.dims[d]) {
      return MakeError("dynamic-slice size " + DimsString(sizes) + " exceeds " + Describe(a));
    }
    (*start)[d] = std::clamp<int64_t>((*start)[d], 0, a.dims[d] - sizes[d]);
  }
  Value out = MakeArray(a.type, sizes);
  std::vector<int64_t> in_index(rank);
  ForEachIndex(sizes, [&](const std::vector<int64_t>& index) {
    for (size_t d = 0; d < rank; ++d) in_index[d] = (*start)[d] + index[d];
    CopyElement(a, Linear(a.dims, in_index), out, Linear(sizes, index));
  });
  return out;
}

Result<Value> Evaluator::DynamicUpdateSlice(const Operands& ops) {
  const Value& a = *ops[0];
  const Value& update = *ops[1];
  const size_t rank = a.dims.size();
  if (update.type != a.type || update.dims.size() != rank) {
    return MakeError("dynamic-update-slice of " + Describe(a) + " with " + Describe(update));
  }
  auto start = StartIndices(ops, 2, rank);
  if (!start.ok()) return start.error();
  for (size_t d = 0; d < rank; ++d) {
    if (update.dims[d] > a.dims[d]) {
      return MakeError("dynamic-update-slice update " + Describe(update) + " exceeds " +
                       Describe(a));
    }
    (*start)[d] = std::clamp<int64_t>((*start)[d], 0, a.dims[d] - update.dims[d]);
  }
  Value out = a;
  std::vector<int64_t> out_index(rank);
  ForEachIndex(update.dims, [&](const std::vector<int64_t>& index) {
    for (size_t d = 0; d < rank; ++d) out_index[d] = (*start)[d] + index[d];
    CopyElement(update, Linear(update.dims, index), out, Linear(a.dims, out_index));
  });
  return out;
}

// Reads the index vector for batch position `batch` (the indices' dims other
// than index_vector_dim, in order) from `indices`. When index_vector_dim
// equals the indices' rank, each index vector has one element.
Result<std::vector<int64_t>> IndexVector(const Value& indices, int64_t index_vector_dim,
                                         const std::vector<int64_t>& batch, size_t length) {
  const int64_t rank = static_cast<int64_t>(indices.dims.size());
  std::vector<int64_t> at(rank);
  std::vector<int64_t> result;
  for (size_t k = 0; k < length; ++k) {
    size_t b = 0;
    for (int64_t d = 0; d < rank; ++d) at[d] = d == index_vector_dim ? k : batch[b++];
    auto v = IndexValue(indices, Linear(indices.dims, at));
    if (!v.ok()) return v.error();
    result.push_back(*v);
  }
  return result;
}

// The value of indices dimension `d` in a batch position (see IndexVector).
int64_t BatchCoordinate(const std::vector<int64_t>& batch, int64_t index_vector_dim, int64_t d) {
  return batch[d < index_vector_dim ? d : d - 1];
}

Result<Value> Evaluator::Gather(const HloInstructionProto& inst, const Value& operand,
                                const Value& indices) {
  const auto& dn = inst.gather_dimension_numbers();
  const std::vector<int64_t> offset_dims = ToVector(dn.offset_dims());
  const std::vector<int64_t> collapsed = ToVector(dn.collapsed_slice_dims());
  const std::vector<int64_t> start_index_map = ToVector(dn.start_index_map());
  const std::vector<int64_t> operand_batching = ToVector(dn.operand_batching_dims());
  const std::vector<int64_t> indices_batching = ToVector(dn.start_indices_batching_dims());
  const std::vector<int64_t> slice_sizes = ToVector(inst.gather_slice_sizes());
  const int64_t ivd = dn.index_vector_dim();
  const int64_t operand_rank = static_cast<int64_t>(operand.dims.size());
  const int64_t indices_rank = static_cast<int64_t>(indices.dims.size());
  const std::vector<int64_t> out_dims = DimsOf(inst.shape());
  const int64_t out_rank = static_cast<int64_t>(out_dims.size());

  if (static_cast<int64_t>(slice_sizes.size()) != operand_rank || ivd < 0 || ivd > indices_rank ||
      operand_batching.size() != indices_batching.size()) {
    return MakeError("gather of " + Describe(operand) + " with indices " + Describe(indices) +
                     ": malformed dimension numbers");
  }
  // Operand dims that the offset (window) dims of the output walk, in order.
  std::vector<int64_t> window_operand_dims;
  for (int64_t d = 0; d < operand_rank; ++d) {
    if (!Contains(collapsed, d) && !Contains(operand_batching, d)) window_operand_dims.push_back(d);
  }
  if (window_operand_dims.size() != offset_dims.size()) {
    return MakeError("gather: " + std::to_string(offset_dims.size()) + " offset dims for " +
                     std::to_string(window_operand_dims.size()) + " window dims");
  }
  const size_t index_length = ivd < indices_rank ? indices.dims[ivd] : 1;
  if (start_index_map.size() != index_length) {
    return MakeError("gather: start_index_map has " + std::to_string(start_index_map.size()) +
                     " dims, index vectors have " + std::to_string(index_length));
  }
  for (int64_t d : start_index_map) {
    if (d < 0 || d >= operand_rank) return MakeError("gather: start_index_map out of range");
  }
  for (size_t i = 0; i < offset_dims.size(); ++i) {
    const int64_t d = window_operand_dims[i];
    if (offset_dims[i] < 0 || offset_dims[i] >= out_rank ||
        out_dims[offset_dims[i]] != slice_sizes[d]) {
      return MakeError("gather: offset dims do not match the slice sizes");
    }
  }
  for (int64_t d = 0; d < operand_rank; ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > operand.dims[d]) {
      return MakeError("gather: slice sizes " + DimsString(slice_sizes) + " exceed " +
                       Describe(operand));
    }
  }
  std::vector<int64_t> batch_out_dims;  // output dims that are not offset dims
  for (int64_t d = 0; d < out_rank; ++d) {
    if (!Contains(offset_dims, d)) batch_out_dims.push_back(d);
  }
  // The batch dims of the output are the indices' dims other than index_vector_dim.
  std::vector<int64_t> indices_batch_sizes;
  for (int64_t d = 0; d < indices_rank; ++d) {
    if (d != ivd) indices_batch_sizes.push_back(indices.dims[d]);
  }
  if (indices_batch_sizes.size() != batch_out_dims.size()) {
    return MakeError("gather: output batch dims do not match the indices' dims");
  }
  for (size_t i = 0; i < batch_out_dims.size(); ++i) {
    if (out_dims[batch_out_dims[i]] != indices_batch_sizes[i]) {
      return MakeError("gather: output batch dims do not match the indices' dims");
    }
  }

  Value out = MakeArray(operand.type, out_dims);
  std::vector<int64_t> batch(batch_out_dims.size());
  std::vector<int64_t> in_index(operand_rank);
  std::vector<int64_t> out_index(out_rank, 0);
  if (out.count() == 0) return out;
  do {
    for (size_t i = 0; i < batch_out_dims.size(); ++i) batch[i] = out_index[batch_out_dims[i]];
    auto starts = IndexVector(indices, ivd, batch, index_length);
    if (!starts.ok()) return starts.error();
    // Start of the slice in the operand, clamped so the slice fits.
    std::vector<int64_t> slice_start(operand_rank, 0);
    for (size_t k = 0; k < start_index_map.size(); ++k)
      slice_start[start_index_map[k]] = (*starts)[k];
    for (size_t i = 0; i < operand_batching.size(); ++i) {
      slice_start[operand_batching[i]] = BatchCoordinate(batch, ivd, indices_batching[i]);
    }
    for (int64_t d = 0; d < operand_rank; ++d) {
      slice_start[d] = std::clamp<int64_t>(slice_start[d], 0, operand.dims[d] - slice_sizes[d]);
    }
    in_index = slice_start;
    for (size_t i = 0; i < offset_dims.size(); ++i) {
      in_index[window_operand_dims[i]] += out_index[offset_dims[i]];
    }
    CopyElement(operand, Linear(operand.dims, in_index), out, Linear(out_dims, out_index));
  } while (NextIndex(out_dims, out_index));
  return out;
}

Result<Value> Evaluator::Scatter(const HloInstructionProto& inst, const Operands& ops) {
  const size_t n = (ops.size() - 1) / 2;
  const Value& indices = *ops[n];
  const auto& dn = inst.scatter_dimension_numbers();
  const std::vector<int64_t> update_window_dims = ToVector(dn.update_window_dims());
  const std::vector<int64_t> inserted = ToVector(dn.inserted_window_dims());
  const std::vector<int64_t> to_operand = ToVector(dn.scatter_dims_to_operand_dims());
  const std::vector<int64_t> input_batching = ToVector(dn.input_batching_dims());
  const std::vector<int64_t> indices_batching = ToVector(dn.scatter_indices_batching_dims());
  const int64_t ivd = dn.index_vector_dim();
  const std::vector<int64_t>& operand_dims = ops[0]->dims;
  const std::vector<int64_t>& update_dims = ops[n + 1]->dims;
  const int64_t operand_rank = static_cast<int64_t>(operand_dims.size());
  const int64_t indices_rank = static_cast<int64_t>(indices.dims.size());
  const int64_t update_rank = static_cast<int64_t>(update_dims.size());
  for (size_t k = 0; k < n; ++k) {
    if (ops[k]->dims != operand_dims || ops[n + 1 + k]->dims != update_dims ||
        ops[k]->type != ops[n + 1 + k]->type) {
      return MakeError("scatter operands and updates of different shapes");
    }
  }
  if (ivd < 0 || ivd > indices_rank || input_batching.size() != indices_batching.size()) {
    return MakeError("scatter: malformed dimension numbers");
  }
  std::vector<int64_t> window_operand_dims;  // operand dims the update window dims walk
  for (int64_t d = 0; d < operand_rank; ++d) {
    if (!Contains(inserted, d) && !Contains(input_batching, d)) window_operand_dims.push_back(d);
  }
  if (window_operand_dims.size() != update_window_dims.size()) {
    return MakeError("scatter: " + std::to_string(update_window_dims.size()) +
                     " update window dims for " + std::to_string(window_operand_dims.size()) +
                     " operand window dims");
  }
  const size_t index_length = ivd < indices_rank ? indices.dims[ivd] : 1;
  if (to_operand.size() != index_length) {
    return MakeError("scatter: scatter_dims_to_operand_dims has " +
                     std::to_string(to_operand.size()) + " dims, index vectors have " +
                     std::to_string(index_length));
  }
  for (int64_t d : to_operand) {
    if (d < 0 || d >= operand_rank)
      return MakeError("scatter: scatter_dims_to_operand_dims out of range");
  }
  std::vector<int64_t> scatter_update_dims;  // update dims that are not window dims
  for (int64_t d = 0; d < update_rank; ++d) {
    if (!Contains(update_window_dims, d)) scatter_update_dims.push_back(d);
  }
  std::vector<int64_t> scatter_sizes, window_sizes;
  for (int64_t d : scatter_update_dims) scatter_sizes.push_back(update_dims[d]);
  // The scatter dims of the updates are the indices' dims other than index_vector_dim.
  std::vector<int64_t> indices_batch_sizes;
  for (int64_t d = 0; d < indices_rank; ++d) {
    if (d != ivd) indices_batch_sizes.push_back(indices.dims[d]);
  }
  if (indices_batch_sizes != scatter_sizes) {
    return MakeError("scatter: update scatter dims " + DimsString(scatter_sizes) +
                     " do not match the indices' dims " + DimsString(indices_batch_sizes));
  }
  for (int64_t d : update_window_dims) {
    if (d < 0 || d >= update_rank) return MakeError("scatter: update_window_dims out of range");
  }
  for (int64_t d : update_window_dims) window_sizes.push_back(update_dims[d]);
  // Size of the window in each operand dimension (1 for inserted and batching dims).
  std::vector<int64_t> window_extent(operand_rank, 1);
  for (size_t i = 0; i < window_operand_dims.size(); ++i) {
    window_extent[window_operand_dims[i]] = window_sizes[i];
  }

  auto combiner = Callee(inst, 0);
  if (!combiner.ok()) return combiner.error();
  std::optional<BinaryKernel> direct;
  if (n == 1) direct = DirectBinaryCombiner(**combiner, ops[0]->type);

  std::vector<Value> outs;
  for (size_t k = 0; k < n; ++k) outs.push_back(*ops[k]);
  if (Product(scatter_sizes) == 0 || Product(window_sizes) == 0) {
    return n == 1 ? outs[0] : MakeTuple(outs);
  }
  // Updates in XLA's order: scatter indices outer, window indices inner.
  std::vector<int64_t> scatter_index(scatter_sizes.size(), 0);
  std::vector<int64_t> update_index(update_rank);
  std::vector<int64_t> operand_index(operand_rank);
  do {
    auto starts = IndexVector(indices, ivd, scatter_index, index_length);
    if (!starts.ok()) return starts.error();
    std::vector<int64_t> window_start(operand_rank, 0);
    for (size_t k = 0; k < to_operand.size(); ++k) window_start[to_operand[k]] = (*starts)[k];
    for (size_t i = 0; i < input_batching.size(); ++i) {
      window_start[input_batching[i]] = BatchCoordinate(scatter_index, ivd, indices_batching[i]);
    }
    // The whole window must fit in the operand, else this update is skipped.
    bool fits = true;
    for (int64_t d = 0; d < operand_rank; ++d) {
      fits = fits && window_start[d] >= 0 && window_start[d] <= operand_dims[d] - window_extent[d];
    }
    if (!fits) continue;
    std::vector<int64_t> window_index(window_sizes.size(), 0);
    do {
      for (size_t i = 0; i < scatter_update_dims.size(); ++i) {
        update_index[scatter_update_dims[i]] = scatter_index[i];
      }
      for (size_t i = 0; i < update_window_dims.size(); ++i) {
        update_index[update_window_dims[i]] = window_index[i];
      }
      operand_index = window_start;
      for (size_t i = 0; i < window_operand_dims.size(); ++i) {
        operand_index[window_operand_dims[i]] += window_index[i];
      }
      const int64_t at = Linear(operand_dims, operand_index);
      const int64_t from = Linear(update_dims, update_index);
      if (direct) {
        (*direct)(outs[0], at, *ops[n + 1], from, outs[0], at);
      } else {
        std::vector<Value> args;
        for (size_t k = 0; k < n; ++k) args.push_back(ScalarAt(outs[k], at));
        for (size_t k = 0; k < n; ++k) args.push_back(ScalarAt(*ops[n + 1 + k], from));
        auto combined = Combine(**combiner, std::move(args), n);
        if (!combined.ok()) return combined.error();
        for (size_t k = 0; k < n; ++k) CopyElement((*combined)[k], 0, outs[k], at);
      }
    } while (NextIndex(window_sizes, window_index));
  } while (NextIndex(scatter_sizes, scatter_index));
  return n == 1 ? outs[0] : MakeTuple(outs);
}

Result<Value> Evaluator::Dot(const HloInstructionProto& inst, const Value& lhs, const Value& rhs) {
  const auto& dn = inst.dot_dimension_numbers();
  const std::vector<int64_t> lhs_batch = ToVector(dn.lhs_batch_dimensions());
  const std::vector<int64_t> rhs_batch = ToVector(dn.rhs_batch_dimensions());
  const std::vector<int64_t> lhs_contracting = ToVector(dn.lhs_contracting_dimensions());
  const std::vector<int64_t> rhs_contracting = ToVector(dn.rhs_contracting_dimensions());
  const PrimitiveType type = inst.shape().element_type();
  const std::string what = "dot of " + Describe(lhs) + " and " + Describe(rhs);
  if (lhs_batch.size() != rhs_batch.size() || lhs_contracting.size() != rhs_contracting.size()) {
    return MakeError(what + ": batch or contracting dimension counts differ");
  }
  if (!IsFloat(type) && !IsInteger(type)) {
    return MakeError("unsupported element type " + TypeName(type) + " for 'dot'");
  }
  auto in_range = [](const std::vector<int64_t>& dims, const Value& v) {
    for (int64_t d : dims) {
      if (d < 0 || d >= static_cast<int64_t>(v.dims.size())) return false;
    }
    return true;
  };
  if (!in_range(lhs_batch, lhs) || !in_range(lhs_contracting, lhs) || !in_range(rhs_batch, rhs) ||
      !in_range(rhs_contracting, rhs)) {
    return MakeError(what + ": dimension out of range");
  }
  std::vector<int64_t> contracting_sizes;
  for (size_t i = 0; i < lhs_contracting.size(); ++i) {
    if (lhs.dims[lhs_contracting[i]] != rhs.dims[rhs_contracting[i]]) {
      return MakeError(what + ": contracting dimension sizes differ");
    }
    contracting_sizes.push_back(lhs.dims[lhs_contracting[i]]);
  }
  auto free_dims = [](const Value& v, const std::vector<int64_t>& batch,
                      const std::vector<int64_t>& contracting) {
    std::vector<int64_t> free;
    for (int64_t d = 0; d < static_cast<int64_t>(v.dims.size()); ++d) {
      if (!Contains(batch, d) && !Contains(contracting, d)) free.push_back(d);
    }
    return free;
  };
  const std::vector<int64_t> lhs_free = free_dims(lhs, lhs_batch, lhs_contracting);
  const std::vector<int64_t> rhs_free = free_dims(rhs, rhs_batch, rhs_contracting);
  // Result dims: batch, lhs free, rhs free.
  std::vector<int64_t> out_dims;
  for (size_t i = 0; i < lhs_batch.size(); ++i) {
    if (lhs.dims[lhs_batch[i]] != rhs.dims[rhs_batch[i]]) {
      return MakeError(what + ": batch dimension sizes differ");
    }
    out_dims.push_back(lhs.dims[lhs_batch[i]]);
  }
  for (int64_t d : lhs_free) out_dims.push_back(lhs.dims[d]);
  for (int64_t d : rhs_free) out_dims.push_back(rhs.dims[d]);

  // Operands are converted to the result type first (as XLA's evaluator
  // does when they differ), then multiplied and accumulated in its
  // arithmetic type: float for f32/bf16, double for f64, the wrapping C++
  // integer type for integers.
  // (An operand already of the result type is read in place, not copied.)
  std::optional<Value> lhs_converted, rhs_converted;
  auto in_result_type = [&](const Value& v, std::optional<Value>& converted) -> Result<const Value*> {
    if (v.type == type) return &v;
    auto c = Convert(v, type);
    if (!c.ok()) return c.error();
    converted = std::move(*c);
    return &*converted;
  };
  auto l_ptr = in_result_type(lhs, lhs_converted);
  if (!l_ptr.ok()) return l_ptr.error();
  auto r_ptr = in_result_type(rhs, rhs_converted);
  if (!r_ptr.ok()) return r_ptr.error();
  const Value* l = *l_ptr;
  const Value* r = *r_ptr;

  Value out = MakeArray(type, out_dims);
  // Row-major strides, and the offsets of the contracting positions (in
  // row-major order of the contracting indices) within each operand.
  auto strides = [](const std::vector<int64_t>& dims) {
    std::vector<int64_t> st(dims.size(), 1);
    for (size_t d = dims.size(); d-- > 1;) st[d - 1] = st[d] * dims[d];
    return st;
  };
  const std::vector<int64_t> ls = strides(lhs.dims), rs = strides(rhs.dims);
  std::vector<int64_t> lhs_offsets, rhs_offsets;
  ForEachIndex(contracting_sizes, [&](const std::vector<int64_t>& c) {
    int64_t lo = 0, ro = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      lo += c[i] * ls[lhs_contracting[i]];
      ro += c[i] * rs[rhs_contracting[i]];
    }
    lhs_offsets.push_back(lo);
    rhs_offsets.push_back(ro);
  });
  auto accumulate = [&](auto zero, auto read_lhs, auto read_rhs, auto multiply_add) {
    ForEachIndex(out_dims, [&](const std::vector<int64_t>& o) {
      // Start of this result element's batch and free indices in each operand.
      int64_t lbase = 0, rbase = 0;
      size_t k = 0;
      for (size_t i = 0; i < lhs_batch.size(); ++i, ++k) {
        lbase += o[k] * ls[lhs_batch[i]];
        rbase += o[k] * rs[rhs_batch[i]];
      }
      for (int64_t d : lhs_free) lbase += o[k++] * ls[d];
      for (int64_t d : rhs_free) rbase += o[k++] * rs[d];
      auto acc = zero;
      for (size_t c = 0; c < lhs_offsets.size(); ++c) {
        acc = multiply_add(acc, read_lhs(lbase + lhs_offsets[c]), read_rhs(rbase + rhs_offsets[c]));
      }
      const int64_t pos = Linear(out_dims, o);
      if (IsFloat(type)) {
        out.floats[pos] = RoundToType(type, static_cast<double>(acc));
      } else {
        out.ints[pos] = WrapToType(type, static_cast<int64_t>(acc));
      }
    });
  };
  if (type == xla::F64) {
    accumulate(
        0.0, [&](int64_t i) { return l->floats[i]; }, [&](int64_t i) { return r->floats[i]; },
        [](double acc, double a, double b) { return acc + a * b; });
  } else if (IsFloat(type)) {
    accumulate(
        0.0f, [&](int64_t i) { return static_cast<float>(l->floats[i]); },
        [&](int64_t i) { return static_cast<float>(r->floats[i]); },
        [](float acc, float a, float b) { return acc + a * b; });
  } else {
    // Wrapping integer arithmetic in uint64_t, truncated to the type at the end.
    accumulate(
        uint64_t{0}, [&](int64_t i) { return static_cast<uint64_t>(l->ints[i]); },
        [&](int64_t i) { return static_cast<uint64_t>(r->ints[i]); },
        [](uint64_t acc, uint64_t a, uint64_t b) { return acc + a * b; });
  }
  return out;
}

std::optional<BinaryKernel> Evaluator::DirectBinaryCombiner(const HloComputationProto& c,
                                                            PrimitiveType type) const {
  if (c.instructions_size() != 3) return std::nullopt;
  const HloInstructionProto* root = nullptr;
  std::map<int64_t, int64_t> parameter_number;  // instruction id -> parameter number
  for (const auto& inst : c.instructions()) {
    if (inst.id() == c.root_id()) root = &inst;
    if (inst.opcode() == "parameter") {
      if (inst.shape().element_type() != type || inst.shape().dimensions_size() != 0) {
        return std::nullopt;
      }
      parameter_number[inst.id()] = inst.parameter_number();
    }
  }
  if (root == nullptr || !BinaryOpcodes().count(root->opcode()) || root->operand_ids_size() != 2 ||
      parameter_number.size() != 2 || root->shape().element_type() != type ||
      root->shape().dimensions_size() != 0 || !parameter_number.count(root->operand_ids(0)) ||
      !parameter_number.count(root->operand_ids(1))) {
    return std::nullopt;
  }
  const int64_t first = parameter_number.at(root->operand_ids(0));
  const int64_t second = parameter_number.at(root->operand_ids(1));
  if (first + second != 1 || first * second != 0) return std::nullopt;  // {0, 1}
  auto kernel = MakeBinaryKernel(root->opcode(), type);
  if (!kernel.ok()) return std::nullopt;
  if (first == 0) return *kernel;
  // root = op(p1, p0): op(element, accumulator).
  BinaryKernel k = *kernel;
  return BinaryKernel([k](const Value& acc, int64_t ia, const Value& elem, int64_t ie, Value& out,
                          int64_t io) { k(elem, ie, acc, ia, out, io); });
}

Result<std::vector<Value>> Evaluator::Combine(const HloComputationProto& c, std::vector<Value> args,
                                              size_t results) {
  std::vector<PrimitiveType> types;
  for (const Value& a : args) types.push_back(a.type);
  auto r = Run(c, std::move(args));
  if (!r.ok()) return r.error();
  std::vector<Value> out;
  if (results == 1 && !r->is_tuple()) {
    out.push_back(std::move(*r));
  } else if (r->is_tuple() && r->elements.size() == results) {
    out = std::move(r->elements);
  } else {
    return MakeError("computation " + c.name() + " returns " + Describe(*r) + ", expected " +
                     std::to_string(results) + " scalars");
  }
  for (size_t k = 0; k < results; ++k) {
    if (out[k].is_tuple() || !out[k].dims.empty() || k >= types.size() || out[k].type != types[k]) {
      return MakeError("computation " + c.name() + " returns " + Describe(*r) +
                       ", expected scalars of the accumulators' types");
    }
  }
  return out;
}

Result<Value> Evaluator::Reduce(const HloInstructionProto& inst, const Operands& ops) {
  const size_t n = ops.size() / 2;
  const Value& first = *ops[0];
  for (size_t k = 0; k < n; ++k) {
    if (ops[k]->dims != first.dims || ops[n + k]->type != ops[k]->type ||
        !ops[n + k]->dims.empty()) {
      return MakeError("reduce inputs must have equal dims and scalar inits of their types");
    }
  }
  const std::vector<int64_t> reduce_dims = ToVector(inst.dimensions());
  std::vector<int64_t> kept, reduced, out_dims, reduced_sizes;
  for (int64_t d = 0; d < static_cast<int64_t>(first.dims.size()); ++d) {
    if (Contains(reduce_dims, d)) {
      reduced.push_back(d);
      reduced_sizes.push_back(first.dims[d]);
    } else {
      kept.push_back(d);
      out_dims.push_back(first.dims[d]);
    }
  }
  if (reduced.size() != reduce_dims.size()) {
    return MakeError("reduce of " + Describe(first) + " over " + DimsString(reduce_dims));
  }
  auto reducer = Callee(inst, 0);
  if (!reducer.ok()) return reducer.error();
  std::optional<BinaryKernel> direct;
  if (n == 1) direct = DirectBinaryCombiner(**reducer, first.type);

  std::vector<Value> outs;
  for (size_t k = 0; k < n; ++k) outs.push_back(MakeArray(ops[k]->type, out_dims));
  std::vector<int64_t> out_index(out_dims.size(), 0);
  std::vector<int64_t> in_index(first.dims.size());
  if (Product(out_dims) > 0) {
    do {
      const int64_t out_pos = Linear(out_dims, out_index);
      for (size_t j = 0; j < kept.size(); ++j) in_index[kept[j]] = out_index[j];
      std::vector<Value> acc;
      for (size_t k = 0; k < n; ++k) acc.push_back(*ops[n + k]);
      std::vector<int64_t> r(reduced.size(), 0);
      if (Product(reduced_sizes) > 0) {
        do {
          for (size_t j = 0; j < reduced.size(); ++j) in_index[reduced[j]] = r[j];
          const int64_t in_pos = Linear(first.dims, in_index);
          if (direct) {
            (*direct)(acc[0], 0, first, in_pos, acc[0], 0);
          } else {
            std::vector<Value> args = acc;
            for (size_t k = 0; k < n; ++k) args.push_back(ScalarAt(*ops[k], in_pos));
            auto combined = Combine(**reducer, std::move(args), n);
            if (!combined.ok()) return combined.error();
            acc = std::move(*combined);
          }
        } while (NextIndex(reduced_sizes, r));
      }
      for (size_t k = 0; k < n; ++k) CopyElement(acc[k], 0, outs[k], out_pos);
    } while (NextIndex(out_dims, out_index));
  }
  return n == 1 ? outs[0] : MakeTuple(std::move(outs));
}

Result<Value> Evaluator::Map(const HloInstructionProto& inst, const Operands& ops) {
  for (const Value* v : ops) {
    if (v->dims != ops[0]->dims) return MakeError("map of operands with different dims");
  }
  auto fn = Callee(inst, 0);
  if (!fn.ok()) return fn.error();
  Value out = MakeArray(inst.shape().element_type(), ops[0]->dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    std::vector<Value> args;
    for (const Value* v : ops) args.push_back(ScalarAt(*v, i));
    auto r = Run(**fn, std::move(args));
    if (!r.ok()) return r.error();
    if (r->is_tuple() || r->type != out.type || !r->dims.empty()) {
      return MakeError("map computation returns " + Describe(*r));
    }
    CopyElement(*r, 0, out, i);
  }
  return out;
}

Result<Value> Evaluator::While(const HloInstructionProto& inst, const Value& init) {
  // XLA orders a while's called computations body first, then condition.
  auto body = Callee(inst, 0);
  auto condition = Callee(inst, 1);
  if (!body.ok()) return body.error();
  if (!condition.ok()) return condition.error();
  Value state = init;
  for (int64_t i = 0;; ++i) {
    auto go_on = Run(**condition, {state});
    if (!go_on.ok()) return go_on.error();
    if (go_on->type != xla::PRED || !go_on->dims.empty()) {
      return MakeError("while condition returns " + Describe(*go_on));
    }
    if (go_on->ints[0] == 0) return state;
    if (i >= kMaxWhileIterations) {
      return MakeError("while loop ran more than " + std::to_string(kMaxWhileIterations) +
                       " iterations");
    }
    auto next = Run(**body, {state});
    if (!next.ok()) return next.error();
    state = std::move(*next);
  }
}

Result<Value> Evaluator::Conditional(const HloInstructionProto& inst, const Operands& ops) {
  const Value& selector = *ops[0];
  if (selector.is_tuple() || !selector.dims.empty()) {
    return MakeError("conditional selector " + Describe(selector) + " is not a scalar");
  }
  const int64_t branches = inst.called_computation_ids_size();
  int64_t branch;
  if (selector.type == xla::PRED) {
    branch = selector.ints[0] != 0 ? 0 : 1;  // true_computation, false_computation
  } else {
    auto index = IndexValue(selector);
    if (!index.ok()) return index.error();
    branch = (*index < 0 || *index >= branches) ? branches - 1 : *index;
  }
  if (static_cast<int64_t>(ops.size()) != branches + 1 || branch < 0) {
    return MakeError("conditional needs one operand per branch");
  }
  auto callee = Callee(inst, static_cast<int>(branch));
  if (!callee.ok()) return callee.error();
  return Run(**callee, {*ops[1 + branch]});
}

// Builds the entry's parameter value of `shape` from arguments[next...].
Result<Value> ParameterValue(const ShapeProto& shape, const std::vector<Tensor>& arguments,
                             size_t& next) {
  if (shape.element_type() == xla::TUPLE) {
    std::vector<Value> elements;
    for (const auto& element : shape.tuple_shapes()) {
      auto v = ParameterValue(element, arguments, next);
      if (!v.ok()) return v.error();
      elements.push_back(std::move(*v));
    }
    return MakeTuple(std::move(elements));
  }
  if (next >= arguments.size()) {
    return MakeError("hlo evaluator: too few arguments (" + std::to_string(arguments.size()) + ")");
  }
  const Tensor& t = arguments[next];
  if (t.type != shape.element_type() || t.dims != DimsOf(shape)) {
    return MakeError("hlo evaluator: argument " + std::to_string(next) + " is " + TypeName(t.type) +
                     DimsString(t.dims) + ", the parameter is " + hlo::ShapeToString(shape));
  }
  ++next;
  auto v = ValueFromTensor(t);
  if (!v.ok())
    return MakeError("hlo evaluator: argument " + std::to_string(next - 1) + ": " +
                     v.error().message);
  return v;
}

void FlattenLeaves(Value&& v, std::vector<Tensor>& out) {
  if (v.is_tuple()) {
    for (Value& e : v.elements) FlattenLeaves(std::move(e), out);
    return;
  }
  out.push_back(TensorFromValue(v));
}

}  // namespace

// ---------------------------------------------------------------------------
// 5. Entry point
// ---------------------------------------------------------------------------

Result<std::vector<Tensor>> EvaluateHlo(const xla::HloModuleProto& module,
                                        const std::vector<Tensor>& arguments) {
  // The storage pool lives for this evaluation (not nested: the evaluator
  // does not call EvaluateHlo).
  struct PoolScope {
    PoolScope() { storage_pool.active = true; }
    ~PoolScope() { storage_pool = StoragePool(); }
  } pool_scope;
  Status valid = hlo::ValidateModule(module, "module " + module.name());
  if (!valid.ok()) return MakeError("hlo evaluator: " + valid.error().message);
  const HloComputationProto* entry = hlo::EntryComputation(module);
  if (entry == nullptr)
    return MakeError("hlo evaluator: module " + module.name() + " has no entry");

  std::map<int64_t, const ShapeProto*> parameters;  // by parameter_number
  for (const auto& inst : entry->instructions()) {
    if (inst.opcode() == "parameter") parameters[inst.parameter_number()] = &inst.shape();
  }
  std::vector<Value> args;
  size_t next = 0;
  for (const auto& [number, shape] : parameters) {
    if (number != static_cast<int64_t>(args.size())) {
      return MakeError("hlo evaluator: entry parameter " + std::to_string(args.size()) +
                       " is missing");
    }
    auto v = ParameterValue(*shape, arguments, next);
    if (!v.ok()) return v.error();
    args.push_back(std::move(*v));
  }
  if (next != arguments.size()) {
    return MakeError("hlo evaluator: " + std::to_string(arguments.size()) + " arguments for " +
                     std::to_string(next) + " parameter leaves");
  }

  Evaluator evaluator(module);
  auto result = evaluator.Run(*entry, std::move(args));
  if (!result.ok()) return result.error();
  std::vector<Tensor> outputs;
  FlattenLeaves(std::move(*result), outputs);
  return outputs;
}

}  // namespace npc::testing
