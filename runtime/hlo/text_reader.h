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
//    `entry_computation_layout` where the header has it.
//  - shapes: an array shape written without a layout gets XLA's default
//    (major-to-minor) layout; every array dimension gets an
//    is_dynamic_dimension entry (`<=N` marks a dynamic one; `?` an unbounded
//    one, stored as INT64_MIN as XLA does).
//  - called_computation_ids order: while = [body, condition] (XLA's
//    HloInstruction::CreateWhile order), conditional = [true, false] or the
//    branch_computations in order, select-and-scatter = [select, scatter],
//    otherwise text order (to_apply, calls, called_computations).
//  - defaults XLA's parser fills in: dot and convolution get one DEFAULT
//    operand_precision per operand when `operand_precision` is absent;
//    convolution gets feature_group_count = batch_group_count = 1; compare
//    gets comparison_type from its operands' element type (FLOAT for floating
//    point and complex, SIGNED, UNSIGNED for unsigned and pred) when `type=`
//    is absent; custom-call gets API_VERSION_ORIGINAL when `api_version` is
//    absent; slices without a stride get stride 1; window dimensions without
//    stride / dilation get 1.
//  - `iota_dimension=N` is stored in `dimensions`; `index=N` in tuple_index;
//    `slice_sizes` in gather_slice_sizes; `backend_config` keeps the string (a
//    `{...}` JSON value is kept verbatim, braces included).
//  - sharding: replicated / maximal device=N / manual / unknown / tuple and
//    `devices=[...]` with an explicit device list or an iota list
//    (`<=[dims]T(perm)`, expanded into tile_assignment_devices), and
//    last_tile_dim_replicate. Iota replica groups (`[G,S]<=[dims]T(perm)`) are
//    expanded into replica_groups likewise.
//  - constants: values go into the LiteralProto field of their element type
//    (16-bit and 8-bit types as little-endian bytes; bf16 and f16 rounded to
//    nearest-even from the decimal text). `inf`, `-inf`, `nan`, `-nan` and
//    `nan(0x<payload>)` are read; a value that does not fit its type is an
//    error. A constant printed elided, `constant({...})`, has no values in the
//    text: its literal holds only the shape, and the instruction carries the
//    frontend attribute kElidedConstantAttribute = "true" so that consumers
//    can report that the module's constants are unknown. No values are made
//    up.
//  - attributes without a field in npc's subset (is_scheduled, layout
//    tiling, sort's is_stable, rng distribution, fft, triangular-solve and
//    cholesky options, source_target_pairs, domain, last_tile_dims,
//    metadata keys other than op_type/op_name/source_file/source_line, ...)
//    are skipped with balanced-bracket scanning; an unknown opcode is an error.
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

// Nesting limit of the text reader (tuple shapes, constant braces, tuple
// constants, tuple shardings).
inline constexpr int kMaxHloTextNesting = 64;
// Longest iota device list (sharding tile assignment or replica groups) the
// text reader expands.
inline constexpr int64_t kMaxHloIotaDevices = int64_t{1} << 20;

// Parses HLO text. Errors: "<source_name>:<line>:<column>: <message>".
Result<xla::HloModuleProto> ParseHloText(std::string_view text, const std::string& source_name);

}  // namespace npc::hlo
