// Per-op checks of ValidateModule; the rules are listed in op_checks.h.
#include "hlo/op_checks.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace npc::hlo {
namespace {

using Inst = xla::HloInstructionProto;
using DimList = google::protobuf::RepeatedField<int64_t>;

bool IsArray(const xla::ShapeProto& s) {
  return s.element_type() != xla::TUPLE && s.element_type() != xla::TOKEN && s.element_type() != xla::OPAQUE_TYPE;
}

std::string Str(int64_t v) { return std::to_string(v); }

// "" when every entry of `list` is in [0, bound), none repeats (and, with
// `sorted`, they ascend); else what is wrong, naming the list `what`.
std::string CheckDimList(const DimList& list, int64_t bound, bool sorted, const std::string& what) {
  std::vector<bool> seen(static_cast<size_t>(bound > 0 ? bound : 0), false);
  for (int i = 0; i < list.size(); ++i) {
    const int64_t d = list.Get(i);
    if (d < 0 || d >= bound) return what + " has dimension " + Str(d) + " out of range [0, " + Str(bound) + ")";
    if (seen[static_cast<size_t>(d)]) return what + " names dimension " + Str(d) + " twice";
    if (sorted && i > 0 && d < list.Get(i - 1)) return what + " is not sorted";
    seen[static_cast<size_t>(d)] = true;
  }
  return "";
}

// "" when no entry of `a` is in `b`.
std::string CheckDisjoint(const DimList& a, const DimList& b, const std::string& what) {
  for (int64_t x : a) {
    for (int64_t y : b) {
      if (x == y) return what + " share dimension " + Str(x);
    }
  }
  return "";
}

bool Contains(const DimList& list, int64_t v) {
  for (int64_t x : list) {
    if (x == v) return true;
  }
  return false;
}

class OpChecker {
 public:
  explicit OpChecker(const xla::HloComputationProto& c) {
    for (const auto& inst : c.instructions()) by_id_[inst.id()] = &inst;
  }

  // "" when `inst` passes.
  std::string Check(const Inst& inst) {
    const std::string& op = inst.opcode();
    if (op == "gather") return Gather(inst);
    if (op == "scatter") return Scatter(inst);
    if (op == "dot") return Dot(inst);
    if (op == "get-tuple-element") return TupleIndex(inst);
    if (op == "iota" && IsArray(inst.shape())) {
      if (inst.dimensions_size() != 1) return "iota needs one dimension";
      return CheckDimList(inst.dimensions(), inst.shape().dimensions_size(), false, "iota dimension");
    }
    if (!HasArrayOperand(inst, 0)) return "";
    const xla::ShapeProto& a = Operand(inst, 0);
    const int64_t rank = a.dimensions_size();
    if (op == "reduce" || op == "reverse") return CheckDimList(inst.dimensions(), rank, false, op + " dimensions");
    if (op == "transpose") {
      if (inst.dimensions_size() != rank) return "transpose dimensions are not a permutation of the operand's";
      return CheckDimList(inst.dimensions(), rank, false, "transpose dimensions");
    }
    if (op == "broadcast") return Broadcast(inst, a);
    if (op == "concatenate" && inst.dimensions_size() != 0) {
      return inst.dimensions_size() == 1 ? CheckDimList(inst.dimensions(), rank, false, "concatenate dimension")
                                         : "concatenate needs one dimension";
    }
    if (op == "slice") return Slice(inst, a);
    if (op == "dynamic-slice" && IsArray(inst.shape())) return WithinOperand(inst.shape(), a, "dynamic-slice sizes");
    if (op == "dynamic-update-slice" && HasArrayOperand(inst, 1)) {
      return WithinOperand(Operand(inst, 1), a, "dynamic-update-slice update");
    }
    if (op == "pad") return Pad(inst, a);
    return "";
  }

