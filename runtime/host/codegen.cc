// HLO module -> C++ translation unit (see host_backend.h).
//
// Shape of the generated code:
//  - the prelude (host/prelude.cc): type aliases and helper functions;
//  - one static function per (computation, mode) that is used:
//      buffer mode (`fnN_b`): every array value is a `const T*` to a dense
//        row-major buffer; parameters come in as `const T*` (one per leaf of
//        each parameter), results go out through `T*` (one per leaf of the
//        root); intermediates live in std::vector<T>;
//      scalar mode (`fnN_s`): every value is a rank-0 scalar held in a local
//        variable; used for reduce/map functions, called once per element;
//  - the extern "C" ABI functions calling the entry computation's buffer-mode
//    function.
// Tuples do not exist at run time: a value is the list of its leaf buffers, so
// tuple, get-tuple-element, reshape and copy only rename buffers.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "host/host_backend.h"
#include "hlo/text_reader.h"  // kElidedConstantAttribute
#include "host/prelude.h"
#include "npc/hlo.h"

namespace npc::host {
namespace {

using Inst = xla::HloInstructionProto;
using Comp = xla::HloComputationProto;

enum class Mode { kBuffer, kScalar };

// ---- element types ------------------------------------------------------------

enum class Kind { kPred, kSigned, kUnsigned, kFloat };

struct ElementType {
  const char* name;  // the alias used in generated code ("f32")
  Kind kind;
  int bytes;
  bool narrow = false;  // bf16/f16: stored as bits, computed in f32
};

std::optional<ElementType> LookupElementType(xla::PrimitiveType t) {
  switch (t) {
    case xla::PRED: return ElementType{"pred", Kind::kPred, 1};
    case xla::S8: return ElementType{"s8", Kind::kSigned, 1};
    case xla::S16: return ElementType{"s16", Kind::kSigned, 2};
    case xla::S32: return ElementType{"s32", Kind::kSigned, 4};
    case xla::S64: return ElementType{"s64", Kind::kSigned, 8};
    case xla::U8: return ElementType{"u8", Kind::kUnsigned, 1};
    case xla::U16: return ElementType{"u16", Kind::kUnsigned, 2};
    case xla::U32: return ElementType{"u32", Kind::kUnsigned, 4};
    case xla::U64: return ElementType{"u64", Kind::kUnsigned, 8};
    case xla::F32: return ElementType{"f32", Kind::kFloat, 4};
    case xla::F64: return ElementType{"f64", Kind::kFloat, 8};
    case xla::BF16: return ElementType{"bf16", Kind::kFloat, 2, true};
    case xla::F16: return ElementType{"f16", Kind::kFloat, 2, true};
    default: return std::nullopt;
  }
}

// Only called for types LookupElementType accepts.
const char* CType(xla::PrimitiveType t) { return LookupElementType(t)->name; }
Kind KindOf(xla::PrimitiveType t) { return LookupElementType(t)->kind; }
bool IsFloat(xla::PrimitiveType t) { return KindOf(t) == Kind::kFloat; }
bool IsNarrow(xla::PrimitiveType t) { return LookupElementType(t)->narrow; }
// The type a value of type `t` is computed in.
xla::PrimitiveType ComputeType(xla::PrimitiveType t) { return IsNarrow(t) ? xla::F32 : t; }
// `expr` (of type t) as its compute type.
std::string Widen(const std::string& expr, xla::PrimitiveType t) { return IsNarrow(t) ? "npc_f32(" + expr + ")" : expr; }
// `expr` (of t's compute type) as type t.
std::string Narrow(const std::string& expr, xla::PrimitiveType t) {
  return IsNarrow(t) ? std::string("npc_to_") + CType(t) + "(" + expr + ")" : expr;
}
bool IsInt(xla::PrimitiveType t) { return KindOf(t) == Kind::kSigned || KindOf(t) == Kind::kUnsigned; }

// ---- shapes ----------------------------------------------------------------------

std::vector<int64_t> Dims(const xla::ShapeProto& s) { return {s.dimensions().begin(), s.dimensions().end()}; }

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

void FlattenShape(const xla::ShapeProto& s, std::vector<const xla::ShapeProto*>* leaves) {
  if (s.element_type() == xla::TUPLE) {
    for (const auto& e : s.tuple_shapes()) FlattenShape(e, leaves);
  } else {
    leaves->push_back(&s);
  }
}

std::vector<const xla::ShapeProto*> Leaves(const xla::ShapeProto& s) {
  std::vector<const xla::ShapeProto*> out;
  FlattenShape(s, &out);
  return out;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

std::string ArrayText(xla::PrimitiveType t, const std::vector<int64_t>& dims) {
  return PrimitiveTypeName(t) + DimsText(dims);
}

// The Neuron custom-calls compiled as math (see host_backend.h); the transfer
// hint AwsNeuronTransferWithStaticRing is handled as an identity elsewhere.
constexpr const char* kNeuronCustomCalls[] = {"AwsNeuronGelu", "AwsNeuronGeluBackward", "AwsNeuronSoftmax",
                                              "AwsNeuronSoftmaxBackward"};

bool IsNeuronCustomCall(const std::string& target) {
  for (const char* t : kNeuronCustomCalls) {
    if (target == t) return true;
  }
  return false;
}

// ---- text helpers ------------------------------------------------------------------

// Names from the module go into comments only; keep them on one line and
// free of anything the C++ lexer could read (a trailing backslash, "*/").
std::string CommentSafe(const std::string& s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (std::isalnum(u) || std::strchr("_.-%[](),{}:= ", c)) ? c : '_';
  }
  return out;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x80) {  // bytes >= 0x80 as Latin-1, so the text is always valid UTF-8
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// A C++ string literal holding `s`; non-printable bytes as three-digit octal.
std::string CStringLiteral(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f || c == '?') {  // '?': no trigraphs
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string FloatLiteral(double v, bool f32) {
  const std::string type = f32 ? "f32" : "f64";
  if (std::isnan(v)) return std::string(std::signbit(v) ? "-" : "") + "std::numeric_limits<" + type + ">::quiet_NaN()";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + type + ">::infinity()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);  // exact
  return std::string(buf) + (f32 ? "f" : "");
}

std::string SignedLiteral(int64_t v, int bytes) {
  if (bytes == 8) {
    if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
    return std::to_string(v) + "LL";
  }
  if (bytes == 4 && v == INT32_MIN) return "(-2147483647 - 1)";
  return std::to_string(v);
}

std::string UnsignedLiteral(uint64_t v, int bytes) {
  return std::to_string(v) + (bytes == 8 ? "ULL" : bytes == 4 ? "u" : "");
}

// Emits C++ text with indentation.
class Writer {
 public:
  explicit Writer(int indent = 0) : indent_(indent) {}
  void Raw(const std::string& text) { text_ += text; }
  void Line(const std::string& s) {
    text_.append(2 * indent_, ' ');
    text_ += s;
    text_ += '\n';
  }
  void Open(const std::string& s) {
    Line(s.empty() ? "{" : s + " {");
    ++indent_;
  }
  void Close(const std::string& suffix = "") {
    --indent_;
    Line("}" + suffix);
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int indent_ = 0;
};

// A linear index expression: sum of var * coefficient, plus a constant.
struct Term {
  std::string var;
  int64_t coef;
};

std::string Linear(const std::vector<Term>& terms, int64_t offset = 0) {
  std::string out;
  for (const auto& t : terms) {
    if (t.coef == 0) continue;
    const int64_t mag = t.coef < 0 ? -t.coef : t.coef;
    std::string piece = mag == 1 ? t.var : t.var + " * " + std::to_string(mag);
    if (out.empty()) out = t.coef < 0 ? "-" + piece : piece;
    else out += (t.coef < 0 ? " - " : " + ") + piece;
  }
  if (out.empty()) return std::to_string(offset);
  if (offset > 0) out += " + " + std::to_string(offset);
  if (offset < 0) out += " - " + std::to_string(-offset);
  return out;
}

struct Loop {
  std::string var;
  int64_t extent;
  std::vector<std::string> prologue;  // statements at the start of the loop body
};

// for (s64 i = 0; i < n; ++i) { prologue; ... body }
void OpenLoops(Writer& w, const std::vector<Loop>& loops) {
  for (const auto& l : loops) {
    w.Open("for (s64 " + l.var + " = 0; " + l.var + " < " + std::to_string(l.extent) + "; ++" + l.var + ")");
    for (const auto& p : l.prologue) w.Line(p);
  }
}
void CloseLoops(Writer& w, const std::vector<Loop>& loops) {
  for (size_t i = 0; i < loops.size(); ++i) w.Close();
}

std::vector<Loop> LoopsOver(const std::vector<int64_t>& dims, const std::string& prefix = "i") {
  std::vector<Loop> loops;
  for (size_t d = 0; d < dims.size(); ++d) loops.push_back({prefix + std::to_string(d), dims[d], {}});
  return loops;
}

std::vector<Term> RowMajorTerms(const std::vector<int64_t>& dims, const std::string& prefix = "i") {
  std::vector<Term> terms;
  auto strides = Strides(dims);
  for (size_t d = 0; d < dims.size(); ++d) terms.push_back({prefix + std::to_string(d), strides[d]});
  return terms;
}

// ---- values --------------------------------------------------------------------------

// One array leaf of a value: in buffer mode `name` is a `const T*`, in scalar
// mode a `T`.
struct Leaf {
  std::string name;
  xla::PrimitiveType type;
  std::vector<int64_t> dims;
  int64_t count() const { return Product(dims); }
};
using Value = std::vector<Leaf>;

// The signature of a computation: leaves of its parameters (in
// parameter_number order) and of its root.
struct Signature {
  std::vector<const Inst*> params;                       // by parameter number
  std::vector<std::vector<const xla::ShapeProto*>> param_leaves;
  std::vector<const xla::ShapeProto*> result_leaves;
  const Inst* root = nullptr;
};

class ModuleCodegen;

// ---- one function ------------------------------------------------------------------

class FunctionEmitter {
 public:
  FunctionEmitter(ModuleCodegen* module, const Comp& comp, const Signature& sig, Mode mode)
      : module_(module), comp_(comp), sig_(sig), mode_(mode) {}

  // Emits the function body (statements only) into `w`.
  Status EmitBody(Writer& w);

 private:
  Error Fail(const Inst& inst, const std::string& what) const {
    return MakeError("host backend: " + what + " (instruction %" + inst.name() + " in computation " + comp_.name() + ")");
  }
  Error Unsupported(const Inst& inst) const {
    std::string what = "unsupported opcode '" + inst.opcode() + "'";
    if (inst.opcode() == "custom-call" && !inst.custom_call_target().empty()) {
      what += " (custom_call_target " + inst.custom_call_target() + ")";
    }
    return Fail(inst, what);
  }
  bool scalar() const { return mode_ == Mode::kScalar; }

  const Value& Operand(const Inst& inst, int i) const { return values_.at(inst.operand_ids(i)); }
  // The single array leaf of operand i.
  Result<Leaf> ArrayOperand(const Inst& inst, int i) const {
    const Value& v = Operand(inst, i);
    if (v.size() != 1 || shape_of_.at(inst.operand_ids(i))->element_type() == xla::TUPLE) {
      return Fail(inst, "operand " + std::to_string(i) + " must be an array, not a tuple");
    }
    return v[0];
  }
  Status ExpectOperands(const Inst& inst, int n) const {
    if (inst.operand_ids_size() != n) {
      return Fail(inst, "expects " + std::to_string(n) + " operands, has " + std::to_string(inst.operand_ids_size()));
    }
    return {};
  }

  std::string VarName(const Inst& inst, size_t leaf, size_t leaf_count, bool tuple) const {
    std::string base = "v" + std::to_string(index_.at(inst.id()));
    return tuple ? base + "_" + std::to_string(leaf) : base;
  }
  std::string BufName(const std::string& var) const { return "b" + var.substr(1); }
  // `npc_buf<T> bN(count[, fill]);` for the leaf named `var` (not initialized
  // without `fill`: every op writes its whole result); the buffer is released
  // after its last use.
  std::string DeclareBuffer(const std::string& var, xla::PrimitiveType t, int64_t count, const std::string& fill = "") {
    owned_[var] = CType(t);
    return "npc_buf<" + std::string(CType(t)) + "> " + BufName(var) + "(" + std::to_string(count) +
           (fill.empty() ? "" : ", " + fill) + ");";
  }
  std::string Comment(const Inst& inst) const;

  // Buffer mode: declares `npc_buf<T> bN(count[, init]);` for a new array
  // value of `inst` (array shape), opens a block with `T* w = bN.data();`.
  // FinishArray closes the block and defines `const T* vN`.
  Leaf BeginArray(Writer& w, const Inst& inst, const std::string& fill = "");
  void FinishArray(Writer& w, const Leaf& leaf);

  Status EmitInstruction(Writer& w, const Inst& inst);
  Status EmitParameter(const Inst& inst);
  Status EmitConstant(Writer& w, const Inst& inst);
  Status EmitElementwise(Writer& w, const Inst& inst);
  Result<std::string> ElementwiseExpr(const Inst& inst, xla::PrimitiveType out, const std::vector<std::string>& args,
                                      const std::vector<xla::PrimitiveType>& types);
  Status EmitIota(Writer& w, const Inst& inst);
  Status EmitBroadcast(Writer& w, const Inst& inst);
  Status EmitTranspose(Writer& w, const Inst& inst);
  Status EmitSlice(Writer& w, const Inst& inst);
  Status EmitDynamicSlice(Writer& w, const Inst& inst, bool update);
  Status EmitConcatenate(Writer& w, const Inst& inst);
  Status EmitPad(Writer& w, const Inst& inst);
  Status EmitReverse(Writer& w, const Inst& inst);
  Status EmitDot(Writer& w, const Inst& inst);
  Status EmitReduce(Writer& w, const Inst& inst);
  Status EmitMap(Writer& w, const Inst& inst);
  Status EmitGather(Writer& w, const Inst& inst);
  Status EmitScatter(Writer& w, const Inst& inst);
  Status EmitCall(Writer& w, const Inst& inst);
  Status EmitWhile(Writer& w, const Inst& inst);
  Status EmitRngBitGenerator(Writer& w, const Inst& inst);
  Status EmitNeuronCustomCall(Writer& w, const Inst& inst);
  Status EmitSoftmax(Writer& w, const Inst& inst, bool backward);
  Status EmitBatchNorm(Writer& w, const Inst& inst);
  Status EmitOutputs(Writer& w);

  ModuleCodegen* module_;
  const Comp& comp_;
  const Signature& sig_;
  Mode mode_;
  std::map<int64_t, Value> values_;                   // instruction id -> its leaves
  std::map<int64_t, const xla::ShapeProto*> shape_of_;
  std::map<int64_t, int> index_;                      // instruction id -> position in comp_
  std::map<std::string, std::string> owned_;          // leaf name -> C type of its std::vector buffer
};

// ---- the module --------------------------------------------------------------------

class ModuleCodegen {
 public:
  explicit ModuleCodegen(const xla::HloModuleProto& module) : module_(module) {
    for (int i = 0; i < module.computations_size(); ++i) index_by_id_.emplace(module.computations(i).id(), i);
  }

  Result<std::string> Generate();

  // Check mode (UnsupportedOpcodes): an instruction that cannot be compiled
  // is recorded in `failures` (opcode, or "custom-call:<target>" -> the first
  // message) and stands in as an opaque value of its shape, so that every
  // failing instruction of the module is seen, not only the first.
  void CollectFailuresInto(std::map<std::string, std::string>* failures) { failures_ = failures; }
  bool collecting() const { return failures_ != nullptr; }
  void RecordFailure(const Inst& inst, const std::string& message) {
    std::string key = inst.opcode();
    if (key == "custom-call") key += ":" + inst.custom_call_target();
    failures_->emplace(key, message);
  }

  // The C++ name of computation `id` compiled in `mode`; queues it. `user`
  // and `user_comp` name the calling instruction in errors.
  Result<std::string> RequireFunction(int64_t id, Mode mode, const Inst& user, const Comp& user_comp);
  Result<const Signature*> GetSignature(int index);
  const Comp& computation(int index) const { return module_.computations(index); }
  int IndexOf(int64_t id) const { return index_by_id_.at(id); }
  bool HasComputation(int64_t id) const { return index_by_id_.count(id) > 0; }

 private:
  static std::string FunctionName(int index, Mode mode) {
    return "fn" + std::to_string(index) + (mode == Mode::kBuffer ? "_b" : "_s");
  }
  std::string Prototype(int index, Mode mode, const Signature& sig) const;
  Status EmitFunction(int index, Mode mode);

  const xla::HloModuleProto& module_;
  std::map<int64_t, int> index_by_id_;
  std::map<int, Signature> signatures_;
  std::set<std::pair<int, Mode>> requested_;
  std::vector<std::pair<int, Mode>> queue_;
  std::map<std::pair<int, Mode>, std::string> definitions_;
  std::map<std::string, std::string>* failures_ = nullptr;
};

Result<const Signature*> ModuleCodegen::GetSignature(int index) {
  auto it = signatures_.find(index);
  if (it != signatures_.end()) return &it->second;
  const Comp& comp = module_.computations(index);
  auto fail = [&](const std::string& what) {
    return MakeError("host backend: " + what + " (computation " + comp.name() + ")");
  };
  Signature sig;
  std::map<int64_t, const Inst*> params;
  for (const auto& inst : comp.instructions()) {
    if (inst.id() == comp.root_id()) sig.root = &inst;
    if (inst.opcode() != "parameter") continue;
    if (!params.emplace(inst.parameter_number(), &inst).second) {
      return fail("two parameters numbered " + std::to_string(inst.parameter_number()));
    }
  }
  if (sig.root == nullptr) return fail("root instruction " + std::to_string(comp.root_id()) + " not found");
  int64_t expected = 0;
  for (const auto& [number, inst] : params) {
    if (number != expected) return fail("parameter " + std::to_string(expected) + " is missing");
    ++expected;
    sig.params.push_back(inst);
    sig.param_leaves.push_back(Leaves(inst->shape()));
  }
  sig.result_leaves = Leaves(sig.root->shape());
  auto check = [&](const xla::ShapeProto* s, const Inst& inst) -> Status {
    if (!LookupElementType(s->element_type())) {
      return MakeError("host backend: unsupported element type '" + PrimitiveTypeName(s->element_type()) +
                       "' (instruction %" + inst.name() + " in computation " + comp.name() + ")");
    }
    return {};
  };
  for (size_t p = 0; p < sig.params.size(); ++p) {
    for (const auto* s : sig.param_leaves[p]) {
      if (auto st = check(s, *sig.params[p]); !st) return st.error();
    }
  }
  for (const auto* s : sig.result_leaves) {
    if (auto st = check(s, *sig.root); !st) return st.error();
  }
  return &signatures_.emplace(index, std::move(sig)).first->second;
}

std::string ModuleCodegen::Prototype(int index, Mode mode, const Signature& sig) const {
  std::string out = "void " + FunctionName(index, mode) + "(";
  bool first = true;
  int p = 0;
  for (const auto& leaves : sig.param_leaves) {
    for (const auto* s : leaves) {
      out += first ? "" : ", ";
      first = false;
      out += mode == Mode::kBuffer ? std::string("const ") + CType(s->element_type()) + "* p" + std::to_string(p)
                                   : std::string(CType(s->element_type())) + " p" + std::to_string(p);
      ++p;
    }
  }
  int o = 0;
  for (const auto* s : sig.result_leaves) {
    out += first ? "" : ", ";
    first = false;
    out += std::string(CType(s->element_type())) + "* o" + std::to_string(o++);
  }
  return out + ")";
}

Result<std::string> ModuleCodegen::RequireFunction(int64_t id, Mode mode, const Inst& user, const Comp& user_comp) {
  auto it = index_by_id_.find(id);
  if (it == index_by_id_.end()) {
    return MakeError("host backend: called computation " + std::to_string(id) + " not found (instruction %" +
                     user.name() + " in computation " + user_comp.name() + ")");
  }
  auto key = std::make_pair(it->second, mode);
  if (requested_.insert(key).second) queue_.push_back(key);
  return FunctionName(it->second, mode);
}

Status ModuleCodegen::EmitFunction(int index, Mode mode) {
  auto sig = GetSignature(index);
  if (!sig) return sig.error();
  const Comp& comp = module_.computations(index);
  Writer w;
  w.Line("// computation " + CommentSafe(comp.name()) + (mode == Mode::kBuffer ? " (buffers)" : " (scalars)"));
  w.Open(Prototype(index, mode, **sig));
  FunctionEmitter emitter(this, comp, **sig, mode);
  if (auto st = emitter.EmitBody(w); !st) return st;
  w.Close();
  definitions_[{index, mode}] = w.text();
  return {};
}

Result<std::string> ModuleCodegen::Generate() {
  const Comp* entry = hlo::EntryComputation(module_);
  if (entry == nullptr) return MakeError("host backend: module " + module_.name() + " has no entry computation");
  int entry_index = 0;
  while (&module_.computations(entry_index) != entry) ++entry_index;
  requested_.insert({entry_index, Mode::kBuffer});
  queue_.push_back({entry_index, Mode::kBuffer});
  // Callees are discovered while emitting; a computation that (indirectly)
  // calls itself is not valid HLO, and the queue holds each one once.
  for (size_t i = 0; i < queue_.size(); ++i) {
    auto [index, mode] = queue_[i];
    if (auto st = EmitFunction(index, mode); !st) return st.error();
  }
  const Signature& sig = signatures_.at(entry_index);

  std::string out;
  out += "// Generated by npc's host backend (codegen version " + std::to_string(kCodegenVersion) +
         ") from HLO module " + CommentSafe(module_.name()) + ". Do not edit.\n";
  out += kPrelude;
  out += "\nnamespace {\n\n";
  for (const auto& [key, text] : definitions_) out += Prototype(key.first, key.second, signatures_.at(key.first)) + ";\n";
  out += "\n";
  for (const auto& [key, text] : definitions_) out += text + "\n";
  out += "}  // namespace\n\n";

  // Signature JSON.
  auto spec = [](const xla::ShapeProto* s) {
    std::string dims;
    for (int i = 0; i < s->dimensions_size(); ++i) dims += (i ? "," : "") + std::to_string(s->dimensions(i));
    return "{\"type\":\"" + PrimitiveTypeName(s->element_type()) + "\",\"dims\":[" + dims + "]}";
  };
  std::string json = "{\"abi_version\":" + std::to_string(kAbiVersion) +
                     ",\"codegen_version\":" + std::to_string(kCodegenVersion) + ",\"module\":\"" +
                     JsonEscape(module_.name()) + "\",\"parameters\":[";
  bool first = true;
  for (const auto& leaves : sig.param_leaves) {
    for (const auto* s : leaves) {
      json += (first ? "" : ",") + spec(s);
      first = false;
    }
  }
  json += "],\"outputs\":[";
  first = true;
  for (const auto* s : sig.result_leaves) {
    json += (first ? "" : ",") + spec(s);
    first = false;
  }
  json += "]}";

  out += "extern \"C\" int npc_host_abi_version(void) { return " + std::to_string(kAbiVersion) + "; }\n\n";
  out += "extern \"C\" const char* npc_host_signature(void) {\n  return " + CStringLiteral(json) + ";\n}\n\n";
  out += "extern \"C\" int npc_host_run(const void* const* inputs, void* const* outputs) {\n";
  out += "  (void)inputs;\n  (void)outputs;\n";
  out += "  try {\n    npc_pool pool;\n    npc_pool_scope scope(&pool);\n    " + FunctionName(entry_index, Mode::kBuffer) + "(";
  first = true;
  int p = 0;
  for (const auto& leaves : sig.param_leaves) {
    for (const auto* s : leaves) {
      out += std::string(first ? "" : ", ") + "static_cast<const " + CType(s->element_type()) + "*>(inputs[" +
             std::to_string(p++) + "])";
      first = false;
    }
  }
  int o = 0;
  for (const auto* s : sig.result_leaves) {
    out += std::string(first ? "" : ", ") + "static_cast<" + CType(s->element_type()) + "*>(outputs[" +
           std::to_string(o++) + "])";
    first = false;
  }
  out += ");\n  } catch (...) {\n    return 1;\n  }\n  return 0;\n}\n";
  return out;
}

// ---- FunctionEmitter -----------------------------------------------------------------

std::string FunctionEmitter::Comment(const Inst& inst) const {
  std::string operands;
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    auto it = index_.find(inst.operand_ids(i));
    operands += (i ? ", v" : "v") + (it == index_.end() ? std::string("?") : std::to_string(it->second));
  }
  return "// %" + CommentSafe(inst.name()) + " = " + CommentSafe(hlo::ShapeToString(inst.shape())) + " " +
         CommentSafe(inst.opcode()) + "(" + operands + ")";
}

Status FunctionEmitter::EmitBody(Writer& w) {
  for (int i = 0; i < comp_.instructions_size(); ++i) {
    const Inst& inst = comp_.instructions(i);
    index_[inst.id()] = i;
    shape_of_[inst.id()] = &inst.shape();
  }
  // Post-order from the root (operands first), iteratively; dead code is skipped.
  std::vector<const Inst*> order;
  std::set<int64_t> done, on_stack;
  std::vector<std::pair<const Inst*, int>> stack;
  auto find = [&](int64_t id) -> const Inst* {
    auto it = index_.find(id);
    return it == index_.end() ? nullptr : &comp_.instructions(it->second);
  };
  stack.push_back({sig_.root, 0});
  on_stack.insert(sig_.root->id());
  while (!stack.empty()) {
    auto& [inst, next] = stack.back();
    if (next < inst->operand_ids_size()) {
      int64_t op = inst->operand_ids(next++);
      const Inst* operand = find(op);
      if (operand == nullptr) return Fail(*inst, "operand id " + std::to_string(op) + " not found");
      if (done.count(op)) continue;
      if (on_stack.count(op)) return Fail(*inst, "the computation has a cycle");
      on_stack.insert(op);
      stack.push_back({operand, 0});
      continue;
    }
    order.push_back(inst);
    done.insert(inst->id());
    on_stack.erase(inst->id());
    stack.pop_back();
  }

  std::vector<std::string> chunks;          // code of each emitted instruction, in order
  std::map<std::string, size_t> last_use;   // leaf name -> last chunk reading it
  // Parameters first (they name the function arguments), then the rest.
  for (const Inst* p : sig_.params) {
    if (auto st = EmitParameter(*p); !st) return st;
  }
  for (const Inst* inst : order) {
    if (inst->opcode() == "parameter") continue;
    Writer iw(1);
    Status st = [&]() -> Status {
      for (const auto* s : Leaves(inst->shape())) {
        if (!LookupElementType(s->element_type())) {
          return Fail(*inst, "unsupported element type '" + PrimitiveTypeName(s->element_type()) + "'");
        }
        if (scalar() && s->dimensions_size() != 0) {
          return Fail(*inst, "a computation applied per element (reduce/map function) must be scalar, but this "
                             "instruction has shape " + hlo::ShapeToString(inst->shape()));
        }
      }
      return EmitInstruction(iw, *inst);
    }();
    if (!st) {
      if (!module_->collecting()) return st;
      module_->RecordFailure(*inst, st.error().message);
      Value opaque;  // stands in for the value, so that its users are checked too
      for (const auto* leaf : Leaves(inst->shape())) opaque.push_back({"unavailable", leaf->element_type(), Dims(*leaf)});
      values_[inst->id()] = std::move(opaque);
      continue;
    }
    chunks.push_back(iw.text());
    std::vector<std::string> reads;
    for (int64_t op : inst->operand_ids()) {
      for (const auto& leaf : values_.at(op)) reads.push_back(leaf.name);
    }
    for (const auto& leaf : values_.at(inst->id())) reads.push_back(leaf.name);  // its own buffers
    for (const auto& name : reads) last_use[name] = chunks.size() - 1;
  }
  // Buffers are released after their last use, except those the root returns.
  std::map<size_t, std::vector<std::string>> release;
  std::set<std::string> returned;
  for (const auto& leaf : values_.at(sig_.root->id())) returned.insert(leaf.name);
  for (const auto& [name, type] : owned_) {
    if (!returned.count(name) && last_use.count(name)) release[last_use[name]].push_back(name);
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    w.Raw(chunks[i]);
    for (const auto& name : release[i]) {
      w.Line(BufName(name) + ".release();  // last use of " + name);
    }
  }
  return EmitOutputs(w);
}

Status FunctionEmitter::EmitParameter(const Inst& inst) {
  int first = 0;
  for (const Inst* p : sig_.params) {
    if (p == &inst) break;
    first += static_cast<int>(Leaves(p->shape()).size());
  }
  Value v;
  for (const auto* s : Leaves(inst.shape())) {
    if (scalar() && s->dimensions_size() != 0) {
      return Fail(inst, "a computation applied per element (reduce/map function) must be scalar, but this "
                        "parameter has shape " + hlo::ShapeToString(inst.shape()));
    }
    v.push_back({"p" + std::to_string(first++), s->element_type(), Dims(*s)});
  }
  values_[inst.id()] = std::move(v);
  return {};
}

Status FunctionEmitter::EmitOutputs(Writer& w) {
  const Value& root = values_.at(sig_.root->id());
  for (size_t o = 0; o < root.size(); ++o) {
    if (scalar()) {
      w.Line("*o" + std::to_string(o) + " = " + root[o].name + ";");
    } else {
      w.Line("npc_copy(o" + std::to_string(o) + ", " + root[o].name + ", " + std::to_string(root[o].count()) + ");");
    }
  }
  return {};
}

Leaf FunctionEmitter::BeginArray(Writer& w, const Inst& inst, const std::string& fill) {
  Leaf leaf{VarName(inst, 0, 1, false), inst.shape().element_type(), Dims(inst.shape())};
  const std::string t = CType(leaf.type);
  w.Line(DeclareBuffer(leaf.name, leaf.type, leaf.count(), fill));
  w.Open("");
  w.Line(t + "* w = " + BufName(leaf.name) + ".data();");
  return leaf;
}

void FunctionEmitter::FinishArray(Writer& w, const Leaf& leaf) {
  w.Close();
  w.Line("const " + std::string(CType(leaf.type)) + "* " + leaf.name + " = " + BufName(leaf.name) + ".data();");
}

Status FunctionEmitter::EmitInstruction(Writer& w, const Inst& inst) {
  const std::string& op = inst.opcode();
  const bool tuple_shape = inst.shape().element_type() == xla::TUPLE;
  const bool collective = op == "all-reduce" || op == "all-gather" || op == "reduce-scatter";
  if (tuple_shape && op != "tuple" && op != "get-tuple-element" && op != "call" && op != "fusion" &&
      op != "reduce" && op != "opt-barrier" && op != "optimization-barrier" && !collective && op != "while" &&
      op != "rng-bit-generator" && op != "batch-norm-training" && op != "batch-norm-grad" &&
      !(op == "custom-call" && inst.custom_call_target() == "AwsNeuronTransferWithStaticRing")) {
    if (op == "constant" || op == "copy") return Fail(inst, "tuple-shaped " + op + " is not supported");
    return Unsupported(inst);
  }
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    if (!values_.count(inst.operand_ids(i))) return Fail(inst, "operand " + std::to_string(i) + " is not defined");
  }

  if (op == "tuple") {
    Value v;
    for (int i = 0; i < inst.operand_ids_size(); ++i) {
      for (const auto& leaf : Operand(inst, i)) v.push_back(leaf);
    }
    values_[inst.id()] = std::move(v);
    return {};
  }
  if (op == "get-tuple-element") {
    if (auto st = ExpectOperands(inst, 1); !st) return st;
    const xla::ShapeProto& ts = *shape_of_.at(inst.operand_ids(0));
    if (ts.element_type() != xla::TUPLE || inst.tuple_index() < 0 || inst.tuple_index() >= ts.tuple_shapes_size()) {
      return Fail(inst, "tuple_index " + std::to_string(inst.tuple_index()) + " out of range for operand shape " +
                            hlo::ShapeToString(ts));
    }
    size_t first = 0;
    for (int64_t i = 0; i < inst.tuple_index(); ++i) first += Leaves(ts.tuple_shapes(i)).size();
    size_t n = Leaves(ts.tuple_shapes(inst.tuple_index())).size();
    const Value& src = Operand(inst, 0);
    values_[inst.id()] = Value(src.begin() + first, src.begin() + first + n);
    return {};
  }
  if (op == "opt-barrier" || op == "optimization-barrier") {
    if (auto st = ExpectOperands(inst, 1); !st) return st;
    values_[inst.id()] = Operand(inst, 0);
    return {};
  }
  if (op == "reshape" || op == "copy") {
    if (auto st = ExpectOperands(inst, 1); !st) return st;
    auto a = ArrayOperand(inst, 0);
    if (!a) return a.error();
    if (a->type != inst.shape().element_type() || a->count() != hlo::ElementCount(inst.shape())) {
      return Fail(inst, op + " from " + ArrayText(a->type, a->dims) + " to " + hlo::ShapeToString(inst.shape()) +
                            " changes the element type or count");
    }
    values_[inst.id()] = {Leaf{a->name, a->type, Dims(inst.shape())}};
    return {};
  }
  if (op == "custom-call" && inst.custom_call_target() == "AwsNeuronTransferWithStaticRing") {
    // torch-neuronx marks parameters (weights) with this transfer hint; its
    // value is its operand.
    if (auto st = ExpectOperands(inst, 1); !st) return st;
    const Value& src = Operand(inst, 0);
    auto leaves = Leaves(inst.shape());
    if (leaves.size() != src.size()) return Fail(inst, "AwsNeuronTransferWithStaticRing changes the shape");
    Value v;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if ( src[i].type != leaves[i]->element_type() || src[i].dims != Dims(*leaves[i])) {
        return Fail(inst, "AwsNeuronTransferWithStaticRing changes the shape");
      }
      v.push_back(src[i]);
    }
    values_[inst.id()] = std::move(v);
    return {};
  }
  if (collective) {
    // The host backend runs one replica: a collective whose every replica
    // group has at most one member (or that names no groups: all replicas,
    // which is this one) is the identity on each operand.
    for (const auto& group : inst.replica_groups()) {
      if (group.replica_ids_size() > 1) {
        return Fail(inst, op + " over a replica group of " + std::to_string(group.replica_ids_size()) +
                              " participants: the host backend runs one replica");
      }
    }
    Value v;
    for (int i = 0; i < inst.operand_ids_size(); ++i) {
      for (const auto& leaf : Operand(inst, i)) v.push_back(leaf);
    }
    auto leaves = Leaves(inst.shape());
    bool same = leaves.size() == v.size();
    for (size_t i = 0; same && i < leaves.size(); ++i) {
      same = v[i].type == leaves[i]->element_type() && v[i].dims == Dims(*leaves[i]);
    }
    if (!same) {
      return Fail(inst, op + " from " + std::to_string(v.size()) + " operands to " + hlo::ShapeToString(inst.shape()) +
                            " needs more than one participant: the host backend runs one replica");
    }
    values_[inst.id()] = std::move(v);
    return {};
  }
  if (op == "parameter") return EmitParameter(inst);
  if (op == "constant") return EmitConstant(w, inst);
  if (op == "call" || op == "fusion") return EmitCall(w, inst);
  const bool batch_norm = op == "batch-norm-training" || op == "batch-norm-inference" || op == "batch-norm-grad";
  if (scalar() && (op == "while" || op == "rng-bit-generator" || op == "custom-call" || batch_norm)) {
    if (op == "custom-call" && !IsNeuronCustomCall(inst.custom_call_target())) return Unsupported(inst);
    return Fail(inst, "opcode '" + op + "' is not supported in a computation applied per element (reduce/map function)");
  }
  if (op == "while") return EmitWhile(w, inst);
  if (op == "rng-bit-generator") return EmitRngBitGenerator(w, inst);
  if (op == "custom-call") return EmitNeuronCustomCall(w, inst);
  if (batch_norm) return EmitBatchNorm(w, inst);

  // Everything below computes new arrays; in scalar mode only elementwise
  // ops (and shape ops that are identities on scalars) are possible.
  if (scalar() && (op == "broadcast" || op == "transpose")) {
    if (auto st = ExpectOperands(inst, 1); !st) return st;
    auto a = ArrayOperand(inst, 0);
    if (!a) return a.error();
    values_[inst.id()] = {*a};
    return {};
  }
  if (scalar() && (op == "iota" || op == "slice" || op == "dynamic-slice" || op == "dynamic-update-slice" ||
                   op == "concatenate" || op == "pad" || op == "reverse" || op == "dot" || op == "gather" ||
                   op == "scatter")) {
    return Fail(inst, "opcode '" + op + "' is not supported in a computation applied per element (reduce/map function)");
  }
  if (op == "iota") return EmitIota(w, inst);
  if (op == "broadcast") return EmitBroadcast(w, inst);
  if (op == "transpose") return EmitTranspose(w, inst);
  if (op == "slice") return EmitSlice(w, inst);
  if (op == "dynamic-slice") return EmitDynamicSlice(w, inst, false);
  if (op == "dynamic-update-slice") return EmitDynamicSlice(w, inst, true);
  if (op == "concatenate") return EmitConcatenate(w, inst);
  if (op == "pad") return EmitPad(w, inst);
  if (op == "reverse") return EmitReverse(w, inst);
  if (op == "dot") return EmitDot(w, inst);
  if (op == "reduce") return EmitReduce(w, inst);
  if (op == "map") return EmitMap(w, inst);
  if (op == "gather") return EmitGather(w, inst);
  if (op == "scatter") return EmitScatter(w, inst);
  return EmitElementwise(w, inst);
}

// ---- constants -----------------------------------------------------------------------

Status FunctionEmitter::EmitConstant(Writer& w, const Inst& inst) {
  if (inst.frontend_attributes().map().count(hlo::kElidedConstantAttribute)) {
    return Fail(inst, "constant %" + inst.name() + " " + hlo::ShapeToString(inst.shape()) +
                          " has elided values ({...} in the HLO text it was read from): its values are unknown, and "
                          "the host backend does not make them up");
  }
  const xla::PrimitiveType t = inst.shape().element_type();
  const ElementType et = *LookupElementType(t);
  const int64_t n = hlo::ElementCount(inst.shape());
  const xla::LiteralProto& lit = inst.literal();
  std::vector<std::string> vals;
  auto bytes_values = [&](const std::string& bytes, int width, bool is_signed) {
    for (size_t i = 0; i + width <= bytes.size(); i += width) {
      uint64_t u = 0;
      for (int b = 0; b < width; ++b) u |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i + b])) << (8 * b);
      if (is_signed) {
        int64_t s = width == 1 ? static_cast<int8_t>(u) : static_cast<int16_t>(u);
        vals.push_back(SignedLiteral(s, width));
      } else {
        vals.push_back(UnsignedLiteral(u, width));
      }
    }
  };
  switch (t) {
    case xla::PRED: for (bool b : lit.preds()) vals.push_back(b ? "1" : "0"); break;
    case xla::S8: bytes_values(lit.s8s(), 1, true); break;
    case xla::U8: bytes_values(lit.u8s(), 1, false); break;
    case xla::S16: bytes_values(lit.s16s(), 2, true); break;
    case xla::U16: bytes_values(lit.u16s(), 2, false); break;
    case xla::S32: for (int32_t v : lit.s32s()) vals.push_back(SignedLiteral(v, 4)); break;
    case xla::S64: for (int64_t v : lit.s64s()) vals.push_back(SignedLiteral(v, 8)); break;
    case xla::U32: for (uint32_t v : lit.u32s()) vals.push_back(UnsignedLiteral(v, 4)); break;
    case xla::U64: for (uint64_t v : lit.u64s()) vals.push_back(UnsignedLiteral(v, 8)); break;
    case xla::F32: for (float v : lit.f32s()) vals.push_back(FloatLiteral(v, true)); break;
    case xla::F64: for (double v : lit.f64s()) vals.push_back(FloatLiteral(v, false)); break;
    case xla::BF16:
    case xla::F16: {
      const std::string& bytes = t == xla::BF16 ? lit.bf16s() : lit.f16s();
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        unsigned bits = static_cast<unsigned char>(bytes[i]) | (static_cast<unsigned char>(bytes[i + 1]) << 8);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s{0x%04x}", et.name, bits);
        vals.push_back(buf);
      }
      break;
    }
    default: return Fail(inst, "unsupported element type '" + PrimitiveTypeName(t) + "'");
  }
  if (static_cast<int64_t>(vals.size()) != n) {
    return Fail(inst, "constant literal has " + std::to_string(vals.size()) + " " + PrimitiveTypeName(t) +
                          " values for shape " + hlo::ShapeToString(inst.shape()) + " (" + std::to_string(n) +
                          " elements)" + (vals.empty() ? "; were its values elided ({...}) in HLO text?" : ""));
  }
  const std::string name = VarName(inst, 0, 1, false);
  w.Line(Comment(inst));
  if (scalar()) {
    w.Line("const " + std::string(et.name) + " " + name + " = " + vals[0] + ";");
  } else if (n == 0) {
    w.Line("const " + std::string(et.name) + "* " + name + " = nullptr;");
  } else {
    const std::string k = "k" + name.substr(1);
    const std::string decl = "static const " + std::string(et.name) + " " + k + "[" + std::to_string(n) + "] = {";
    std::string all;
    for (int64_t i = 0; i < n && all.size() < 100; ++i) all += (i ? ", " : "") + vals[i];
    if (decl.size() + all.size() < 100) {
      w.Line(decl + all + "};");
      w.Line("const " + std::string(et.name) + "* " + name + " = " + k + ";");
      values_[inst.id()] = {Leaf{name, t, Dims(inst.shape())}};
      return {};
    }
    w.Line(decl);
    std::string line;
    for (int64_t i = 0; i < n; ++i) {
      line += vals[i] + (i + 1 < n ? "," : "");
      if (line.size() > 90 || i + 1 == n) {
        w.Line("    " + line);
        line.clear();
      } else {
        line += " ";
      }
    }
    w.Line("};");
    w.Line("const " + std::string(et.name) + "* " + name + " = " + k + ";");
  }
  values_[inst.id()] = {Leaf{name, t, Dims(inst.shape())}};
  return {};
}

