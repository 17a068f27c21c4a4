// Per-op checks of ValidateModule (internal to npc): what XLA's shape
// inference and HLO verifier (xla/service/shape_inference.cc, hlo_verifier.cc)
// reject in the dimension numbers of the ops the host backend compiles, so
// that no consumer indexes past a list or a buffer:
//  - gather: index_vector_dim in [0, rank(indices)]; offset_dims sorted,
//    unique, in [0, rank(result)); collapsed_slice_dims and
//    operand_batching_dims sorted, unique, in [0, rank(operand)) and disjoint;
//    start_index_map unique, in [0, rank(operand)), one per index vector
//    element; slice_sizes one per operand dimension, each in [0, dimension
//    size], collapsed ones <= 1; offset + collapsed + batching = rank(operand).
//  - scatter: the same for update_window_dims (sorted, unique, in
//    [0, rank(updates))), inserted_window_dims / input_batching_dims (sorted,
//    unique, disjoint, in [0, rank(operand))), scatter_dims_to_operand_dims
//    (unique, in range, one per index vector element); update window sizes
//    within the operand's dimensions; result shape = operand shape (one
//    operand).
//  - dot: batch and contracting dimensions unique within each side, in range,
//    lhs and rhs lists of equal length.
//  - reduce, reverse: dimensions unique and in range; transpose: a
//    permutation; broadcast: one distinct result dimension per operand
//    dimension; concatenate, iota: the dimension in range.
//  - slice: start in [0, limit], limit <= dimension size, stride >= 1;
//    dynamic-slice: result sizes within the operand; pad: interior >= 0;
//    get-tuple-element: index within the operand's tuple.
// Shapes of tuple-shaped operands where an array is expected are left to the
// consumers (the host backend refuses them by name).
#pragma once

#include "npc/hlo.pb.h"
#include "npc/result.h"

namespace npc::hlo {

// Checks every instruction of `computation` (whose operand ids resolve, see
// ValidateModule). Error: "instruction '<name>': <what>".
Status CheckComputationOps(const xla::HloComputationProto& computation);

}  // namespace npc::hlo