 private:
  bool HasArrayOperand(const Inst& inst, int i) const {
    if (i >= inst.operand_ids_size()) return false;
    auto it = by_id_.find(inst.operand_ids(i));
    return it != by_id_.end() && IsArray(it->second->shape());
  }
  const xla::ShapeProto& Operand(const Inst& inst, int i) const { return by_id_.at(inst.operand_ids(i))->shape(); }

  std::string Gather(const Inst& inst) {
    if (!HasArrayOperand(inst, 0) || !HasArrayOperand(inst, 1) || !IsArray(inst.shape())) return "";
    const auto& a = Operand(inst, 0);
    const auto& idx = Operand(inst, 1);
    const auto& g = inst.gather_dimension_numbers();
    const int64_t ar = a.dimensions_size(), ir = idx.dimensions_size(), rr = inst.shape().dimensions_size();
    const int64_t ivd = g.index_vector_dim();
    if (ivd < 0 || ivd > ir) return "gather index_vector_dim " + Str(ivd) + " out of range [0, " + Str(ir) + "]";
    const int64_t index_count = ivd == ir ? 1 : idx.dimensions(static_cast<int>(ivd));
    std::string e;
    if (!(e = CheckDimList(g.offset_dims(), rr, true, "gather offset_dims")).empty()) return e;
    if (!(e = CheckDimList(g.collapsed_slice_dims(), ar, true, "gather collapsed_slice_dims")).empty()) return e;
    if (!(e = CheckDimList(g.operand_batching_dims(), ar, true, "gather operand_batching_dims")).empty()) return e;
    if (!(e = CheckDisjoint(g.collapsed_slice_dims(), g.operand_batching_dims(),
                            "gather collapsed_slice_dims and operand_batching_dims")).empty()) {
      return e;
    }
    if (!(e = CheckDimList(g.start_indices_batching_dims(), ir, false, "gather start_indices_batching_dims")).empty()) {
      return e;
    }
    if (Contains(g.start_indices_batching_dims(), ivd)) return "gather start_indices_batching_dims holds index_vector_dim";
    if (!(e = CheckDimList(g.start_index_map(), ar, false, "gather start_index_map")).empty()) return e;
    if (g.start_index_map_size() != index_count) {
      return "gather start_index_map has " + Str(g.start_index_map_size()) + " entries, the index vector " +
             Str(index_count);
    }
    if (inst.gather_slice_sizes_size() != ar) return "gather slice_sizes must have one size per operand dimension";
    for (int64_t d = 0; d < ar; ++d) {
      const int64_t s = inst.gather_slice_sizes(static_cast<int>(d));
      if (s < 0 || s > a.dimensions(static_cast<int>(d))) {
        return "gather slice size " + Str(s) + " of dimension " + Str(d) + " exceeds the operand";
      }
      if ((Contains(g.collapsed_slice_dims(), d) || Contains(g.operand_batching_dims(), d)) && s > 1) {
        return "gather collapses dimension " + Str(d) + " of slice size " + Str(s) + " (must be 0 or 1)";
      }
    }
    if (g.offset_dims_size() + g.collapsed_slice_dims_size() + g.operand_batching_dims_size() != ar) {
      return "gather offset_dims, collapsed_slice_dims and operand_batching_dims do not add up to the operand's rank";
    }
    const int64_t batch_rank = ivd < ir ? ir - 1 : ir;
    if (rr != g.offset_dims_size() + batch_rank) return "gather result rank does not match its dimension numbers";
    return "";
  }

