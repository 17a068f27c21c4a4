// XLA's HLO text format -> HloModuleProto. Internal to npc.
//
// Reads what XLA's HloModule::ToString() prints, in the older style (operand
// shapes inline and `%` names, as torch-xla / torch-neuronx dump it) and the
// newer one (bare operand names, as JAX and XLA's tools print it):
//
//   HloModule name, input_output_alias={ {0}: (3, {}, must-alias) }, ...
//   %add (x: f32[], y: f32[]) -> f32[] { ... }
//   ENTRY %main (p0: f32[2]) -> f32[2] {
//     %p0 = f32[2]{0} parameter(0)
//     ROOT %r = f32[2]{0} add(f32[2]{0} %p0, f32[2]{0} %p0), metadata={...}
//   }
//
// The result follows what XLA's own parser followed by HloModule::ToProto()
// would write, field by field (field numbers from XLA's hlo.proto and
// xla_data.proto, see runtime/hlo/hlo.proto):
//  - ids: computations and instructions get ids from one counter, in text
//    order, starting at 1 (unique across the module); operand_ids,
//    control_predecessor_ids and called_computation_ids refer to them. Operands
//    are looked up by name within their computation (a use before the
//    definition is accepted), called computations by name within the module.
//  - computations are stored callees first (XLA's order); the entry is the one
//    marked ENTRY, else the last one. root_id is the ROOT instruction, else the
//    last one. program_shape: parameters by parameter number, the root's
//    shape, parameter names without their ".N" suffix. The module's
//    host_program_shape is the entry's, with the shapes of
//    `entry_computation_layout` where the header has it (one with another
//    number of parameters than the entry is an error).
//  - shapes: an array shape written without a layout gets XLA's default
//    (major-to-minor) layout; every array dimension gets an
//    is_dynamic_dimension entry (`<=N` marks a dynamic one; `?` an unbounded
//    one, stored as INT64_MIN as XLA does). Layout details after ':' are
//    read: tiles T(..)(..), L(n) tail padding alignment, E(n) element size in
//    bits, S(n) memory space, M(n) dynamic shape metadata prefix; the
//    details of sparse layouts and split configs are an error.
//  - called_computation_ids order: while = [body, condition] (XLA's
//    HloInstruction::CreateWhile order), conditional = [true, false] or the
//    branch_computations in order, select-and-scatter = [select, scatter],
//    otherwise text order (to_apply, calls, called_computations).
//  - defaults XLA's parser fills in: dot and ragged-dot get one DEFAULT
//    operand_precision for each of lhs and rhs, convolution and custom-call
//    one per operand, when `operand_precision` is absent;
//    convolution gets feature_group_count = batch_group_count = 1; compare
//    gets comparison_type from its operands' element type (FLOAT for floating
//    point and complex, SIGNED, UNSIGNED for unsigned and pred) when `type=`
//    is absent; custom-call gets API_VERSION_ORIGINAL when `api_version` is
//    absent; slices without a stride get stride 1; window dimensions without
//    stride / dilation get 1.
//  - `iota_dimension=N` and reshape's `inferred_dimension=N` are stored in
//    `dimensions`; `index=N` in tuple_index; gather's `slice_sizes` in
//    gather_slice_sizes, collective-permute's `slice_sizes={{..},..}` in
//    dynamic_slice_sizes (flattened); map's `dimensions` are all of its
//    dimensions (as XLA stores them); `backend_config` keeps the string (a
//    `{...}` JSON value is kept verbatim, braces included).
//  - sharding: replicated / maximal device=N / manual / unknown / unreduced /
//    tuple (`{}` for an empty tuple) and `devices=[...]` with an explicit
//    device list or an iota list (`<=[dims]T(perm)`, expanded into
//    tile_assignment_devices), last_tile_dim_replicate, last_tile_dims={...}
//    and shard_as N / shard_like N. Iota replica groups (`[G,S]<=[dims]T(perm)`)
//    are expanded into replica_groups likewise.
//  - constants: values go into the LiteralProto field of their element type
//    (16-bit types as little-endian bytes; types of 8 bits and fewer, f8 and
//    f4/f6 floats and s1/s2/s4/u1/u2/u4 integers included, one byte per
//    element; floats narrower than 32 bits rounded to nearest-even from the
//    decimal text). `inf`, `-inf`, `nan`, `-nan` and `nan(0x<payload>)` are
//    read where the type has them; a value that does not fit its type is an
//    error. A constant printed elided, `constant({...})`, has no values in
//    the text: its literal holds only the shape, and the instruction carries
//    the frontend attribute kElidedConstantAttribute = "true" so that
//    consumers can report that the module's constants are unknown. No values
//    are made up.
//  - attributes: every instruction attribute of XLA's text format is read
//    into its field (sort's is_stable, rng's distribution, fft_type and
//    fft_length, topk's k and largest, source_target_pairs, channel_id,
//    replica_groups, triangular-solve and cholesky options, dot sparsity and
//    algorithm, result_accuracy, domain shardings, custom-call schedule,
//    literal and padding_type, ...). XLA's parser defaults are filled in as
//    above, plus topk's largest = true. An attribute that XLA's format does
//    not have, or that it has for other opcodes only, or one given twice, is
//    an error naming it; so is a missing attribute that XLA requires (sort's
//    dimensions, rng's distribution, ...). The only attributes read and not
//    stored are debug information: `origin` (original_value), `statistics`
//    (statistics_viz), and `metadata` inside a sharding; in an instruction's
//    `metadata`, keys other than op_type, op_name, source_file and
//    source_line are skipped (all metadata is debug information).
//  - the module header: input_output_alias, buffer_donor,
//    entry_computation_layout, frontend_attributes and is_scheduled (true:
//    a schedule listing each non-fusion computation's instructions in text
//    order, as XLA makes it) go into their fields. replica_count,
//    num_partitions, alias_passthrough_params and
//    allow_spmd_sharding_propagation_to_{parameters,output} belong to XLA's
//    HloModuleConfig, which HloModuleProto does not carry; a value other than
//    XLA's default is recorded as the module frontend attribute
//    kModuleConfigAttributePrefix + name (e.g.
//    "npc_module_config.num_partitions" = "8") so that the canonical graph
//    key sees it. Any other header attribute is an error; a computation's
//    only attribute is execution_thread.
//
// Untrusted input: tuple shapes, constant braces, tuple constants and tuple
// shardings nested deeper than kMaxHloTextNesting levels, and iota device
// lists (`<=[dims]`) of more than kMaxHloIotaDevices devices, are errors (never
// a stack overflow or an allocation failure); element counts are checked
// 64-bit products.
//
// Errors: "<source_name>:<line>:<column>: <message>", line and column
// 1-based, column in bytes; e.g. an unknown opcode, unexpected end of input,
// a malformed shape, an operand that is not defined in its computation, a
// reference to an undefined computation.
#pragma once

#include <string>
#include <string_view>

#include "npc/hlo.pb.h"
#include "npc/result.h"

namespace npc::hlo {

// Frontend attribute set (to "true") on a constant whose values the text
// elides (`constant({...})`).
inline constexpr char kElidedConstantAttribute[] = "npc_elided_constant";

// Prefix of the module frontend attributes that record module-header
// attributes XLA keeps outside HloModuleProto (see above).
inline constexpr char kModuleConfigAttributePrefix[] = "npc_module_config.";

// Nesting limit of the text reader (tuple shapes, constant braces, tuple
// constants, tuple shardings).
inline constexpr int kMaxHloTextNesting = 64;
// Longest iota device list (sharding tile assignment or replica groups) the
// text reader expands.
inline constexpr int64_t kMaxHloIotaDevices = int64_t{1} << 20;

// Parses HLO text. Errors: "<source_name>:<line>:<column>: <message>".
Result<xla::HloModuleProto> ParseHloText(std::string_view text, const std::string& source_name);

}  // namespace npc::hlo
