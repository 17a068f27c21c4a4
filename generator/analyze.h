// `npc analyze` and `neuron_parallel_compile --command analyze`: which ops the
// HLO modules of a model use and whether the selected backend supports them,
// as a summary on stdout and as <analyze output>/result.json.
//
//   npc analyze [--backend B] [--analyze-output DIR] [--analyze-verbosity 1|2] [--] [files, folders...]
//     Analyses HLO files (HLO text, HloModuleProto, HloProto, gzip of any;
//     hlo::ReadHloModuleFile) and folders of them (import.h's ExpandHloPaths:
//     *.hlo, *.txt, *.pb, *.binpb, optionally .gz, recursively; a cache root
//     or compiler directory is such a folder: each entry's model.hlo_module.pb,
//     else model.hlo.pb, is analysed as that entry). No path: the entries of
//     the selected backend's compiler directory in the resolved cache.
//   neuron_parallel_compile --command analyze [options] [--] <training command...>
//     Runs the training command as a trial run (NEURON_EXTRACT_GRAPHS_ONLY=1,
//     as `collect` does) with a fresh cache, <analyze output>/trial-cache
//     (removed and re-created by each run; NEURON_CC_FLAGS' --cache_dir and
//     --no_cache are left out for the trial), so that every graph of the run
//     is collected even when the main cache has it compiled; the main cache
//     is not touched. Then analyses the collected entries. The graphs stay in
//     the trial cache (`npc compile --cache_dir <output>/trial-cache` compiles
//     them).
//
// Backend support (--backend, else NPC_BACKEND, else host):
//  - host: npc::host::UnsupportedOpcodes(module) decides (it checks the
//    instructions reachable from the entry); each unsupported op key (opcode,
//    or "custom-call:<target>") comes with the message of its first failing
//    instruction. The key "" is a failure not tied to an instruction (a
//    malformed computation).
//  - neuronx-cc: not checked. Only neuronx-cc knows what it supports, and
//    analyze does not run it; the report says so ("support_checked": false)
//    rather than guessing.
//
// Verbosity (--analyze-verbosity, default 1; applies to stdout and result.json):
//  1: per module: source, name, graph key, instruction and computation counts,
//     element types, custom-call targets, whether the backend supports it and
//     the unsupported op keys with instruction counts and reasons; a summary.
//  2: adds per-opcode counts (all computations and those reachable from the
//     entry), the entry's parameter and output shapes, the supported op keys,
//     and every instruction of an unsupported op key: computation,
//     instruction name, shape, operand shapes, and its metadata (framework op
//     type and name, source file and line).
//
// result.json (written atomically: temporary file, then rename; keys in this
// order; modules in input order):
//   {
//     "format": "npc-analysis",
//     "version": 1,
//     "backend": "host",                       // or "neuronx-cc"
//     "support_checked": true,                 // false for neuronx-cc
//     "support_note": "...",                   // why support was not checked (only when it was not)
//     "verbosity": 1,
//     "backend_supported_ops": ["abs", "add", ...],   // verbosity 2, host: npc::host::SupportedOpcodes()
//     "inputs": ["<path given>", ...],         // npc analyze; the trial cache for --command analyze
//     "command": ["<training command>", ...],  // --command analyze only
//     "command_exit_status": 0,                // --command analyze only
//     "summary": {
//       "modules": 3,                          // analysed
//       "errors": 1,                           // files that could not be read / parsed
//       "supported": 2,                        // modules with no unsupported op (null when not checked)
//       "unsupported": 1,                      // modules with some (null when not checked)
//       "unsupported_ops": {"all-reduce": {"modules": 1, "instructions": 1}},   // by op key
//       "custom_call_targets": {"AwsNeuronTransferWithStaticRing": {"modules": 3, "instructions": 20}}
//     },
//     "modules": [
//       {
//         "source": "/abs/path/step.hlo",      // the file read
//         "entry": "host-gcc-12.2.0-x86_64-linux-gnu-cg3/MODULE_<key>+<hash>",   // only for a cache entry's HLO
//         "name": "SyncTensorsGraph.142",
//         "graph_key": "123...",               // the entry's key, else hlo::CanonicalGraphKey
//         "computations": 5, "computations_reachable": 5,
//         "instructions": 92, "instructions_reachable": 92,
//         "element_types": ["f32", "pred", "s64"],
//         "custom_call_targets": {"AwsNeuronTransferWithStaticRing": 4},
//         "input_output_aliases": 4,
//         "elided_constants": false,           // constant values were not in the text
//         "supported": true,                   // null when not checked
//         "unsupported_ops": [{"op": "all-reduce", "instructions": 1, "reason": "..."}],   // sorted by op
//                                              // ("op": "" with 0 instructions: see "host" above)
//         // verbosity 2:
//         "opcodes": {"add": 7, ...}, "opcodes_reachable": {"add": 7, ...},
//         "parameters": [{"number": 0, "name": "p0.1", "shape": "f32[]"}, ...],
//         "result_shape": "(f32[10,784]{1,0}, ...)",
//         "outputs": ["f32[10,784]{1,0}", ...],
//         "supported_ops": ["add", "custom-call:AwsNeuronTransferWithStaticRing", ...],
//                                              // op keys reachable from the entry and not unsupported (when checked)
//         "unsupported_instructions": [{"op": "all-reduce", "computation": "...", "instruction": "all-reduce.105",
//             "reachable": true, "shape": "...", "operand_shapes": ["..."], "op_type": "...", "op_name": "...",
//             "source_file": "...", "source_line": 44}]
//       }, ...
//     ],
//     "errors": [{"source": "/abs/path/bad.hlo", "error": "<message naming the file>"}]
//   }
// Counts are numbers of instructions; shapes are XLA's text form.
//
// Exit status: 0 when every input was analysed (whether or not its ops are
// supported), 1 when some file could not be read or parsed (the others are
// still analysed and reported) or result.json cannot be written, 2 on a usage
// error. --command analyze: the training command's failure status (1..255)
// when it failed; the graphs it extracted before failing are still analysed.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "generator/cli.h"
#include "npc/hlo.pb.h"
#include "npc/hlo_analysis.h"