// ---- elementwise -----------------------------------------------------------------------

enum class Types { kFloat, kNumeric, kAny, kIntOrPred, kInt };

struct ElementwiseOp {
  const char* opcode;
  int arity;
  Types types;
  const char* format;  // $T: element type, $0 $1 $2: operands
};

constexpr ElementwiseOp kElementwiseOps[] = {
    {"add", 2, Types::kNumeric, "npc_add<$T>($0, $1)"},
    {"subtract", 2, Types::kNumeric, "npc_sub<$T>($0, $1)"},
    {"multiply", 2, Types::kNumeric, "npc_mul<$T>($0, $1)"},
    {"divide", 2, Types::kNumeric, "npc_div<$T>($0, $1)"},
    {"remainder", 2, Types::kNumeric, "npc_rem<$T>($0, $1)"},
    {"power", 2, Types::kNumeric, "npc_pow<$T>($0, $1)"},
    {"maximum", 2, Types::kAny, "npc_max<$T>($0, $1)"},
    {"minimum", 2, Types::kAny, "npc_min<$T>($0, $1)"},
    {"atan2", 2, Types::kFloat, "std::atan2($0, $1)"},
    {"and", 2, Types::kIntOrPred, "npc_and<$T>($0, $1)"},
    {"or", 2, Types::kIntOrPred, "npc_or<$T>($0, $1)"},
    {"xor", 2, Types::kIntOrPred, "npc_xor<$T>($0, $1)"},
    {"shift-left", 2, Types::kInt, "npc_shl<$T>($0, $1)"},
    {"shift-right-logical", 2, Types::kInt, "npc_shr_logical<$T>($0, $1)"},
    {"shift-right-arithmetic", 2, Types::kInt, "npc_shr_arith<$T>($0, $1)"},
    {"negate", 1, Types::kNumeric, "npc_neg<$T>($0)"},
    {"abs", 1, Types::kNumeric, "npc_abs<$T>($0)"},
    {"sign", 1, Types::kNumeric, "npc_sign<$T>($0)"},
    {"floor", 1, Types::kFloat, "std::floor($0)"},
    {"ceil", 1, Types::kFloat, "std::ceil($0)"},
    {"round-nearest-afz", 1, Types::kFloat, "std::round($0)"},
    {"round-nearest-even", 1, Types::kFloat, "npc_round_even<$T>($0)"},
    {"exponential", 1, Types::kFloat, "std::exp($0)"},
    {"exponential-minus-one", 1, Types::kFloat, "std::expm1($0)"},
    {"log", 1, Types::kFloat, "std::log($0)"},
    {"log-plus-one", 1, Types::kFloat, "std::log1p($0)"},
    {"logistic", 1, Types::kFloat, "npc_logistic<$T>($0)"},
    {"sqrt", 1, Types::kFloat, "std::sqrt($0)"},
    {"rsqrt", 1, Types::kFloat, "npc_rsqrt<$T>($0)"},
    {"cbrt", 1, Types::kFloat, "std::cbrt($0)"},
    {"sine", 1, Types::kFloat, "std::sin($0)"},
    {"cosine", 1, Types::kFloat, "std::cos($0)"},
    {"tan", 1, Types::kFloat, "std::tan($0)"},
    {"tanh", 1, Types::kFloat, "std::tanh($0)"},
    {"erf", 1, Types::kFloat, "std::erf($0)"},
    {"popcnt", 1, Types::kInt, "npc_popcnt<$T>($0)"},
    {"count-leading-zeros", 1, Types::kInt, "npc_clz<$T>($0)"},
    {"clamp", 3, Types::kAny, "npc_clamp<$T>($0, $1, $2)"},
};

