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
    if (TryConsume(':')) {
      // Layout details: tiles T(...), element size E(n), memory space S(n), ...
      while (!AtEnd() && Peek() != '}') {
        if (Peek() == 'S' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '(') {
          pos_ += 2;
          int64_t space = 0;
          if (!ParseInt(&space) || !Expect(')')) return false;
          layout->set_memory_space(space);
          continue;
        }
        if (Peek() == '(') {
          int depth = 0;
          while (!AtEnd()) {
            char c = text_[pos_++];
            if (c == '(') ++depth;
            if (c == ')' && --depth == 0) break;
          }
          continue;
        }
        if (Peek() == '{' || Peek() == '\n') break;
        ++pos_;
      }
    }
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
      std::string_view word = ReadIdentRaw();
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
      } else if (word == "last_tile_dim_replicate") {
        sharding->set_replicate_on_last_tile_dim(true);
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
      } else if (TryConsume('=')) {
        if (!SkipValue()) return false;  // last_tile_dims={...}, metadata={...}, ...
      }
      // Other bare words (shard_as N, ...) are skipped.
    }
    return true;
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

  // Called computations by role, ordered as XLA stores them when done.
  struct Calls {
    std::vector<NameRef> generic, branches;
    std::optional<NameRef> body, condition, on_true, on_false, select, scatter;
  };

  bool ParseInstructionAttribute(PendingInstruction* pi, Calls* calls) {
    xla::HloInstructionProto& inst = pi->proto;
    const std::string& op = inst.opcode();
    std::string name;
    if (!ParseAttributeName(&name) || !Expect('=')) return false;
    SkipSpace();
    int64_t v = 0;
    bool b = false;
    std::string s;
    if (name == "metadata") return ParseMetadata(inst.mutable_metadata());
    if (name == "frontend_attributes") return ParseFrontendAttributes(inst.mutable_frontend_attributes());
    if (name == "sharding") return ParseSharding(inst.mutable_sharding());
    if (name == "dimensions") return ParseIntListInto(inst.mutable_dimensions());
    if (name == "iota_dimension") {
      if (!ParseInt(&v)) return false;
      inst.add_dimensions(v);
      return true;
    }
    if (name == "slice") return ParseSliceDims(&inst);
    if (name == "dynamic_slice_sizes") return ParseIntListInto(inst.mutable_dynamic_slice_sizes());
    if (name == "padding" && op == "pad") return ParsePadding(inst.mutable_padding_config());
    if (name == "window") return ParseWindow(inst.mutable_window());
    if (name == "dim_labels") return ParseDimLabels(inst.mutable_convolution_dimension_numbers());
    if (name == "lhs_contracting_dims") {
      return ParseIntListInto(inst.mutable_dot_dimension_numbers()->mutable_lhs_contracting_dimensions());
    }
    if (name == "rhs_contracting_dims") {
      return ParseIntListInto(inst.mutable_dot_dimension_numbers()->mutable_rhs_contracting_dimensions());
    }
    if (name == "lhs_batch_dims") {
      return ParseIntListInto(inst.mutable_dot_dimension_numbers()->mutable_lhs_batch_dimensions());
    }
    if (name == "rhs_batch_dims") {
      return ParseIntListInto(inst.mutable_dot_dimension_numbers()->mutable_rhs_batch_dimensions());
    }
    if (name == "operand_precision") {
      if (!Expect('{')) return false;
      auto* pc = inst.mutable_precision_config();
      pc->clear_operand_precision();
      if (TryConsume('}')) return true;
      do {
        xla::PrecisionConfig::Precision p;
        if (!ParseEnumWord(&xla::PrecisionConfig::Precision_Parse, &p, "precision")) return false;
        pc->add_operand_precision(p);
      } while (TryConsume(','));
      return Expect('}');
    }
    if (name == "direction") {
      size_t start = pos_;
      std::string dir(ReadIdentRaw());
      static const std::unordered_set<std::string> dirs = {"EQ", "NE", "GE", "GT", "LE", "LT"};
      if (!dirs.count(dir)) return Fail(start, "unknown comparison direction " + Describe(start));
      inst.set_comparison_direction(dir);
      return true;
    }
    if (name == "type" && op == "compare") {
      size_t start = pos_;
      std::string type(ReadIdentRaw());
      static const std::unordered_set<std::string> types = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
      if (!types.count(type)) return Fail(start, "unknown comparison type " + Describe(start));
      inst.set_comparison_type(type);
      pi->compare_type_given = true;
      return true;
    }
    if (name == "to_apply" || name == "calls" || name == "called_computations") {
      if (op == "fusion" && name == "calls") pi->is_fusion = true;
      return ParseComputationRefs(&calls->generic);
    }
    if (name == "body" || name == "condition" || name == "true_computation" || name == "false_computation" ||
        name == "select" || (name == "scatter" && op == "select-and-scatter")) {
      std::vector<NameRef> refs;
      if (!ParseComputationRefs(&refs)) return false;
      if (refs.size() != 1) return Fail(pos_, "expected one computation for " + name);
      auto& slot = name == "body" ? calls->body
                   : name == "condition" ? calls->condition
                   : name == "true_computation" ? calls->on_true
                   : name == "false_computation" ? calls->on_false
                   : name == "select" ? calls->select
                                      : calls->scatter;
      slot = refs[0];
      return true;
    }
    if (name == "branch_computations") return ParseComputationRefs(&calls->branches);
    if (name == "control-predecessors") {
      if (!Expect('{')) return false;
      if (TryConsume('}')) return true;
      do {
        SkipSpace();
        NameRef ref{"", pos_};
        if (!ParseName(&ref.name, "an instruction name")) return false;
        pi->control_predecessors.push_back(std::move(ref));
      } while (TryConsume(','));
      return Expect('}');
    }
    if (name == "index" && op == "get-tuple-element") {
      if (!ParseInt(&v)) return false;
      inst.set_tuple_index(v);
      return true;
    }
    if (name == "custom_call_target") {
      if (!ParseString(&s)) return false;
      inst.set_custom_call_target(s);
      return true;
    }
    if (name == "backend_config") {
      if (Peek() == '"') {
        if (!ParseString(&s)) return false;
        inst.set_backend_config(s);
        return true;
      }
      const size_t value_pos = pos_;
      std::string_view raw;
      if (!SkipValue(&raw)) return false;
      if (!IsValidUtf8(raw)) return Fail(value_pos, "backend_config is not valid UTF-8");
      inst.set_backend_config(std::string(raw));
      return true;
    }
    if (name == "replica_groups") return ParseReplicaGroups(&inst);
    if (name == "channel_id") {
      if (!ParseInt(&v)) return false;
      inst.set_channel_id(v);
      return true;
    }
    if (name == "use_global_device_ids") {
      if (!ParseBool(&b)) return false;
      inst.set_use_global_device_ids(b);
      return true;
    }
    if (name == "constrain_layout") {
      if (!ParseBool(&b)) return false;
      inst.set_constrain_layout(b);
      return true;
    }
    if (name == "custom_call_has_side_effect") {
      if (!ParseBool(&b)) return false;
      inst.set_custom_call_has_side_effect(b);
      return true;
    }
    if (name == "indices_are_sorted") {
      if (!ParseBool(&b)) return false;
      inst.set_indices_are_sorted(b);
      return true;
    }
    if (name == "unique_indices") {
      if (!ParseBool(&b)) return false;
      inst.set_unique_indices(b);
      return true;
    }
    if (name == "exponent_bits" || name == "mantissa_bits") {
      if (!ParseInt(&v)) return false;
      if (name == "exponent_bits") inst.set_exponent_bits(static_cast<int32_t>(v));
      else inst.set_mantissa_bits(static_cast<int32_t>(v));
      return true;
    }
    if (name == "epsilon") {
      size_t start = pos_;
      FloatToken tok;
      if (!ParseFloatToken(&tok)) return false;
      if (tok.kind != FloatToken::kNumber) return Fail(start, "epsilon must be a finite number");
      inst.set_epsilon(static_cast<float>(tok.negative ? -tok.magnitude : tok.magnitude));
      return true;
    }
    if (name == "feature_index") {
      if (!ParseInt(&v)) return false;
      inst.set_feature_index(v);
      return true;
    }
    if (name == "feature_group_count" || name == "batch_group_count") {
      if (!ParseInt(&v)) return false;
      if (name == "feature_group_count") inst.set_feature_group_count(v);
      else inst.set_batch_group_count(v);
      return true;
    }
    if (name == "algorithm" && op == "rng-bit-generator") {
      xla::RandomAlgorithm alg;
      if (!ParseEnumWord(&xla::RandomAlgorithm_Parse, &alg, "rng algorithm")) return false;
      inst.set_rng_algorithm(alg);
      return true;
    }
    if (name == "kind" && op == "fusion") {
      std::string_view kind = ReadIdentRaw();
      if (kind.empty()) return FailExpected("a fusion kind");
      inst.set_fusion_kind(std::string(kind));
      return true;
    }
    // Gather / scatter dimension numbers.
    if (op == "gather") {
      auto* g = inst.mutable_gather_dimension_numbers();
      if (name == "offset_dims") return ParseIntListInto(g->mutable_offset_dims());
      if (name == "collapsed_slice_dims") return ParseIntListInto(g->mutable_collapsed_slice_dims());
      if (name == "start_index_map") return ParseIntListInto(g->mutable_start_index_map());
      if (name == "operand_batching_dims") return ParseIntListInto(g->mutable_operand_batching_dims());
      if (name == "start_indices_batching_dims") return ParseIntListInto(g->mutable_start_indices_batching_dims());
      if (name == "slice_sizes") return ParseIntListInto(inst.mutable_gather_slice_sizes());
      if (name == "index_vector_dim") {
        if (!ParseInt(&v)) return false;
        g->set_index_vector_dim(v);
        return true;
      }
    }
    if (op == "scatter") {
      auto* sc = inst.mutable_scatter_dimension_numbers();
      if (name == "update_window_dims") return ParseIntListInto(sc->mutable_update_window_dims());
      if (name == "inserted_window_dims") return ParseIntListInto(sc->mutable_inserted_window_dims());
      if (name == "scatter_dims_to_operand_dims") return ParseIntListInto(sc->mutable_scatter_dims_to_operand_dims());
      if (name == "input_batching_dims") return ParseIntListInto(sc->mutable_input_batching_dims());
      if (name == "scatter_indices_batching_dims") {
        return ParseIntListInto(sc->mutable_scatter_indices_batching_dims());
      }
      if (name == "index_vector_dim") {
        if (!ParseInt(&v)) return false;
        sc->set_index_vector_dim(v);
        return true;
      }
    }
    if (name == "api_version") {
      xla::CustomCallApiVersion version;
      if (!ParseEnumWord(&xla::CustomCallApiVersion_Parse, &version, "custom-call api_version")) return false;
      inst.set_custom_call_api_version(version);
      api_version_given_ = true;
      return true;
    }
    if (name == "operand_layout_constraints") {
      if (!Expect('{')) return false;
      if (TryConsume('}')) return true;
      do {
        if (!ParseShape(inst.add_operand_shapes_with_layout())) return false;
      } while (TryConsume(','));
      return Expect('}');
    }
    if (name == "output_to_operand_aliasing") return ParseOutputOperandAliasing(&inst);
    if (name == "parameter_replication") {
      if (!Expect('{')) return false;
      auto* rep = inst.mutable_parameter_replication();
      if (TryConsume('}')) return true;
      do {
        if (!ParseBool(&b)) return false;
        rep->add_replicated_at_leaf_buffers(b);
      } while (TryConsume(','));
      return Expect('}');
    }
    // Not in npc's subset of the schema: skipped.
    return SkipValue();
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
    api_version_given_ = false;
    while (TryConsume(',')) {
      if (!ParseInstructionAttribute(&pi, &calls)) return false;
    }
    if (elided) (*inst.mutable_frontend_attributes()->mutable_map())[kElidedConstantAttribute] = "true";
    // Defaults that XLA's parser fills in.
    if ((opcode == "dot" || opcode == "convolution") && inst.precision_config().operand_precision_size() == 0) {
      for (size_t i = 0; i < pi.operands.size(); ++i) {
        inst.mutable_precision_config()->add_operand_precision(xla::PrecisionConfig::DEFAULT);
      }
    }
    if (opcode == "convolution") {
      if (inst.feature_group_count() == 0) inst.set_feature_group_count(1);
      if (inst.batch_group_count() == 0) inst.set_batch_group_count(1);
    }
    if (opcode == "custom-call" && !api_version_given_) inst.set_custom_call_api_version(xla::API_VERSION_ORIGINAL);
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
      if (!ParseAttributeName(&attr) || !Expect('=')) return false;
      if (attr == "execution_thread") {
        std::string thread;
        if (!ParseString(&thread)) return false;
        comp.proto.set_execution_thread(thread);
      } else if (!SkipValue()) {
        return false;
      }
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
      entry->set_kind(xla::HloInputOutputAliasProto::MAY_ALIAS);
      if (TryConsume(',')) {
        SkipSpace();
        size_t kind_pos = pos_;
        std::string_view kind = ReadIdentRaw();
        if (kind == "must-alias") entry->set_kind(xla::HloInputOutputAliasProto::MUST_ALIAS);
        else if (kind != "may-alias") return Fail(kind_pos, "unknown alias kind " + Describe(kind_pos));
      }
      if (!Expect(')')) return false;
    } while (TryConsume(','));
    if (TryConsume('}')) return true;
    return FailExpected("',' or '}' in input_output_alias");
  }

  // {(f32[2]{0}, s32[])->f32[2]{0}}
  bool ParseEntryComputationLayout() {
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

  bool ParseModule() {
    SkipSpace();
    if (!TryKeyword("HloModule")) return FailExpected("'HloModule'");
    std::string name;
    if (!ParseName(&name, "the module's name")) return false;
    module_.set_name(name);
    while (TryConsume(',')) {
      std::string attr;
      if (!ParseAttributeName(&attr) || !Expect('=')) return false;
      if (attr == "input_output_alias") {
        if (!ParseInputOutputAlias()) return false;
      } else if (attr == "entry_computation_layout") {
        if (!ParseEntryComputationLayout()) return false;
      } else if (!SkipValue()) {  // is_scheduled, buffer_donor, replica_count, ...
        return false;
      }
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
            case xla::F8E5M2: case xla::F8E4M3FN:
              inst.set_comparison_type("FLOAT");
              break;
            case xla::S4: case xla::S8: case xla::S16: case xla::S32: case xla::S64:
              inst.set_comparison_type("SIGNED");
              break;
            case xla::PRED: case xla::U4: case xla::U8: case xla::U16: case xla::U32: case xla::U64:
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
    if (entry_layout_ && entry_layout_->parameters_size() == entry_proto->program_shape().parameters_size()) {
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
  bool api_version_given_ = false;
  std::vector<PendingComputation> computations_;
  std::optional<xla::ProgramShapeProto> entry_layout_;
  xla::HloModuleProto module_;
};

}  // namespace

Result<xla::HloModuleProto> ParseHloText(std::string_view text, const std::string& source_name) {
  return Parser(text, source_name).Run();
}

}  // namespace npc::hlo