namespace CLI {
class App;
}

namespace npc::tool {

inline constexpr char kAnalysisFormat[] = "npc-analysis";
inline constexpr int kAnalysisVersion = 1;
inline constexpr char kDefaultAnalyzeOutput[] = "model_analysis_result";
inline constexpr char kAnalysisResultFile[] = "result.json";
inline constexpr char kTrialCacheDir[] = "trial-cache";

// What a backend says about the ops of one module.
struct BackendSupport {
  std::string backend;                             // "host", "neuronx-cc"
  bool checked = false;                            // false: support unknown (see note)
  std::string note;                                // why it was not checked
  std::map<std::string, std::string> unsupported;  // op key -> reason (when checked)
};

// The backend's verdict on `module`. `backend` is "host", "neuronx-cc" or
// "neuron" (= neuronx-cc); another name is not checked (note says so).
BackendSupport CheckBackendSupport(const std::string& backend, const xla::HloModuleProto& module);

struct AnalyzedModule {
  std::string source;  // the file read (absolute)
  std::string entry;   // "<compiler dir>/MODULE_<key>+<hash>" for a cache entry's HLO; else empty
  std::string graph_key;
  hlo::ModuleAnalysis analysis;
  BackendSupport support;
  std::vector<hlo::InstructionInfo> unsupported_instructions;  // filled at verbosity 2
};

struct AnalysisError {
  std::string source;
  std::string message;  // names the file
};

struct AnalysisReport {
  std::string backend;
  int verbosity = 1;
  std::vector<std::string> inputs;
  std::optional<std::vector<std::string>> command;  // --command analyze
  int command_exit_status = 0;
  std::vector<AnalyzedModule> modules;
  std::vector<AnalysisError> errors;
};

// Reads and analyses every HLO file named by `paths` (files and folders, see
// above) into `report` (modules and errors; one bad path or file does not
// stop the others).
void AnalyzePaths(const std::vector<std::string>& paths, AnalysisReport* report);

// result.json's document (schema above).
nlohmann::ordered_json AnalysisReportToJson(const AnalysisReport& report);

// The human-readable summary printed on stdout.
std::string AnalysisReportToText(const AnalysisReport& report);

// --analyze-output and --analyze-verbosity on `app`.
void AddAnalyzeOptions(CLI::App& app, ToolOptions& options);

// `npc analyze` (files: options.command) and `neuron_parallel_compile
// --command analyze` (options.analyze_trial; training command: options.command).
int RunAnalyze(const ToolOptions& options);

}  // namespace npc::tool