bool IsElementwiseOpcode(const std::string& op) {
  if (op == "compare" || op == "convert" || op == "bitcast-convert" || op == "select" || op == "is-finite" ||
      op == "not") {
    return true;
  }
  for (const auto& e : kElementwiseOps) {
    if (op == e.opcode) return true;
  }
  return false;
}

bool TypeAllowed(Types types, xla::PrimitiveType t) {
  switch (types) {
    case Types::kFloat: return IsFloat(t);
    case Types::kNumeric: return IsFloat(t) || IsInt(t);
    case Types::kAny: return true;
    case Types::kIntOrPred: return IsInt(t) || KindOf(t) == Kind::kPred;
    case Types::kInt: return IsInt(t);
  }
  return false;
}

std::string Substitute(const std::string& format, const std::string& type, const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '$' && i + 1 < format.size()) {
      char c = format[i + 1];
      if (c == 'T') {
        out += type;
        ++i;
        continue;
      }
      if (c >= '0' && c <= '9' && static_cast<size_t>(c - '0') < args.size()) {
        out += args[c - '0'];
        ++i;
        continue;
      }
    }
    out += format[i];
  }
  return out;
}

Result<std::string> FunctionEmitter::ElementwiseExpr(const Inst& inst, xla::PrimitiveType out,
                                                     const std::vector<std::string>& args,
                                                     const std::vector<xla::PrimitiveType>& types) {
  const std::string& op = inst.opcode();
  // 16-bit floats: compute in f32 and round the result (bitcast-convert works on the bits).
  bool narrow = IsNarrow(out);
  for (auto t : types) narrow = narrow || IsNarrow(t);
  if (narrow && op != "bitcast-convert") {
    if (op != "convert") {
      for (size_t i = 0; i < types.size(); ++i) {
        const xla::PrimitiveType want = (op == "select" && i == 0)                   ? xla::PRED
                                        : (op == "compare" || op == "is-finite") ? types[0]
                                                                                 : out;
        if (types[i] != want) {
          return Fail(inst, "operand " + std::to_string(i) + " has element type " + PrimitiveTypeName(types[i]) +
                                ", expected " + PrimitiveTypeName(want));
        }
      }
    }
    std::vector<std::string> wide_args;
    std::vector<xla::PrimitiveType> wide_types;
    for (size_t i = 0; i < args.size(); ++i) {
      wide_args.push_back(Widen(args[i], types[i]));
      wide_types.push_back(ComputeType(types[i]));
    }
    auto expr = ElementwiseExpr(inst, ComputeType(out), wide_args, wide_types);
    if (!expr) return expr;
    return Narrow(*expr, out);
  }
  const std::string t = CType(out);
  auto bad_type = [&](xla::PrimitiveType ty) {
    return Fail(inst, "opcode '" + op + "' does not support element type " + PrimitiveTypeName(ty));
  };
  auto arity = [&](int n) -> Status {
    if (static_cast<int>(args.size()) != n) {
      return Fail(inst, "expects " + std::to_string(n) + " operands, has " + std::to_string(args.size()));
    }
    return {};
  };
  if (op == "compare") {
    if (auto st = arity(2); !st) return st.error();
    if (types[0] != types[1]) return Fail(inst, "compare of different element types");
    if (out != xla::PRED) return Fail(inst, "compare must produce pred");
    static const std::map<std::string, std::string> kOps = {{"EQ", "=="}, {"NE", "!="}, {"LT", "<"},
                                                           {"LE", "<="}, {"GT", ">"}, {"GE", ">="}};
    auto it = kOps.find(inst.comparison_direction());
    if (it == kOps.end()) return Fail(inst, "unknown comparison_direction '" + inst.comparison_direction() + "'");
    std::string a = args[0], b = args[1];
    if (inst.comparison_type() == "TOTALORDER" && IsFloat(types[0])) {
      a = "npc_total_key(" + a + ")";
      b = "npc_total_key(" + b + ")";
    }
    return "static_cast<pred>(" + a + " " + it->second + " " + b + ")";
  }
  if (op == "convert") {
    if (auto st = arity(1); !st) return st.error();
    if (out == xla::PRED) return "npc_to_pred(" + args[0] + ")";
    return "npc_convert<" + t + ">(" + args[0] + ")";
  }
  if (op == "bitcast-convert") {
    if (auto st = arity(1); !st) return st.error();
    if (out == xla::PRED || types[0] == xla::PRED) return bad_type(xla::PRED);
    if (LookupElementType(out)->bytes != LookupElementType(types[0])->bytes) {
      return Fail(inst, "bitcast-convert between types of different sizes is not supported");
    }
    return "npc_bitcast<" + t + ">(" + args[0] + ")";
  }
  if (op == "select") {
    if (auto st = arity(3); !st) return st.error();
    if (types[0] != xla::PRED) return Fail(inst, "select predicate must be pred");
    if (types[1] != out || types[2] != out) return Fail(inst, "select operand types differ from the result");
    return "(" + args[0] + " != 0 ? " + args[1] + " : " + args[2] + ")";
  }
  if (op == "is-finite") {
    if (auto st = arity(1); !st) return st.error();
    if (!IsFloat(types[0])) return bad_type(types[0]);
    return "npc_is_finite(" + args[0] + ")";
  }
  if (op == "not") {
    if (auto st = arity(1); !st) return st.error();
    if (types[0] != out) return Fail(inst, "operand type differs from the result");
    if (out == xla::PRED) return "npc_lnot(" + args[0] + ")";
    if (!IsInt(out)) return bad_type(out);
    return "npc_bnot<" + t + ">(" + args[0] + ")";
  }
  if (out == xla::PRED && (op == "add" || op == "multiply")) {
    // XLA: on pred, add is or and multiply is and.
    if (auto st = arity(2); !st) return st.error();
    if (types[0] != out || types[1] != out) return Fail(inst, "operand types differ from the result");
    return std::string(op == "add" ? "npc_or" : "npc_and") + "<pred>(" + args[0] + ", " + args[1] + ")";
  }
  for (const auto& e : kElementwiseOps) {
    if (op != e.opcode) continue;
    if (auto st = arity(e.arity); !st) return st.error();
    for (auto ty : types) {
      if (ty != out) {
        return Fail(inst, "operand type " + PrimitiveTypeName(ty) + " differs from the result type " +
                              PrimitiveTypeName(out));
      }
    }
    if (!TypeAllowed(e.types, out)) return bad_type(out);
    return Substitute(e.format, t, args);
  }
  return Unsupported(inst);
}

