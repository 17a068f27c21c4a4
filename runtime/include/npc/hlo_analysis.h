// Op analysis of an HLO module: which opcodes, custom-call targets and
// element types it uses, how many of each, what its entry computation takes
// and returns. Backend-neutral: whether a backend supports the ops is decided
// elsewhere (the host backend: npc::host::UnsupportedOpcodes; `npc analyze`
// joins the two).
//
//   auto module = npc::hlo::ReadHloModuleFile("step.hlo");
//   npc::hlo::ModuleAnalysis a = npc::hlo::AnalyzeModule(*module);
//   a.opcodes["dot"];                                  // dot instructions in the whole module
//   a.op_keys["custom-call:AwsNeuronGelu"];            // custom-calls by target
//   a.parameters[0].shape;                             // "f32[32,784]{1,0}"
//
// Terms:
//  - "op key": the opcode, except for a custom-call, whose key is
//    "custom-call:<custom_call_target>" (one key per target, since each target
//    is a different operation to a backend). The same keys are used by
//    npc::host::UnsupportedOpcodes.
//  - "reachable": a computation is reachable when it is the entry computation
//    or is called (to_apply, calls, while body/condition, branches, ...) by an
//    instruction of a reachable computation. Counts "*_reachable" only count
//    instructions of reachable computations; a module written by XLA has every
//    computation reachable, a hand-edited one may not.
//  - shapes are XLA's text form (npc::hlo::ShapeToString): "f32[2,3]{1,0}",
//    "s64[]", "(f32[2]{0}, pred[])". Element type names are lower case
//    ("f32", "bf16", "pred", "s64", "token").
// Counts are numbers of instructions. Nothing here reads files or fails: the
// module must have passed npc::hlo::ValidateModule (ParseHloModule and
// ReadHloModuleFile do that); references that do not resolve are skipped.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto

namespace npc::hlo {

// The op key of `instruction` (see above).
std::string OpKey(const xla::HloInstructionProto& instruction);

// Lower-case name of an element type: "f32", "bf16", "pred", "token", ...
std::string ElementTypeName(xla::PrimitiveType type);

// One parameter of the entry computation.
struct ParameterInfo {
  int64_t number = 0;    // parameter_number
  std::string name;      // the instruction's name ("p0.1")
  std::string shape;     // "f32[32,784]{1,0}"
};

// One instruction, with where it came from; for reports about specific
// instructions (e.g. the unsupported ones).
struct InstructionInfo {
  std::string computation;           // name of its computation
  bool reachable = true;             // its computation is reachable from the entry
  std::string name;                  // instruction name ("custom-call.4")
  std::string op_key;                // see OpKey
  std::string shape;                 // result shape
  std::vector<std::string> operand_shapes;
  // From the instruction's metadata (empty / 0 when absent): the framework
  // op ("aten__mm"), its name, and the user's source line.
  std::string op_type;
  std::string op_name;
  std::string source_file;
  int32_t source_line = 0;
};

struct ModuleAnalysis {
  std::string name;                                // the module's name
  std::string entry_computation;                   // name of the entry computation
  int64_t computations = 0;                        // all computations
  int64_t computations_reachable = 0;
  int64_t instructions = 0;                        // all instructions of all computations
  int64_t instructions_reachable = 0;
  std::map<std::string, int64_t> opcodes;          // opcode -> instructions, all computations
  std::map<std::string, int64_t> opcodes_reachable;
  std::map<std::string, int64_t> op_keys;          // op key -> instructions, all computations
  std::map<std::string, int64_t> op_keys_reachable;
  std::map<std::string, int64_t> custom_call_targets;  // target -> custom-call instructions, all computations
  std::vector<std::string> element_types;          // of every array leaf of every instruction's shape; sorted, unique
  std::vector<ParameterInfo> parameters;           // entry parameters, by parameter number
  std::string result_shape;                        // the entry root's shape
  std::vector<std::string> outputs;                // leaves of the root shape, depth-first (one for a non-tuple root)
  int64_t input_output_aliases = 0;                // entries of input_output_alias (outputs updated in place)
  bool elided_constants = false;                   // some constant's values were elided in the text it was read from
};

// Analyses `module`. Deterministic; never fails (see above).
ModuleAnalysis AnalyzeModule(const xla::HloModuleProto& module);

// The instructions of `module` whose op key is `op_key`, in module order
// (computations as stored, instructions as stored).
std::vector<InstructionInfo> InstructionsWithOpKey(const xla::HloModuleProto& module, const std::string& op_key);

}  // namespace npc::hlo
