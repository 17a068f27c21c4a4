// Command-line front ends of the generator (DESIGN.md sections 1 and 3).
//
//   neuron_parallel_compile [options] [--] <training command...>
//     --command all|collect-and-compile|collect|compile|clean|clear-locks|scan|analyze  (default all)
//   npc <verb> [options] [--] [training command...]
//     verbs: collect, compile, all, generate, scan, clean, clear-locks, compile-entry,
//            import, explain, manifest, verify, prune, analyze (files, not a command)
//
// Option parsing stops at the first word that is not an option (or value of
// one), or at "--": everything from there on is the training command, passed
// on untouched (`neuron_parallel_compile python train.py --lr 0.1` runs
// `python train.py --lr 0.1`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "npc/result.h"

namespace npc::tool {

struct ToolOptions {
  std::string verb = "all";            // collect, compile, all, generate, scan, clean, clear-locks, compile-entry
  std::string cache_dir;               // --cache_dir / --cache; empty: NEURON_CC_FLAGS, NEURON_COMPILE_CACHE_URL, default
  std::string build_dir;               // --build_dir; empty: DefaultBuildDir (commands.h)
  std::string backend;                 // --backend; empty: NPC_BACKEND, else "host"
  std::string compiler;                // --compiler; empty: NPC_COMPILER, else the backend's default
  std::string compiler_dir;            // --compiler_dir; empty: asked from the compiler
  std::optional<int> num_parallel;     // --num_parallel
  std::string log_level;               // --log_level
  bool retry_failed_compilation = false;
  bool json = false;                   // scan --json
  std::string entry;                   // compile-entry --entry <compiler dir>/MODULE_<key>+<hash>
  std::string stamp;                   // compile-entry --stamp <file>: written when the entry is DONE
  std::vector<std::string> command;    // the training command (import: the HLO files)
  // Reproducible builds and import (generator/manifest.h, generator/import.h).
  std::string manifest;                // --manifest <file>: manifest, verify; generate/compile exactly its entries
  bool offline = false;                // --offline: refuse network caches (with --manifest)
  std::string scratch_dir;             // verify --scratch_dir
  bool keep_going = false;             // import --keep_going: import what reads, report the rest
  std::optional<std::string> import_flags;  // import --flags '<compiler flags>': instead of NEURON_CC_FLAGS
  std::string prune_max_size;          // prune --max_size (e.g. "20G")
  std::string prune_max_age;           // prune --max_age (e.g. "30d")
  bool prune_dry_run = false;          // prune --dry_run
  // Op analysis (generator/analyze.h).
  std::string analyze_output = "model_analysis_result";  // --analyze-output: where result.json goes
  int analyze_verbosity = 1;           // --analyze-verbosity 1|2
  bool analyze_trial = false;          // neuron_parallel_compile --command analyze: command is a training command
};

// What parsing decided: run `options`, or exit now with `exit_status` after
// printing `message` (help text to stdout when exit_status is 0, else an
// error to stderr).
struct ParsedCommandLine {
  ToolOptions options;
  bool exit_now = false;
  int exit_status = 0;
  std::string message;
};

// argv[0] is the program name.
ParsedCommandLine ParseNeuronParallelCompileArgs(const std::vector<std::string>& argv);
ParsedCommandLine ParseNpcArgs(const std::vector<std::string>& argv);

// Runs a parsed command; returns the process exit status.
int RunTool(const ToolOptions& options);

// main() of the two executables.
int NeuronParallelCompileMain(int argc, char** argv);
int NpcMain(int argc, char** argv);

}  // namespace npc::tool