Status FunctionEmitter::EmitElementwise(Writer& w, const Inst& inst) {
  // Check the opcode first, so that an unknown op is reported as such.
  if (!IsElementwiseOpcode(inst.opcode())) return Unsupported(inst);
  std::vector<Leaf> operands;
  std::vector<xla::PrimitiveType> types;
  const std::vector<int64_t> dims = Dims(inst.shape());
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    auto a = ArrayOperand(inst, i);
    if (!a) return a.error();
    operands.push_back(*a);
    types.push_back(a->type);
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    // Rank-0 operands are broadcast (select's predicate and clamp's bounds may be scalars).
    if (operands[i].dims != dims && !operands[i].dims.empty()) {
      return Fail(inst, "operand " + std::to_string(i) + " has shape " +
                            ArrayText(operands[i].type, operands[i].dims) + ", result " +
                            hlo::ShapeToString(inst.shape()));
    }
  }
  const std::string op = inst.opcode();
  // Identity conversions only rename.
  if ((op == "convert" || op == "bitcast-convert") && operands.size() == 1 && types[0] == inst.shape().element_type()) {
    values_[inst.id()] = {Leaf{operands[0].name, types[0], dims}};
    return {};
  }
  std::vector<std::string> args;
  for (const auto& a : operands) {
    if (scalar()) args.push_back(a.name);
    else args.push_back(a.name + (a.dims.empty() && !dims.empty() ? "[0]" : "[i]"));
  }
  auto expr = ElementwiseExpr(inst, inst.shape().element_type(), args, types);
  if (!expr) return expr.error();
  w.Line(Comment(inst));
  if (scalar()) {
    const std::string name = VarName(inst, 0, 1, false);
    w.Line("const " + std::string(CType(inst.shape().element_type())) + " " + name + " = " + *expr + ";");
    values_[inst.id()] = {Leaf{name, inst.shape().element_type(), dims}};
    return {};
  }
  Leaf out = BeginArray(w, inst);
  w.Line("for (s64 i = 0; i < " + std::to_string(out.count()) + "; ++i) w[i] = " + *expr + ";");
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// ---- shape ops -------------------------------------------------------------------------