  std::string Scatter(const Inst& inst) {
    const int n_ops = inst.operand_ids_size();
    if (n_ops < 3 || n_ops % 2 != 1) return "scatter needs operands, indices and as many updates";
    const int n = (n_ops - 1) / 2;
    if (!HasArrayOperand(inst, 0) || !HasArrayOperand(inst, n) || !HasArrayOperand(inst, n + 1)) return "";
    const auto& a = Operand(inst, 0);
    const auto& idx = Operand(inst, n);
    const auto& upd = Operand(inst, n + 1);
    const auto& sd = inst.scatter_dimension_numbers();
    const int64_t ar = a.dimensions_size(), ir = idx.dimensions_size(), ur = upd.dimensions_size();
    const int64_t ivd = sd.index_vector_dim();
    if (ivd < 0 || ivd > ir) return "scatter index_vector_dim " + Str(ivd) + " out of range [0, " + Str(ir) + "]";
    const int64_t index_count = ivd == ir ? 1 : idx.dimensions(static_cast<int>(ivd));
    std::string e;
    if (!(e = CheckDimList(sd.update_window_dims(), ur, true, "scatter update_window_dims")).empty()) return e;
    if (!(e = CheckDimList(sd.inserted_window_dims(), ar, true, "scatter inserted_window_dims")).empty()) return e;
    if (!(e = CheckDimList(sd.input_batching_dims(), ar, true, "scatter input_batching_dims")).empty()) return e;
    if (!(e = CheckDisjoint(sd.inserted_window_dims(), sd.input_batching_dims(),
                            "scatter inserted_window_dims and input_batching_dims")).empty()) {
      return e;
    }
    if (!(e = CheckDimList(sd.scatter_indices_batching_dims(), ir, false, "scatter scatter_indices_batching_dims"))
             .empty()) {
      return e;
    }
    if (Contains(sd.scatter_indices_batching_dims(), ivd)) {
      return "scatter scatter_indices_batching_dims holds index_vector_dim";
    }
    if (!(e = CheckDimList(sd.scatter_dims_to_operand_dims(), ar, false, "scatter scatter_dims_to_operand_dims"))
             .empty()) {
      return e;
    }
    if (sd.scatter_dims_to_operand_dims_size() != index_count) {
      return "scatter scatter_dims_to_operand_dims has " + Str(sd.scatter_dims_to_operand_dims_size()) +
             " entries, the index vector " + Str(index_count);
    }
    if (sd.update_window_dims_size() + sd.inserted_window_dims_size() + sd.input_batching_dims_size() != ar) {
      return "scatter update_window_dims, inserted_window_dims and input_batching_dims do not add up to the "
             "operand's rank";
    }
    const int64_t batch_rank = ivd < ir ? ir - 1 : ir;
    if (ur != sd.update_window_dims_size() + batch_rank) return "scatter updates rank does not match its dimension numbers";
    // Update window k covers operand dimension k-th among those neither inserted nor batching.
    int k = 0;
    for (int64_t d = 0; d < ar; ++d) {
      if (Contains(sd.inserted_window_dims(), d) || Contains(sd.input_batching_dims(), d)) continue;
      const int64_t size = upd.dimensions(static_cast<int>(sd.update_window_dims(k++)));
      if (size > a.dimensions(static_cast<int>(d))) {
        return "scatter update window of size " + Str(size) + " exceeds operand dimension " + Str(d);
      }
    }
    for (int i = 1; i < n; ++i) {
      if (!HasArrayOperand(inst, i) || !HasArrayOperand(inst, n + 1 + i)) continue;
      if (Operand(inst, i).dimensions().size() != ar || Operand(inst, n + 1 + i).dimensions().size() != ur) {
        return "scatter operands or updates differ in rank";
      }
    }
    if (n == 1 && IsArray(inst.shape()) &&
        !std::equal(inst.shape().dimensions().begin(), inst.shape().dimensions().end(), a.dimensions().begin(),
                    a.dimensions().end())) {
      return "scatter result dimensions differ from the operand's";
    }
    return "";
  }

  std::string Dot(const Inst& inst) {
    if (!HasArrayOperand(inst, 0) || !HasArrayOperand(inst, 1)) return "";
    const auto& dn = inst.dot_dimension_numbers();
    if (dn.lhs_batch_dimensions_size() != dn.rhs_batch_dimensions_size() ||
        dn.lhs_contracting_dimensions_size() != dn.rhs_contracting_dimensions_size()) {
      return "dot lhs and rhs dimension lists differ in length";
    }
    for (int side = 0; side < 2; ++side) {
      const int64_t rank = Operand(inst, side).dimensions_size();
      DimList all = side == 0 ? dn.lhs_batch_dimensions() : dn.rhs_batch_dimensions();
      all.MergeFrom(side == 0 ? dn.lhs_contracting_dimensions() : dn.rhs_contracting_dimensions());
      std::string e = CheckDimList(all, rank, false, side == 0 ? "dot lhs batch/contracting dimensions"
                                                              : "dot rhs batch/contracting dimensions");
      if (!e.empty()) return e;
    }
    return "";
  }

