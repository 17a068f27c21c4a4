// XLA's HLO text format -> HloModuleProto (see text_reader.h for what is read
// and how it maps onto the proto).
//
// A hand-written recursive-descent reader over the text. Every parse function
// returns false after recording the first error (with its byte offset), so the
// error names the exact place. Names are resolved after the whole module is
// read: operands within their computation, called computations within the
// module.
#include "hlo/text_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace npc::hlo {
namespace {

// XLA's opcode names (HloOpcodeString), plus a few older spellings that dumps
// from older releases contain.
constexpr std::string_view kOpcodes[] = {
    "abs", "add", "add-dependency", "after-all", "all-gather", "all-gather-done", "all-gather-start",
    "all-reduce", "all-reduce-done", "all-reduce-start", "all-to-all", "and", "async-done", "async-start",
    "async-update", "atan2", "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast",
    "bitcast-convert", "broadcast", "call", "cbrt", "ceil", "cholesky", "clamp", "collective-broadcast",
    "collective-permute", "collective-permute-done", "collective-permute-start", "compare", "complex",
    "concatenate", "conditional", "constant", "convert", "convolution", "copy", "copy-done", "copy-start",
    "cosine", "count-leading-zeros", "cross-replica-sum", "custom-call", "divide", "domain", "dot",
    "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "erf", "exponential",
    "exponential-minus-one", "fft", "floor", "fusion", "gather", "get-dimension-size", "get-tuple-element",
    "imag", "infeed", "iota", "is-finite", "log", "log-plus-one", "logistic", "map", "maximum", "minimum",
    "multiply", "negate", "not", "opt-barrier", "or", "outfeed", "pad", "parameter", "partition-id",
    "popcnt", "power", "ragged-all-to-all", "ragged-dot", "real", "recv", "recv-done", "reduce",
    "reduce-precision", "reduce-scatter", "reduce-window", "remainder", "replica-id", "reshape", "reverse",
    "rng", "rng-bit-generator", "rng-get-and-update-state", "round-nearest-afz", "round-nearest-even",
    "rsqrt", "scatter", "select", "select-and-scatter", "send", "send-done", "set-dimension-size",
    "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt",
    "stochastic-convert", "subtract", "tan", "tanh", "topk", "trace", "transpose", "triangular-solve",
    "tuple", "tuple-select", "while", "xor",
};

bool IsKnownOpcode(std::string_view op) {
  static const std::unordered_set<std::string_view> known(std::begin(kOpcodes), std::end(kOpcodes));
  return known.count(op) != 0;
}

std::optional<xla::PrimitiveType> PrimitiveTypeFromName(std::string_view s) {
  static const std::unordered_map<std::string_view, xla::PrimitiveType> types = {
      {"pred", xla::PRED},   {"s4", xla::S4},         {"s8", xla::S8},       {"s16", xla::S16},
      {"s32", xla::S32},     {"s64", xla::S64},       {"u4", xla::U4},       {"u8", xla::U8},
      {"u16", xla::U16},     {"u32", xla::U32},       {"u64", xla::U64},     {"f16", xla::F16},
      {"bf16", xla::BF16},   {"f32", xla::F32},       {"f64", xla::F64},     {"c64", xla::C64},
      {"c128", xla::C128},   {"token", xla::TOKEN},   {"opaque", xla::OPAQUE_TYPE},
      {"f8e5m2", xla::F8E5M2}, {"f8e4m3fn", xla::F8E4M3FN},
      {"s1", xla::S1},       {"s2", xla::S2},         {"u1", xla::U1},       {"u2", xla::U2},
      {"f8e4m3", xla::F8E4M3}, {"f8e3m4", xla::F8E3M4}, {"f8e4m3b11fnuz", xla::F8E4M3B11FNUZ},
      {"f8e5m2fnuz", xla::F8E5M2FNUZ}, {"f8e4m3fnuz", xla::F8E4M3FNUZ}, {"f4e2m1fn", xla::F4E2M1FN},
      {"f8e8m0fnu", xla::F8E8M0FNU}, {"f6e3m2fn", xla::F6E3M2FN}, {"f6e2m3fn", xla::F6E2M3FN},
  };
  auto it = types.find(s);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

std::string TypeName(xla::PrimitiveType t) {
  std::string s = xla::PrimitiveType_Name(t);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsArrayType(xla::PrimitiveType t) {
  return t != xla::TUPLE && t != xla::TOKEN && t != xla::OPAQUE_TYPE && t != xla::PRIMITIVE_TYPE_INVALID;
}

bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

// "p0.1" -> "p0": XLA's program shapes name parameters without the id suffix.
std::string StripIdSuffix(const std::string& name) { return name.substr(0, name.find('.')); }

// The element count of an array shape; nullopt when a dimension is negative
// or the product overflows 64 bits.
std::optional<int64_t> ElementCountOf(const xla::ShapeProto& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dimensions()) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// Caps on untrusted text (see text_reader.h): nesting of tuple shapes,
// constant braces and tuple shardings, and the length of an expanded iota
// device list.
constexpr int kMaxNesting = kMaxHloTextNesting;
constexpr int64_t kMaxIotaDevices = kMaxHloIotaDevices;

// Well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF):
// what a protobuf string field must hold to be written and read back.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const int n = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;  // continuation bytes
    if (n < 0 || i + static_cast<size_t>(n) >= s.size()) return false;
    uint32_t cp = c & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

// --- Float encodings ---------------------------------------------------------

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t lsb = (bits >> 16) & 1;
  bits += 0x7fff + lsb;  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff;
  uint32_t man = x & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (man ? (0x200 | (man >> 13)) : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000;
    int shift = 14 - e;
    uint32_t h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(h);
}

void AppendLe16(std::string* bytes, uint16_t v) {
  bytes->push_back(static_cast<char>(v & 0xff));
  bytes->push_back(static_cast<char>(v >> 8));
}

// One floating-point value as written in the text.
struct FloatToken {
  enum Kind { kNumber, kInf, kNan } kind = kNumber;
  bool negative = false;
  double magnitude = 0;      // kNumber
  uint64_t nan_payload = 0;  // kNan; 0: the default quiet NaN
};

// Floating-point types narrower than 16 bits (ml_dtypes' formats, as XLA
// uses them): one byte per element in the LiteralProto.
struct MiniFloat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  enum Specials {
    kIeee,      // inf and NaN as IEEE (all-ones exponent), signed zero
    kFiniteNan, // no inf; NaN = all ones (S.1111.111); signed zero (e4m3fn)
    kFnuz,      // no inf, no -0; NaN = 0x80
    kFinite,    // no inf, no NaN; signed zero (f4e2m1fn, f6*)
    kE8M0,      // unsigned powers of two, no zero; NaN = 0xff
  } specials;
};

std::optional<MiniFloat> MiniFloatOf(xla::PrimitiveType t) {
  switch (t) {
    case xla::F8E5M2: return MiniFloat{5, 2, 15, MiniFloat::kIeee};
    case xla::F8E4M3: return MiniFloat{4, 3, 7, MiniFloat::kIeee};
    case xla::F8E3M4: return MiniFloat{3, 4, 3, MiniFloat::kIeee};
    case xla::F8E4M3FN: return MiniFloat{4, 3, 7, MiniFloat::kFiniteNan};
    case xla::F8E4M3B11FNUZ: return MiniFloat{4, 3, 11, MiniFloat::kFnuz};
    case xla::F8E5M2FNUZ: return MiniFloat{5, 2, 16, MiniFloat::kFnuz};
    case xla::F8E4M3FNUZ: return MiniFloat{4, 3, 8, MiniFloat::kFnuz};
    case xla::F4E2M1FN: return MiniFloat{2, 1, 1, MiniFloat::kFinite};
    case xla::F6E3M2FN: return MiniFloat{3, 2, 3, MiniFloat::kFinite};
    case xla::F6E2M3FN: return MiniFloat{2, 3, 1, MiniFloat::kFinite};
    case xla::F8E8M0FNU: return MiniFloat{8, 0, 127, MiniFloat::kE8M0};
    default: return std::nullopt;
  }
}

// --- Intermediate structures -------------------------------------------------

struct NameRef {
  std::string name;
  size_t pos = 0;
};

struct PendingInstruction {
  xla::HloInstructionProto proto;
  size_t pos = 0;
  std::vector<NameRef> operands;
  std::vector<NameRef> control_predecessors;
  std::vector<NameRef> calls;  // in XLA's called_computations order
  bool is_fusion = false;      // its calls are fusion computations
  bool compare_type_given = false;
  bool elided = false;         // a literal printed as {...}
  std::unordered_set<std::string_view> seen_attributes;
};

struct PendingComputation {
  xla::HloComputationProto proto;
  size_t pos = 0;
  bool is_entry = false;
  std::vector<PendingInstruction> instructions;
  int root_index = -1;
  std::unordered_map<std::string, size_t> by_name;  // instruction name -> index
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source_name) : text_(text), source_(source_name) {}

  Result<xla::HloModuleProto> Run() {
    if (!ParseModule() || !Finish()) return MakeError(ErrorText());
    return std::move(module_);
  }

 private:
  // --- Errors ---------------------------------------------------------------

  bool Fail(size_t pos, std::string message) {
    if (!failed_) {
      failed_ = true;
      error_pos_ = std::min(pos, text_.size());
      error_message_ = std::move(message);
    }
    return false;
  }

  std::string ErrorText() const {
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < error_pos_; ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return source_ + ":" + std::to_string(line) + ":" + std::to_string(error_pos_ - line_start + 1) + ": " +
           error_message_;
  }

  // What the next token looks like, for messages.
  std::string Describe(size_t pos) const {
    while (pos < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos]))) ++pos;
    if (pos >= text_.size()) return "end of input";
    size_t end = pos;
    if (text_[pos] == '%') ++end;
    while (end < text_.size() && IsIdentChar(text_[end])) ++end;
    if (end == pos || (end == pos + 1 && text_[pos] == '%')) end = pos + 1;
    return "'" + std::string(text_.substr(pos, end - pos)) + "'";
  }

  // "unexpected end of input, expected X" or "expected X, found 'y'".
  bool FailExpected(const std::string& what) {
    SkipSpace();
    if (AtEnd()) return Fail(pos_, "unexpected end of input, expected " + what);
    return Fail(pos_, "expected " + what + ", found " + Describe(pos_));
  }

  // One level of nesting (tuple shape, constant braces, tuple sharding) for
  // the lifetime of the guard; Enter() fails past kMaxNesting levels, so deep
  // input is an error instead of a stack overflow.
  class Nesting {
   public:
    explicit Nesting(Parser* parser) : p_(parser) { ++p_->depth_; }
    ~Nesting() { --p_->depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    bool Enter(const char* what) {
      if (p_->depth_ <= kMaxNesting) return true;
      return p_->Fail(p_->pos_, std::string(what) + " nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }

   private:
    Parser* p_;
  };

  // --- Lexing ---------------------------------------------------------------

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  bool LookingAt(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  // Whitespace, /* ... */ comments (e.g. /*index=5*/) and // line comments.
  void SkipSpace() {
    while (!AtEnd()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (LookingAt("/*")) {
        size_t end = text_.find("*/", pos_ + 2);
        pos_ = end == std::string_view::npos ? text_.size() : end + 2;
      } else if (LookingAt("//")) {
        size_t end = text_.find('\n', pos_);
        pos_ = end == std::string_view::npos ? text_.size() : end + 1;
      } else {
        break;
      }
    }
  }

  bool TryConsume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  // `c` exactly at pos_, no whitespace skipping.
  bool TryConsumeRaw(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  bool Expect(char c) {
    if (TryConsume(c)) return true;
    return FailExpected(std::string("'") + c + "'");
  }

  // Identifier characters from pos_ (no whitespace skipping, no '%').
  std::string_view ReadIdentRaw() {
    size_t start = pos_;
    while (!AtEnd() && IsIdentChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  std::string_view PeekIdent() const {
    size_t end = pos_;
    while (end < text_.size() && IsIdentChar(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }

  // A keyword: the identifier at pos_ equals `kw`.
  bool TryKeyword(std::string_view kw) {
    SkipSpace();
    if (PeekIdent() != kw) return false;
    pos_ += kw.size();
    return true;
  }

  // An instruction / computation / module name, with or without '%'.
  bool ParseName(std::string* out, const std::string& what) {
    SkipSpace();
    size_t start = pos_;
    if (Peek() == '%') ++pos_;
    std::string_view name = ReadIdentRaw();
    if (name.empty()) {
      pos_ = start;
      return FailExpected(what);
    }
    *out = std::string(name);
    return true;
  }

  bool ParseAttributeName(std::string* out) {
    SkipSpace();
    std::string_view name = ReadIdentRaw();
    if (name.empty()) return FailExpected("an attribute name");
    *out = std::string(name);
    return true;
  }

  // An integer at pos_ (after whitespace), with optional '-'.
  bool ParseInt(int64_t* out) {
    SkipSpace();
    return ParseIntRaw(out);
  }

  // `check_end`: reject "1.5" / "1e3"; off inside "3x3" and "0_1x1_0".
  bool ParseIntRaw(int64_t* out, bool check_end = true) {
    size_t start = pos_;
    const char* begin = text_.data() + pos_;
    const char* end = text_.data() + text_.size();
    auto [ptr, ec] = std::from_chars(begin, end, *out);
    if (ec == std::errc::result_out_of_range) return Fail(start, "integer out of range");
    if (ec != std::errc() || ptr == begin) return FailExpected("an integer");
    pos_ += static_cast<size_t>(ptr - begin);
    return !check_end || CheckIntegerEnd(start);
  }

  // An integer must not run on into a fraction or an exponent ("1.5", "1e3").
  bool CheckIntegerEnd(size_t start) {
    if (!AtEnd() && (Peek() == '.' || std::isalpha(static_cast<unsigned char>(Peek())))) {
      size_t end = pos_;
      while (end < text_.size() && (IsIdentChar(text_[end]) || text_[end] == '+')) ++end;
      return Fail(start, "expected an integer, found '" + std::string(text_.substr(start, end - start)) + "'");
    }
    return true;
  }

  bool ParseBool(bool* out) {
    SkipSpace();
    if (TryKeyword("true")) {
      *out = true;
      return true;
    }
    if (TryKeyword("false")) {
      *out = false;
      return true;
    }
    return FailExpected("true or false");
  }

  // A double-quoted string with C escapes.
  bool ParseString(std::string* out) {
    SkipSpace();
    if (Peek() != '"') return FailExpected("a quoted string");
    size_t start = pos_++;
    out->clear();
    while (true) {
      if (AtEnd()) return Fail(start, "unterminated string");
      char c = text_[pos_++];
      if (c == '"') {
        // XLA's schema stores these in protobuf string fields, which must be UTF-8.
        return IsValidUtf8(*out) || Fail(start, "string is not valid UTF-8");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (AtEnd()) return Fail(start, "unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'a': out->push_back('\a'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'v': out->push_back('\v'); break;
        case 'x': {
          int v = 0, n = 0;
          while (n < 2 && !AtEnd() && std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
            char h = text_[pos_++];
            v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
            ++n;
          }
          if (n == 0) return Fail(pos_ - 2, "bad \\x escape in string");
          out->push_back(static_cast<char>(v));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0', n = 1;
            while (n < 3 && !AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '7') {
              v = v * 8 + (text_[pos_++] - '0');
              ++n;
            }
            out->push_back(static_cast<char>(v));
          } else {
            out->push_back(e);  // \" \\ \' \?
          }
      }
    }
  }

  // Skips one attribute value: up to a ',' or newline outside brackets and
  // strings, or an unmatched closing bracket. Returns the skipped text.
  bool SkipValue(std::string_view* skipped = nullptr) {
    SkipSpace();
    size_t start = pos_;
    std::vector<std::pair<char, size_t>> open;
    while (!AtEnd()) {
      char c = text_[pos_];
      if (c == '"') {
        std::string ignored;
        if (!ParseString(&ignored)) return false;
        continue;
      }
      if (LookingAt("/*")) {
        size_t end = text_.find("*/", pos_ + 2);
        pos_ = end == std::string_view::npos ? text_.size() : end + 2;
        continue;
      }
      if (c == '{' || c == '(' || c == '[') {
        open.push_back({c, pos_});
      } else if (c == '}' || c == ')' || c == ']') {
        if (open.empty()) break;
        char want = open.back().first == '{' ? '}' : open.back().first == '(' ? ')' : ']';
        if (c != want) return Fail(pos_, std::string("unbalanced '") + c + "' in an attribute value");
        open.pop_back();
      } else if (open.empty() && (c == ',' || c == '\n')) {
        break;
      }
      ++pos_;
    }
    if (!open.empty()) {
      return Fail(pos_, std::string("unexpected end of input, expected the closing bracket of '") +
                            open.back().first + "'");
    }
    size_t end = pos_;
    while (end > start && std::isspace(static_cast<unsigned char>(text_[end - 1]))) --end;
    if (end == start) return FailExpected("an attribute value");
    if (skipped) *skipped = text_.substr(start, end - start);
    return true;
  }

  // --- Shapes ---------------------------------------------------------------

  // At pos_ (no whitespace skipping): does an array shape start here?
  bool LooksLikeArrayShape() const {
    size_t end = pos_;
    while (end < text_.size() && IsIdentChar(text_[end])) ++end;
    return end < text_.size() && text_[end] == '[' && PrimitiveTypeFromName(text_.substr(pos_, end - pos_));
  }

  bool ParseShape(xla::ShapeProto* shape) {
    Nesting nesting(this);
    if (!nesting.Enter("tuple shapes")) return false;
    SkipSpace();
    if (AtEnd()) return FailExpected("a shape");
    if (Peek() == '(') {
      ++pos_;
      shape->set_element_type(xla::TUPLE);
      if (TryConsume(')')) return true;
      do {
        if (!ParseShape(shape->add_tuple_shapes())) return false;
      } while (TryConsume(','));
      if (TryConsume(')')) return true;
      return FailExpected("',' or ')' in a tuple shape");
    }
    size_t start = pos_;
    std::string_view word = ReadIdentRaw();
    if (word.empty()) {
      return Fail(start, "malformed shape: expected an element type or '(', found " + Describe(start));
    }
    auto type = PrimitiveTypeFromName(word);
    if (!type) return Fail(start, "malformed shape: unknown element type '" + std::string(word) + "'");
    shape->set_element_type(*type);
    if (Peek() != '[') {
      return Fail(pos_, "malformed shape: expected '[' after '" + std::string(word) + "', found " + Describe(pos_));
    }
    ++pos_;
    if (!TryConsume(']')) {
      do {
        SkipSpace();
        bool dynamic = false;
        int64_t dim = 0;
        if (LookingAt("<=")) {
          dynamic = true;
          pos_ += 2;
          SkipSpace();
        }
        if (!dynamic && Peek() == '?') {
          ++pos_;
          dynamic = true;
          dim = std::numeric_limits<int64_t>::min();
        } else {
          size_t dim_pos = pos_;
          const char* begin = text_.data() + pos_;
          auto [ptr, ec] = std::from_chars(begin, text_.data() + text_.size(), dim);
          if (ec != std::errc() || ptr == begin || dim < 0) {
            if (AtEnd()) return Fail(pos_, "unexpected end of input, expected a dimension size");
            return Fail(dim_pos, "malformed shape: expected a dimension size, found " + Describe(dim_pos));
          }
          pos_ += static_cast<size_t>(ptr - begin);
        }
        shape->add_dimensions(dim);
        shape->add_is_dynamic_dimension(dynamic);
        SkipSpace();
      } while (TryConsume(','));
      if (!TryConsume(']')) {
        if (AtEnd()) return Fail(pos_, "unexpected end of input, expected ',' or ']' in a shape");
        return Fail(pos_, "malformed shape: expected ',' or ']', found " + Describe(pos_));
      }
    }
    if (!IsArrayType(*type)) return true;
    xla::LayoutProto* layout = shape->mutable_layout();
    // A layout follows the ']' directly; "f32[] {" is a shape then a body.
    if (Peek() != '{') {
      for (int i = shape->dimensions_size() - 1; i >= 0; --i) layout->add_minor_to_major(i);
      return true;
    }
    ++pos_;
    SkipSpace();
    if (Peek() != '}' && Peek() != ':') {
      do {
        int64_t d = 0;
        if (!ParseInt(&d)) return false;
        layout->add_minor_to_major(d);
      } while (TryConsume(','));
    }
    if (TryConsume(':') && !ParseLayoutDetails(layout)) return false;
    if (!TryConsume('}')) {
      if (AtEnd()) return Fail(pos_, "unexpected end of input, expected '}' after a layout");
      return Fail(pos_, "malformed shape: expected ',' or '}' in a layout, found " + Describe(pos_));
    }
    if (layout->minor_to_major_size() != shape->dimensions_size()) {
      return Fail(pos_ - 1, "malformed shape: the layout has " + std::to_string(layout->minor_to_major_size()) +
                                " dimensions, the shape " + std::to_string(shape->dimensions_size()));
    }
    return true;
  }

  // After `{minor_to_major:`, XLA's layout details (Layout::ToString):
  // tiles T(8,128)(2,1) (`*`: XLA's combined dimension), tail padding
  // alignment L(n), element size in bits E(n), memory space S(n), dynamic
  // shape metadata prefix M(n). The details of sparse layouts (D, #, *, P)
  // and split configs (SC) are refused, naming them.
  bool ParseLayoutDetails(xla::LayoutProto* layout) {
    while (true) {
      SkipSpace();
      const size_t start = pos_;
      if (AtEnd() || Peek() == '}') return true;
      auto number = [&](auto set) {
        int64_t v = 0;
        if (!Expect('(') || !ParseInt(&v) || !Expect(')')) return false;
        set(v);
        return true;
      };
      const char c = Peek();
      if (c == 'T') {
        ++pos_;
        if (Peek() != '(') return FailExpected("'(' after T in a layout");
        while (Peek() == '(') {
          ++pos_;
          auto* tile = layout->add_tiles();
          if (!TryConsume(')')) {
            do {
              SkipSpace();
              if (TryConsumeRaw('*')) {
                tile->add_dimensions(std::numeric_limits<int64_t>::min());
              } else {
                int64_t d = 0;
                if (!ParseInt(&d)) return false;
                tile->add_dimensions(d);
              }
            } while (TryConsume(','));
            if (!Expect(')')) return false;
          }
        }
      } else if (c == 'L') {
        ++pos_;
        if (!number([&](int64_t v) { layout->set_tail_padding_alignment_in_elements(v); })) return false;
      } else if (c == 'E') {
        ++pos_;
        if (!number([&](int64_t v) { layout->set_element_size_in_bits(v); })) return false;
      } else if (c == 'S' && !LookingAt("SC")) {
        ++pos_;
        if (!number([&](int64_t v) { layout->set_memory_space(v); })) return false;
      } else if (c == 'M') {
        ++pos_;
        if (!number([&](int64_t v) { layout->set_dynamic_shape_metadata_prefix_bytes(v); })) return false;
      } else {
        return Fail(start, "layout detail " + Describe(start) +
                               " is not read by npc (sparse layouts and split configs are not supported)");
      }
    }
  }

  // --- Literals -------------------------------------------------------------

  bool ParseFloatToken(FloatToken* tok) {
    SkipSpace();
    size_t start = pos_;
    if (Peek() == '-' || Peek() == '+') {
      tok->negative = Peek() == '-';
      ++pos_;
    }
    if (LookingAt("inf") && !(pos_ + 3 < text_.size() && IsIdentChar(text_[pos_ + 3]))) {
      pos_ += 3;
      tok->kind = FloatToken::kInf;
      return true;
    }
    if (LookingAt("nan") && !(pos_ + 3 < text_.size() && IsIdentChar(text_[pos_ + 3]))) {
      pos_ += 3;
      tok->kind = FloatToken::kNan;
      if (Peek() == '(') {
        ++pos_;
        if (!LookingAt("0x")) return FailExpected("a hexadecimal NaN payload");
        pos_ += 2;
        const char* begin = text_.data() + pos_;
        auto [ptr, ec] = std::from_chars(begin, text_.data() + text_.size(), tok->nan_payload, 16);
        if (ec != std::errc() || ptr == begin) return FailExpected("a hexadecimal NaN payload");
        pos_ += static_cast<size_t>(ptr - begin);
        if (!Expect(')')) return false;
      }
      return true;
    }
    size_t num_start = pos_;
    bool hex = LookingAt("0x") || LookingAt("0X");
    if (hex) pos_ += 2;
    size_t digits_start = pos_;
    while (!AtEnd()) {
      char c = text_[pos_];
      char prev = pos_ > digits_start ? text_[pos_ - 1] : '\0';
      bool exp_sign = (c == '+' || c == '-') &&
                      (hex ? (prev == 'p' || prev == 'P') : (prev == 'e' || prev == 'E'));
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || exp_sign) {
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == digits_start) {
      pos_ = start;
      return FailExpected("a number");
    }
    const char* begin = text_.data() + digits_start;
    const char* end = text_.data() + pos_;
    auto [ptr, ec] = std::from_chars(begin, end, tok->magnitude,
                                     hex ? std::chars_format::hex : std::chars_format::general);
    if (ec == std::errc::result_out_of_range) return Fail(start, "number out of range");
    if (ec != std::errc() || ptr != end) {
      return Fail(start, "malformed number '" + std::string(text_.substr(num_start, pos_ - num_start)) + "'");
    }
    return true;
  }

  bool AppendFloat(xla::PrimitiveType type, const FloatToken& tok, size_t pos, xla::LiteralProto* lit) {
    const std::string tname = TypeName(type);
    auto out_of_range = [&]() { return Fail(pos, "constant value out of range for " + tname); };
    double d = tok.kind == FloatToken::kInf ? std::numeric_limits<double>::infinity() : tok.magnitude;
    if (tok.negative) d = -d;
    if (tok.kind == FloatToken::kNan) {
      // Quiet NaN with the sign and the payload as written.
      uint64_t p = tok.nan_payload;
      switch (type) {
        case xla::F64: {
          if (p >= (uint64_t{1} << 52)) return out_of_range();
          uint64_t bits = (uint64_t{tok.negative} << 63) | (uint64_t{0x7ff} << 52) | (p ? p : uint64_t{1} << 51);
          double v;
          std::memcpy(&v, &bits, 8);
          lit->add_f64s(v);
          return true;
        }
        case xla::F32:
        case xla::C64:
        case xla::C128: {
          if (p >= (uint64_t{1} << 23)) return out_of_range();
          uint32_t bits = (uint32_t{tok.negative} << 31) | 0x7f800000u | static_cast<uint32_t>(p ? p : 0x400000);
          float v;
          std::memcpy(&v, &bits, 4);
          if (type == xla::C128) lit->add_c128s(v);
          else if (type == xla::C64) lit->add_c64s(v);
          else lit->add_f32s(v);
          return true;
        }
        case xla::BF16:
          if (p >= (uint64_t{1} << 7)) return out_of_range();
          AppendLe16(lit->mutable_bf16s(),
                     static_cast<uint16_t>((tok.negative ? 0x8000 : 0) | 0x7f80 | (p ? p : 0x40)));
          return true;
        case xla::F16:
          if (p >= (uint64_t{1} << 10)) return out_of_range();
          AppendLe16(lit->mutable_f16s(),
                     static_cast<uint16_t>((tok.negative ? 0x8000 : 0) | 0x7c00 | (p ? p : 0x200)));
          return true;
        default:
          break;
      }
      return Fail(pos, "NaN is not a value of type " + tname);
    }
    switch (type) {
      case xla::F64: lit->add_f64s(d); return true;
      case xla::C128: lit->add_c128s(d); return true;
      case xla::F32:
      case xla::C64: {
        float f = static_cast<float>(d);
        if (std::isinf(f) && !std::isinf(d)) return out_of_range();
        if (type == xla::C64) lit->add_c64s(f);
        else lit->add_f32s(f);
        return true;
      }
      case xla::BF16:
      case xla::F16: {
        float f = static_cast<float>(d);
        uint16_t h = type == xla::BF16 ? FloatToBf16(f) : FloatToHalf(f);
        bool is_inf = type == xla::BF16 ? (h & 0x7fff) == 0x7f80 : (h & 0x7fff) == 0x7c00;
        if (is_inf && !std::isinf(d)) return out_of_range();
        AppendLe16(type == xla::BF16 ? lit->mutable_bf16s() : lit->mutable_f16s(), h);
        return true;
      }
      default:
        return Fail(pos, "not a floating-point type: " + tname);
    }
  }

  static std::string* MiniFloatBytes(xla::PrimitiveType t, xla::LiteralProto* lit) {
    switch (t) {
      case xla::F8E5M2: return lit->mutable_f8e5m2s();
      case xla::F8E4M3: return lit->mutable_f8e4m3s();
      case xla::F8E3M4: return lit->mutable_f8e3m4s();
      case xla::F8E4M3FN: return lit->mutable_f8e4m3fns();
      case xla::F8E4M3B11FNUZ: return lit->mutable_f8e4m3b11fnuzs();
      case xla::F8E5M2FNUZ: return lit->mutable_f8e5m2fnuzs();
      case xla::F8E4M3FNUZ: return lit->mutable_f8e4m3fnuzs();
      case xla::F4E2M1FN: return lit->mutable_f4e2m1fns();
      case xla::F6E3M2FN: return lit->mutable_f6e3m2fns();
      case xla::F6E2M3FN: return lit->mutable_f6e2m3fns();
      case xla::F8E8M0FNU: return lit->mutable_f8e8m0fnus();
      default: return nullptr;
    }
  }

  // A value of a narrow float type, rounded to nearest-even from the decimal
  // text. A finite value that rounds past the type's largest finite value is
  // out of range (as XLA's parser says); inf and NaN only where the type has
  // them.
  bool AppendMiniFloat(xla::PrimitiveType type, const MiniFloat& f, const FloatToken& tok, size_t pos,
                       xla::LiteralProto* lit) {
    const std::string tname = TypeName(type);
    auto out_of_range = [&]() { return Fail(pos, "constant value out of range for " + tname); };
    auto push = [&](uint32_t code) {
      MiniFloatBytes(type, lit)->push_back(static_cast<char>(code));
      return true;
    };
    const int mb = f.mantissa_bits;
    const uint32_t sign_bit = f.specials == MiniFloat::kE8M0 ? 0 : 1u << (f.exponent_bits + mb);
    const uint32_t sign = tok.negative ? sign_bit : 0;
    const uint32_t exp_max = (1u << f.exponent_bits) - 1;  // the all-ones exponent field
    if (tok.kind == FloatToken::kNan) {
      switch (f.specials) {
        case MiniFloat::kIeee:
          if (tok.nan_payload >= (uint64_t{1} << mb)) return out_of_range();
          return push(sign | (exp_max << mb) |
                      static_cast<uint32_t>(tok.nan_payload ? tok.nan_payload : 1u << (mb - 1)));
        case MiniFloat::kFiniteNan:
          if (tok.nan_payload) return Fail(pos, "NaN payloads are not values of type " + tname);
          return push(sign | (exp_max << mb) | ((1u << mb) - 1));
        case MiniFloat::kFnuz:
          if (tok.nan_payload) return Fail(pos, "NaN payloads are not values of type " + tname);
          return push(0x80);
        case MiniFloat::kE8M0:
          if (tok.nan_payload) return Fail(pos, "NaN payloads are not values of type " + tname);
          return push(0xff);
        case MiniFloat::kFinite:
          break;
      }
      return Fail(pos, "NaN is not a value of type " + tname);
    }
    if (tok.kind == FloatToken::kInf) {
      if (f.specials != MiniFloat::kIeee) return Fail(pos, "inf is not a value of type " + tname);
      return push(sign | (exp_max << mb));
    }
    const double a = tok.magnitude;
    if (f.specials == MiniFloat::kE8M0) {  // 2^(field - 127), field 0..254
      if (a == 0) return Fail(pos, "0 is not a value of type " + tname);
      if (tok.negative) return out_of_range();
      int e = 0;
      const double q = 2 * std::frexp(a, &e);  // a = q * 2^(e-1), q in [1, 2)
      int k = e - 1;
      if (q > 1.5 || (q == 1.5 && ((k + f.bias) & 1))) ++k;  // nearest, ties to an even code
      const int field = k + f.bias;
      if (field < 0 || field > 254) return out_of_range();
      return push(static_cast<uint32_t>(field));
    }
    const uint32_t zero = f.specials == MiniFloat::kFnuz ? 0 : sign;  // FNUZ has no -0
    if (a == 0) return push(zero);
    const int emin = 1 - f.bias;  // exponent of the smallest normal value
    int e = 0;
    std::frexp(a, &e);
    const int quantum = std::max(e - 1, emin) - mb;  // the value of the last mantissa bit
    uint64_t n = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, -quantum)));  // ties to even
    if (n == 0) return push(zero);  // underflows to zero
    uint32_t field = 0, mant = static_cast<uint32_t>(n);
    if (n >= (uint64_t{1} << mb)) {  // normal (a subnormal that rounded up included)
      int exponent = quantum + mb;
      if (n == (uint64_t{1} << (mb + 1))) {
        n >>= 1;
        ++exponent;
      }
      if (exponent + f.bias > static_cast<int>(exp_max)) return out_of_range();
      field = static_cast<uint32_t>(exponent + f.bias);
      mant = static_cast<uint32_t>(n - (uint64_t{1} << mb));
    }
    if (field == exp_max && (f.specials == MiniFloat::kIeee ||
                             (f.specials == MiniFloat::kFiniteNan && mant == (1u << mb) - 1))) {
      return out_of_range();  // would be inf or NaN
    }
    return push(sign | (field << mb) | mant);
  }

  // One element value of `type`, appended to the literal's field for it.
  bool ParseLiteralElement(xla::PrimitiveType type, xla::LiteralProto* lit) {
    SkipSpace();
    size_t start = pos_;
    if (AtEnd()) return FailExpected("a constant value");
    switch (type) {
      case xla::PRED: {
        if (TryKeyword("true")) {
          lit->add_preds(true);
          return true;
        }
        if (TryKeyword("false")) {
          lit->add_preds(false);
          return true;
        }
        int64_t v = 0;
        if (!ParseIntRaw(&v)) return false;
        if (v != 0 && v != 1) return Fail(start, "constant value out of range for pred");
        lit->add_preds(v != 0);
        return true;
      }
      case xla::S8:
      case xla::S16:
      case xla::S32:
      case xla::S64: {
        int64_t v = 0;
        if (!ParseIntRaw(&v)) return false;
        int bits = type == xla::S8 ? 8 : type == xla::S16 ? 16 : type == xla::S32 ? 32 : 64;
        if (bits < 64) {
          int64_t lo = -(int64_t{1} << (bits - 1)), hi = (int64_t{1} << (bits - 1)) - 1;
          if (v < lo || v > hi) return Fail(start, "constant value out of range for " + TypeName(type));
        }
        if (type == xla::S8) lit->mutable_s8s()->push_back(static_cast<char>(static_cast<int8_t>(v)));
        else if (type == xla::S16) AppendLe16(lit->mutable_s16s(), static_cast<uint16_t>(static_cast<int16_t>(v)));
        else if (type == xla::S32) lit->add_s32s(static_cast<int32_t>(v));
        else lit->add_s64s(v);
        return true;
      }
      case xla::U8:
      case xla::U16:
      case xla::U32:
      case xla::U64: {
        uint64_t v;
        const char* begin = text_.data() + pos_;
        auto [ptr, ec] = std::from_chars(begin, text_.data() + text_.size(), v);
        if (ec == std::errc::result_out_of_range) return Fail(start, "constant value out of range for " + TypeName(type));
        if (ec != std::errc() || ptr == begin) return FailExpected("an unsigned integer");
        pos_ += static_cast<size_t>(ptr - begin);
        if (!CheckIntegerEnd(start)) return false;
        int bits = type == xla::U8 ? 8 : type == xla::U16 ? 16 : type == xla::U32 ? 32 : 64;
        if (bits < 64 && v >= (uint64_t{1} << bits)) {
          return Fail(start, "constant value out of range for " + TypeName(type));
        }
        if (type == xla::U8) lit->mutable_u8s()->push_back(static_cast<char>(static_cast<uint8_t>(v)));
        else if (type == xla::U16) AppendLe16(lit->mutable_u16s(), static_cast<uint16_t>(v));
        else if (type == xla::U32) lit->add_u32s(static_cast<uint32_t>(v));
        else lit->add_u64s(v);
        return true;
      }
      case xla::F16:
      case xla::BF16:
      case xla::F32:
      case xla::F64: {
        FloatToken tok;
        return ParseFloatToken(&tok) && AppendFloat(type, tok, start, lit);
      }
      case xla::S1:
      case xla::S2:
      case xla::S4: {
        // One byte per element: the value's low bits (two's complement).
        int64_t v = 0;
        if (!ParseIntRaw(&v)) return false;
        const int bits = type == xla::S1 ? 1 : type == xla::S2 ? 2 : 4;
        if (v < -(int64_t{1} << (bits - 1)) || v > (int64_t{1} << (bits - 1)) - 1) {
          return Fail(start, "constant value out of range for " + TypeName(type));
        }
        std::string* bytes = type == xla::S1   ? lit->mutable_s1s()
                             : type == xla::S2 ? lit->mutable_s2s()
                                               : lit->mutable_s4s();
        bytes->push_back(static_cast<char>(static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1)));
        return true;
      }
      case xla::U1:
      case xla::U2:
      case xla::U4: {
        int64_t v = 0;
        if (!ParseIntRaw(&v)) return false;
        const int bits = type == xla::U1 ? 1 : type == xla::U2 ? 2 : 4;
        if (v < 0 || v >= (int64_t{1} << bits)) return Fail(start, "constant value out of range for " + TypeName(type));
        std::string* bytes = type == xla::U1   ? lit->mutable_u1s()
                             : type == xla::U2 ? lit->mutable_u2s()
                                               : lit->mutable_u4s();
        bytes->push_back(static_cast<char>(v));
        return true;
      }
      case xla::F8E5M2:
      case xla::F8E4M3:
      case xla::F8E3M4:
      case xla::F8E4M3FN:
      case xla::F8E4M3B11FNUZ:
      case xla::F8E5M2FNUZ:
      case xla::F8E4M3FNUZ:
      case xla::F4E2M1FN:
      case xla::F6E3M2FN:
      case xla::F6E2M3FN:
      case xla::F8E8M0FNU: {
        FloatToken tok;
        return ParseFloatToken(&tok) && AppendMiniFloat(type, *MiniFloatOf(type), tok, start, lit);
      }
      case xla::C64:
      case xla::C128: {
        if (!Expect('(')) return false;
        FloatToken re, im;
        size_t re_pos = pos_;
        if (!ParseFloatToken(&re) || !AppendFloat(type, re, re_pos, lit) || !Expect(',')) return false;
        SkipSpace();
        size_t im_pos = pos_;
        return ParseFloatToken(&im) && AppendFloat(type, im, im_pos, lit) && Expect(')');
      }
      default:
        return Fail(start, "constants of type " + TypeName(type) + " are not supported");
    }
  }

  // '{' elements or nested '{...}' '}', flattened in row-major order.
  bool ParseNestedElements(xla::PrimitiveType type, xla::LiteralProto* lit, int64_t* count) {
    Nesting nesting(this);
    if (!nesting.Enter("constant braces")) return false;
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      SkipSpace();
      if (Peek() == '{') {
        if (!ParseNestedElements(type, lit, count)) return false;
      } else {
        if (!ParseLiteralElement(type, lit)) return false;
        ++*count;
      }
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in a constant");
  }

  // At "{...}" (after whitespace)?
  bool LooksElided() const {
    size_t p = pos_;
    auto skip = [&]() {
      while (p < text_.size() && std::isspace(static_cast<unsigned char>(text_[p]))) ++p;
    };
    if (p >= text_.size() || text_[p] != '{') return false;
    ++p;
    skip();
    if (text_.substr(p, 3) != "...") return false;
    p += 3;
    skip();
    return p < text_.size() && text_[p] == '}';
  }

  // A literal of `shape` (the constant's own shape) into `lit`.
  bool ParseLiteral(const xla::ShapeProto& shape, xla::LiteralProto* lit, bool* elided) {
    Nesting nesting(this);
    if (!nesting.Enter("tuple constants")) return false;
    *lit->mutable_shape() = shape;
    SkipSpace();
    // Older XLA printed the shape again inside: constant(f32[2] {1, 2}).
    if (LooksLikeArrayShape()) {
      xla::ShapeProto ignored;
      if (!ParseShape(&ignored)) return false;
      SkipSpace();
    }
    if (shape.element_type() == xla::TUPLE) {
      if (!Expect('(')) return false;
      for (int i = 0; i < shape.tuple_shapes_size(); ++i) {
        if (i > 0 && !Expect(',')) return false;
        if (!ParseLiteral(shape.tuple_shapes(i), lit->add_tuple_literals(), elided)) return false;
      }
      return Expect(')');
    }
    if (LooksElided()) {
      pos_ = text_.find('}', pos_) + 1;
      *elided = true;
      return true;
    }
    if (!IsArrayType(shape.element_type())) return Fail(pos_, "constants of type " + TypeName(shape.element_type()) + " are not supported");
    size_t start = pos_;
    if (shape.dimensions_size() == 0) return ParseLiteralElement(shape.element_type(), lit);
    std::optional<int64_t> want = ElementCountOf(shape);
    if (!want) return Fail(start, "the constant's shape has more elements than a 64-bit count holds");
    int64_t count = 0;
    if (!ParseNestedElements(shape.element_type(), lit, &count)) return false;
    if (count != *want) {
      return Fail(start, "constant has " + std::to_string(count) + " values, its shape has " +
                             std::to_string(*want) + " elements");
    }
    return true;
  }

  // --- Attribute values -----------------------------------------------------

  bool ParseIntList(std::vector<int64_t>* out) {
    out->clear();
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      int64_t v = 0;
      if (!ParseInt(&v)) return false;
      out->push_back(v);
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}'");
  }

  template <class Repeated>
  bool ParseIntListInto(Repeated* field) {
    std::vector<int64_t> v;
    if (!ParseIntList(&v)) return false;
    for (int64_t x : v) field->Add(x);
    return true;
  }

  // A shape index: {} or {1,2}.
  template <class Repeated>
  bool ParseShapeIndex(Repeated* field) {
    return ParseIntListInto(field);
  }

  // Names of called computations: %a or {%a, %b}.
  bool ParseComputationRefs(std::vector<NameRef>* out) {
    SkipSpace();
    if (Peek() == '{') {
      ++pos_;
      if (TryConsume('}')) return true;
      do {
        SkipSpace();
        NameRef ref{"", pos_};
        if (!ParseName(&ref.name, "a computation name")) return false;
        out->push_back(std::move(ref));
      } while (TryConsume(','));
      if (TryConsume('}')) return true;
      return FailExpected("',' or '}'");
    }
    NameRef ref{"", pos_};
    if (!ParseName(&ref.name, "a computation name")) return false;
    out->push_back(std::move(ref));
    return true;
  }

  // [a:b] or [a:b:s], no whitespace skipping inside beyond ParseInt's.
  bool ParseSliceDims(xla::HloInstructionProto* inst) {
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      if (!Expect('[')) return false;
      int64_t start = 0, limit = 0, stride = 1;
      if (!ParseInt(&start) || !Expect(':') || !ParseInt(&limit)) return false;
      if (TryConsume(':') && !ParseInt(&stride)) return false;
      if (!Expect(']')) return false;
      auto* d = inst->add_slice_dimensions();
      d->set_start(start);
      d->set_limit(limit);
      d->set_stride(stride);
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in slice");
  }

  // lo_hi[_interior] groups separated by 'x' (pad's padding=).
  bool ParsePadding(xla::PaddingConfig* config) {
    SkipSpace();
    do {
      int64_t lo = 0, hi = 0, interior = 0;
      if (!ParseIntRaw(&lo, false)) return false;
      if (Peek() != '_') return FailExpected("'_' in padding");
      ++pos_;
      if (!ParseIntRaw(&hi, false)) return false;
      if (Peek() == '_') {
        ++pos_;
        if (!ParseIntRaw(&interior, false)) return false;
      }
      auto* d = config->add_dimensions();
      d->set_edge_padding_low(lo);
      d->set_edge_padding_high(hi);
      d->set_interior_padding(interior);
    } while (TryConsumeRaw('x'));
    return true;
  }

  // Values of one window key: N(xN)*.
  bool ParseXSeparated(std::vector<int64_t>* out) {
    do {
      int64_t v = 0;
      if (!ParseIntRaw(&v, false)) return false;
      out->push_back(v);
    } while (TryConsumeRaw('x'));
    return true;
  }

  bool ParseWindow(xla::Window* window) {
    if (!Expect('{')) return false;
    std::vector<int64_t> size, stride, lhs_dilate, rhs_dilate, reversal;
    std::vector<std::pair<int64_t, int64_t>> pad;
    while (!TryConsume('}')) {
      std::string key;
      if (!ParseAttributeName(&key) || !Expect('=')) return false;
      SkipSpace();
      if (key == "size") {
        if (!ParseXSeparated(&size)) return false;
      } else if (key == "stride") {
        if (!ParseXSeparated(&stride)) return false;
      } else if (key == "lhs_dilate") {
        if (!ParseXSeparated(&lhs_dilate)) return false;
      } else if (key == "rhs_dilate") {
        if (!ParseXSeparated(&rhs_dilate)) return false;
      } else if (key == "rhs_reversal") {
        if (!ParseXSeparated(&reversal)) return false;
      } else if (key == "pad") {
        xla::PaddingConfig config;
        if (!ParsePadding(&config)) return false;
        for (const auto& d : config.dimensions()) pad.push_back({d.edge_padding_low(), d.edge_padding_high()});
      } else {
        return Fail(pos_, "unknown window attribute '" + key + "'");
      }
    }
    size_t n = size.size();
    auto check = [&](const auto& v, const char* what) {
      if (!v.empty() && v.size() != n) {
        return Fail(pos_ - 1, std::string("window ") + what + " has " + std::to_string(v.size()) +
                                  " dimensions, size has " + std::to_string(n));
      }
      return true;
    };
    if (!check(stride, "stride") || !check(lhs_dilate, "lhs_dilate") || !check(rhs_dilate, "rhs_dilate") ||
        !check(reversal, "rhs_reversal") || !check(pad, "pad")) {
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      auto* d = window->add_dimensions();
      d->set_size(size[i]);
      d->set_stride(stride.empty() ? 1 : stride[i]);
      d->set_base_dilation(lhs_dilate.empty() ? 1 : lhs_dilate[i]);
      d->set_window_dilation(rhs_dilate.empty() ? 1 : rhs_dilate[i]);
      d->set_window_reversal(!reversal.empty() && reversal[i] != 0);
      if (!pad.empty()) {
        d->set_padding_low(pad[i].first);
        d->set_padding_high(pad[i].second);
      }
    }
    return true;
  }

  // dim_labels=b01f_01io->b01f
  bool ParseDimLabels(xla::ConvolutionDimensionNumbers* dnums) {
    SkipSpace();
    size_t start = pos_;
    while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_' || Peek() == '-' ||
                        Peek() == '>' || Peek() == '?')) {
      ++pos_;
    }
    std::string_view all = text_.substr(start, pos_ - start);
    size_t us = all.find('_'), arrow = all.find("->");
    if (us == std::string_view::npos || arrow == std::string_view::npos || arrow < us) {
      return Fail(start, "malformed dim_labels '" + std::string(all) + "'");
    }
    std::string_view lhs = all.substr(0, us), rhs = all.substr(us + 1, arrow - us - 1), out = all.substr(arrow + 2);
    auto spatial = [](std::string_view s, auto* field) {
      std::vector<std::pair<int, int64_t>> dims;
      for (size_t i = 0; i < s.size(); ++i) {
        if (std::isdigit(static_cast<unsigned char>(s[i]))) dims.push_back({s[i] - '0', static_cast<int64_t>(i)});
      }
      std::sort(dims.begin(), dims.end());
      for (auto& d : dims) field->Add(d.second);
    };
    auto pos_of = [](std::string_view s, char c) { return static_cast<int64_t>(s.find(c)); };
    if (lhs.find('b') == std::string_view::npos || lhs.find('f') == std::string_view::npos ||
        rhs.find('i') == std::string_view::npos || rhs.find('o') == std::string_view::npos ||
        out.find('b') == std::string_view::npos || out.find('f') == std::string_view::npos) {
      return Fail(start, "malformed dim_labels '" + std::string(all) + "'");
    }
    dnums->set_input_batch_dimension(pos_of(lhs, 'b'));
    dnums->set_input_feature_dimension(pos_of(lhs, 'f'));
    spatial(lhs, dnums->mutable_input_spatial_dimensions());
    dnums->set_kernel_input_feature_dimension(pos_of(rhs, 'i'));
    dnums->set_kernel_output_feature_dimension(pos_of(rhs, 'o'));
    spatial(rhs, dnums->mutable_kernel_spatial_dimensions());
    dnums->set_output_batch_dimension(pos_of(out, 'b'));
    dnums->set_output_feature_dimension(pos_of(out, 'f'));
    spatial(out, dnums->mutable_output_spatial_dimensions());
    return true;
  }

  // The device ids of an iota tile assignment "<=[dims]" or "<=[dims]T(perm)"
  // (pos_ just after "<=").
  bool ParseIotaList(std::vector<int64_t>* out) {
    if (!Expect('[')) return false;
    std::vector<int64_t> dims;
    do {
      int64_t d = 0;
      if (!ParseInt(&d)) return false;
      dims.push_back(d);
    } while (TryConsume(','));
    if (!Expect(']')) return false;
    std::vector<int64_t> perm;
    for (size_t i = 0; i < dims.size(); ++i) perm.push_back(static_cast<int64_t>(i));
    if (Peek() == 'T') {
      ++pos_;
      if (!Expect('(')) return false;
      perm.clear();
      do {
        int64_t p = 0;
        if (!ParseInt(&p)) return false;
        perm.push_back(p);
      } while (TryConsume(','));
      if (!Expect(')')) return false;
      if (perm.size() != dims.size()) return Fail(pos_ - 1, "iota transpose does not match its dimensions");
    }
    int64_t total = 1;
    for (int64_t d : dims) {
      if (d < 0) return Fail(pos_ - 1, "negative dimension in an iota device list");
      if (__builtin_mul_overflow(total, d, &total) || total > kMaxIotaDevices) {
        return Fail(pos_ - 1, "iota device list longer than " + std::to_string(kMaxIotaDevices) + " devices");
      }
    }
    // Element i of the transposed array: its multi-index in the transposed
    // shape, mapped back to the source (row-major iota) index.
    std::vector<int64_t> tdims(dims.size()), src_stride(dims.size());
    int64_t s = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      src_stride[i] = s;
      s *= dims[i];
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(dims.size())) return Fail(pos_ - 1, "bad iota transpose");
      tdims[i] = dims[static_cast<size_t>(perm[i])];
    }
    std::vector<int64_t> index(dims.size(), 0);
    for (int64_t n = 0; n < total; ++n) {
      int64_t src = 0;
      for (size_t i = 0; i < dims.size(); ++i) src += index[i] * src_stride[static_cast<size_t>(perm[i])];
      out->push_back(src);
      for (size_t i = dims.size(); i-- > 0;) {
        if (++index[i] < tdims[i]) break;
        index[i] = 0;
      }
    }
    return true;
  }

  bool ParseSharding(xla::OpSharding* sharding) {
    Nesting nesting(this);
    if (!nesting.Enter("tuple shardings")) return false;
    if (!Expect('{')) return false;
    SkipSpace();
    if (Peek() == '}') {  // {}: the sharding of an empty tuple
      ++pos_;
      sharding->set_type(xla::OpSharding::TUPLE);
      return true;
    }
    if (Peek() == '{') {
      sharding->set_type(xla::OpSharding::TUPLE);
      do {
        if (!ParseSharding(sharding->add_tuple_shardings())) return false;
      } while (TryConsume(','));
      return Expect('}');
    }
    sharding->set_type(xla::OpSharding::REPLICATED);
    while (!TryConsume('}')) {
      SkipSpace();
      if (AtEnd()) return FailExpected("'}' after a sharding");
      size_t word_pos = pos_;
      std::string word(ReadIdentRaw());
      if (word.empty()) {
        return Fail(word_pos, "malformed sharding: unexpected " + Describe(word_pos));
      }
      if (word == "replicated") {
        sharding->set_type(xla::OpSharding::REPLICATED);
      } else if (word == "maximal") {
        sharding->set_type(xla::OpSharding::MAXIMAL);
      } else if (word == "manual") {
        sharding->set_type(xla::OpSharding::MANUAL);
      } else if (word == "unknown") {
        sharding->set_type(xla::OpSharding::UNKNOWN);
      } else if (word == "unreduced") {
        sharding->set_type(xla::OpSharding::UNREDUCED);
      } else if (word == "last_tile_dim_replicate") {
        sharding->set_replicate_on_last_tile_dim(true);
      } else if (word == "shard_as" || word == "shard_like") {
        int64_t group = 0;
        if (!ParseInt(&group)) return false;
        sharding->set_is_shard_group(true);
        sharding->set_shard_group_id(group);
        sharding->set_shard_group_type(word == "shard_as" ? xla::OpSharding::AS : xla::OpSharding::LIKE);
      } else if (word == "device" && TryConsume('=')) {
        int64_t device = 0;
        if (!ParseInt(&device)) return false;
        sharding->clear_tile_assignment_dimensions();
        sharding->add_tile_assignment_dimensions(1);
        sharding->clear_tile_assignment_devices();
        sharding->add_tile_assignment_devices(device);
      } else if (word == "devices" && TryConsume('=')) {
        sharding->set_type(xla::OpSharding::OTHER);
        if (!Expect('[')) return false;
        do {
          int64_t d = 0;
          if (!ParseInt(&d)) return false;
          sharding->add_tile_assignment_dimensions(d);
        } while (TryConsume(','));
        if (!Expect(']')) return false;
        std::vector<int64_t> devices;
        SkipSpace();
        if (LookingAt("<=")) {
          pos_ += 2;
          if (!ParseIotaList(&devices)) return false;
        } else {
          do {
            int64_t d = 0;
            if (!ParseInt(&d)) return false;
            devices.push_back(d);
          } while (TryConsume(','));
        }
        for (int64_t d : devices) sharding->add_tile_assignment_devices(d);
      } else if (word == "last_tile_dims" && TryConsume('=')) {
        if (!Expect('{')) return false;
        if (!TryConsume('}')) {
          do {
            xla::OpSharding::Type type;
            if (!ParseEnumWord(&xla::OpSharding::Type_Parse, &type, "sharding type")) return false;
            sharding->add_last_tile_dims(type);
          } while (TryConsume(','));
          if (!Expect('}')) return false;
        }
      } else if (word == "metadata" && TryConsume('=')) {
        // Where the sharding came from: debug information, not stored.
        if (!SkipBracketed()) return false;
      } else {
        return Fail(word_pos, "unknown sharding attribute '" + word + "'");
      }
    }
    return true;
  }

  // One bracketed value ({...}, [...], (...)) with its nested brackets and
  // strings.
  bool SkipBracketed() {
    SkipSpace();
    const char open = Peek();
    if (open != '{' && open != '[' && open != '(') return FailExpected("'{'");
    std::vector<char> stack;
    while (!AtEnd()) {
      char c = text_[pos_];
      if (c == '"') {
        std::string ignored;
        if (!ParseString(&ignored)) return false;
        continue;
      }
      ++pos_;
      if (c == '{' || c == '[' || c == '(') {
        stack.push_back(c == '{' ? '}' : c == '[' ? ']' : ')');
      } else if (c == '}' || c == ']' || c == ')') {
        if (stack.empty() || stack.back() != c) return Fail(pos_ - 1, std::string("unbalanced '") + c + "'");
        stack.pop_back();
        if (stack.empty()) return true;
      }
    }
    return Fail(pos_, std::string("unexpected end of input, expected the closing bracket of '") + open + "'");
  }

  bool ParseReplicaGroups(xla::HloInstructionProto* inst) {
    SkipSpace();
    if (Peek() == '[') {  // iota form [groups,size]<=[dims]T(perm)
      std::vector<int64_t> shape;
      ++pos_;
      do {
        int64_t d = 0;
        if (!ParseInt(&d)) return false;
        shape.push_back(d);
      } while (TryConsume(','));
      if (!Expect(']')) return false;
      SkipSpace();
      if (!LookingAt("<=")) return FailExpected("'<=' in iota replica groups");
      pos_ += 2;
      std::vector<int64_t> ids;
      if (!ParseIotaList(&ids)) return false;
      int64_t groups_times_size = 0;
      if (shape.size() != 2 || shape[0] < 0 || shape[1] < 0 ||
          __builtin_mul_overflow(shape[0], shape[1], &groups_times_size) ||
          groups_times_size != static_cast<int64_t>(ids.size())) {
        return Fail(pos_, "iota replica groups do not match their device count");
      }
      for (int64_t g = 0; g < shape[0]; ++g) {
        auto* group = inst->add_replica_groups();
        for (int64_t i = 0; i < shape[1]; ++i) group->add_replica_ids(ids[static_cast<size_t>(g * shape[1] + i)]);
      }
      return true;
    }
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      std::vector<int64_t> ids;
      if (!ParseIntList(&ids)) return false;
      auto* group = inst->add_replica_groups();
      for (int64_t id : ids) group->add_replica_ids(id);
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in replica_groups");
  }

  bool ParseMetadata(xla::OpMetadata* metadata) {
    if (!Expect('{')) return false;
    while (!TryConsume('}')) {
      std::string key;
      if (!ParseAttributeName(&key) || !Expect('=')) return false;
      std::string value;
      if (key == "op_type") {
        if (!ParseString(&value)) return false;
        metadata->set_op_type(value);
      } else if (key == "op_name") {
        if (!ParseString(&value)) return false;
        metadata->set_op_name(value);
      } else if (key == "source_file") {
        if (!ParseString(&value)) return false;
        metadata->set_source_file(value);
      } else if (key == "source_line") {
        int64_t line = 0;
        if (!ParseInt(&line)) return false;
        metadata->set_source_line(static_cast<int32_t>(line));
      } else {
        // Other keys (source_end_line, deduplicated_name, stack_frame_id, ...)
        // are single tokens, strings or bracketed values.
        SkipSpace();
        if (Peek() == '"') {
          if (!ParseString(&value)) return false;
        } else if (Peek() == '{' || Peek() == '[' || Peek() == '(') {
          if (!SkipValue()) return false;
        } else {
          while (!AtEnd() && !std::isspace(static_cast<unsigned char>(Peek())) && Peek() != '}') ++pos_;
        }
      }
    }
    return true;
  }

  bool ParseFrontendAttributes(xla::FrontendAttributes* attrs) {
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      SkipSpace();
      std::string key, value;
      if (Peek() == '"') {
        if (!ParseString(&key)) return false;
      } else if (!ParseAttributeName(&key)) {
        return false;
      }
      if (!Expect('=')) return false;
      SkipSpace();
      if (Peek() == '"') {
        if (!ParseString(&value)) return false;
      } else {
        const size_t value_pos = pos_;
        std::string_view raw;
        if (!SkipValue(&raw)) return false;
        if (!IsValidUtf8(raw)) return Fail(value_pos, "attribute value is not valid UTF-8");
        value = std::string(raw);
      }
      (*attrs->mutable_map())[key] = value;
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in frontend_attributes");
  }

  // {{}: (0, {}), {1}: (1, {0})}
  bool ParseOutputOperandAliasing(xla::HloInstructionProto* inst) {
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      auto* alias = inst->add_output_operand_aliasing();
      int64_t operand = 0;
      if (!ParseShapeIndex(alias->mutable_output_shape_index()) || !Expect(':') || !Expect('(') ||
          !ParseInt(&operand) || !Expect(',') || !ParseShapeIndex(alias->mutable_operand_shape_index()) ||
          !Expect(')')) {
        return false;
      }
      alias->set_operand_index(operand);
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in output_to_operand_aliasing");
  }

  // An enum value written in lower or upper case (rng_default, API_VERSION_...).
  template <class Enum>
  bool ParseEnumWord(bool (*parse)(const std::string&, Enum*), Enum* out, const std::string& what) {
    SkipSpace();
    size_t start = pos_;
    std::string word(ReadIdentRaw());
    for (char& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (word.empty() || !parse(word, out)) {
      pos_ = start;
      return Fail(start, "unknown " + what + " " + Describe(start));
    }
    return true;
  }

  // --- Instructions ---------------------------------------------------------

  bool ParseOperands(PendingInstruction* inst) {
    if (!Expect('(')) return false;
    if (TryConsume(')')) return true;
    do {
      SkipSpace();
      // Older dumps write each operand's shape before its name.
      if (Peek() == '(' || LooksLikeArrayShape()) {
        xla::ShapeProto ignored;
        if (!ParseShape(&ignored)) return false;
        SkipSpace();
      }
      NameRef ref{"", pos_};
      if (!ParseName(&ref.name, "an operand name")) return false;
      inst->operands.push_back(std::move(ref));
    } while (TryConsume(','));
    if (TryConsume(')')) return true;
    return FailExpected("',' or ')' after an operand");
  }

  // --- Instruction attributes -----------------------------------------------
  //
  // One table (AttributeTable) maps each attribute name XLA's text format has
  // to the opcodes XLA accepts it on and to the function that reads its value
  // into the proto. An attribute that is not in the table, or that is given
  // for another opcode, or twice, is an error that names it: nothing that
  // could change what the module computes is skipped. The only attributes read
  // and not stored are the debug information that has no place in the
  // canonical key (`origin`, `statistics`), see kDebugOnlyAttributes.

  // Called computations by role, ordered as XLA stores them when done.
  struct Calls {
    std::vector<NameRef> generic, branches;
    std::optional<NameRef> body, condition, on_true, on_false, select, scatter;
  };

  // What an attribute's reader gets: the instruction, its called
  // computations, the attribute's name and where its value starts.
  struct AttrContext {
    PendingInstruction* pi;
    Calls* calls;
    std::string_view name;
    size_t pos;
  };
  using AttrReader = bool (*)(Parser&, AttrContext&);
  struct AttrRule {
    std::vector<std::string_view> opcodes;  // empty: every opcode
    AttrReader read;
  };

  static bool OpcodeIn(std::string_view op, const std::vector<std::string_view>& ops) {
    return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
  }

  // Debug information: read (balanced) and not stored.
  static constexpr std::string_view kDebugOnlyAttributes[] = {"origin", "statistics"};

  template <class Setter>
  bool ReadInt(Setter&& set) {
    int64_t v = 0;
    if (!ParseInt(&v)) return false;
    set(v);
    return true;
  }
  template <class Setter>
  bool ReadBool(Setter&& set) {
    bool b = false;
    if (!ParseBool(&b)) return false;
    set(b);
    return true;
  }
  template <class Setter>
  bool ReadString(Setter&& set) {
    std::string s;
    if (!ParseString(&s)) return false;
    set(std::move(s));
    return true;
  }

  // {{a,b},{c,d},...}
  bool ParseIntListList(std::vector<std::vector<int64_t>>* out, const char* what) {
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    do {
      std::vector<int64_t> v;
      if (!ParseIntList(&v)) return false;
      out->push_back(std::move(v));
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected(std::string("',' or '}' in ") + what);
  }

  // L.1@2:4 or L.1@2:4_R.0@2:4 (dot sparsity).
  bool ParseSparsity(xla::HloInstructionProto* inst) {
    SkipSpace();
    do {
      size_t start = pos_;
      char side = Peek();
      if (side != 'L' && side != 'R')
        return Fail(start, "malformed sparsity: expected L or R, found " + Describe(start));
      ++pos_;
      int64_t dim = 0, n = 0, m = 0;
      if (!TryConsumeRaw('.') || !ParseIntRaw(&dim, false) || !TryConsumeRaw('@') || !ParseIntRaw(&n, false) ||
          !TryConsumeRaw(':') || !ParseIntRaw(&m, false)) {
        return Fail(start, "malformed sparsity descriptor (expected e.g. L.1@2:4)");
      }
      if (dim < 0 || n < 1 || m <= n) return Fail(start, "invalid sparsity descriptor");
      auto* d = inst->add_dot_sparsity();
      d->set_type(xla::SPARSITY_STRUCTURED_N_M);
      d->set_index(side == 'L' ? 0 : 1);
      d->set_dimension(static_cast<int32_t>(dim));
      d->set_n(static_cast<int32_t>(n));
      d->set_m(static_cast<int32_t>(m));
    } while (TryConsumeRaw('_'));
    return true;
  }

  // {mode=highest} or {tolerance={atol=0,rtol=0,ulps=1}}
  bool ParseResultAccuracy(xla::ResultAccuracy* accuracy) {
    if (!Expect('{')) return false;
    std::string key;
    size_t key_pos = pos_;
    if (!ParseAttributeName(&key) || !Expect('=')) return false;
    SkipSpace();
    if (key == "mode") {
      xla::ResultAccuracy::Mode mode;
      if (!ParseEnumWord(&xla::ResultAccuracy::Mode_Parse, &mode, "result accuracy mode")) return false;
      accuracy->set_mode(mode);
    } else if (key == "tolerance") {
      auto* t = accuracy->mutable_tolerance();
      if (!Expect('{')) return false;
      while (!TryConsume('}')) {
        std::string field;
        size_t field_pos = pos_;
        if (!ParseAttributeName(&field) || !Expect('=')) return false;
        SkipSpace();
        if (field == "ulps") {
          int64_t v = 0;
          if (!ParseInt(&v)) return false;
          t->set_ulps(v);
        } else if (field == "atol" || field == "rtol") {
          size_t start = pos_;
          FloatToken tok;
          if (!ParseFloatToken(&tok)) return false;
          if (tok.kind != FloatToken::kNumber) return Fail(start, field + " must be a finite number");
          double v = tok.negative ? -tok.magnitude : tok.magnitude;
          if (field == "atol") t->set_atol(v);
          else t->set_rtol(v);
        } else {
          return Fail(field_pos, "unknown result_accuracy tolerance field '" + field + "'");
        }
        TryConsume(',');
      }
    } else {
      return Fail(key_pos, "unknown result_accuracy field '" + key + "'");
    }
    return Expect('}');
  }

  // domain={kind="sharding", entry={...}, exit={...}}
  bool ParseDomain(xla::HloInstructionProto* inst) {
    if (!Expect('{')) return false;
    bool kind = false, entry = false, exit = false;
    while (!TryConsume('}')) {
      std::string key;
      size_t key_pos = pos_;
      if (!ParseAttributeName(&key) || !Expect('=')) return false;
      if (key == "kind") {
        std::string value;
        size_t value_pos = pos_;
        if (!ParseString(&value)) return false;
        if (value != "sharding") return Fail(value_pos, "unsupported domain kind \"" + value + "\"");
        kind = true;
      } else if (key == "entry") {
        if (!ParseSharding(inst->mutable_domain_entry_sharding())) return false;
        entry = true;
      } else if (key == "exit") {
        if (!ParseSharding(inst->mutable_domain_exit_sharding())) return false;
        exit = true;
      } else {
        return Fail(key_pos, "unknown domain field '" + key + "'");
      }
      TryConsume(',');
    }
    if (!kind || !entry || !exit) return Fail(pos_ - 1, "domain needs kind=, entry= and exit=");
    return true;
  }

  // dot's algorithm=dot_bf16_bf16_f32 -> ALG_DOT_BF16_BF16_F32.
  bool ParseDotAlgorithm(xla::PrecisionConfig* config) {
    SkipSpace();
    size_t start = pos_;
    std::string word(ReadIdentRaw());
    for (char& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    xla::PrecisionConfig::Algorithm alg;
    if (word.empty() || (!xla::PrecisionConfig::Algorithm_Parse("ALG_" + word, &alg) &&
                         !xla::PrecisionConfig::Algorithm_Parse(word, &alg))) {
      return Fail(start, "unknown dot algorithm " + Describe(start));
    }
    config->set_algorithm(alg);
    return true;
  }

  // Readers for the common shapes of attribute: a scalar or a list into one
  // field of the instruction.
  template <auto kSet>
  static bool IntAttr(Parser& p, AttrContext& c) {
    return p.ReadInt([&](int64_t v) { (c.pi->proto.*kSet)(v); });
  }
  template <auto kSet>
  static bool BoolAttr(Parser& p, AttrContext& c) {
    return p.ReadBool([&](bool b) { (c.pi->proto.*kSet)(b); });
  }
  template <auto kMutable>
  static bool IntListAttr(Parser& p, AttrContext& c) {
    return p.ParseIntListInto((c.pi->proto.*kMutable)());
  }
  template <class Enum, bool (*kParse)(const std::string&, Enum*), void (xla::HloInstructionProto::*kSet)(Enum)>
  static bool EnumAttr(Parser& p, AttrContext& c) {
    Enum v;
    if (!p.ParseEnumWord(kParse, &v, std::string(c.name))) return false;
    (c.pi->proto.*kSet)(v);
    return true;
  }
  // gather / scatter dimension numbers.
  template <auto kMutable>
  static bool GatherDims(Parser& p, AttrContext& c) {
    return p.ParseIntListInto((c.pi->proto.mutable_gather_dimension_numbers()->*kMutable)());
  }
  template <auto kMutable>
  static bool ScatterDims(Parser& p, AttrContext& c) {
    return p.ParseIntListInto((c.pi->proto.mutable_scatter_dimension_numbers()->*kMutable)());
  }
  // dot's dimension numbers, or ragged-dot's (inside its ragged ones).
  template <auto kMutable>
  static bool DotDims(Parser& p, AttrContext& c) {
    auto& i = c.pi->proto;
    xla::DotDimensionNumbers* d = i.opcode() == "ragged-dot"
                                      ? i.mutable_ragged_dot_dimension_numbers()->mutable_dot_dimension_numbers()
                                      : i.mutable_dot_dimension_numbers();
    return p.ParseIntListInto((d->*kMutable)());
  }
  template <auto kMutable>
  static bool RaggedDims(Parser& p, AttrContext& c) {
    return p.ParseIntListInto((c.pi->proto.mutable_ragged_dot_dimension_numbers()->*kMutable)());
  }
  // Computation references by role.
  template <auto kSlot>
  static bool OneComputation(Parser& p, AttrContext& c) {
    return p.ParseOneComputation(c, &(c.calls->*kSlot));
  }
  template <auto kList>
  static bool Computations(Parser& p, AttrContext& c) {
    if (c.name == "calls" && c.pi->proto.opcode() == "fusion") c.pi->is_fusion = true;
    return p.ParseComputationRefs(&(c.calls->*kList));
  }

  // The table. Opcode lists follow XLA's parser (hlo_parser.cc), plus the
  // older spelling npc reads (cross-replica-sum = all-reduce).
  static const std::unordered_map<std::string_view, AttrRule>& AttributeTable() {
    using I = xla::HloInstructionProto;
    using G = xla::GatherDimensionNumbers;
    using S = xla::ScatterDimensionNumbers;
    using D = xla::DotDimensionNumbers;
    using R = xla::RaggedDotDimensionNumbers;
    static const std::vector<std::string_view> kAllReduce = {"all-reduce", "all-reduce-start", "reduce-scatter",
                                                             "cross-replica-sum"};
    static const std::vector<std::string_view> kCollectives = {
        "all-gather", "all-gather-start", "all-reduce", "all-reduce-start", "reduce-scatter", "cross-replica-sum",
        "all-to-all", "ragged-all-to-all", "collective-broadcast"};
    static const std::vector<std::string_view> kChannel = {
        "all-gather", "all-gather-start", "all-reduce", "all-reduce-start", "reduce-scatter", "cross-replica-sum",
        "all-to-all", "ragged-all-to-all", "collective-broadcast", "collective-permute", "collective-permute-start",
        "send", "send-done", "recv", "recv-done"};
    static const std::vector<std::string_view> kGlobalIds = {"all-gather", "all-gather-start", "all-reduce",
                                                             "all-reduce-start", "reduce-scatter", "cross-replica-sum"};
    static const std::vector<std::string_view> kConstrainLayout = {
        "all-gather", "all-gather-start", "all-reduce", "all-reduce-start", "reduce-scatter", "cross-replica-sum",
        "all-to-all"};
    static const std::vector<std::string_view> kSendRecv = {"send", "send-done", "recv", "recv-done"};
    static const std::vector<std::string_view> kBatchNorm = {"batch-norm-training", "batch-norm-inference",
                                                             "batch-norm-grad"};
    static const std::vector<std::string_view> kDots = {"dot", "ragged-dot"};
    static const std::vector<std::string_view> kPrecision = {"dot", "ragged-dot", "convolution", "custom-call"};
    static const std::vector<std::string_view> kConv = {"convolution", "custom-call"};
    static const std::vector<std::string_view> kWindow = {"convolution", "reduce-window", "select-and-scatter",
                                                          "custom-call"};
    static const std::vector<std::string_view> kAccuracy = {
        "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "sqrt", "cbrt", "rsqrt",
        "tanh", "erf", "sine", "cosine", "tan"};
    static const std::vector<std::string_view> kAsync = {"async-start", "async-update", "async-done"};
    static const std::vector<std::string_view> kPermute = {"collective-permute", "collective-permute-start"};
    static const std::vector<std::string_view> kGatherScatter = {"gather", "scatter"};
    static const std::vector<std::string_view> kToApply = {
        "all-reduce", "all-reduce-start", "reduce-scatter", "cross-replica-sum", "sort", "call", "reduce-window",
        "map", "reduce", "scatter", "custom-call"};
    static const std::vector<std::string_view> kDimensions = {
        "broadcast", "concatenate", "reduce", "reverse", "transpose", "sort", "map", "all-gather",
        "all-gather-start", "reduce-scatter", "all-to-all", "ragged-all-to-all", "get-dimension-size",
        "set-dimension-size"};
    const std::vector<std::string_view> kAny;
    auto only = [](std::string_view op) { return std::vector<std::string_view>{op}; };

    static const std::unordered_map<std::string_view, AttrRule> table = {
        // Any opcode.
        {"metadata", {kAny, &MetadataAttr}},
        {"frontend_attributes", {kAny, &FrontendAttributesAttr}},
        {"sharding", {kAny, &ShardingAttr}},
        {"backend_config", {kAny, &BackendConfigAttr}},
        {"control-predecessors", {kAny, &ControlPredecessorsAttr}},
        {"parameter_replication", {kAny, &ParameterReplicationAttr}},
        // Shapes, slices, dimensions.
        {"dimensions", {kDimensions, &IntListAttr<&I::mutable_dimensions>}},
        {"iota_dimension", {only("iota"), &IntAttr<&I::add_dimensions>}},
        {"inferred_dimension", {only("reshape"), &IntAttr<&I::add_dimensions>}},
        {"slice", {only("slice"), [](Parser& p, AttrContext& c) { return p.ParseSliceDims(&c.pi->proto); }}},
        {"dynamic_slice_sizes", {only("dynamic-slice"), &IntListAttr<&I::mutable_dynamic_slice_sizes>}},
        {"padding",
         {only("pad"), [](Parser& p, AttrContext& c) { return p.ParsePadding(c.pi->proto.mutable_padding_config()); }}},
        {"window", {kWindow, [](Parser& p, AttrContext& c) { return p.ParseWindow(c.pi->proto.mutable_window()); }}},
        {"dim_labels",
         {kConv,
          [](Parser& p, AttrContext& c) {
            return p.ParseDimLabels(c.pi->proto.mutable_convolution_dimension_numbers());
          }}},
        {"feature_group_count", {kConv, &IntAttr<&I::set_feature_group_count>}},
        {"batch_group_count", {kConv, &IntAttr<&I::set_batch_group_count>}},
        // dot, ragged-dot.
        {"lhs_contracting_dims", {kDots, &DotDims<&D::mutable_lhs_contracting_dimensions>}},
        {"rhs_contracting_dims", {kDots, &DotDims<&D::mutable_rhs_contracting_dimensions>}},
        {"lhs_batch_dims", {kDots, &DotDims<&D::mutable_lhs_batch_dimensions>}},
        {"rhs_batch_dims", {kDots, &DotDims<&D::mutable_rhs_batch_dimensions>}},
        {"lhs_ragged_dims", {only("ragged-dot"), &RaggedDims<&R::mutable_lhs_ragged_dimensions>}},
        {"rhs_group_dims", {only("ragged-dot"), &RaggedDims<&R::mutable_rhs_group_dimensions>}},
        {"sparsity", {only("dot"), [](Parser& p, AttrContext& c) { return p.ParseSparsity(&c.pi->proto); }}},
        {"operand_precision", {kPrecision, &OperandPrecisionAttr}},
        {"algorithm", {{"dot", "rng-bit-generator"}, &AlgorithmAttr}},
        // compare.
        {"direction", {only("compare"), &DirectionAttr}},
        {"type", {only("compare"), &ComparisonTypeAttr}},
        // Called computations.
        {"to_apply", {kToApply, &Computations<&Calls::generic>}},
        {"calls", {{"fusion", "async-start", "async-update", "async-done"}, &Computations<&Calls::generic>}},
        {"called_computations", {only("custom-call"), &Computations<&Calls::generic>}},
        {"branch_computations", {only("conditional"), &Computations<&Calls::branches>}},
        {"body", {only("while"), &OneComputation<&Calls::body>}},
        {"condition", {only("while"), &OneComputation<&Calls::condition>}},
        {"true_computation", {only("conditional"), &OneComputation<&Calls::on_true>}},
        {"false_computation", {only("conditional"), &OneComputation<&Calls::on_false>}},
        {"select", {only("select-and-scatter"), &OneComputation<&Calls::select>}},
        {"scatter", {only("select-and-scatter"), &OneComputation<&Calls::scatter>}},
        // Tuples, calls, sort, fusion, async, copy-start.
        {"index", {only("get-tuple-element"), &IntAttr<&I::set_tuple_index>}},
        {"is_stable", {only("sort"), &BoolAttr<&I::set_is_stable>}},
        {"is_composite", {only("call"), &BoolAttr<&I::set_is_composite>}},
        {"kind", {only("fusion"), &FusionKindAttr}},
        {"output_to_operand_aliasing",
         {{"custom-call", "fusion"},
          [](Parser& p, AttrContext& c) { return p.ParseOutputOperandAliasing(&c.pi->proto); }}},
        {"async_execution_thread",
         {kAsync,
          [](Parser& p, AttrContext& c) {
            return p.ReadString([&](std::string s) { c.pi->proto.set_async_execution_thread(s); });
          }}},
        {"cross_program_prefetch_index", {only("copy-start"), &IntAttr<&I::set_cross_program_prefetch_index>}},
        // Collectives, send / recv.
        {"replica_groups",
         {kCollectives, [](Parser& p, AttrContext& c) { return p.ParseReplicaGroups(&c.pi->proto); }}},
        {"channel_id", {kChannel, &IntAttr<&I::set_channel_id>}},
        {"all_reduce_id", {kAllReduce, &IntAttr<&I::set_all_reduce_id>}},
        {"use_global_device_ids", {kGlobalIds, &BoolAttr<&I::set_use_global_device_ids>}},
        {"constrain_layout", {kConstrainLayout, &BoolAttr<&I::set_constrain_layout>}},
        {"source_target_pairs", {kPermute, &SourceTargetPairsAttr}},
        {"slice_sizes", {{"gather", "collective-permute", "collective-permute-start"}, &SliceSizesAttr}},
        {"is_host_transfer", {kSendRecv, &BoolAttr<&I::set_is_host_transfer>}},
        // custom-call.
        {"custom_call_target",
         {only("custom-call"),
          [](Parser& p, AttrContext& c) {
            return p.ReadString([&](std::string s) { c.pi->proto.set_custom_call_target(s); });
          }}},
        {"custom_call_has_side_effect", {only("custom-call"), &BoolAttr<&I::set_custom_call_has_side_effect>}},
        // API_VERSION_UNSPECIFIED, which newer XLA refuses, is what older
        // torch-neuronx dumps print: kept as written.
        {"api_version",
         {only("custom-call"), &EnumAttr<xla::CustomCallApiVersion, &xla::CustomCallApiVersion_Parse,
                                         &I::set_custom_call_api_version>}},
        {"schedule",
         {only("custom-call"),
          &EnumAttr<xla::CustomCallSchedule, &xla::CustomCallSchedule_Parse, &I::set_custom_call_schedule>}},
        {"padding_type",
         {only("custom-call"), &EnumAttr<xla::PaddingType, &xla::PaddingType_Parse, &I::set_padding_type>}},
        {"operand_layout_constraints", {only("custom-call"), &OperandLayoutConstraintsAttr}},
        {"literal", {only("custom-call"), &CustomCallLiteralAttr}},
        // Other single-opcode attributes.
        {"epsilon", {kBatchNorm, &EpsilonAttr}},
        {"feature_index", {kBatchNorm, &IntAttr<&I::set_feature_index>}},
        {"exponent_bits", {only("reduce-precision"), &IntAttr<&I::set_exponent_bits>}},
        {"mantissa_bits", {only("reduce-precision"), &IntAttr<&I::set_mantissa_bits>}},
        {"fft_type", {only("fft"), &EnumAttr<xla::FftType, &xla::FftType_Parse, &I::set_fft_type>}},
        {"fft_length", {only("fft"), &IntListAttr<&I::mutable_fft_length>}},
        {"left_side", {only("triangular-solve"), &TriangularSolveAttr}},
        {"unit_diagonal", {only("triangular-solve"), &TriangularSolveAttr}},
        {"transpose_a", {only("triangular-solve"), &TriangularSolveAttr}},
        {"lower", {{"triangular-solve", "cholesky"}, &TriangularSolveAttr}},
        {"k", {only("topk"), &IntAttr<&I::set_k>}},
        {"largest", {only("topk"), &BoolAttr<&I::set_largest>}},
        {"distribution", {only("rng"), &DistributionAttr}},
        {"delta", {only("rng-get-and-update-state"), &IntAttr<&I::set_delta>}},
        {"infeed_config",
         {only("infeed"),
          [](Parser& p, AttrContext& c) {
            return p.ReadString([&](std::string s) { c.pi->proto.set_infeed_config(s); });
          }}},
        {"outfeed_config",
         {only("outfeed"),
          [](Parser& p, AttrContext& c) {
            return p.ReadString([&](std::string s) { c.pi->proto.set_outfeed_config(s); });
          }}},
        {"outfeed_shape",
         {only("outfeed"),
          [](Parser& p, AttrContext& c) { return p.ParseShape(c.pi->proto.mutable_outfeed_shape()); }}},
        {"result_accuracy",
         {kAccuracy,
          [](Parser& p, AttrContext& c) { return p.ParseResultAccuracy(c.pi->proto.mutable_result_accuracy()); }}},
        {"domain", {only("domain"), [](Parser& p, AttrContext& c) { return p.ParseDomain(&c.pi->proto); }}},
        // gather / scatter.
        {"offset_dims", {only("gather"), &GatherDims<&G::mutable_offset_dims>}},
        {"collapsed_slice_dims", {only("gather"), &GatherDims<&G::mutable_collapsed_slice_dims>}},
        {"start_index_map", {only("gather"), &GatherDims<&G::mutable_start_index_map>}},
        {"operand_batching_dims", {only("gather"), &GatherDims<&G::mutable_operand_batching_dims>}},
        {"start_indices_batching_dims", {only("gather"), &GatherDims<&G::mutable_start_indices_batching_dims>}},
        {"update_window_dims", {only("scatter"), &ScatterDims<&S::mutable_update_window_dims>}},
        {"inserted_window_dims", {only("scatter"), &ScatterDims<&S::mutable_inserted_window_dims>}},
        {"scatter_dims_to_operand_dims", {only("scatter"), &ScatterDims<&S::mutable_scatter_dims_to_operand_dims>}},
        {"input_batching_dims", {only("scatter"), &ScatterDims<&S::mutable_input_batching_dims>}},
        {"scatter_indices_batching_dims", {only("scatter"), &ScatterDims<&S::mutable_scatter_indices_batching_dims>}},
        {"index_vector_dim", {kGatherScatter, &IndexVectorDimAttr}},
        {"indices_are_sorted", {kGatherScatter, &BoolAttr<&I::set_indices_are_sorted>}},
        {"unique_indices", {only("scatter"), &BoolAttr<&I::set_unique_indices>}},
    };
    return table;
  }

  // The readers that need more than one field or a check.
  static bool MetadataAttr(Parser& p, AttrContext& c) { return p.ParseMetadata(c.pi->proto.mutable_metadata()); }
  static bool FrontendAttributesAttr(Parser& p, AttrContext& c) {
    return p.ParseFrontendAttributes(c.pi->proto.mutable_frontend_attributes());
  }
  static bool ShardingAttr(Parser& p, AttrContext& c) { return p.ParseSharding(c.pi->proto.mutable_sharding()); }
  static bool BackendConfigAttr(Parser& p, AttrContext& c) {
    if (p.Peek() == '"') return p.ReadString([&](std::string s) { c.pi->proto.set_backend_config(s); });
    const size_t value_pos = p.pos_;
    std::string_view raw;
    if (!p.SkipValue(&raw)) return false;
    if (!IsValidUtf8(raw)) return p.Fail(value_pos, "backend_config is not valid UTF-8");
    c.pi->proto.set_backend_config(std::string(raw));
    return true;
  }
  static bool ControlPredecessorsAttr(Parser& p, AttrContext& c) {
    if (!p.Expect('{')) return false;
    if (p.TryConsume('}')) return true;
    do {
      p.SkipSpace();
      NameRef ref{"", p.pos_};
      if (!p.ParseName(&ref.name, "an instruction name")) return false;
      c.pi->control_predecessors.push_back(std::move(ref));
    } while (p.TryConsume(','));
    return p.Expect('}');
  }
  static bool ParameterReplicationAttr(Parser& p, AttrContext& c) {
    if (!p.Expect('{')) return false;
    auto* rep = c.pi->proto.mutable_parameter_replication();
    if (p.TryConsume('}')) return true;
    do {
      if (!p.ReadBool([&](bool b) { rep->add_replicated_at_leaf_buffers(b); })) return false;
    } while (p.TryConsume(','));
    return p.Expect('}');
  }
  static bool OperandPrecisionAttr(Parser& p, AttrContext& c) {
    if (!p.Expect('{')) return false;
    auto* pc = c.pi->proto.mutable_precision_config();
    pc->clear_operand_precision();
    if (p.TryConsume('}')) return true;
    do {
      xla::PrecisionConfig::Precision v;
      if (!p.ParseEnumWord(&xla::PrecisionConfig::Precision_Parse, &v, "precision")) return false;
      pc->add_operand_precision(v);
    } while (p.TryConsume(','));
    return p.Expect('}');
  }
  // dot's algorithm=dot_bf16_bf16_f32, rng-bit-generator's algorithm=rng_philox.
  static bool AlgorithmAttr(Parser& p, AttrContext& c) {
    auto& i = c.pi->proto;
    if (i.opcode() == "dot") return p.ParseDotAlgorithm(i.mutable_precision_config());
    xla::RandomAlgorithm alg;
    if (!p.ParseEnumWord(&xla::RandomAlgorithm_Parse, &alg, "rng algorithm")) return false;
    i.set_rng_algorithm(alg);
    return true;
  }
  static bool DirectionAttr(Parser& p, AttrContext& c) {
    size_t start = p.pos_;
    std::string dir(p.ReadIdentRaw());
    static const std::unordered_set<std::string> dirs = {"EQ", "NE", "GE", "GT", "LE", "LT"};
    if (!dirs.count(dir)) return p.Fail(start, "unknown comparison direction " + p.Describe(start));
    c.pi->proto.set_comparison_direction(dir);
    return true;
  }
  static bool ComparisonTypeAttr(Parser& p, AttrContext& c) {
    size_t start = p.pos_;
    std::string type(p.ReadIdentRaw());
    static const std::unordered_set<std::string> types = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
    if (!types.count(type)) return p.Fail(start, "unknown comparison type " + p.Describe(start));
    c.pi->proto.set_comparison_type(type);
    c.pi->compare_type_given = true;
    return true;
  }
  static bool FusionKindAttr(Parser& p, AttrContext& c) {
    std::string_view kind = p.ReadIdentRaw();
    if (kind.empty()) return p.FailExpected("a fusion kind");
    c.pi->proto.set_fusion_kind(std::string(kind));
    return true;
  }
  static bool SourceTargetPairsAttr(Parser& p, AttrContext& c) {
    std::vector<std::vector<int64_t>> pairs;
    if (!p.ParseIntListList(&pairs, "source_target_pairs")) return false;
    for (const auto& pair : pairs) {
      if (pair.size() != 2) return p.Fail(c.pos, "source_target_pairs must be a list of {source,target} pairs");
      auto* st = c.pi->proto.add_source_target_pairs();
      st->set_source(pair[0]);
      st->set_target(pair[1]);
    }
    return true;
  }
  // gather's slice_sizes={..}; collective-permute's slice_sizes={{..},..},
  // flattened into dynamic_slice_sizes as XLA stores them.
  static bool SliceSizesAttr(Parser& p, AttrContext& c) {
    if (c.pi->proto.opcode() == "gather") return p.ParseIntListInto(c.pi->proto.mutable_gather_slice_sizes());
    std::vector<std::vector<int64_t>> sizes;
    if (!p.ParseIntListList(&sizes, "slice_sizes")) return false;
    for (const auto& s : sizes) {
      for (int64_t v : s) c.pi->proto.add_dynamic_slice_sizes(v);
    }
    return true;
  }
  static bool OperandLayoutConstraintsAttr(Parser& p, AttrContext& c) {
    if (!p.Expect('{')) return false;
    // XLA marks a custom-call with operand layouts as layout-constrained.
    c.pi->proto.set_constrain_layout(true);
    if (p.TryConsume('}')) return true;
    do {
      if (!p.ParseShape(c.pi->proto.add_operand_shapes_with_layout())) return false;
    } while (p.TryConsume(','));
    return p.Expect('}');
  }
  // literal=s32[2] {1, 2}: a shape, then the values.
  static bool CustomCallLiteralAttr(Parser& p, AttrContext& c) {
    xla::ShapeProto shape;
    bool elided = false;
    if (!p.ParseShape(&shape) || !p.ParseLiteral(shape, c.pi->proto.mutable_literal(), &elided)) return false;
    if (elided) c.pi->elided = true;
    return true;
  }
  static bool EpsilonAttr(Parser& p, AttrContext& c) {
    size_t start = p.pos_;
    FloatToken tok;
    if (!p.ParseFloatToken(&tok)) return false;
    if (tok.kind != FloatToken::kNumber) return p.Fail(start, "epsilon must be a finite number");
    c.pi->proto.set_epsilon(static_cast<float>(tok.negative ? -tok.magnitude : tok.magnitude));
    return true;
  }
  // triangular-solve's options, and cholesky's `lower`.
  static bool TriangularSolveAttr(Parser& p, AttrContext& c) {
    auto& i = c.pi->proto;
    if (c.name == "transpose_a") {
      xla::TriangularSolveOptions::Transpose v;
      if (!p.ParseEnumWord(&xla::TriangularSolveOptions::Transpose_Parse, &v, "transpose_a")) return false;
      i.mutable_triangular_solve_options()->set_transpose_a(v);
      return true;
    }
    bool b = false;
    if (!p.ParseBool(&b)) return false;
    if (c.name == "lower" && i.opcode() == "cholesky") i.mutable_cholesky_options()->set_lower(b);
    else if (c.name == "lower") i.mutable_triangular_solve_options()->set_lower(b);
    else if (c.name == "left_side") i.mutable_triangular_solve_options()->set_left_side(b);
    else i.mutable_triangular_solve_options()->set_unit_diagonal(b);
    return true;
  }
  static bool DistributionAttr(Parser& p, AttrContext& c) {
    xla::RandomDistribution v;
    if (!p.ParseEnumWord(&xla::RandomDistribution_Parse, &v, "rng distribution")) return false;
    if (v == xla::RNG_INVALID) return p.Fail(c.pos, "invalid rng distribution");
    c.pi->proto.set_distribution(v);
    return true;
  }
  static bool IndexVectorDimAttr(Parser& p, AttrContext& c) {
    return p.ReadInt([&](int64_t v) {
      auto& i = c.pi->proto;
      if (i.opcode() == "gather") i.mutable_gather_dimension_numbers()->set_index_vector_dim(v);
      else i.mutable_scatter_dimension_numbers()->set_index_vector_dim(v);
    });
  }

  // body=%b and the other attributes that name exactly one computation.
  bool ParseOneComputation(AttrContext& c, std::optional<NameRef>* slot) {
    std::vector<NameRef> refs;
    if (!ParseComputationRefs(&refs)) return false;
    if (refs.size() != 1) return Fail(c.pos, "expected one computation for " + std::string(c.name));
    *slot = refs[0];
    return true;
  }

  bool ParseInstructionAttribute(PendingInstruction* pi, Calls* calls) {
    SkipSpace();
    const size_t name_pos = pos_;
    std::string name;
    if (!ParseAttributeName(&name) || !Expect('=')) return false;
    SkipSpace();
    const std::string& op = pi->proto.opcode();
    if (std::find(std::begin(kDebugOnlyAttributes), std::end(kDebugOnlyAttributes), name) !=
        std::end(kDebugOnlyAttributes)) {
      return SkipValue();
    }
    const auto& table = AttributeTable();
    auto it = table.find(name);
    if (it == table.end()) {
      return Fail(name_pos, "unknown attribute '" + name + "' on " + op + " (npc reads every attribute of XLA's "
                            "text format; an unknown one could change what the module computes)");
    }
    if (!OpcodeIn(op, it->second.opcodes)) {
      return Fail(name_pos, "attribute '" + name + "' is not an attribute of " + op);
    }
    if (!pi->seen_attributes.insert(it->first).second) {
      return Fail(name_pos, "attribute '" + name + "' is given twice");
    }
    AttrContext c{pi, calls, it->first, pos_};
    return it->second.read(*this, c);
  }

  // What XLA's parser fills in when the text leaves it out (so that the proto
  // is what XLA's parser followed by HloModule::ToProto() writes), and the
  // attributes XLA requires.
  bool FillDefaults(PendingInstruction* pi, size_t op_pos) {
    xla::HloInstructionProto& inst = pi->proto;
    const std::string& op = inst.opcode();
    auto require = [&](std::string_view attr) {
      if (pi->seen_attributes.count(attr)) return true;
      return Fail(op_pos, op + " needs " + std::string(attr) + "=");
    };
    // One DEFAULT operand precision per operand (dot and ragged-dot: per
    // lhs and rhs only) when `operand_precision` is absent.
    if (op == "dot" || op == "ragged-dot" || op == "convolution" || op == "custom-call") {
      if (!pi->seen_attributes.count("operand_precision")) {
        const size_t n = op == "dot" || op == "ragged-dot" ? 2 : pi->operands.size();
        for (size_t i = 0; i < n; ++i)
          inst.mutable_precision_config()->add_operand_precision(xla::PrecisionConfig::DEFAULT);
      }
    }
    if (op == "convolution") {
      if (!require("dim_labels")) return false;
      if (!pi->seen_attributes.count("feature_group_count")) inst.set_feature_group_count(1);
      if (!pi->seen_attributes.count("batch_group_count")) inst.set_batch_group_count(1);
    }
    if (op == "custom-call") {
      if (!require("custom_call_target")) return false;
      if (!pi->seen_attributes.count("api_version")) inst.set_custom_call_api_version(xla::API_VERSION_ORIGINAL);
    }
    if (op == "topk") {
      if (!require("k")) return false;
      if (!pi->seen_attributes.count("largest")) inst.set_largest(true);
    }
    if (op == "map") {
      // XLA's map applies to every dimension: its proto lists all of them.
      inst.clear_dimensions();
      for (int i = 0; i < inst.shape().dimensions_size(); ++i) inst.add_dimensions(i);
    }
    if (op == "sort" && !require("dimensions")) return false;
    if (op == "rng" && !require("distribution")) return false;
    if (op == "rng-bit-generator" && !require("algorithm")) return false;
    if (op == "fft" && (!require("fft_type") || !require("fft_length"))) return false;
    if (op == "collective-permute" || op == "collective-permute-start") {
      if (!require("source_target_pairs")) return false;
    }
    if (op == "rng-get-and-update-state" && !require("delta")) return false;
    if (op == "compare" && !require("direction")) return false;
    if (op == "fusion" && (!require("kind") || !require("calls"))) return false;
    if (op == "domain" && !require("domain")) return false;
    return true;
  }

  bool ParseInstruction(PendingComputation* comp) {
    SkipSpace();
    PendingInstruction pi;
    pi.pos = pos_;
    bool is_root = TryKeyword("ROOT");
    SkipSpace();
    size_t name_pos = pos_;
    std::string name;
    if (!ParseName(&name, "an instruction name or '}'")) return false;
    if (comp->by_name.count(name)) {
      return Fail(name_pos, "instruction '" + name + "' is defined twice in computation '" + comp->proto.name() + "'");
    }
    if (!Expect('=')) return false;
    xla::HloInstructionProto& inst = pi.proto;
    inst.set_name(name);
    if (!ParseShape(inst.mutable_shape())) return false;
    SkipSpace();
    size_t op_pos = pos_;
    std::string_view opcode = ReadIdentRaw();
    if (opcode.empty()) return FailExpected("an opcode");
    if (!IsKnownOpcode(opcode)) return Fail(op_pos, "unknown opcode '" + std::string(opcode) + "'");
    inst.set_opcode(std::string(opcode));
    bool elided = false;
    if (opcode == "parameter") {
      int64_t number = 0;
      if (!Expect('(') || !ParseInt(&number) || !Expect(')')) return false;
      if (number < 0) return Fail(op_pos, "negative parameter number");
      inst.set_parameter_number(number);
    } else if (opcode == "constant") {
      if (!Expect('(') || !ParseLiteral(inst.shape(), inst.mutable_literal(), &elided) || !Expect(')')) return false;
    } else if (!ParseOperands(&pi)) {
      return false;
    }
    Calls calls;
    while (TryConsume(',')) {
      if (!ParseInstructionAttribute(&pi, &calls)) return false;
    }
    if (elided || pi.elided) (*inst.mutable_frontend_attributes()->mutable_map())[kElidedConstantAttribute] = "true";
    if (!FillDefaults(&pi, op_pos)) return false;
    // Called computations in XLA's order.
    if (opcode == "while") {
      if (!calls.body || !calls.condition) return Fail(op_pos, "while needs body= and condition=");
      pi.calls = {*calls.body, *calls.condition};
    } else if (opcode == "conditional" && (calls.on_true || calls.on_false)) {
      if (!calls.on_true || !calls.on_false) {
        return Fail(op_pos, "conditional needs both true_computation= and false_computation=");
      }
      pi.calls = {*calls.on_true, *calls.on_false};
    } else if (opcode == "select-and-scatter") {
      if (!calls.select || !calls.scatter) return Fail(op_pos, "select-and-scatter needs select= and scatter=");
      pi.calls = {*calls.select, *calls.scatter};
    }
    for (auto& r : calls.branches) pi.calls.push_back(r);
    for (auto& r : calls.generic) pi.calls.push_back(r);

    if (is_root) {
      if (comp->root_index >= 0) {
        return Fail(pi.pos, "computation '" + comp->proto.name() + "' has more than one ROOT instruction");
      }
      comp->root_index = static_cast<int>(comp->instructions.size());
    }
    inst.set_id(next_id_++);
    comp->by_name[name] = comp->instructions.size();
    comp->instructions.push_back(std::move(pi));
    return true;
  }

  // --- Computations and the module ------------------------------------------

  // (name: shape, ...) -> shape; checked for syntax, the shapes come from
  // the instructions.
  bool ParseSignature() {
    if (!Expect('(')) return false;
    if (!TryConsume(')')) {
      do {
        std::string param;
        xla::ShapeProto ignored;
        if (!ParseName(&param, "a parameter name") || !Expect(':') || !ParseShape(&ignored)) return false;
      } while (TryConsume(','));
      if (!TryConsume(')')) return FailExpected("',' or ')' in the computation's signature");
    }
    SkipSpace();
    if (!LookingAt("->")) return FailExpected("'->' in the computation's signature");
    pos_ += 2;
    xla::ShapeProto ignored;
    return ParseShape(&ignored);
  }

  bool ParseComputation() {
    SkipSpace();
    PendingComputation comp;
    comp.pos = pos_;
    comp.is_entry = TryKeyword("ENTRY");
    std::string name;
    if (!ParseName(&name, "a computation")) return false;
    comp.proto.set_name(name);
    comp.proto.set_id(next_id_++);
    SkipSpace();
    if (Peek() == '(' && !ParseSignature()) return false;
    if (!Expect('{')) return false;
    while (true) {
      SkipSpace();
      if (AtEnd()) return Fail(pos_, "unexpected end of input, expected an instruction or '}'");
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      if (!ParseInstruction(&comp)) return false;
    }
    if (comp.instructions.empty()) return Fail(comp.pos, "computation '" + name + "' has no instructions");
    // Computation attributes: , execution_thread="..."
    while (TryConsume(',')) {
      std::string attr;
      SkipSpace();
      const size_t attr_pos = pos_;
      if (!ParseAttributeName(&attr) || !Expect('=')) return false;
      if (attr != "execution_thread") {
        return Fail(attr_pos,
                    "unknown computation attribute '" + attr + "' (XLA's text format has only execution_thread)");
      }
      std::string thread;
      if (!ParseString(&thread)) return false;
      comp.proto.set_execution_thread(thread);
    }
    computations_.push_back(std::move(comp));
    return true;
  }

  // { {0}: (3, {}, must-alias), {1}: (2, {}) }
  bool ParseInputOutputAlias() {
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    auto* alias = module_.mutable_input_output_alias();
    do {
      auto* entry = alias->add_entries();
      int64_t param = 0;
      if (!ParseShapeIndex(entry->mutable_output_shape_index()) || !Expect(':') || !Expect('(') ||
          !ParseInt(&param) || !Expect(',') || !ParseShapeIndex(entry->mutable_parameter_shape_index())) {
        return false;
      }
      entry->set_parameter_number(param);
      entry->set_kind(xla::MAY_ALIAS);
      if (TryConsume(',')) {
        SkipSpace();
        size_t kind_pos = pos_;
        std::string_view kind = ReadIdentRaw();
        if (kind == "must-alias") entry->set_kind(xla::MUST_ALIAS);
        else if (kind != "may-alias") return Fail(kind_pos, "unknown alias kind " + Describe(kind_pos));
      }
      if (!Expect(')')) return false;
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in input_output_alias");
  }

  // {(f32[2]{0}, s32[])->f32[2]{0}}
  bool ParseEntryComputationLayout() {
    SkipSpace();
    entry_layout_pos_ = pos_;
    if (!Expect('{') || !Expect('(')) return false;
    entry_layout_.emplace();
    if (!TryConsume(')')) {
      do {
        if (!ParseShape(entry_layout_->add_parameters())) return false;
      } while (TryConsume(','));
      if (!TryConsume(')')) return FailExpected("',' or ')' in entry_computation_layout");
    }
    SkipSpace();
    if (!LookingAt("->")) return FailExpected("'->' in entry_computation_layout");
    pos_ += 2;
    return ParseShape(entry_layout_->mutable_result()) && Expect('}');
  }

  // { (0, {}), (1, {0}) }
  bool ParseBufferDonor() {
    if (!Expect('{')) return false;
    if (TryConsume('}')) return true;
    auto* donor = module_.mutable_buffer_donor();
    do {
      auto* entry = donor->add_entries();
      int64_t param = 0;
      if (!Expect('(') || !ParseInt(&param) || !Expect(',') ||
          !ParseShapeIndex(entry->mutable_parameter_shape_index()) || !Expect(')')) {
        return false;
      }
      entry->set_parameter_number(param);
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in buffer_donor");
  }

  // true, false, or {true, false, ...}; as text "true" / "{true,false}".
  bool ParseBoolOrBoolList(std::string* text, bool* any_true) {
    SkipSpace();
    bool b = false;
    if (Peek() != '{') {
      if (!ParseBool(&b)) return false;
      *text = b ? "true" : "false";
      *any_true = b;
      return true;
    }
    ++pos_;
    *text = "{";
    if (!TryConsume('}')) {
      do {
        if (!ParseBool(&b)) return false;
        *text += std::string(text->size() > 1 ? "," : "") + (b ? "true" : "false");
        *any_true |= b;
      } while (TryConsume(','));
      if (!Expect('}')) return false;
    }
    *text += "}";
    return true;
  }

  // The module header's attributes. Those that XLA keeps in the module's
  // HloModuleConfig rather than in HloModuleProto (replica_count,
  // num_partitions, alias_passthrough_params,
  // allow_spmd_sharding_propagation_to_*) are recorded, when not XLA's
  // default, as module frontend attributes kModuleConfigAttributePrefix +
  // name, so that the canonical key covers them.
  bool ParseModuleAttribute(const std::string& attr, size_t attr_pos) {
    auto record = [&](const std::string& value) {
      (*module_.mutable_frontend_attributes()->mutable_map())[std::string(kModuleConfigAttributePrefix) + attr] = value;
    };
    if (attr == "input_output_alias") return ParseInputOutputAlias();
    if (attr == "entry_computation_layout") return ParseEntryComputationLayout();
    if (attr == "buffer_donor") return ParseBufferDonor();
    if (attr == "frontend_attributes") return ParseFrontendAttributes(module_.mutable_frontend_attributes());
    if (attr == "is_scheduled") return ParseBool(&is_scheduled_);
    if (attr == "replica_count" || attr == "num_partitions") {
      int64_t v = 0;
      if (!ParseInt(&v)) return false;
      if (v < 1) return Fail(attr_pos, attr + " must be at least 1");
      if (v != 1) record(std::to_string(v));
      return true;
    }
    if (attr == "alias_passthrough_params") {
      bool b = false;
      if (!ParseBool(&b)) return false;
      if (b) record("true");
      return true;
    }
    if (attr == "allow_spmd_sharding_propagation_to_parameters" ||
        attr == "allow_spmd_sharding_propagation_to_output") {
      std::string text;
      bool any_true = false;
      if (!ParseBoolOrBoolList(&text, &any_true)) return false;
      if (any_true) record(text);
      return true;
    }
    return Fail(attr_pos, "unknown module attribute '" + attr + "'");
  }

  bool ParseModule() {
    SkipSpace();
    if (!TryKeyword("HloModule")) return FailExpected("'HloModule'");
    std::string name;
    if (!ParseName(&name, "the module's name")) return false;
    module_.set_name(name);
    std::unordered_set<std::string> seen;
    while (TryConsume(',')) {
      std::string attr;
      SkipSpace();
      const size_t attr_pos = pos_;
      if (!ParseAttributeName(&attr) || !Expect('=')) return false;
      if (!seen.insert(attr).second) return Fail(attr_pos, "module attribute '" + attr + "' is given twice");
      if (!ParseModuleAttribute(attr, attr_pos)) return false;
    }
    while (true) {
      SkipSpace();
      if (AtEnd()) break;
      if (!ParseComputation()) return false;
    }
    if (computations_.empty()) return Fail(pos_, "unexpected end of input, expected a computation");
    return true;
  }

  // Orders a computation's instructions operands (and control predecessors)
  // first, as XLA stores them; text order where the text already is. Names
  // are resolved already.
  bool SortInstructions(PendingComputation* c) {
    const size_t n = c->instructions.size();
    std::vector<std::vector<size_t>> deps(n);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& r : c->instructions[i].operands) deps[i].push_back(c->by_name.at(r.name));
      for (const auto& r : c->instructions[i].control_predecessors) deps[i].push_back(c->by_name.at(r.name));
    }
    std::vector<int> state(n, 0);  // 0 new, 1 in progress, 2 done
    std::vector<size_t> order;
    order.reserve(n);
    std::vector<std::pair<size_t, size_t>> stack;
    for (size_t start = 0; start < n; ++start) {
      if (state[start]) continue;
      stack.push_back({start, 0});
      state[start] = 1;
      while (!stack.empty()) {
        auto& [i, next] = stack.back();
        if (next < deps[i].size()) {
          size_t d = deps[i][next++];
          if (state[d] == 1) {
            return Fail(c->instructions[d].pos, "instruction '" + c->instructions[d].proto.name() +
                                                    "' depends on itself in computation '" + c->proto.name() + "'");
          }
          if (state[d] == 0) {
            state[d] = 1;
            stack.push_back({d, 0});
          }
        } else {
          state[i] = 2;
          order.push_back(i);
          stack.pop_back();
        }
      }
    }
    bool identity = true;
    for (size_t i = 0; i < n; ++i) identity &= order[i] == i;
    if (identity) return true;
    std::vector<PendingInstruction> sorted;
    sorted.reserve(n);
    for (size_t i : order) sorted.push_back(std::move(c->instructions[i]));
    c->instructions = std::move(sorted);
    c->by_name.clear();
    for (size_t i = 0; i < n; ++i) c->by_name[c->instructions[i].proto.name()] = i;
    return true;
  }

  // Resolves names, fills ids, program shapes, the entry, and orders the
  // computations callees first.
  bool Finish() {
    std::unordered_map<std::string, size_t> comp_by_name;
    int entry = -1;
    for (size_t i = 0; i < computations_.size(); ++i) {
      const auto& c = computations_[i];
      if (!comp_by_name.emplace(c.proto.name(), i).second) {
        return Fail(c.pos, "computation '" + c.proto.name() + "' is defined twice");
      }
      if (c.is_entry) {
        if (entry >= 0) return Fail(c.pos, "more than one ENTRY computation");
        entry = static_cast<int>(i);
      }
    }
    if (entry < 0) entry = static_cast<int>(computations_.size()) - 1;

    std::vector<std::vector<size_t>> callees(computations_.size());
    std::vector<bool> is_fusion(computations_.size(), false);
    for (size_t ci = 0; ci < computations_.size(); ++ci) {
      auto& c = computations_[ci];
      for (auto& pi : c.instructions) {
        auto& inst = pi.proto;
        for (const auto& ref : pi.operands) {
          auto it = c.by_name.find(ref.name);
          if (it == c.by_name.end()) {
            return Fail(ref.pos, "operand '" + ref.name + "' of '" + inst.name() + "' is not defined in computation '" +
                                     c.proto.name() + "'");
          }
          inst.add_operand_ids(c.instructions[it->second].proto.id());
        }
        for (const auto& ref : pi.control_predecessors) {
          auto it = c.by_name.find(ref.name);
          if (it == c.by_name.end()) {
            return Fail(ref.pos, "control predecessor '" + ref.name + "' of '" + inst.name() +
                                     "' is not defined in computation '" + c.proto.name() + "'");
          }
          inst.add_control_predecessor_ids(c.instructions[it->second].proto.id());
        }
        for (const auto& ref : pi.calls) {
          auto it = comp_by_name.find(ref.name);
          if (it == comp_by_name.end()) {
            return Fail(ref.pos, "computation '" + ref.name + "' called by '" + inst.name() + "' is not defined");
          }
          inst.add_called_computation_ids(computations_[it->second].proto.id());
          callees[ci].push_back(it->second);
          if (pi.is_fusion) is_fusion[it->second] = true;
        }
        // compare's default comparison type, from its first operand.
        if (inst.opcode() == "compare" && !pi.compare_type_given && !pi.operands.empty()) {
          const auto& lhs = c.instructions[c.by_name[pi.operands[0].name]].proto.shape();
          switch (lhs.element_type()) {
            case xla::F16: case xla::BF16: case xla::F32: case xla::F64: case xla::C64: case xla::C128:
            case xla::F8E5M2: case xla::F8E4M3: case xla::F8E4M3FN: case xla::F8E4M3B11FNUZ: case xla::F8E3M4:
            case xla::F8E5M2FNUZ: case xla::F8E4M3FNUZ: case xla::F4E2M1FN: case xla::F8E8M0FNU:
            case xla::F6E3M2FN: case xla::F6E2M3FN:
              inst.set_comparison_type("FLOAT");
              break;
            case xla::S1: case xla::S2: case xla::S4: case xla::S8: case xla::S16: case xla::S32: case xla::S64:
              inst.set_comparison_type("SIGNED");
              break;
            case xla::PRED: case xla::U1: case xla::U2: case xla::U4: case xla::U8: case xla::U16: case xla::U32:
            case xla::U64:
              inst.set_comparison_type("UNSIGNED");
              break;
            default:
              break;
          }
        }
      }
      // Program shape: parameters by number, then the root.
      int root = c.root_index >= 0 ? c.root_index : static_cast<int>(c.instructions.size()) - 1;
      c.proto.set_root_id(c.instructions[static_cast<size_t>(root)].proto.id());
      std::map<int64_t, const PendingInstruction*> params;
      for (const auto& pi : c.instructions) {
        if (pi.proto.opcode() != "parameter") continue;
        if (!params.emplace(pi.proto.parameter_number(), &pi).second) {
          return Fail(pi.pos, "parameter number " + std::to_string(pi.proto.parameter_number()) +
                                  " is used twice in computation '" + c.proto.name() + "'");
        }
      }
      auto* ps = c.proto.mutable_program_shape();
      int64_t expected = 0;
      for (const auto& [number, pi] : params) {
        if (number != expected++) {
          return Fail(pi->pos, "computation '" + c.proto.name() + "' has no parameter " + std::to_string(expected - 1));
        }
        *ps->add_parameters() = pi->proto.shape();
        ps->add_parameter_names(StripIdSuffix(pi->proto.name()));
      }
      *ps->mutable_result() = c.instructions[static_cast<size_t>(root)].proto.shape();
      if (!SortInstructions(&c)) return false;
    }

    // Callees before callers, otherwise text order.
    std::vector<int> state(computations_.size(), 0);  // 0 new, 1 in progress, 2 done
    std::vector<size_t> order;
    std::vector<std::pair<size_t, size_t>> stack;
    for (size_t start = 0; start < computations_.size(); ++start) {
      if (state[start]) continue;
      stack.push_back({start, 0});
      state[start] = 1;
      while (!stack.empty()) {
        auto& [ci, next] = stack.back();
        if (next < callees[ci].size()) {
          size_t callee = callees[ci][next++];
          if (state[callee] == 1) {
            return Fail(computations_[callee].pos, "computation '" + computations_[callee].proto.name() +
                                                       "' calls itself (directly or indirectly)");
          }
          if (state[callee] == 0) {
            state[callee] = 1;
            stack.push_back({callee, 0});
          }
        } else {
          state[ci] = 2;
          order.push_back(ci);
          stack.pop_back();
        }
      }
    }
    const std::string entry_name = computations_[static_cast<size_t>(entry)].proto.name();
    for (size_t ci : order) {
      auto& c = computations_[ci];
      c.proto.set_is_fusion_computation(is_fusion[ci]);
      if (is_scheduled_ && !is_fusion[ci]) {
        // is_scheduled=true: XLA schedules each non-fusion computation in the
        // order its instructions are written (ids are given in text order).
        std::vector<int64_t> ids;
        for (const auto& pi : c.instructions) ids.push_back(pi.proto.id());
        std::sort(ids.begin(), ids.end());
        auto& seq = (*module_.mutable_schedule()->mutable_sequences())[c.proto.id()];
        for (int64_t id : ids) seq.add_instruction_ids(id);
      }
      for (auto& pi : c.instructions) *c.proto.add_instructions() = std::move(pi.proto);
      *module_.add_computations() = std::move(c.proto);
    }
    const xla::HloComputationProto* entry_proto = nullptr;
    for (const auto& c : module_.computations()) {
      if (c.name() == entry_name) entry_proto = &c;
    }
    module_.set_entry_computation_name(entry_proto->name());
    module_.set_entry_computation_id(entry_proto->id());
    *module_.mutable_host_program_shape() = entry_proto->program_shape();
    if (entry_layout_ && entry_layout_->parameters_size() != entry_proto->program_shape().parameters_size()) {
      return Fail(entry_layout_pos_, "entry_computation_layout has " + std::to_string(entry_layout_->parameters_size()) +
                                         " parameters, the entry computation " +
                                         std::to_string(entry_proto->program_shape().parameters_size()));
    }
    if (entry_layout_) {
      auto* host = module_.mutable_host_program_shape();
      for (int i = 0; i < entry_layout_->parameters_size(); ++i) *host->mutable_parameters(i) = entry_layout_->parameters(i);
      *host->mutable_result() = entry_layout_->result();
    }
    return true;
  }

  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
  bool failed_ = false;
  size_t error_pos_ = 0;
  std::string error_message_;

  int64_t next_id_ = 1;
  int depth_ = 0;  // current nesting, see Nesting
  std::vector<PendingComputation> computations_;
  std::optional<xla::ProgramShapeProto> entry_layout_;
  size_t entry_layout_pos_ = 0;
  bool is_scheduled_ = false;
  xla::HloModuleProto module_;
};

}  // namespace

Result<xla::HloModuleProto> ParseHloText(std::string_view text, const std::string& source_name) {
  return Parser(text, source_name).Run();
}

}  // namespace npc::hlo