Status FunctionEmitter::EmitIota(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 0); !st) return st;
  const auto dims = Dims(inst.shape());
  const xla::PrimitiveType t = inst.shape().element_type();
  if (t == xla::PRED) return Fail(inst, "iota of pred is not supported");
  if (inst.dimensions_size() != 1 || inst.dimensions(0) < 0 || inst.dimensions(0) >= static_cast<int64_t>(dims.size())) {
    return Fail(inst, "iota needs one iota dimension within the rank");
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  auto loops = LoopsOver(dims);
  OpenLoops(w, loops);
  w.Line("w[" + Linear(RowMajorTerms(dims)) + "] = " +
         Narrow(std::string("static_cast<") + CType(ComputeType(t)) + ">(i" + std::to_string(inst.dimensions(0)) + ")", t) +
         ";");
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

Status FunctionEmitter::EmitBroadcast(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  const auto dims = Dims(inst.shape());
  if (a->type != inst.shape().element_type()) return Fail(inst, "broadcast changes the element type");
  if (inst.dimensions_size() != static_cast<int>(a->dims.size())) {
    return Fail(inst, "broadcast dimensions must list one output dimension per operand dimension");
  }
  auto astrides = Strides(a->dims);
  std::vector<Term> terms;
  for (int k = 0; k < inst.dimensions_size(); ++k) {
    int64_t d = inst.dimensions(k);
    if (d < 0 || d >= static_cast<int64_t>(dims.size()) || dims[d] != a->dims[k]) {
      return Fail(inst, "broadcast dimension " + std::to_string(k) + " -> " + std::to_string(d) +
                            " does not fit operand " + ArrayText(a->type, a->dims));
    }
    terms.push_back({"i" + std::to_string(d), astrides[k]});
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  if (a->dims.empty() || a->count() == 1) {
    w.Line("for (s64 i = 0; i < " + std::to_string(out.count()) + "; ++i) w[i] = " + a->name + "[0];");
  } else {
    auto loops = LoopsOver(dims);
    OpenLoops(w, loops);
    w.Line("w[" + Linear(RowMajorTerms(dims)) + "] = " + a->name + "[" + Linear(terms) + "];");
    CloseLoops(w, loops);
  }
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

Status FunctionEmitter::EmitTranspose(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  const auto dims = Dims(inst.shape());
  const size_t rank = a->dims.size();
  if (inst.dimensions_size() != static_cast<int>(rank) || dims.size() != rank) {
    return Fail(inst, "transpose permutation must have one entry per dimension");
  }
  std::vector<bool> seen(rank, false);
  auto astrides = Strides(a->dims);
  std::vector<Term> terms;
  bool identity = true;
  for (size_t i = 0; i < rank; ++i) {
    int64_t p = inst.dimensions(i);
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p] || dims[i] != a->dims[p]) {
      return Fail(inst, "transpose dimensions are not a permutation matching the shapes");
    }
    seen[p] = true;
    identity = identity && p == static_cast<int64_t>(i);
    terms.push_back({"i" + std::to_string(i), astrides[p]});
  }
  if (identity) {
    values_[inst.id()] = {Leaf{a->name, a->type, dims}};
    return {};
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  auto loops = LoopsOver(dims);
  OpenLoops(w, loops);
  w.Line("w[" + Linear(RowMajorTerms(dims)) + "] = " + a->name + "[" + Linear(terms) + "];");
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

Status FunctionEmitter::EmitSlice(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  const auto dims = Dims(inst.shape());
  const size_t rank = a->dims.size();
  if (inst.slice_dimensions_size() != static_cast<int>(rank) || dims.size() != rank) {
    return Fail(inst, "slice needs one slice dimension per operand dimension");
  }
  auto astrides = Strides(a->dims);
  std::vector<Term> terms;
  int64_t offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    const auto& sd = inst.slice_dimensions(d);
    int64_t stride = sd.stride() == 0 ? 1 : sd.stride();
    // A stride past the dimension's size takes one element, as the size does
    // (and keeps stride * stride of the operand within 64 bits).
    if (stride > a->dims[d]) stride = std::max<int64_t>(a->dims[d], 1);
    if (sd.start() < 0 || sd.limit() > a->dims[d] || sd.start() > sd.limit() || stride < 0 ||
        (sd.limit() == sd.start() ? 0 : (sd.limit() - sd.start() - 1) / stride + 1) != dims[d]) {
      return Fail(inst, "slice dimension " + std::to_string(d) + " [" + std::to_string(sd.start()) + ":" +
                            std::to_string(sd.limit()) + ":" + std::to_string(stride) + "] does not fit operand " +
                            ArrayText(a->type, a->dims) + " and result " + hlo::ShapeToString(inst.shape()));
    }
    offset += sd.start() * astrides[d];
    terms.push_back({"i" + std::to_string(d), stride * astrides[d]});
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  auto loops = LoopsOver(dims);
  OpenLoops(w, loops);
  w.Line("w[" + Linear(RowMajorTerms(dims)) + "] = " + a->name + "[" + Linear(terms, offset) + "];");
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// dynamic-slice(operand, start...) and dynamic-update-slice(operand, update, start...).
// Start indices are rank-0 integer operands (or, in old HLO, one rank-1 operand).
Status FunctionEmitter::EmitDynamicSlice(Writer& w, const Inst& inst, bool update) {
  const int first_index = update ? 2 : 1;
  if (inst.operand_ids_size() < first_index) return Fail(inst, "too few operands");
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  const size_t rank = a->dims.size();
  std::vector<int64_t> sizes;
  Leaf u;
  if (update) {
    auto ur = ArrayOperand(inst, 1);
    if (!ur) return ur.error();
    u = *ur;
    sizes = u.dims;
    if (u.type != a->type) return Fail(inst, "update type differs from the operand");
  } else {
    sizes = Dims(inst.shape());
  }
  if (sizes.size() != rank) return Fail(inst, "slice sizes must have the operand's rank");
  if (update && Dims(inst.shape()) != a->dims) return Fail(inst, "result shape differs from the operand");
  std::vector<std::string> index_exprs;
  std::vector<xla::PrimitiveType> index_types;
  const int n_index = inst.operand_ids_size() - first_index;
  if (n_index == static_cast<int>(rank)) {
    for (int i = 0; i < n_index; ++i) {
      auto s = ArrayOperand(inst, first_index + i);
      if (!s) return s.error();
      if (!s->dims.empty() || !IsInt(s->type)) return Fail(inst, "start indices must be integer scalars");
      index_exprs.push_back(s->name + "[0]");
    }
  } else if (n_index == 1 && rank != 1) {
    auto s = ArrayOperand(inst, first_index);
    if (!s) return s.error();
    if (s->dims.size() != 1 || s->dims[0] != static_cast<int64_t>(rank) || !IsInt(s->type)) {
      return Fail(inst, "start indices must be integer scalars");
    }
    for (size_t d = 0; d < rank; ++d) index_exprs.push_back(s->name + "[" + std::to_string(d) + "]");
  } else {
    return Fail(inst, "expects one start index per operand dimension");
  }
  auto astrides = Strides(a->dims);
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] > a->dims[d] || sizes[d] < 0) return Fail(inst, "slice size exceeds the operand");
    w.Line("const s64 s" + std::to_string(d) + " = npc_start_index(" + index_exprs[d] + ", " +
           std::to_string(a->dims[d] - sizes[d]) + ");");
  }
  std::vector<Term> aterms;
  for (size_t d = 0; d < rank; ++d) {
    aterms.push_back({"i" + std::to_string(d), astrides[d]});
    aterms.push_back({"s" + std::to_string(d), astrides[d]});
  }
  auto loops = LoopsOver(sizes);
  if (update) {
    w.Line("npc_copy(w, " + a->name + ", " + std::to_string(a->count()) + ");");
    OpenLoops(w, loops);
    w.Line("w[" + Linear(aterms) + "] = " + u.name + "[" + Linear(RowMajorTerms(sizes)) + "];");
  } else {
    OpenLoops(w, loops);
    w.Line("w[" + Linear(RowMajorTerms(sizes)) + "] = " + a->name + "[" + Linear(aterms) + "];");
  }
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

Status FunctionEmitter::EmitConcatenate(Writer& w, const Inst& inst) {
  if (inst.operand_ids_size() < 1) return Fail(inst, "concatenate needs operands");
  const auto dims = Dims(inst.shape());
  if (inst.dimensions_size() != 1 || inst.dimensions(0) < 0 || inst.dimensions(0) >= static_cast<int64_t>(dims.size())) {
    return Fail(inst, "concatenate needs one dimension within the rank");
  }
  const int64_t cd = inst.dimensions(0);
  auto ostrides = Strides(dims);
  std::vector<Leaf> operands;
  int64_t total = 0;
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    auto a = ArrayOperand(inst, i);
    if (!a) return a.error();
    if (a->type != inst.shape().element_type() || a->dims.size() != dims.size()) {
      return Fail(inst, "operand " + std::to_string(i) + " does not fit the result");
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (static_cast<int64_t>(d) != cd && a->dims[d] != dims[d]) {
        return Fail(inst, "operand " + std::to_string(i) + " does not fit the result");
      }
    }
    total += a->dims[cd];
    operands.push_back(*a);
  }
  if (total != dims[cd]) return Fail(inst, "operand sizes do not add up to the result");
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  int64_t offset = 0;
  for (const auto& a : operands) {
    std::vector<Term> oterms;
    for (size_t d = 0; d < dims.size(); ++d) oterms.push_back({"i" + std::to_string(d), ostrides[d]});
    auto loops = LoopsOver(a.dims);
    OpenLoops(w, loops);
    w.Line("w[" + Linear(oterms, offset * ostrides[cd]) + "] = " + a.name + "[" + Linear(RowMajorTerms(a.dims)) + "];");
    CloseLoops(w, loops);
    offset += a.dims[cd];
  }
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

Status FunctionEmitter::EmitPad(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 2); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  auto pv = ArrayOperand(inst, 1);
  if (!pv) return pv.error();
  const auto dims = Dims(inst.shape());
  const size_t rank = a->dims.size();
  if (!pv->dims.empty() || pv->type != a->type) return Fail(inst, "padding value must be a scalar of the operand type");
  if (inst.padding_config().dimensions_size() != static_cast<int>(rank) || dims.size() != rank) {
    return Fail(inst, "padding_config needs one entry per dimension");
  }
  auto ostrides = Strides(dims);
  std::vector<Loop> loops = LoopsOver(a->dims);
  std::vector<Term> oterms;
  for (size_t d = 0; d < rank; ++d) {
    const auto& pc = inst.padding_config().dimensions(d);
    const int64_t lo = pc.edge_padding_low(), hi = pc.edge_padding_high(), interior = pc.interior_padding();
    const int64_t n = a->dims[d];
    if (interior < 0 || lo + hi + n + (n > 0 ? (n - 1) * interior : 0) != dims[d]) {
      return Fail(inst, "padding_config does not match the result shape");
    }
    const std::string c = "c" + std::to_string(d);
    loops[d].prologue.push_back("const s64 " + c + " = " + Linear({{loops[d].var, interior + 1}}, lo) + ";");
    if (lo < 0 || hi < 0) loops[d].prologue.push_back("if (" + c + " < 0 || " + c + " >= " + std::to_string(dims[d]) + ") continue;");
    oterms.push_back({c, ostrides[d]});
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst, pv->name + "[0]");
  OpenLoops(w, loops);
  w.Line("w[" + Linear(oterms) + "] = " + a->name + "[" + Linear(RowMajorTerms(a->dims)) + "];");
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

Status FunctionEmitter::EmitReverse(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  const auto dims = a->dims;
  std::set<int64_t> rev;
  for (int64_t d : inst.dimensions()) {
    if (d < 0 || d >= static_cast<int64_t>(dims.size())) return Fail(inst, "reverse dimension out of range");
    rev.insert(d);
  }
  auto strides = Strides(dims);
  std::vector<Term> terms;
  int64_t offset = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (rev.count(d)) {
      offset += (dims[d] - 1) * strides[d];
      terms.push_back({"i" + std::to_string(d), -strides[d]});
    } else {
      terms.push_back({"i" + std::to_string(d), strides[d]});
    }
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  auto loops = LoopsOver(dims);
  OpenLoops(w, loops);
  w.Line("w[" + Linear(RowMajorTerms(dims)) + "] = " + a->name + "[" + Linear(terms, offset) + "];");
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// ---- dot -------------------------------------------------------------------------------

// result[batch..., lhs free..., rhs free...] = sum over contracting dims.
// Loop order: batch, lhs free, contracting, rhs free (i-k-j), so the innermost
// loop walks the result and (usually) rhs rows contiguously.
Status FunctionEmitter::EmitDot(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 2); !st) return st;
  auto lhs = ArrayOperand(inst, 0);
  if (!lhs) return lhs.error();
  auto rhs = ArrayOperand(inst, 1);
  if (!rhs) return rhs.error();
  const xla::PrimitiveType t = inst.shape().element_type();
  if (t == xla::PRED || lhs->type == xla::PRED || rhs->type == xla::PRED) return Fail(inst, "dot of pred is not supported");
  const auto& dn = inst.dot_dimension_numbers();
  const auto dims = Dims(inst.shape());
  const int lr = static_cast<int>(lhs->dims.size()), rr = static_cast<int>(rhs->dims.size());
  if (dn.lhs_batch_dimensions_size() != dn.rhs_batch_dimensions_size() ||
      dn.lhs_contracting_dimensions_size() != dn.rhs_contracting_dimensions_size()) {
    return Fail(inst, "dot_dimension_numbers: lhs and rhs lists differ in length");
  }
  std::vector<int> lrole(lr, 0), rrole(rr, 0);  // 0 free, 1 batch, 2 contracting
  auto mark = [&](const auto& list, std::vector<int>& role, int rank,
                  int what) -> bool {
    for (int64_t d : list) {
      if (d < 0 || d >= rank || role[d] != 0) return false;
      role[d] = what;
    }
    return true;
  };
  if (!mark(dn.lhs_batch_dimensions(), lrole, lr, 1) || !mark(dn.rhs_batch_dimensions(), rrole, rr, 1) ||
      !mark(dn.lhs_contracting_dimensions(), lrole, lr, 2) || !mark(dn.rhs_contracting_dimensions(), rrole, rr, 2)) {
    return Fail(inst, "dot_dimension_numbers name a dimension twice or out of range");
  }
  auto ls = Strides(lhs->dims), rs = Strides(rhs->dims), os = Strides(dims);
  std::vector<Term> lterms, rterms, oterms;
  std::vector<Loop> outer, contract, inner;
  std::vector<int64_t> expect_dims;
  int var = 0;
  auto next_var = [&]() { return "i" + std::to_string(var++); };
  // Batch.
  for (int k = 0; k < dn.lhs_batch_dimensions_size(); ++k) {
    int64_t ld = dn.lhs_batch_dimensions(k), rd = dn.rhs_batch_dimensions(k);
    if (lhs->dims[ld] != rhs->dims[rd]) return Fail(inst, "batch dimension sizes differ");
    std::string v = next_var();
    outer.push_back({v, lhs->dims[ld], {}});
    lterms.push_back({v, ls[ld]});
    rterms.push_back({v, rs[rd]});
    oterms.push_back({v, 0});
    expect_dims.push_back(lhs->dims[ld]);
  }
  // Lhs free.
  for (int d = 0; d < lr; ++d) {
    if (lrole[d] != 0) continue;
    std::string v = next_var();
    outer.push_back({v, lhs->dims[d], {}});
    lterms.push_back({v, ls[d]});
    oterms.push_back({v, 0});
    expect_dims.push_back(lhs->dims[d]);
  }
  // Contracting.
  for (int k = 0; k < dn.lhs_contracting_dimensions_size(); ++k) {
    int64_t ld = dn.lhs_contracting_dimensions(k), rd = dn.rhs_contracting_dimensions(k);
    if (lhs->dims[ld] != rhs->dims[rd]) return Fail(inst, "contracting dimension sizes differ");
    std::string v = next_var();
    contract.push_back({v, lhs->dims[ld], {}});
    lterms.push_back({v, ls[ld]});
    rterms.push_back({v, rs[rd]});
  }
  // Rhs free.
  for (int d = 0; d < rr; ++d) {
    if (rrole[d] != 0) continue;
    std::string v = next_var();
    inner.push_back({v, rhs->dims[d], {}});
    rterms.push_back({v, rs[d]});
    oterms.push_back({v, 0});
    expect_dims.push_back(rhs->dims[d]);
  }
  if (expect_dims != dims) {
    return Fail(inst, "result shape " + hlo::ShapeToString(inst.shape()) + " does not match dot of " +
                          ArrayText(lhs->type, lhs->dims) + " and " + ArrayText(rhs->type, rhs->dims) +
                          " (expected " + DimsText(expect_dims) + ")");
  }
  for (size_t i = 0; i < oterms.size(); ++i) oterms[i].coef = os[i];
  // Accumulate in the compute type (f32 for bf16/f16 results, rounded once at the end).
  const xla::PrimitiveType acc_type = ComputeType(t);
  const std::string ct = CType(acc_type);
  auto conv = [&](const std::string& e, xla::PrimitiveType from) {
    std::string wide = Widen(e, from);
    return ComputeType(from) == acc_type ? wide : "npc_convert<" + ct + ">(" + wide + ")";
  };
  // When rhs is contiguous along a contracting dimension (x . W^T), an inner
  // dot product (i-j-k) walks memory in order and assigns each result;
  // otherwise i-k-j accumulates into a zeroed result.
  const bool rhs_minor_contracting = rr > 0 && rrole[rr - 1] == 2 && !inner.empty();
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst, IsNarrow(t) || rhs_minor_contracting ? "" : "0");
  if (IsNarrow(t)) {
    w.Line("std::vector<" + ct + "> acc_buffer(" + std::to_string(out.count()) + ");");
    w.Line(ct + "* acc = acc_buffer.data();");
  } else {
    w.Line(ct + "* acc = w;");
  }
  const std::string a_elem = conv(lhs->name + "[" + Linear(lterms) + "]", lhs->type);
  const std::string b_elem = conv(rhs->name + "[" + Linear(rterms) + "]", rhs->type);
  auto accumulate = [&](const std::string& target, const std::string& x, const std::string& y) {
    if (IsFloat(acc_type)) return target + " += " + x + " * " + y + ";";
    return target + " = npc_add<" + ct + ">(" + target + ", npc_mul<" + ct + ">(" + x + ", " + y + "));";
  };
  OpenLoops(w, outer);
  if (rhs_minor_contracting) {
    OpenLoops(w, inner);
    w.Line(ct + " sum = 0;");
    OpenLoops(w, contract);
    w.Line(accumulate("sum", a_elem, b_elem));
    CloseLoops(w, contract);
    w.Line("acc[" + Linear(oterms) + "] = sum;");
    CloseLoops(w, inner);
  } else {
    OpenLoops(w, contract);
    w.Line("const " + ct + " a = " + a_elem + ";");
    OpenLoops(w, inner);
    w.Line(accumulate("acc[" + Linear(oterms) + "]", "a", b_elem));
    CloseLoops(w, inner);
    CloseLoops(w, contract);
  }
  CloseLoops(w, outer);
  if (IsNarrow(t)) {
    w.Line("for (s64 i = 0; i < " + std::to_string(out.count()) + "; ++i) w[i] = " + Narrow("acc[i]", t) + ";");
  }
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// ---- reduce, map, call -------------------------------------------------------------------

Status FunctionEmitter::EmitReduce(Writer& w, const Inst& inst) {
  const int n2 = inst.operand_ids_size();
  if (n2 < 2 || n2 % 2 != 0) return Fail(inst, "reduce needs inputs followed by as many init values");
  const int n = n2 / 2;
  if (inst.called_computation_ids_size() != 1) return Fail(inst, "reduce needs one reducer computation");
  std::vector<Leaf> inputs, inits;
  for (int i = 0; i < n; ++i) {
    auto a = ArrayOperand(inst, i);
    if (!a) return a.error();
    auto init = ArrayOperand(inst, n + i);
    if (!init) return init.error();
    if (!init->dims.empty() || init->type != a->type) {
      return Fail(inst, "init value " + std::to_string(i) + " must be a scalar of the input's type");
    }
    if (i > 0 && a->dims != inputs[0].dims) return Fail(inst, "reduce inputs have different shapes");
    inputs.push_back(*a);
    inits.push_back(*init);
  }
  const auto in_dims = inputs[0].dims;
  std::set<int64_t> reduced;
  for (int64_t d : inst.dimensions()) {
    if (d < 0 || d >= static_cast<int64_t>(in_dims.size()) || !reduced.insert(d).second) {
      return Fail(inst, "reduce dimensions out of range or repeated");
    }
  }
  std::vector<int64_t> out_dims;
  for (size_t d = 0; d < in_dims.size(); ++d) {
    if (!reduced.count(d)) out_dims.push_back(in_dims[d]);
  }
  auto out_leaves = Leaves(inst.shape());
  if (static_cast<int>(out_leaves.size()) != n) return Fail(inst, "reduce result must have one array per input");
  for (int i = 0; i < n; ++i) {
    if (Dims(*out_leaves[i]) != out_dims || out_leaves[i]->element_type() != inputs[i].type) {
      return Fail(inst, "result shape " + hlo::ShapeToString(inst.shape()) + " does not match the reduction");
    }
  }
  // The reducer: (acc_0..acc_n-1, x_0..x_n-1) -> (acc'_0..acc'_n-1), all scalars.
  auto fn = module_->RequireFunction(inst.called_computation_ids(0), Mode::kScalar, inst, comp_);
  if (!fn) return fn.error();
  auto sig = module_->GetSignature(module_->IndexOf(inst.called_computation_ids(0)));
  if (!sig) return sig.error();
  {
    size_t params = 0;
    for (const auto& l : (*sig)->param_leaves) params += l.size();
    if (params != static_cast<size_t>(2 * n) || (*sig)->result_leaves.size() != static_cast<size_t>(n)) {
      return Fail(inst, "reducer computation " + module_->computation(module_->IndexOf(inst.called_computation_ids(0))).name() +
                            " must take " + std::to_string(2 * n) + " scalars and return " + std::to_string(n));
    }
  }
  if (scalar()) {
    // Rank-0 reduce inside a scalar computation: one application.
    std::string call = *fn + "(";
    for (int i = 0; i < n; ++i) call += inits[i].name + ", ";
    for (int i = 0; i < n; ++i) call += inputs[i].name + ", ";
    Value v;
    w.Line(Comment(inst));
    for (int i = 0; i < n; ++i) {
      std::string name = VarName(inst, i, n, n > 1 || inst.shape().element_type() == xla::TUPLE);
      w.Line(std::string(CType(inputs[i].type)) + " " + name + ";");
      call += (i ? ", &" : "&") + name;
      v.push_back({name, inputs[i].type, {}});
    }
    w.Line(call + ");");
    values_[inst.id()] = v;
    return {};
  }
  const bool tuple = inst.shape().element_type() == xla::TUPLE;
  const int64_t out_count = Product(out_dims);
  w.Line(Comment(inst));
  Value v;
  for (int i = 0; i < n; ++i) {
    std::string name = VarName(inst, i, n, tuple);
    w.Line(DeclareBuffer(name, inputs[i].type, out_count, inits[i].name + "[0]"));
    v.push_back({name, inputs[i].type, out_dims});
  }
  w.Open("");
  for (int i = 0; i < n; ++i) {
    w.Line(std::string(CType(inputs[i].type)) + "* w" + std::to_string(i) + " = " + BufName(v[i].name) + ".data();");
  }
  auto loops = LoopsOver(in_dims);
  auto in_strides = Strides(in_dims);
  auto out_strides = Strides(out_dims);
  std::vector<Term> oterms;
  for (size_t d = 0, k = 0; d < in_dims.size(); ++d) {
    if (!reduced.count(d)) oterms.push_back({"i" + std::to_string(d), out_strides[k++]});
  }
  const size_t kept = out_dims.size();
  bool suffix = true;  // the reduced dimensions are the innermost ones
  for (size_t d = 0; d < kept; ++d) suffix = suffix && !reduced.count(d);
  if (suffix) {
    // Accumulate in locals: for each result element, a loop over the reduced block.
    std::vector<Loop> outer(loops.begin(), loops.begin() + kept), inner(loops.begin() + kept, loops.end());
    OpenLoops(w, outer);
    w.Line("const s64 r = " + Linear(oterms) + ";");
    for (int i = 0; i < n; ++i) {
      w.Line(std::string(CType(inputs[i].type)) + " a" + std::to_string(i) + " = w" + std::to_string(i) + "[r];");
    }
    OpenLoops(w, inner);
    w.Line("const s64 x = " + Linear(RowMajorTerms(in_dims)) + ";");
    std::string call = *fn + "(";
    for (int i = 0; i < n; ++i) call += "a" + std::to_string(i) + ", ";
    for (int i = 0; i < n; ++i) call += inputs[i].name + "[x], ";
    for (int i = 0; i < n; ++i) call += std::string(i ? ", " : "") + "&a" + std::to_string(i);
    w.Line(call + ");");
    CloseLoops(w, inner);
    for (int i = 0; i < n; ++i) w.Line("w" + std::to_string(i) + "[r] = a" + std::to_string(i) + ";");
    CloseLoops(w, outer);
  } else {
    OpenLoops(w, loops);
    w.Line("const s64 r = " + Linear(oterms) + ";");
    w.Line("const s64 x = " + Linear(RowMajorTerms(in_dims)) + ";");
    std::string call = *fn + "(";
    for (int i = 0; i < n; ++i) call += "w" + std::to_string(i) + "[r], ";
    for (int i = 0; i < n; ++i) call += inputs[i].name + "[x], ";
    for (int i = 0; i < n; ++i) call += std::string(i ? ", " : "") + "&w" + std::to_string(i) + "[r]";
    w.Line(call + ");");
    CloseLoops(w, loops);
  }
  w.Close();
  for (int i = 0; i < n; ++i) {
    w.Line("const " + std::string(CType(inputs[i].type)) + "* " + v[i].name + " = " + BufName(v[i].name) + ".data();");
  }
  values_[inst.id()] = v;
  return {};
}

Status FunctionEmitter::EmitMap(Writer& w, const Inst& inst) {
  if (inst.called_computation_ids_size() != 1) return Fail(inst, "map needs one computation");
  const auto dims = Dims(inst.shape());
  std::vector<Leaf> operands;
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    auto a = ArrayOperand(inst, i);
    if (!a) return a.error();
    if (a->dims != dims) return Fail(inst, "map operands must have the result's dimensions");
    operands.push_back(*a);
  }
  auto fn = module_->RequireFunction(inst.called_computation_ids(0), Mode::kScalar, inst, comp_);
  if (!fn) return fn.error();
  auto sig = module_->GetSignature(module_->IndexOf(inst.called_computation_ids(0)));
  if (!sig) return sig.error();
  if ((*sig)->param_leaves.size() != operands.size() || (*sig)->result_leaves.size() != 1) {
    return Fail(inst, "map computation must take one scalar per operand and return one scalar");
  }
  w.Line(Comment(inst));
  if (scalar()) {
    std::string name = VarName(inst, 0, 1, false);
    w.Line(std::string(CType(inst.shape().element_type())) + " " + name + ";");
    std::string call = *fn + "(";
    for (const auto& a : operands) call += a.name + ", ";
    w.Line(call + "&" + name + ");");
    values_[inst.id()] = {Leaf{name, inst.shape().element_type(), dims}};
    return {};
  }
  Leaf out = BeginArray(w, inst);
  std::string call = *fn + "(";
  for (const auto& a : operands) call += a.name + "[i], ";
  w.Line("for (s64 i = 0; i < " + std::to_string(out.count()) + "; ++i) " + call + "&w[i]);");
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// call / fusion: the called computation as a function of the same mode.
Status FunctionEmitter::EmitCall(Writer& w, const Inst& inst) {
  if (inst.called_computation_ids_size() != 1) return Fail(inst, inst.opcode() + " needs one called computation");
  const int64_t callee = inst.called_computation_ids(0);
  auto fn = module_->RequireFunction(callee, mode_, inst, comp_);
  if (!fn) return fn.error();
  auto sig = module_->GetSignature(module_->IndexOf(callee));
  if (!sig) return sig.error();
  const Signature& s = **sig;
  if (static_cast<int>(s.params.size()) != inst.operand_ids_size()) {
    return Fail(inst, "called computation takes " + std::to_string(s.params.size()) + " parameters, given " +
                          std::to_string(inst.operand_ids_size()));
  }
  std::string args;
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    const Value& v = Operand(inst, i);
    if (v.size() != s.param_leaves[i].size()) return Fail(inst, "operand " + std::to_string(i) + " does not match the parameter shape");
    for (size_t k = 0; k < v.size(); ++k) {
      if (v[k].type != s.param_leaves[i][k]->element_type() || v[k].dims != Dims(*s.param_leaves[i][k])) {
        return Fail(inst, "operand " + std::to_string(i) + " does not match the parameter shape");
      }
      args += v[k].name + ", ";
    }
  }
  auto out_leaves = Leaves(inst.shape());
  if (out_leaves.size() != s.result_leaves.size()) return Fail(inst, "result shape differs from the called computation's");
  for (size_t k = 0; k < out_leaves.size(); ++k) {
    if (out_leaves[k]->element_type() != s.result_leaves[k]->element_type() ||
        Dims(*out_leaves[k]) != Dims(*s.result_leaves[k])) {
      return Fail(inst, "result shape differs from the called computation's");
    }
  }
  const bool tuple = inst.shape().element_type() == xla::TUPLE;
  w.Line(Comment(inst));
  Value v;
  std::string outs;
  for (size_t k = 0; k < out_leaves.size(); ++k) {
    const std::string name = VarName(inst, k, out_leaves.size(), tuple);
    const std::string t = CType(out_leaves[k]->element_type());
    if (scalar()) {
      w.Line(t + " " + name + ";");
      outs += (k ? ", &" : "&") + name;
    } else {
      w.Line(DeclareBuffer(name, out_leaves[k]->element_type(), hlo::ElementCount(*out_leaves[k])));
      outs += (k ? ", " : "") + BufName(name) + ".data()";
    }
    v.push_back({name, out_leaves[k]->element_type(), Dims(*out_leaves[k])});
  }
  if (outs.empty() && !args.empty()) args.resize(args.size() - 2);
  w.Line(*fn + "(" + args + outs + ");");
  if (!scalar()) {
    for (const auto& leaf : v) {
      w.Line("const " + std::string(CType(leaf.type)) + "* " + leaf.name + " = " + BufName(leaf.name) + ".data();");
    }
  }
  values_[inst.id()] = v;
  return {};
}