  std::string TupleIndex(const Inst& inst) {
    if (inst.operand_ids_size() != 1) return "get-tuple-element needs one operand";
    const auto& t = Operand(inst, 0);
    if (t.element_type() != xla::TUPLE) return "get-tuple-element of a non-tuple operand";
    if (inst.tuple_index() < 0 || inst.tuple_index() >= t.tuple_shapes_size()) {
      return "get-tuple-element index " + Str(inst.tuple_index()) + " out of range [0, " + Str(t.tuple_shapes_size()) +
             ")";
    }
    return "";
  }

  std::string Broadcast(const Inst& inst, const xla::ShapeProto& a) {
    if (!IsArray(inst.shape())) return "";
    const int64_t rr = inst.shape().dimensions_size();
    if (inst.dimensions_size() != a.dimensions_size()) return "broadcast needs one dimension per operand dimension";
    std::string e = CheckDimList(inst.dimensions(), rr, false, "broadcast dimensions");
    if (!e.empty()) return e;
    for (int i = 0; i < inst.dimensions_size(); ++i) {
      if (inst.shape().dimensions(static_cast<int>(inst.dimensions(i))) != a.dimensions(i)) {
        return "broadcast operand dimension " + Str(i) + " differs in size from result dimension " +
               Str(inst.dimensions(i));
      }
    }
    return "";
  }

  static std::string Slice(const Inst& inst, const xla::ShapeProto& a) {
    if (inst.slice_dimensions_size() != a.dimensions_size()) return "slice needs one range per operand dimension";
    for (int d = 0; d < inst.slice_dimensions_size(); ++d) {
      const auto& s = inst.slice_dimensions(d);
      if (s.start() < 0 || s.start() > s.limit() || s.limit() > a.dimensions(d) || s.stride() < 1) {
        return "slice [" + Str(s.start()) + ":" + Str(s.limit()) + ":" + Str(s.stride()) + "] of dimension " + Str(d) +
               " does not fit the operand (size " + Str(a.dimensions(d)) + ")";
      }
    }
    return "";
  }

  static std::string WithinOperand(const xla::ShapeProto& part, const xla::ShapeProto& a, const std::string& what) {
    if (part.dimensions_size() != a.dimensions_size()) return what + " must have the operand's rank";
    for (int d = 0; d < a.dimensions_size(); ++d) {
      if (part.dimensions(d) < 0 || part.dimensions(d) > a.dimensions(d)) {
        return what + ": size " + Str(part.dimensions(d)) + " of dimension " + Str(d) + " exceeds the operand";
      }
    }
    return "";
  }

  static std::string Pad(const Inst& inst, const xla::ShapeProto& a) {
    const auto& pc = inst.padding_config();
    if (pc.dimensions_size() != a.dimensions_size()) return "pad needs one padding per operand dimension";
    for (int d = 0; d < pc.dimensions_size(); ++d) {
      if (pc.dimensions(d).interior_padding() < 0) return "pad interior padding of dimension " + Str(d) + " is negative";
    }
    return "";
  }

  std::unordered_map<int64_t, const Inst*> by_id_;
};

}  // namespace

Status CheckComputationOps(const xla::HloComputationProto& computation) {
  OpChecker checker(computation);
  for (const auto& inst : computation.instructions()) {
    std::string what = checker.Check(inst);
    if (!what.empty()) return MakeError("instruction '" + inst.name() + "': " + what);
  }
  return {};
}

}  // namespace npc::hlo
