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
// bytes (big-endian) of the SHA-256 of a canonical serialization of the
// module. The canonical form ignores module, computation and instruction
// names and ids, instruction order that does not change the dataflow, and
// `metadata`; it includes opcodes, shapes (with layouts), literals, every
// attribute, operand order, called computations, and the module's
// input/output aliasing. Stable across runs, machines and builds.
std::string CanonicalGraphKey(const xla::HloModuleProto& module);

// The canonical form that CanonicalGraphKey hashes, for tools that explain why
// two modules have different keys (`npc explain`). Computations are numbered
// in the order they are reached from the entry (entry = 0); instructions
// parameters first (by number), then in post order from the root.
struct CanonicalInstruction {
  std::string name;                         // original name, for messages only
  xla::HloInstructionProto normalized;      // names, ids, metadata, references cleared; default layouts removed
  std::vector<int64_t> operands;            // canonical instruction numbers (-1: dangling reference)
  std::vector<int64_t> control_predecessors;
  std::vector<int64_t> called_computations; // canonical computation numbers
};
struct CanonicalComputation {
  std::string name;  // original name, for messages only
  std::vector<CanonicalInstruction> instructions;
  int64_t root = -1;  // canonical number of the root instruction
  bool missing = false;  // called by some instruction but absent from the module (invalid module)
};
struct CanonicalModule {
  std::vector<CanonicalComputation> computations;  // [0] is the entry; empty for a module without one
  xla::HloInputOutputAliasProto input_output_alias;
};
CanonicalModule CanonicalForm(const xla::HloModuleProto& module);

// Number of elements of an array shape (1 for a scalar; 0 for a tuple, or a
// shape with a negative dimension; INT64_MAX when the product overflows, which
// ValidateShape rejects).
int64_t ElementCount(const xla::ShapeProto& shape);

// XLA's text form of a shape, e.g. "f32[4,8]{1,0}", "(f32[], s32[2])".
std::string ShapeToString(const xla::ShapeProto& shape);

}  // namespace npc::hlo