// while: the state (the operand's leaves) lives in buffers of its own; each
// iteration runs the condition on it and, while that is true, the body into a
// second set of buffers, then swaps the two.
Status FunctionEmitter::EmitWhile(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  if (inst.called_computation_ids_size() != 2) return Fail(inst, "while needs a body and a condition computation");
  // XLA's order: called_computation_ids = {body, condition}.
  const int64_t body_id = inst.called_computation_ids(0), cond_id = inst.called_computation_ids(1);
  auto body = module_->RequireFunction(body_id, Mode::kBuffer, inst, comp_);
  if (!body) return body.error();
  auto cond = module_->RequireFunction(cond_id, Mode::kBuffer, inst, comp_);
  if (!cond) return cond.error();
  auto body_sig = module_->GetSignature(module_->IndexOf(body_id));
  if (!body_sig) return body_sig.error();
  auto cond_sig = module_->GetSignature(module_->IndexOf(cond_id));
  if (!cond_sig) return cond_sig.error();
  const Value& init = Operand(inst, 0);
  const auto leaves = Leaves(inst.shape());
  auto same_leaves = [&](const std::vector<const xla::ShapeProto*>& shapes) {
    if (shapes.size() != leaves.size()) return false;
    for (size_t k = 0; k < shapes.size(); ++k) {
      if (shapes[k]->element_type() != leaves[k]->element_type() || Dims(*shapes[k]) != Dims(*leaves[k])) return false;
    }
    return true;
  };
  if (init.size() != leaves.size()) return Fail(inst, "the operand does not match the while's shape");
  for (size_t k = 0; k < leaves.size(); ++k) {
    if (init[k].type != leaves[k]->element_type() || init[k].dims != Dims(*leaves[k])) {
      return Fail(inst, "the operand does not match the while's shape");
    }
  }
  const Signature& bs = **body_sig;
  const Signature& cs = **cond_sig;
  if (bs.params.size() != 1 || !same_leaves(bs.param_leaves[0]) || !same_leaves(bs.result_leaves)) {
    return Fail(inst, "body computation " + module_->computation(module_->IndexOf(body_id)).name() +
                          " must take and return the loop state " + hlo::ShapeToString(inst.shape()));
  }
  if (cs.params.size() != 1 || !same_leaves(cs.param_leaves[0]) || cs.result_leaves.size() != 1 ||
      cs.result_leaves[0]->element_type() != xla::PRED || cs.result_leaves[0]->dimensions_size() != 0) {
    return Fail(inst, "condition computation " + module_->computation(module_->IndexOf(cond_id)).name() +
                          " must take the loop state " + hlo::ShapeToString(inst.shape()) + " and return pred[]");
  }
  const bool tuple = inst.shape().element_type() == xla::TUPLE;
  w.Line(Comment(inst));
  Value v;
  for (size_t k = 0; k < leaves.size(); ++k) {
    const std::string name = VarName(inst, k, leaves.size(), tuple);
    w.Line(DeclareBuffer(name, init[k].type, init[k].count()));
    v.push_back({name, init[k].type, init[k].dims});
  }
  w.Open("");
  std::string state_args, next_args;
  for (size_t k = 0; k < v.size(); ++k) {
    const std::string t = CType(v[k].type), n = std::to_string(v[k].count()), next = "next" + std::to_string(k);
    w.Line("npc_copy(" + BufName(v[k].name) + ".data(), " + init[k].name + ", " + n + ");");
    w.Line("npc_buf<" + t + "> " + next + "(" + n + ");");
    state_args += BufName(v[k].name) + ".data(), ";
    next_args += std::string(k ? ", " : "") + next + ".data()";
  }
  w.Open("for (;;)");
  w.Line("pred go = 0;");
  w.Line(*cond + "(" + state_args + "&go);");
  w.Line("if (!go) break;");
  w.Line(*body + "(" + state_args + next_args + ");");
  for (size_t k = 0; k < v.size(); ++k) w.Line(BufName(v[k].name) + ".swap(next" + std::to_string(k) + ");");
  w.Close();
  w.Close();
  for (const auto& leaf : v) {
    w.Line("const " + std::string(CType(leaf.type)) + "* " + leaf.name + " = " + BufName(leaf.name) + ".data();");
  }
  values_[inst.id()] = v;
  return {};
}

