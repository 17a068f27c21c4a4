// HloBuilder: builds HloModuleProto the way XLA serializes them.
//
// Conventions (XLA's hlo.proto / xla_data.proto):
//  - instruction and computation ids come from one counter, so they are
//    unique across the module (as in XLA's HloModule); they start at 1;
//  - computations are stored in post order (callees before callers), the
//    entry computation last;
//  - every array shape carries a row-major layout ({n-1,...,0}); tuple shapes
//    carry none;
//  - instruction names default to "<opcode>.<id>" and are made unique across
//    the module; computation names likewise.
#include "npc/hlo_builder.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "npc/hlo.h"
#include "npc/tensor.h"

namespace npc::hlo {
namespace {

[[noreturn]] void Fail(const std::string& builder, const std::string& message) {
  std::fprintf(stderr, "npc::hlo::HloBuilder('%s'): %s\n", builder.c_str(), message.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string DimsToString(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "}";
  return os.str();
}

std::vector<int64_t> Dims(const xla::ShapeProto& s) {
  return std::vector<int64_t>(s.dimensions().begin(), s.dimensions().end());
}

bool IsTuple(const xla::ShapeProto& s) { return s.element_type() == xla::TUPLE; }

bool IsFloating(xla::PrimitiveType t) {
  return t == xla::F16 || t == xla::F32 || t == xla::F64 || t == xla::BF16 ||
         t == xla::F8E5M2 || t == xla::F8E4M3FN || t == xla::C64 || t == xla::C128;
}

// Sets row-major layouts on `s` (recursively for tuples); clears dynamic flags.
void NormalizeLayout(xla::ShapeProto* s) {
  if (IsTuple(*s)) {
    s->clear_layout();
    s->clear_dimensions();
    for (auto& e : *s->mutable_tuple_shapes()) NormalizeLayout(&e);
    return;
  }
  s->clear_tuple_shapes();
  auto* layout = s->mutable_layout();
  layout->clear_minor_to_major();
  for (int64_t i = s->dimensions_size() - 1; i >= 0; --i) layout->add_minor_to_major(i);
}

bool SameShape(const xla::ShapeProto& a, const xla::ShapeProto& b) {
  if (a.element_type() != b.element_type()) return false;
  if (IsTuple(a)) {
    if (a.tuple_shapes_size() != b.tuple_shapes_size()) return false;
    for (int i = 0; i < a.tuple_shapes_size(); ++i) {
      if (!SameShape(a.tuple_shapes(i), b.tuple_shapes(i))) return false;
    }
    return true;
  }
  return Dims(a) == Dims(b);
}

bool IsScalar(const xla::ShapeProto& s) { return !IsTuple(s) && s.dimensions_size() == 0; }

}  // namespace

struct HloBuilder::Impl {
  std::string name;
  int64_t next_id = 1;
  bool built = false;
  // The computation being built, in creation order (a topological order).
  std::vector<xla::HloInstructionProto> instructions;
  std::map<int64_t, size_t> index_of;  // instruction id -> index in `instructions`
  // Finished computations (reducers, call targets), in post order.
  std::vector<xla::HloComputationProto> computations;

  int64_t NewId() { return next_id++; }

  void CheckUsable() const {
    if (built) Fail(name, "used after Build()");
  }

  // Checks that `op` was made by this builder (and not by another one).
  const xla::HloInstructionProto& Get(const Op& op, const char* what) const {
    auto it = index_of.find(op.id);
    if (it == index_of.end()) {
      Fail(name, std::string(what) + ": operand id " + std::to_string(op.id) +
                     " is not an instruction of this builder");
    }
    return instructions[it->second];
  }

  const xla::ShapeProto& ArrayOperand(const Op& op, const std::string& what) const {
    const auto& inst = Get(op, what.c_str());
    if (IsTuple(inst.shape())) {
      Fail(name, what + ": operand " + inst.opcode() + " has tuple shape " +
                     ShapeToString(inst.shape()) + ", expected an array");
    }
    return inst.shape();
  }

  const xla::HloComputationProto& Computation(int64_t id, const std::string& what) const {
    for (const auto& c : computations) {
      if (c.id() == id) return c;
    }
    Fail(name, what + ": no computation with id " + std::to_string(id) +
                   " (make it with MakeReducer or AddComputation on this builder)");
  }

  Op Add(xla::HloInstructionProto inst, const std::vector<Op>& operands, xla::ShapeProto shape) {
    CheckUsable();
    for (const Op& o : operands) Get(o, inst.opcode().c_str());
    NormalizeLayout(&shape);
    inst.set_id(NewId());
    inst.clear_operand_ids();
    for (const Op& o : operands) inst.add_operand_ids(o.id);
    *inst.mutable_shape() = shape;
    index_of[inst.id()] = instructions.size();
    instructions.push_back(std::move(inst));
    return Op{instructions.back().id(), instructions.back().shape()};
  }

  Op Add(const std::string& opcode, const std::vector<Op>& operands, xla::ShapeProto shape) {
    xla::HloInstructionProto inst;
    inst.set_opcode(opcode);
    return Add(std::move(inst), operands, std::move(shape));
  }

  // Finishes the current computation: program shape from its parameters,
  // root `root`. Names left empty are filled in by Build().
  xla::HloComputationProto Finish(const Op& root, const std::string& computation_name) {
    CheckUsable();
    const auto& root_inst = Get(root, "root");
    xla::HloComputationProto c;
    c.set_name(computation_name);
    c.set_id(NewId());
    c.set_root_id(root_inst.id());
    std::map<int64_t, const xla::HloInstructionProto*> params;
    for (const auto& inst : instructions) {
      if (inst.opcode() != "parameter") continue;
      if (!params.emplace(inst.parameter_number(), &inst).second) {
        Fail(name, "two parameters with number " + std::to_string(inst.parameter_number()));
      }
    }
    int64_t expect = 0;
    auto* ps = c.mutable_program_shape();
    for (const auto& [number, inst] : params) {
      if (number != expect) {
        Fail(name, "parameter numbers must be 0..n-1; parameter " + std::to_string(expect) +
                       " is missing");
      }
      ++expect;
      *ps->add_parameters() = inst->shape();
      ps->add_parameter_names(inst->name().empty() ? "parameter." + std::to_string(inst->id())
                                                   : inst->name());
    }
    *ps->mutable_result() = root_inst.shape();
    for (auto& inst : instructions) *c.add_instructions() = std::move(inst);
    instructions.clear();
    index_of.clear();
    built = true;
    return c;
  }
};

HloBuilder::HloBuilder(std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
}

HloBuilder::~HloBuilder() = default;

xla::ShapeProto HloBuilder::ArrayShape(xla::PrimitiveType type, const std::vector<int64_t>& dims) {
  if (type == xla::TUPLE || type == xla::PRIMITIVE_TYPE_INVALID) {
    Fail("ArrayShape", "element type " + std::to_string(type) + " is not an array type");
  }
  xla::ShapeProto s;
  s.set_element_type(type);
  for (int64_t d : dims) {
    if (d < 0) Fail("ArrayShape", "negative dimension in " + DimsToString(dims));
    s.add_dimensions(d);
  }
  NormalizeLayout(&s);
  return s;
}

xla::ShapeProto HloBuilder::TupleShape(const std::vector<xla::ShapeProto>& elements) {
  xla::ShapeProto s;
  s.set_element_type(xla::TUPLE);
  for (const auto& e : elements) *s.add_tuple_shapes() = e;
  NormalizeLayout(&s);
  return s;
}

Op HloBuilder::Parameter(int64_t number, xla::PrimitiveType type, const std::vector<int64_t>& dims,
                         const std::string& name) {
  return ParameterWithShape(number, ArrayShape(type, dims), name);
}

Op HloBuilder::ParameterWithShape(int64_t number, const xla::ShapeProto& shape,
                                  const std::string& name) {
  if (number < 0) Fail(impl_->name, "negative parameter number " + std::to_string(number));
  for (const auto& inst : impl_->instructions) {
    if (inst.opcode() == "parameter" && inst.parameter_number() == number) {
      Fail(impl_->name, "parameter number " + std::to_string(number) + " used twice");
    }
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("parameter");
  inst.set_name(name);
  inst.set_parameter_number(number);
  return impl_->Add(std::move(inst), {}, shape);
}

namespace {
xla::HloInstructionProto ConstantInstruction(const xla::ShapeProto& shape) {
  xla::HloInstructionProto inst;
  inst.set_opcode("constant");
  *inst.mutable_literal()->mutable_shape() = shape;
  return inst;
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
}  // namespace

Op HloBuilder::ConstantF32(float value) { return ConstantF32Array({}, {value}); }
Op HloBuilder::ConstantS32(int32_t value) { return ConstantS32Array({}, {value}); }

Op HloBuilder::ConstantS64(int64_t value) {
  auto shape = ArrayShape(xla::S64, {});
  auto inst = ConstantInstruction(shape);
  inst.mutable_literal()->add_s64s(value);
  return impl_->Add(std::move(inst), {}, shape);
}

Op HloBuilder::ConstantPred(bool value) {
  auto shape = ArrayShape(xla::PRED, {});
  auto inst = ConstantInstruction(shape);
  inst.mutable_literal()->add_preds(value);
  return impl_->Add(std::move(inst), {}, shape);
}

Op HloBuilder::ConstantF32Array(const std::vector<int64_t>& dims, const std::vector<float>& values) {
  auto shape = ArrayShape(xla::F32, dims);
  if (static_cast<int64_t>(values.size()) != Product(dims)) {
    Fail(impl_->name, "constant f32" + DimsToString(dims) + " needs " +
                          std::to_string(Product(dims)) + " values, got " +
                          std::to_string(values.size()));
  }
  auto inst = ConstantInstruction(shape);
  for (float v : values) inst.mutable_literal()->add_f32s(v);
  return impl_->Add(std::move(inst), {}, shape);
}

Op HloBuilder::ConstantS32Array(const std::vector<int64_t>& dims,
                                const std::vector<int32_t>& values) {
  auto shape = ArrayShape(xla::S32, dims);
  if (static_cast<int64_t>(values.size()) != Product(dims)) {
    Fail(impl_->name, "constant s32" + DimsToString(dims) + " needs " +
                          std::to_string(Product(dims)) + " values, got " +
                          std::to_string(values.size()));
  }
  auto inst = ConstantInstruction(shape);
  for (int32_t v : values) inst.mutable_literal()->add_s32s(v);
  return impl_->Add(std::move(inst), {}, shape);
}

Op HloBuilder::Broadcast(Op operand, const std::vector<int64_t>& out_dims,
                         const std::vector<int64_t>& broadcast_dimensions) {
  const auto& in = impl_->ArrayOperand(operand, "broadcast");
  const std::string what = "broadcast of " + ShapeToString(in) + " to " + DimsToString(out_dims) +
                           " with dimensions " + DimsToString(broadcast_dimensions);
  if (static_cast<int64_t>(broadcast_dimensions.size()) != in.dimensions_size()) {
    Fail(impl_->name, what + ": need one broadcast dimension per operand dimension");
  }
  for (size_t i = 0; i < broadcast_dimensions.size(); ++i) {
    int64_t d = broadcast_dimensions[i];
    if (d < 0 || d >= static_cast<int64_t>(out_dims.size())) {
      Fail(impl_->name, what + ": dimension " + std::to_string(d) + " out of range");
    }
    if (i > 0 && broadcast_dimensions[i - 1] >= d) {
      Fail(impl_->name, what + ": broadcast dimensions must be strictly increasing");
    }
    if (in.dimensions(i) != 1 && in.dimensions(i) != out_dims[d]) {
      Fail(impl_->name, what + ": operand dimension " + std::to_string(i) + " (size " +
                            std::to_string(in.dimensions(i)) + ") does not match output size " +
                            std::to_string(out_dims[d]));
    }
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("broadcast");
  for (int64_t d : broadcast_dimensions) inst.add_dimensions(d);
  return impl_->Add(std::move(inst), {operand}, ArrayShape(in.element_type(), out_dims));
}

Op HloBuilder::Reshape(Op operand, const std::vector<int64_t>& out_dims) {
  const auto& in = impl_->ArrayOperand(operand, "reshape");
  if (ElementCount(in) != Product(out_dims)) {
    Fail(impl_->name, "reshape of " + ShapeToString(in) + " to " + DimsToString(out_dims) +
                          ": element counts differ");
  }
  return impl_->Add("reshape", {operand}, ArrayShape(in.element_type(), out_dims));
}

Op HloBuilder::Transpose(Op operand, const std::vector<int64_t>& permutation) {
  const auto& in = impl_->ArrayOperand(operand, "transpose");
  const int64_t rank = in.dimensions_size();
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(permutation.size()) == rank;
  for (int64_t i = 0; ok && i < rank; ++i) ok = sorted[i] == i;
  if (!ok) {
    Fail(impl_->name, "transpose of " + ShapeToString(in) + ": " + DimsToString(permutation) +
                          " is not a permutation of the operand's dimensions");
  }
  std::vector<int64_t> out;
  for (int64_t p : permutation) out.push_back(in.dimensions(p));
  xla::HloInstructionProto inst;
  inst.set_opcode("transpose");
  for (int64_t p : permutation) inst.add_dimensions(p);
  return impl_->Add(std::move(inst), {operand}, ArrayShape(in.element_type(), out));
}

Op HloBuilder::Slice(Op operand, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& limit, const std::vector<int64_t>& stride) {
  const auto& in = impl_->ArrayOperand(operand, "slice");
  const size_t rank = in.dimensions_size();
  const std::string what = "slice of " + ShapeToString(in) + " start " + DimsToString(start) +
                           " limit " + DimsToString(limit) + " stride " + DimsToString(stride);
  if (start.size() != rank || limit.size() != rank || stride.size() != rank) {
    Fail(impl_->name, what + ": need start, limit and stride for every dimension");
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("slice");
  std::vector<int64_t> out;
  for (size_t i = 0; i < rank; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.dimensions(i) || stride[i] < 1) {
      Fail(impl_->name, what + ": dimension " + std::to_string(i) + " out of bounds");
    }
    out.push_back((limit[i] - start[i] + stride[i] - 1) / stride[i]);
    auto* sd = inst.add_slice_dimensions();
    sd->set_start(start[i]);
    sd->set_limit(limit[i]);
    sd->set_stride(stride[i]);
  }
  return impl_->Add(std::move(inst), {operand}, ArrayShape(in.element_type(), out));
}

Op HloBuilder::Concatenate(const std::vector<Op>& operands, int64_t dimension) {
  if (operands.empty()) Fail(impl_->name, "concatenate of no operands");
  const auto& first = impl_->ArrayOperand(operands[0], "concatenate");
  std::vector<int64_t> out = Dims(first);
  if (dimension < 0 || dimension >= static_cast<int64_t>(out.size())) {
    Fail(impl_->name, "concatenate of " + ShapeToString(first) + ": dimension " +
                          std::to_string(dimension) + " out of range");
  }
  for (size_t k = 1; k < operands.size(); ++k) {
    const auto& s = impl_->ArrayOperand(operands[k], "concatenate");
    bool ok = s.element_type() == first.element_type() &&
              s.dimensions_size() == static_cast<int>(out.size());
    for (int64_t i = 0; ok && i < s.dimensions_size(); ++i) {
      ok = i == dimension || s.dimensions(i) == first.dimensions(i);
    }
    if (!ok) {
      Fail(impl_->name, "concatenate on dimension " + std::to_string(dimension) + " of " +
                            ShapeToString(first) + " and " + ShapeToString(s) +
                            ": shapes differ outside the concatenated dimension");
    }
    out[dimension] += s.dimensions(dimension);
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("concatenate");
  inst.add_dimensions(dimension);
  return impl_->Add(std::move(inst), operands, ArrayShape(first.element_type(), out));
}

Op HloBuilder::Iota(xla::PrimitiveType type, const std::vector<int64_t>& dims,
                    int64_t iota_dimension) {
  if (iota_dimension < 0 || iota_dimension >= static_cast<int64_t>(dims.size())) {
    Fail(impl_->name, "iota of " + DimsToString(dims) + ": iota dimension " +
                          std::to_string(iota_dimension) + " out of range");
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("iota");
  inst.add_dimensions(iota_dimension);
  return impl_->Add(std::move(inst), {}, ArrayShape(type, dims));
}

Op HloBuilder::Convert(Op operand, xla::PrimitiveType type) {
  const auto& in = impl_->ArrayOperand(operand, "convert");
  return impl_->Add("convert", {operand}, ArrayShape(type, Dims(in)));
}

Op HloBuilder::Dot(Op lhs, Op rhs, const std::vector<int64_t>& lhs_contracting,
                   const std::vector<int64_t>& rhs_contracting,
                   const std::vector<int64_t>& lhs_batch, const std::vector<int64_t>& rhs_batch) {
  const auto& l = impl_->ArrayOperand(lhs, "dot");
  const auto& r = impl_->ArrayOperand(rhs, "dot");
  const std::string what = "dot of " + ShapeToString(l) + " and " + ShapeToString(r) +
                           " (lhs contracting " + DimsToString(lhs_contracting) +
                           ", rhs contracting " + DimsToString(rhs_contracting) + ", lhs batch " +
                           DimsToString(lhs_batch) + ", rhs batch " + DimsToString(rhs_batch) + ")";
  if (l.element_type() != r.element_type()) Fail(impl_->name, what + ": element types differ");
  if (lhs_contracting.size() != rhs_contracting.size()) {
    Fail(impl_->name, what + ": contracting dimension counts differ");
  }
  if (lhs_batch.size() != rhs_batch.size()) {
    Fail(impl_->name, what + ": batch dimension counts differ");
  }
  auto check_dims = [&](const xla::ShapeProto& s, const std::vector<int64_t>& contracting,
                        const std::vector<int64_t>& batch, const char* side) {
    std::set<int64_t> seen;
    for (const auto* v : {&contracting, &batch}) {
      for (int64_t d : *v) {
        if (d < 0 || d >= s.dimensions_size()) {
          Fail(impl_->name, what + ": " + side + " dimension " + std::to_string(d) +
                                " out of range");
        }
        if (!seen.insert(d).second) {
          Fail(impl_->name, what + ": " + side + " dimension " + std::to_string(d) +
                                " used twice");
        }
      }
    }
  };
  check_dims(l, lhs_contracting, lhs_batch, "lhs");
  check_dims(r, rhs_contracting, rhs_batch, "rhs");
  for (size_t i = 0; i < lhs_contracting.size(); ++i) {
    if (l.dimensions(lhs_contracting[i]) != r.dimensions(rhs_contracting[i])) {
      Fail(impl_->name, what + ": contracting dimension sizes differ");
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < lhs_batch.size(); ++i) {
    if (l.dimensions(lhs_batch[i]) != r.dimensions(rhs_batch[i])) {
      Fail(impl_->name, what + ": batch dimension sizes differ");
    }
    out.push_back(l.dimensions(lhs_batch[i]));
  }
  auto free_dims = [&](const xla::ShapeProto& s, const std::vector<int64_t>& contracting,
                       const std::vector<int64_t>& batch) {
    for (int64_t i = 0; i < s.dimensions_size(); ++i) {
      if (std::find(contracting.begin(), contracting.end(), i) != contracting.end()) continue;
      if (std::find(batch.begin(), batch.end(), i) != batch.end()) continue;
      out.push_back(s.dimensions(i));
    }
  };
  free_dims(l, lhs_contracting, lhs_batch);
  free_dims(r, rhs_contracting, rhs_batch);

  xla::HloInstructionProto inst;
  inst.set_opcode("dot");
  auto* dn = inst.mutable_dot_dimension_numbers();
  for (int64_t d : lhs_contracting) dn->add_lhs_contracting_dimensions(d);
  for (int64_t d : rhs_contracting) dn->add_rhs_contracting_dimensions(d);
  for (int64_t d : lhs_batch) dn->add_lhs_batch_dimensions(d);
  for (int64_t d : rhs_batch) dn->add_rhs_batch_dimensions(d);
  inst.mutable_precision_config()->add_operand_precision(xla::PrecisionConfig::DEFAULT);
  inst.mutable_precision_config()->add_operand_precision(xla::PrecisionConfig::DEFAULT);
  return impl_->Add(std::move(inst), {lhs, rhs}, ArrayShape(l.element_type(), out));
}

Op HloBuilder::Unary(const std::string& opcode, Op operand) {
  const auto& in = impl_->ArrayOperand(operand, opcode);
  static const std::set<std::string> kFloatOnly = {
      "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "sqrt", "rsqrt",
      "cbrt", "sine", "cosine", "tan", "logistic", "floor", "ceil", "round-nearest-afz",
      "round-nearest-even", "is-finite", "erf"};
  static const std::set<std::string> kAny = {"negate", "abs", "sign", "not", "copy",
                                             "popcnt", "clz"};
  if (kFloatOnly.count(opcode)) {
    if (!IsFloating(in.element_type())) {
      Fail(impl_->name, opcode + " of " + ShapeToString(in) + ": needs a floating-point operand");
    }
  } else if (!kAny.count(opcode)) {
    Fail(impl_->name, "'" + opcode + "' is not an elementwise unary opcode");
  }
  xla::ShapeProto out = in;
  if (opcode == "is-finite") out.set_element_type(xla::PRED);
  return impl_->Add(opcode, {operand}, out);
}

Op HloBuilder::Binary(const std::string& opcode, Op lhs, Op rhs) {
  static const std::set<std::string> kBinary = {
      "add",  "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder",
      "and",  "or",       "xor",      "atan2",  "shift-left", "shift-right-arithmetic",
      "shift-right-logical"};
  if (!kBinary.count(opcode)) {
    Fail(impl_->name, "'" + opcode + "' is not an elementwise binary opcode");
  }
  const auto& a = impl_->ArrayOperand(lhs, opcode);
  const auto& b = impl_->ArrayOperand(rhs, opcode);
  if (!SameShape(a, b)) {
    Fail(impl_->name, opcode + " of " + ShapeToString(a) + " and " + ShapeToString(b) +
                          ": operand shapes differ (broadcast explicitly)");
  }
  return impl_->Add(opcode, {lhs, rhs}, a);
}

Op HloBuilder::Compare(Op lhs, Op rhs, const std::string& direction) {
  static const std::set<std::string> kDirections = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  if (!kDirections.count(direction)) {
    Fail(impl_->name, "compare direction '" + direction + "' is not one of EQ NE LT LE GT GE");
  }
  const auto& a = impl_->ArrayOperand(lhs, "compare");
  const auto& b = impl_->ArrayOperand(rhs, "compare");
  if (!SameShape(a, b)) {
    Fail(impl_->name, "compare of " + ShapeToString(a) + " and " + ShapeToString(b) +
                          ": operand shapes differ");
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("compare");
  inst.set_comparison_direction(direction);
  return impl_->Add(std::move(inst), {lhs, rhs}, ArrayShape(xla::PRED, Dims(a)));
}

Op HloBuilder::Select(Op pred, Op on_true, Op on_false) {
  const auto& p = impl_->ArrayOperand(pred, "select");
  const auto& t = impl_->ArrayOperand(on_true, "select");
  const auto& f = impl_->ArrayOperand(on_false, "select");
  if (p.element_type() != xla::PRED || Dims(p) != Dims(t) || !SameShape(t, f)) {
    Fail(impl_->name, "select of " + ShapeToString(p) + ", " + ShapeToString(t) + ", " +
                          ShapeToString(f) +
                          ": needs a pred with the dimensions of two equal-shaped branches");
  }
  return impl_->Add("select", {pred, on_true, on_false}, t);
}

Op HloBuilder::Reduce(Op operand, Op init, const std::vector<int64_t>& dimensions,
                      int64_t reducer_id) {
  const auto& in = impl_->ArrayOperand(operand, "reduce");
  const auto& init_shape = impl_->ArrayOperand(init, "reduce");
  const std::string what = "reduce of " + ShapeToString(in) + " over " + DimsToString(dimensions);
  if (!IsScalar(init_shape) || init_shape.element_type() != in.element_type()) {
    Fail(impl_->name, what + ": init value " + ShapeToString(init_shape) +
                          " must be a scalar of the operand's type");
  }
  const auto& reducer = impl_->Computation(reducer_id, what);
  const auto& ps = reducer.program_shape();
  const auto scalar = ArrayShape(in.element_type(), {});
  if (ps.parameters_size() != 2 || !SameShape(ps.parameters(0), scalar) ||
      !SameShape(ps.parameters(1), scalar) || !SameShape(ps.result(), scalar)) {
    Fail(impl_->name, what + ": reducer '" + reducer.name() + "' must be (" +
                          ShapeToString(scalar) + ", " + ShapeToString(scalar) + ") -> " +
                          ShapeToString(scalar));
  }
  std::set<int64_t> seen;
  for (int64_t d : dimensions) {
    if (d < 0 || d >= in.dimensions_size() || !seen.insert(d).second) {
      Fail(impl_->name, what + ": dimension " + std::to_string(d) + " out of range or repeated");
    }
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < in.dimensions_size(); ++i) {
    if (!seen.count(i)) out.push_back(in.dimensions(i));
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("reduce");
  for (int64_t d : dimensions) inst.add_dimensions(d);
  inst.add_called_computation_ids(reducer_id);
  return impl_->Add(std::move(inst), {operand, init}, ArrayShape(in.element_type(), out));
}

int64_t HloBuilder::MakeReducer(const std::string& opcode, xla::PrimitiveType type) {
  impl_->CheckUsable();
  HloBuilder sub(opcode + "_" + npc::PrimitiveTypeName(type));
  Op a = sub.Parameter(0, type, {}, "lhs");
  Op b = sub.Parameter(1, type, {}, "rhs");
  Op r = sub.Binary(opcode, a, b);
  return AddComputation(sub, r);
}

int64_t HloBuilder::AddComputation(HloBuilder& sub, Op root) {
  impl_->CheckUsable();
  if (&sub == this) Fail(impl_->name, "AddComputation of the builder itself");
  std::vector<xla::HloComputationProto> comps = std::move(sub.impl_->computations);
  comps.push_back(sub.impl_->Finish(root, sub.impl_->name));
  // Renumber: the sub-builder's ids are unique within it; give them ids of
  // this builder so that ids stay unique across the module.
  std::map<int64_t, int64_t> remap;
  auto map_id = [&](int64_t old) {
    auto it = remap.find(old);
    if (it == remap.end()) it = remap.emplace(old, impl_->NewId()).first;
    return it->second;
  };
  for (auto& c : comps) {
    for (auto& inst : *c.mutable_instructions()) inst.set_id(map_id(inst.id()));
    c.set_id(map_id(c.id()));
  }
  for (auto& c : comps) {
    c.set_root_id(remap.at(c.root_id()));
    for (auto& inst : *c.mutable_instructions()) {
      for (auto& o : *inst.mutable_operand_ids()) o = remap.at(o);
      for (auto& cc : *inst.mutable_called_computation_ids()) cc = remap.at(cc);
    }
    impl_->computations.push_back(std::move(c));
  }
  return impl_->computations.back().id();
}

Op HloBuilder::Call(const std::vector<Op>& operands, int64_t computation_id,
                    const xla::ShapeProto& result) {
  const auto& callee = impl_->Computation(computation_id, "call");
  const auto& ps = callee.program_shape();
  if (ps.parameters_size() != static_cast<int>(operands.size())) {
    Fail(impl_->name, "call of '" + callee.name() + "': " + std::to_string(operands.size()) +
                          " operands for " + std::to_string(ps.parameters_size()) + " parameters");
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const auto& s = impl_->Get(operands[i], "call").shape();
    if (!SameShape(s, ps.parameters(i))) {
      Fail(impl_->name, "call of '" + callee.name() + "': operand " + std::to_string(i) + " is " +
                            ShapeToString(s) + ", parameter is " +
                            ShapeToString(ps.parameters(i)));
    }
  }
  if (!SameShape(result, ps.result())) {
    Fail(impl_->name, "call of '" + callee.name() + "': result " + ShapeToString(result) +
                          " differs from the computation's " + ShapeToString(ps.result()));
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("call");
  inst.add_called_computation_ids(computation_id);
  return impl_->Add(std::move(inst), operands, result);
}

Op HloBuilder::Tuple(const std::vector<Op>& elements) {
  std::vector<xla::ShapeProto> shapes;
  for (const Op& e : elements) shapes.push_back(impl_->Get(e, "tuple").shape());
  return impl_->Add("tuple", elements, TupleShape(shapes));
}

Op HloBuilder::GetTupleElement(Op tuple, int64_t index) {
  const auto& s = impl_->Get(tuple, "get-tuple-element").shape();
  if (!IsTuple(s)) {
    Fail(impl_->name, "get-tuple-element of " + ShapeToString(s) + ": not a tuple");
  }
  if (index < 0 || index >= s.tuple_shapes_size()) {
    Fail(impl_->name, "get-tuple-element " + std::to_string(index) + " of " + ShapeToString(s) +
                          ": index out of range");
  }
  xla::HloInstructionProto inst;
  inst.set_opcode("get-tuple-element");
  inst.set_tuple_index(index);
  xla::ShapeProto element = s.tuple_shapes(index);
  return impl_->Add(std::move(inst), {tuple}, element);
}

Op HloBuilder::AddInstruction(xla::HloInstructionProto instruction, const std::vector<Op>& operands,
                              const xla::ShapeProto& shape) {
  if (instruction.opcode().empty()) Fail(impl_->name, "AddInstruction without an opcode");
  return impl_->Add(std::move(instruction), operands, shape);
}

xla::HloModuleProto HloBuilder::Build(Op root) {
  impl_->CheckUsable();
  xla::HloModuleProto m;
  m.set_name(impl_->name);
  std::vector<xla::HloComputationProto> comps = std::move(impl_->computations);
  comps.push_back(impl_->Finish(root, impl_->name));

  // Names: defaults "<opcode>.<id>", then unique across the module.
  std::set<std::string> used_inst, used_comp;
  auto unique = [](std::set<std::string>& used, std::string name, int64_t id) {
    if (used.count(name)) name += "." + std::to_string(id);
    while (used.count(name)) name += "_";
    used.insert(name);
    return name;
  };
  // The entry first, so that the names the caller gave there are kept.
  for (auto it = comps.rbegin(); it != comps.rend(); ++it) {
    auto& c = *it;
    c.set_name(unique(used_comp, c.name().empty() ? "computation" : c.name(), c.id()));
    for (auto& inst : *c.mutable_instructions()) {
      std::string name = inst.name().empty() ? inst.opcode() + "." + std::to_string(inst.id())
                                             : inst.name();
      name = unique(used_inst, name, inst.id());
      inst.set_name(name);
      if (inst.opcode() == "parameter") {
        c.mutable_program_shape()->set_parameter_names(inst.parameter_number(), name);
      }
    }
  }
  const auto& entry = comps.back();
  m.set_entry_computation_name(entry.name());
  m.set_entry_computation_id(entry.id());
  *m.mutable_host_program_shape() = entry.program_shape();
  for (auto& c : comps) *m.add_computations() = std::move(c);
  return m;
}

}  // namespace npc::hlo
