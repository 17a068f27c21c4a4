// HLO modules: reading them from files, validating them, and the canonical
// graph key.
//
// Formats read (see ReadHloModuleFile):
//  - serialized `HloModuleProto` (`model.hlo_module.pb`, older `model.hlo.pb`);
//  - serialized `HloProto` (a wrapper whose field 1 is the module);
//  - either of the above compressed with gzip;
//  - XLA's HLO text format (`HloModule name, ...`).
// Field numbers follow XLA's hlo.proto / xla_data.proto (see runtime/hlo/hlo.proto).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto
#include "npc/result.h"

namespace npc::hlo {

// Largest input npc reads as one HLO module, in bytes (a file, or what a gzip
// stream inflates to): 2 GiB - 1, the most libprotobuf parses as one message.
inline constexpr size_t kMaxHloModuleBytes = 2147483647;

// Parses `bytes` in any of the formats above. `source_name` (usually the file
// path) is named in every error. Errors: not a known format, truncated or
// corrupt protobuf, a well-formed protobuf of another message type ("not an
// HloModuleProto or HloProto: ..."), a gzip stream that does not inflate or
// inflates past kMaxHloModuleBytes, input larger than that, a module that
// fails ValidateModule, and the text reader's errors (text_reader.h: nesting
// and list caps). Protobuf nesting is bounded by libprotobuf's recursion limit
// (100); libprotobuf's log messages for these parses are not printed but put
// into the error.
Result<xla::HloModuleProto> ParseHloModule(std::string_view bytes, const std::string& source_name);

// Reads `path` and parses it with ParseHloModule. Errors name the file.
Result<xla::HloModuleProto> ReadHloModuleFile(const std::string& path);

// Structural checks that every consumer relies on: at least one computation,
// an entry computation that exists (by id, else by name, else the last
// computation as XLA does), unique instruction ids within a computation,
// operand and called-computation ids that resolve, a root that exists, every
// instruction with an opcode and a valid shape (ValidateShape), and what XLA's
// shape inference rejects for the dimension numbers of the ops the host
// backend compiles (runtime/hlo/op_checks.h: duplicate or out-of-range
// dimension numbers of gather, scatter, dot, reduce, transpose, broadcast,
// reverse, concatenate, iota, slices, ...). Errors name `source_name`, the
// computation and the instruction.
Status ValidateModule(const xla::HloModuleProto& module, const std::string& source_name);

// A shape XLA's ShapeUtil::ValidateShape accepts: a known element type;
// tuples nested at most 64 levels; arrays of rank <= 128, dimension sizes >= 0
// (or XLA's unbounded size INT64_MIN on a dimension marked dynamic), a byte
// size that fits in 64 bits (checked multiplication), a layout that is empty
// or a permutation of the dimensions. Errors say what is wrong, without a
// file name.
Status ValidateShape(const xla::ShapeProto& shape);

// The entry computation (see ValidateModule for how it is found); nullptr when
// there is none.
const xla::HloComputationProto* EntryComputation(const xla::HloModuleProto& module);

// The canonical graph key: an unsigned 64-bit decimal string, the first 8
// bytes (big-endian) of the SHA-256 of the canonical form of the complete
// module (format kGraphKeyFormat, below). Stable across runs, machines and
// builds. Two modules that differ in anything that can change what the
// compiler makes of them get different keys; two that differ only in the
// following get the same key:
//  - names: of the module, computations, instructions, program-shape
//    parameters (`name`, `entry_computation_name`, `parameter_names`);
//  - ids: of the module, computations and instructions (`id`, `root_id`,
//    `entry_computation_id`, `operand_ids`, `control_predecessor_ids`,
//    `called_computation_ids`, the ids in `schedule`). They are re-encoded:
//    computations are numbered in the order they are reached from the entry
//    (entry = 0), instructions within a computation parameters first (by
//    parameter number), then in post order from the root (operands in order,
//    then control predecessors), then any unreachable ones in listed order;
//    every reference is written as such a number. So the order in which
//    computations and instructions are listed does not matter either, unless
//    it changes the dataflow;
//  - debug information: instruction `metadata` (framework op, source file and
//    line, profile hints), the `metadata` lists inside shardings
//    (OpSharding, NamedShardingProto), the module's `stack_frame_index` (what
//    metadata points into), `statistics_viz` (graph visualization) and
//    `original_value` (which instruction of an earlier module a value came
//    from, for tools);
//  - spellings of the same thing: a default layout ({n-1,...,0}, nothing
//    else set) written or left out, and in any layout
//    `tail_padding_alignment_in_elements` 1 (what 0 means; newer XLA writes
//    1), an all-DENSE `dim_level_types`, all-true `dim_unique` /
//    `dim_ordered`; an all-false `is_dynamic_dimension`; a
//    `precision_config` of only DEFAULT precisions (no algorithm); a
//    `result_accuracy` of mode DEFAULT; an empty `frontend_attributes` or
//    `window`; map entries in any order; a `host_program_shape` that repeats
//    the entry computation's program shape (each written or left out).
//    A collective's devices in any of XLA's forms (`replica_groups`,
//    `collective_device_list` with explicit groups or an iota list,
//    `iota_collective_device_list`) count as the explicit groups they stand
//    for, and an iota tile assignment in a sharding (`iota_reshape_dims`,
//    `iota_transpose_perm`) as its explicit device list; so text read by
//    npc and protos written by any XLA version agree.
// Everything else is part of the key, field by field: opcodes, shapes and
// layouts, literals, every instruction attribute (including `backend_config`;
// `frontend_attributes`, which XLA backends read for semantics such as host
// offloading and send/recv pipelining; `sharding`; `channel_id`, whose value
// pairs host transfers; replica groups; `is_stable`, `distribution`, ...),
// operand order, called computations, computation-level fields
// (`program_shape` shapes, `is_fusion_computation`, `execution_thread`), and
// the module-level fields that change compilation: `input_output_alias`,
// `buffer_donor`, `cross_program_prefetches`, `is_dynamic`,
// `spmd_output_sharding`, `spmd_parameters_shardings`,
// `use_auto_spmd_partitioning`, `profile_info`, `device_assignment`,
// `frontend_attributes` (where the text reader also records the module
// header's HloModuleConfig attributes, see runtime/hlo/text_reader.h),
// `host_program_shape` (the entry layout) and `schedule` (re-encoded as
// above). Fields this build does not declare (written by a newer XLA) are
// kept as unknown fields and are part of the key byte for byte: a field npc
// does not know can never be ignored by accident.
//
// Cost: the module is serialized once and its bytes walked a few times; no
// per-instruction message is built (scripts/bench-graph-key.sh measures it
// per MB of serialized module).
//
// Changing the canonical form changes every key: entries that a build with
// another format wrote are then not found (a miss, recompiled once; old
// entries age out with `npc prune`). kGraphKeyFormat names the format and is
// the first thing hashed; it changes whenever the form does. History:
//   1: (npc <= 0.1.0) a subset of the schema; unknown fields discarded.
//   2: every field of XLA's schema; unknown fields kept; module-level fields.
inline constexpr char kGraphKeyFormat[] = "npc-graph-key/2";
std::string CanonicalGraphKey(const xla::HloModuleProto& module);

// The canonical form that CanonicalGraphKey hashes, for tools that explain why
// two modules have different keys (`npc explain`). Numbering as above.
struct CanonicalInstruction {
  std::string name;                         // original name, for messages only
  xla::HloInstructionProto normalized;      // as hashed: names, ids, debug information and references cleared, ...
  std::vector<int64_t> operands;            // canonical instruction numbers (-1: dangling reference)
  std::vector<int64_t> control_predecessors;
  std::vector<int64_t> called_computations; // canonical computation numbers
};
struct CanonicalComputation {
  std::string name;  // original name, for messages only
  xla::HloComputationProto normalized;  // computation-level fields as hashed (no instructions, name, ids)
  std::vector<CanonicalInstruction> instructions;
  int64_t root = -1;  // canonical number of the root instruction
  bool missing = false;  // called by some instruction but absent from the module (invalid module)
  std::vector<int64_t> schedule;  // the module's schedule for it, canonical numbers (-1: unknown id)
};
struct CanonicalModule {
  std::vector<CanonicalComputation> computations;  // [0] is the entry; empty for a module without one
  xla::HloModuleProto module;  // module-level fields as hashed (no computations, names, ids, schedule)
  bool has_schedule = false;
};
CanonicalModule CanonicalForm(const xla::HloModuleProto& module);

// Number of elements of an array shape (1 for a scalar; 0 for a tuple, or a
// shape with a negative dimension; INT64_MAX when the product overflows, which
// ValidateShape rejects).
int64_t ElementCount(const xla::ShapeProto& shape);

// XLA's text form of a shape, e.g. "f32[4,8]{1,0}", "(f32[], s32[2])".
std::string ShapeToString(const xla::ShapeProto& shape);

}  // namespace npc::hlo