// rng-bit-generator(state) -> (new state, bits): XLA's Philox bit generator
// (see host_backend.h). state u64[2] is {key, counter low} with the key as the
// counter's high word; u64[3] is {key, counter low, counter high}.
Status FunctionEmitter::EmitRngBitGenerator(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  const auto alg = inst.rng_algorithm();
  if (alg != xla::RNG_DEFAULT && alg != xla::RNG_PHILOX) {
    std::string name = xla::RandomAlgorithm_Name(alg);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return Fail(inst, "rng-bit-generator algorithm " + (name.empty() ? std::to_string(alg) : name) +
                          " is not supported: the host backend implements Philox4x32-10 only (rng_philox, and "
                          "rng_default, which XLA's CPU and GPU backends also run as Philox)");
  }
  auto s = ArrayOperand(inst, 0);
  if (!s) return s.error();
  const auto& shape = inst.shape();
  if (s->type != xla::U64 || s->dims.size() != 1 || (s->dims[0] != 2 && s->dims[0] != 3)) {
    return Fail(inst, "rng-bit-generator state must be u64[2] or u64[3], not " + ArrayText(s->type, s->dims));
  }
  if (shape.element_type() != xla::TUPLE || shape.tuple_shapes_size() != 2 ||
      shape.tuple_shapes(0).element_type() != xla::U64 || Dims(shape.tuple_shapes(0)) != s->dims ||
      shape.tuple_shapes(1).element_type() == xla::TUPLE) {
    return Fail(inst, "rng-bit-generator result must be (state, bits) with the operand's state shape, not " +
                          hlo::ShapeToString(shape));
  }
  const xla::PrimitiveType t = shape.tuple_shapes(1).element_type();
  if (!IsInt(t)) {
    return Fail(inst, "rng-bit-generator of " + PrimitiveTypeName(t) +
                          " is not supported (integer bits: s8..s64, u8..u64)");
  }
  const int bytes = LookupElementType(t)->bytes;
  const auto dims = Dims(shape.tuple_shapes(1));
  const int64_t count = Product(dims);
  // 32-bit and narrower elements take one 32-bit word each (narrower ones its
  // low bits), four per block; 64-bit elements two words each, two per block.
  const int64_t per_block = bytes == 8 ? 2 : 4;
  const int64_t blocks = (count + per_block - 1) / per_block;
  const std::string ct = CType(t);
  w.Line(Comment(inst));
  Leaf state{VarName(inst, 0, 2, true), xla::U64, s->dims};
  Leaf bits{VarName(inst, 1, 2, true), t, dims};
  w.Line(DeclareBuffer(state.name, xla::U64, s->dims[0]));
  w.Line(DeclareBuffer(bits.name, t, count));
  w.Open("");
  const std::string in = s->name;
  w.Line("const u64 key = " + in + "[0], lo = " + in + "[1], hi = " + in + (s->dims[0] == 3 ? "[2]" : "[0]") + ";");
  w.Line(ct + "* w = " + BufName(bits.name) + ".data();");
  w.Open("for (s64 j = 0; j < " + std::to_string(blocks) + "; ++j)");
  w.Line("u32 r[4];");
  w.Line("npc_philox_block(key, lo, hi, static_cast<u64>(j), r);");
  if (bytes == 8) {
    w.Line("w[2 * j] = static_cast<" + ct + ">(static_cast<u64>(r[0]) | (static_cast<u64>(r[1]) << 32));");
    if (count % 2) w.Line("if (2 * j + 1 == " + std::to_string(count) + ") break;");
    w.Line("w[2 * j + 1] = static_cast<" + ct + ">(static_cast<u64>(r[2]) | (static_cast<u64>(r[3]) << 32));");
  } else {
    w.Open("for (s64 q = 0; q < 4 && 4 * j + q < " + std::to_string(count) + "; ++q)");
    w.Line("w[4 * j + q] = static_cast<" + ct + ">(r[q]);");
    w.Close();
  }
  w.Close();
  w.Line("const u64 next_lo = lo + " + std::to_string(blocks) + "u;");
  w.Line("u64* ns = " + BufName(state.name) + ".data();");
  w.Line("ns[0] = key;");
  w.Line("ns[1] = next_lo;");
  if (s->dims[0] == 3) w.Line("ns[2] = next_lo < lo ? hi + 1 : hi;");
  w.Close();
  w.Line("const u64* " + state.name + " = " + BufName(state.name) + ".data();");
  w.Line("const " + ct + "* " + bits.name + " = " + BufName(bits.name) + ".data();");
  values_[inst.id()] = {state, bits};
  return {};
}

// AwsNeuronGelu / AwsNeuronGeluBackward (elementwise on one operand) and
// AwsNeuronSoftmax / AwsNeuronSoftmaxBackward (see host_backend.h).
Status FunctionEmitter::EmitNeuronCustomCall(Writer& w, const Inst& inst) {
  const std::string& target = inst.custom_call_target();
  if (!IsNeuronCustomCall(target)) return Unsupported(inst);
  if (target == "AwsNeuronSoftmax") return EmitSoftmax(w, inst, false);
  if (target == "AwsNeuronSoftmaxBackward") return EmitSoftmax(w, inst, true);
  if (auto st = ExpectOperands(inst, 1); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  const xla::PrimitiveType t = inst.shape().element_type();
  if (a->type != t || a->dims != Dims(inst.shape())) {
    return Fail(inst, target + " of " + ArrayText(a->type, a->dims) + " must have the operand's shape, not " +
                          hlo::ShapeToString(inst.shape()));
  }
  if (!IsFloat(t)) return Fail(inst, target + " of " + PrimitiveTypeName(t) + " is not supported (floating point only)");
  const std::string fn = target == "AwsNeuronGelu" ? "npc_gelu" : "npc_gelu_dx";
  const std::string ct = CType(ComputeType(t));
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  w.Line("for (s64 i = 0; i < " + std::to_string(out.count()) + "; ++i) w[i] = " +
         Narrow(fn + "<" + ct + ">(" + Widen(a->name + "[i]", t) + ")", t) + ";");
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// Softmax along dimension d (backend_config, a decimal number), computed in
// the compute type and rounded once:
//   forward  (x):      y = exp(x - max_d x) / sum_d exp(x - max_d x)
//   backward (y, dy):  dx = y * (dy - sum_d (dy * y))
// Sums and the max run over the dimension in index order.
Status FunctionEmitter::EmitSoftmax(Writer& w, const Inst& inst, bool backward) {
  const std::string& target = inst.custom_call_target();
  if (auto st = ExpectOperands(inst, backward ? 2 : 1); !st) return st;
  std::vector<Leaf> in;
  const xla::PrimitiveType t = inst.shape().element_type();
  const auto dims = Dims(inst.shape());
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    auto a = ArrayOperand(inst, i);
    if (!a) return a.error();
    if (a->type != t || a->dims != dims) {
      return Fail(inst, target + " operand " + std::to_string(i) + " " + ArrayText(a->type, a->dims) +
                            " must have the result's shape " + hlo::ShapeToString(inst.shape()));
    }
    in.push_back(*a);
  }
  if (!IsFloat(t)) return Fail(inst, target + " of " + PrimitiveTypeName(t) + " is not supported (floating point only)");
  const std::string& config = inst.backend_config();
  int64_t d = -1;
  if (!config.empty() && config.size() <= 18 &&
      std::all_of(config.begin(), config.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    d = std::stoll(config);
  }
  if (d < 0 || d >= static_cast<int64_t>(dims.size())) {
    return Fail(inst, target + " needs the dimension it normalises as its backend_config (a decimal number below "
                               "the rank " + std::to_string(dims.size()) + "), has '" + CommentSafe(config) + "'");
  }
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= dims[k];
  for (size_t k = d + 1; k < dims.size(); ++k) inner *= dims[k];
  const int64_t n = dims[d];
  const std::string ct = CType(ComputeType(t));
  auto at = [&](const Leaf& l) { return Widen(l.name + "[base + k * " + std::to_string(inner) + "]", t); };
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  w.Open("for (s64 o = 0; o < " + std::to_string(outer) + "; ++o)");
  w.Open("for (s64 i = 0; i < " + std::to_string(inner) + "; ++i)");
  w.Line("const s64 base = o * " + std::to_string(n * inner) + " + i;");
  const std::string loop = "for (s64 k = 0; k < " + std::to_string(n) + "; ++k)";
  const std::string dst = "w[base + k * " + std::to_string(inner) + "]";
  if (!backward) {
    w.Line(ct + " m = -std::numeric_limits<" + ct + ">::infinity();");
    w.Line(loop + " m = npc_max<" + ct + ">(m, " + at(in[0]) + ");");
    w.Line(ct + " s = 0;");
    w.Line(loop + " s += std::exp(" + at(in[0]) + " - m);");
    w.Line(loop + " " + dst + " = " + Narrow("std::exp(" + at(in[0]) + " - m) / s", t) + ";");
  } else {
    w.Line(ct + " s = 0;");
    w.Line(loop + " s += " + at(in[1]) + " * " + at(in[0]) + ";");
    w.Line(loop + " " + dst + " = " + Narrow(at(in[0]) + " * (" + at(in[1]) + " - s)", t) + ";");
  }
  w.Close();
  w.Close();
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// batch-norm-training (x, scale, offset) -> (y, mean, variance),
// batch-norm-inference (x, scale, offset, mean, variance) -> y and
// batch-norm-grad (x, scale, mean, variance, grad_y) -> (grad_x, grad_scale,
// grad_offset), XLA's operation semantics: per feature l (dimension
// feature_index), over the m elements of all other dimensions in row-major
// order, in the compute type, each result rounded once:
//   mean = sum(x) / m, variance = sum((x - mean)^2) / m (two passes),
//   y = scale * (x - mean) / sqrt(variance + epsilon) + offset;
//   grad: d = sum(gy) / m, c = sum(gy * (x - mean)) / (variance + epsilon) / m,
//   grad_x = scale / sqrt(variance + epsilon) * (gy - d - c * (x - mean)),
//   grad_scale = sum(gy * (x - mean)) / sqrt(variance + epsilon),
//   grad_offset = sum(gy).
Status FunctionEmitter::EmitBatchNorm(Writer& w, const Inst& inst) {
  const std::string& op = inst.opcode();
  const bool training = op == "batch-norm-training", grad = op == "batch-norm-grad";
  if (auto st = ExpectOperands(inst, training ? 3 : 5); !st) return st;
  std::vector<Leaf> in;
  for (int i = 0; i < inst.operand_ids_size(); ++i) {
    auto a = ArrayOperand(inst, i);
    if (!a) return a.error();
    in.push_back(*a);
  }
  const Leaf& x = in[0];
  const xla::PrimitiveType t = x.type;
  if (!IsFloat(t)) return Fail(inst, op + " of " + PrimitiveTypeName(t) + " is not supported (floating point only)");
  const int64_t fd = inst.feature_index();
  if (fd < 0 || fd >= static_cast<int64_t>(x.dims.size())) {
    return Fail(inst, "feature_index " + std::to_string(fd) + " is not a dimension of " + ArrayText(t, x.dims));
  }
  const int64_t features = x.dims[fd];
  // Operand roles: 1-D feature vectors, and (grad) grad_y shaped like x.
  for (size_t i = 1; i < in.size(); ++i) {
    const bool full = grad && i == 4;
    if (in[i].type != t || in[i].dims != (full ? x.dims : std::vector<int64_t>{features})) {
      return Fail(inst, op + " operand " + std::to_string(i) + " " + ArrayText(in[i].type, in[i].dims) +
                            " does not fit operand 0 " + ArrayText(t, x.dims) + " with feature_index " +
                            std::to_string(fd));
    }
  }
  const auto leaves = Leaves(inst.shape());
  const size_t n_out = training || grad ? 3 : 1;
  bool shape_ok = leaves.size() == n_out && (n_out == 1) == (inst.shape().element_type() != xla::TUPLE);
  for (size_t k = 0; shape_ok && k < leaves.size(); ++k) {
    shape_ok = leaves[k]->element_type() == t &&
               Dims(*leaves[k]) == (k == 0 ? x.dims : std::vector<int64_t>{features});
  }
  if (!shape_ok) return Fail(inst, op + " result shape " + hlo::ShapeToString(inst.shape()) + " does not fit its operands");
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < fd; ++k) outer *= x.dims[k];
  for (size_t k = fd + 1; k < x.dims.size(); ++k) inner *= x.dims[k];
  const std::string ct = CType(ComputeType(t));
  const std::string m = "static_cast<" + ct + ">(" + std::to_string(outer * inner) + ")";
  const std::string eps = "static_cast<" + ct + ">(" + FloatLiteral(inst.epsilon(), true) + ")";
  auto vec = [&](size_t i) { return Widen(in[i].name + "[l]", t); };
  auto at = [&](const Leaf& l) { return Widen(l.name + "[e]", t); };
  const bool tuple = n_out > 1;
  w.Line(Comment(inst));
  Value v;
  for (size_t k = 0; k < n_out; ++k) {
    const std::string name = VarName(inst, k, n_out, tuple);
    w.Line(DeclareBuffer(name, t, k == 0 ? x.count() : features));
    v.push_back({name, t, Dims(*leaves[k])});
  }
  w.Open("");
  for (size_t k = 0; k < n_out; ++k) {
    w.Line(std::string(CType(t)) + "* w" + std::to_string(k) + " = " + BufName(v[k].name) + ".data();");
  }
  // Visits every element e of feature l, in row-major order.
  const std::string each = "for (s64 o = 0; o < " + std::to_string(outer) + "; ++o) for (s64 i = 0; i < " +
                           std::to_string(inner) + "; ++i)";
  w.Open("for (s64 l = 0; l < " + std::to_string(features) + "; ++l)");
  const std::string index = "const s64 e = (o * " + std::to_string(features) + " + l) * " + std::to_string(inner) + " + i;";
  if (training) {
    w.Line(ct + " sum = 0;");
    w.Line(each + " { " + index + " sum += " + at(x) + "; }");
    w.Line("const " + ct + " mean = sum / " + m + ";");
    w.Line(ct + " sq = 0;");
    w.Line(each + " { " + index + " const " + ct + " dx = " + at(x) + " - mean; sq += dx * dx; }");
    w.Line("const " + ct + " var = sq / " + m + ";");
    w.Line(each + " { " + index + " w0[e] = " +
           Narrow(vec(1) + " * (" + at(x) + " - mean) / std::sqrt(var + " + eps + ") + " + vec(2), t) + "; }");
    w.Line("w1[l] = " + Narrow("mean", t) + ";");
    w.Line("w2[l] = " + Narrow("var", t) + ";");
  } else if (!grad) {
    w.Line(each + " { " + index + " w0[e] = " +
           Narrow(vec(1) + " * (" + at(x) + " - " + vec(3) + ") / std::sqrt(" + vec(4) + " + " + eps + ") + " + vec(2),
                  t) +
           "; }");
  } else {
    const Leaf& gy = in[4];
    w.Line("const " + ct + " mean = " + vec(2) + ", var = " + vec(3) + ";");
    w.Line(ct + " sum_gy = 0, sum_gyx = 0;");
    w.Line(each + " { " + index + " sum_gy += " + at(gy) + "; sum_gyx += " + at(gy) + " * (" + at(x) + " - mean); }");
    w.Line("const " + ct + " d = sum_gy / " + m + ";");
    w.Line("const " + ct + " c = sum_gyx / (var + " + eps + ") / " + m + ";");
    w.Line("const " + ct + " k = " + vec(1) + " / std::sqrt(var + " + eps + ");");
    w.Line(each + " { " + index + " w0[e] = " + Narrow("k * (" + at(gy) + " - d - c * (" + at(x) + " - mean))", t) +
           "; }");
    w.Line("w1[l] = " + Narrow("sum_gyx / std::sqrt(var + " + eps + ")", t) + ";");
    w.Line("w2[l] = " + Narrow("sum_gy", t) + ";");
  }
  w.Close();
  w.Close();
  for (const auto& leaf : v) {
    w.Line("const " + std::string(CType(leaf.type)) + "* " + leaf.name + " = " + BufName(leaf.name) + ".data();");
  }
  values_[inst.id()] = v;
  return {};
}

// ---- gather, scatter -----------------------------------------------------------------

namespace {

// The positions of `indices` (rank `rank`, index vector at `ivd`; ivd == rank
// means an implicit trailing dimension of size 1) other than the index vector
// dimension, in order.
std::vector<int64_t> BatchPositions(int64_t rank, int64_t ivd) {
  std::vector<int64_t> out;
  for (int64_t p = 0; p < rank; ++p) {
    if (p != ivd) out.push_back(p);
  }
  return out;
}

bool Contains(const google::protobuf::RepeatedField<int64_t>& list, int64_t v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

}  // namespace

// XLA gather: for each result index, the batch dimensions (those not in
// offset_dims) select a start index vector from `start_indices`; the start,
// clamped so that the slice fits, plus the offset dimensions address the operand.
Status FunctionEmitter::EmitGather(Writer& w, const Inst& inst) {
  if (auto st = ExpectOperands(inst, 2); !st) return st;
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  auto idx = ArrayOperand(inst, 1);
  if (!idx) return idx.error();
  if (!IsInt(idx->type)) return Fail(inst, "start indices must be integers");
  const auto& g = inst.gather_dimension_numbers();
  if (g.operand_batching_dims_size() || g.start_indices_batching_dims_size()) {
    return Fail(inst, "gather with batching dimensions is not supported");
  }
  const auto dims = Dims(inst.shape());
  const int64_t ar = static_cast<int64_t>(a->dims.size()), ir = static_cast<int64_t>(idx->dims.size());
  const int64_t ivd = g.index_vector_dim();
  if (a->type != inst.shape().element_type()) return Fail(inst, "gather changes the element type");
  if (ivd < 0 || ivd > ir) return Fail(inst, "index_vector_dim out of range");
  const int64_t index_count = ivd == ir ? 1 : idx->dims[ivd];
  if (g.start_index_map_size() != index_count) return Fail(inst, "start_index_map does not match the index vector");
  if (inst.gather_slice_sizes_size() != ar) return Fail(inst, "slice_sizes must have the operand's rank");
  std::vector<int64_t> slice(inst.gather_slice_sizes().begin(), inst.gather_slice_sizes().end());
  for (int64_t d = 0; d < ar; ++d) {
    if (slice[d] < 0 || slice[d] > a->dims[d]) return Fail(inst, "slice size exceeds the operand");
    if (Contains(g.collapsed_slice_dims(), d) && slice[d] != 1) return Fail(inst, "collapsed slice dimensions must have size 1");
  }
  std::vector<int64_t> start_dim(index_count);
  for (int64_t k = 0; k < index_count; ++k) {
    start_dim[k] = g.start_index_map(k);
    if (start_dim[k] < 0 || start_dim[k] >= ar) return Fail(inst, "start_index_map out of range");
    // Two starts on one dimension would add up past the clamped range.
    if (std::find(start_dim.begin(), start_dim.begin() + k, start_dim[k]) != start_dim.begin() + k) {
      return Fail(inst, "start_index_map names a dimension twice");
    }
  }
  // Result dimensions: batch (not in offset_dims) <-> indices positions; offset <-> uncollapsed operand dims.
  std::vector<int64_t> batch_out, offset_out(g.offset_dims().begin(), g.offset_dims().end());
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (!Contains(g.offset_dims(), d)) batch_out.push_back(d);
  }
  const auto batch_pos = BatchPositions(ir, ivd);
  if (batch_pos.size() != batch_out.size()) return Fail(inst, "result rank does not match the gather");
  for (size_t j = 0; j < batch_out.size(); ++j) {
    if (dims[batch_out[j]] != idx->dims[batch_pos[j]]) return Fail(inst, "batch dimension sizes differ");
  }
  std::vector<int64_t> window_dims;
  for (int64_t d = 0; d < ar; ++d) {
    if (!Contains(g.collapsed_slice_dims(), d)) window_dims.push_back(d);
  }
  if (window_dims.size() != offset_out.size()) return Fail(inst, "offset_dims do not match the uncollapsed slice dimensions");
  auto as = Strides(a->dims), is = Strides(idx->dims);
  std::vector<Term> aterms;
  for (size_t k = 0; k < window_dims.size(); ++k) {
    if (offset_out[k] < 0 || offset_out[k] >= static_cast<int64_t>(dims.size()) ||
        dims[offset_out[k]] != slice[window_dims[k]]) {
      return Fail(inst, "offset dimension sizes do not match slice_sizes");
    }
    aterms.push_back({"i" + std::to_string(offset_out[k]), as[window_dims[k]]});
  }
  std::vector<std::string> starts;
  std::vector<Term> iterms;
  for (size_t j = 0; j < batch_out.size(); ++j) iterms.push_back({"i" + std::to_string(batch_out[j]), is[batch_pos[j]]});
  for (int64_t k = 0; k < index_count; ++k) {
    const int64_t at = ivd == ir ? 0 : k * is[ivd];
    starts.push_back("const s64 s" + std::to_string(k) + " = npc_start_index(" + idx->name + "[" + Linear(iterms, at) +
                     "], " + std::to_string(a->dims[start_dim[k]] - slice[start_dim[k]]) + ");");
    aterms.push_back({"s" + std::to_string(k), as[start_dim[k]]});
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  auto loops = LoopsOver(dims);
  if (batch_out.empty()) {
    for (const auto& line : starts) w.Line(line);
  } else {
    loops[batch_out.back()].prologue = starts;
  }
  OpenLoops(w, loops);
  w.Line("w[" + Linear(RowMajorTerms(dims)) + "] = " + a->name + "[" + Linear(aterms) + "];");
  CloseLoops(w, loops);
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

// XLA scatter (one operand): the result is the operand with each update window
// combined in by `to_apply`, in row-major order of the updates. A window that
// does not fit in the operand is skipped.
Status FunctionEmitter::EmitScatter(Writer& w, const Inst& inst) {
  if (inst.operand_ids_size() != 3) return Fail(inst, "scatter with more than one operand is not supported");
  auto a = ArrayOperand(inst, 0);
  if (!a) return a.error();
  auto idx = ArrayOperand(inst, 1);
  if (!idx) return idx.error();
  auto upd = ArrayOperand(inst, 2);
  if (!upd) return upd.error();
  if (!IsInt(idx->type)) return Fail(inst, "scatter indices must be integers");
  if (upd->type != a->type || a->type != inst.shape().element_type() || Dims(inst.shape()) != a->dims) {
    return Fail(inst, "scatter operand, updates and result must have the same element type");
  }
  if (inst.called_computation_ids_size() != 1) return Fail(inst, "scatter needs one update computation");
  const auto& sd = inst.scatter_dimension_numbers();
  if (sd.input_batching_dims_size() || sd.scatter_indices_batching_dims_size()) {
    return Fail(inst, "scatter with batching dimensions is not supported");
  }
  const int64_t ar = static_cast<int64_t>(a->dims.size()), ir = static_cast<int64_t>(idx->dims.size());
  const int64_t ur = static_cast<int64_t>(upd->dims.size());
  const int64_t ivd = sd.index_vector_dim();
  if (ivd < 0 || ivd > ir) return Fail(inst, "index_vector_dim out of range");
  const int64_t index_count = ivd == ir ? 1 : idx->dims[ivd];
  if (sd.scatter_dims_to_operand_dims_size() != index_count) {
    return Fail(inst, "scatter_dims_to_operand_dims does not match the index vector");
  }
  std::vector<int64_t> scatter_upd;  // update dims not in update_window_dims
  for (int64_t d = 0; d < ur; ++d) {
    if (!Contains(sd.update_window_dims(), d)) scatter_upd.push_back(d);
  }
  const auto batch_pos = BatchPositions(ir, ivd);
  if (batch_pos.size() != scatter_upd.size()) return Fail(inst, "updates rank does not match the scatter");
  for (size_t j = 0; j < scatter_upd.size(); ++j) {
    if (upd->dims[scatter_upd[j]] != idx->dims[batch_pos[j]]) return Fail(inst, "scatter dimension sizes differ");
  }
  std::vector<int64_t> window_operand;  // operand dims not inserted, in order <-> update_window_dims
  for (int64_t d = 0; d < ar; ++d) {
    if (!Contains(sd.inserted_window_dims(), d)) window_operand.push_back(d);
  }
  if (static_cast<int>(window_operand.size()) != sd.update_window_dims_size()) {
    return Fail(inst, "update_window_dims do not match the operand's uninserted dimensions");
  }
  std::vector<int64_t> window_size(ar, 1);
  auto as = Strides(a->dims), is = Strides(idx->dims);
  std::vector<Term> aterms;
  for (size_t k = 0; k < window_operand.size(); ++k) {
    const int64_t ud = sd.update_window_dims(k);
    if (ud < 0 || ud >= ur || upd->dims[ud] > a->dims[window_operand[k]]) return Fail(inst, "update window too large");
    window_size[window_operand[k]] = upd->dims[ud];
    aterms.push_back({"i" + std::to_string(ud), as[window_operand[k]]});
  }
  std::vector<std::string> starts;
  std::string fits;
  std::vector<Term> iterms;
  for (size_t j = 0; j < scatter_upd.size(); ++j) iterms.push_back({"i" + std::to_string(scatter_upd[j]), is[batch_pos[j]]});
  for (int64_t k = 0; k < index_count; ++k) {
    const int64_t d = sd.scatter_dims_to_operand_dims(k);
    if (d < 0 || d >= ar) return Fail(inst, "scatter_dims_to_operand_dims out of range");
    for (int64_t j = 0; j < k; ++j) {
      if (sd.scatter_dims_to_operand_dims(j) == d) return Fail(inst, "scatter_dims_to_operand_dims names a dimension twice");
    }
    const std::string s = "s" + std::to_string(k);
    const int64_t at = ivd == ir ? 0 : k * is[ivd];
    starts.push_back("const s64 " + s + " = static_cast<s64>(" + idx->name + "[" + Linear(iterms, at) + "]);");
    fits += std::string(k ? " && " : "") + s + " >= 0 && " + s + " <= " + std::to_string(a->dims[d] - window_size[d]);
    aterms.push_back({s, as[d]});
  }
  auto fn = module_->RequireFunction(inst.called_computation_ids(0), Mode::kScalar, inst, comp_);
  if (!fn) return fn.error();
  auto sig = module_->GetSignature(module_->IndexOf(inst.called_computation_ids(0)));
  if (!sig) return sig.error();
  if ((*sig)->param_leaves.size() != 2 || (*sig)->result_leaves.size() != 1) {
    return Fail(inst, "scatter's update computation must take two scalars and return one");
  }
  w.Line(Comment(inst));
  Leaf out = BeginArray(w, inst);
  w.Line("npc_copy(w, " + a->name + ", " + std::to_string(a->count()) + ");");
  auto loops = LoopsOver(upd->dims);
  const bool wrap = scatter_upd.empty();
  if (wrap) {
    for (const auto& line : starts) w.Line(line);
    w.Open("if (" + (fits.empty() ? std::string("true") : fits) + ")");
  } else {
    loops[scatter_upd.back()].prologue = starts;
    if (!fits.empty()) loops[scatter_upd.back()].prologue.push_back("if (!(" + fits + ")) continue;");
  }
  OpenLoops(w, loops);
  w.Line("const s64 o = " + Linear(aterms) + ";");
  w.Line(*fn + "(w[o], " + upd->name + "[" + Linear(RowMajorTerms(upd->dims)) + "], &w[o]);");
  CloseLoops(w, loops);
  if (wrap) w.Close();
  FinishArray(w, out);
  values_[inst.id()] = {out};
  return {};
}

}  // namespace

namespace {

bool HasUnboundedDimension(const xla::ShapeProto& shape) {
  for (const auto& element : shape.tuple_shapes()) {
    if (HasUnboundedDimension(element)) return true;
  }
  for (int64_t d : shape.dimensions()) {
    if (d < 0) return true;
  }
  return false;
}

// ValidateModule, then: unbounded dynamic dimensions (XLA's '?') have no size
// to lower.
Status CheckLowerable(const xla::HloModuleProto& module) {
  if (auto st = hlo::ValidateModule(module, "host backend: module " + module.name()); !st) return st;
  for (const auto& c : module.computations()) {
    for (const auto& inst : c.instructions()) {
      if (HasUnboundedDimension(inst.shape())) {
        return MakeError("host backend: instruction '" + inst.name() + "' in computation '" + c.name() +
                         "' has an unbounded dynamic dimension, which is not supported");
      }
    }
  }
  return {};
}

}  // namespace

Result<std::string> GenerateCpp(const xla::HloModuleProto& module) {
  if (module.computations_size() == 0) return MakeError("host backend: module " + module.name() + " has no computations");
  // The emitters index shapes and buffers by the module's dimension numbers:
  // only a module that passes validation is lowered.
  if (auto st = CheckLowerable(module); !st) return st.error();
  ModuleCodegen codegen(module);
  return codegen.Generate();
}

std::map<std::string, std::string> UnsupportedOpcodes(const xla::HloModuleProto& module) {
  std::map<std::string, std::string> failures;
  if (module.computations_size() == 0) {
    failures.emplace("", "host backend: module " + module.name() + " has no computations");
    return failures;
  }
  if (auto st = CheckLowerable(module); !st) {
    failures.emplace("", st.error().message);
    return failures;
  }
  ModuleCodegen codegen(module);
  codegen.CollectFailuresInto(&failures);
  auto generated = codegen.Generate();
  // A failure outside any instruction (e.g. a malformed computation signature).
  if (!generated && failures.empty()) failures.emplace("", generated.error().message);
  return failures;
}

std::vector<std::string> SupportedOpcodes() {
  std::vector<std::string> out = {"parameter", "constant", "iota", "broadcast", "reshape", "copy", "transpose",
                                  "slice", "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "reverse",
                                  "dot", "gather", "scatter", "reduce", "map", "call", "fusion", "tuple",
                                  "get-tuple-element", "opt-barrier", "optimization-barrier", "all-reduce",
                                  "all-gather", "reduce-scatter", "while", "rng-bit-generator",
                                  "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
                                  "custom-call:AwsNeuronTransferWithStaticRing"};
  for (const char* target : kNeuronCustomCalls) out.push_back(std::string("custom-call:") + target);
  for (const auto& e : kElementwiseOps) out.push_back(e.opcode);
  for (const char* op : {"compare", "convert", "bitcast-convert", "select", "is-finite", "not"}) out.push_back(op);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace npc::host
