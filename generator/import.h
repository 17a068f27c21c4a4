// `npc import`: HLO files checked into a project become cache entries to
// compile, exactly as if a trial run had extracted them (DESIGN.md section 2).
#pragma once

#include <string>
#include <vector>

#include "generator/cli.h"
#include "npc/cache.h"
#include "npc/result.h"

namespace npc::tool {

struct ImportedEntry {
  std::string source;    // the file given
  cache::EntryRef ref;
  bool created = false;  // false: the entry already had an HLO (left alone)
};

// Puts each HLO file (any format hlo::ReadHloModuleFile reads: HloModuleProto,
// HloProto, gzip of either, HLO text) into the cache as a TODO entry of
// `compiler_dir`: graph key hlo::CanonicalGraphKey, flags hash of
// cache::CompileFlagsJson(flags). The HLO is stored as a serialized
// HloModuleProto (deterministic serialization) in model.hlo_module.pb, with
// compile_flags.json beside it. Entries that already hold an HLO are left
// alone (created = false). All files are read and parsed before anything is
// written, and each entry is written atomically.
// `unreadable`: when null, a file that does not read or parse is an error and
// nothing is imported; otherwise such files are appended to it (one Error
// each, naming the file and, for HLO text, line and column) and the others
// are imported.
// Errors: a file that does not read or parse (naming it; see above), store I/O.
Result<std::vector<ImportedEntry>> ImportHloFiles(cache::Store& store, const std::string& compiler_dir,
                                                  const std::vector<std::string>& files,
                                                  const std::vector<std::string>& flags,
                                                  std::vector<Error>* unreadable = nullptr);

// The HLO files named by `paths`: a file is taken as given; a directory is
// walked recursively (sorted by path, hidden names skipped) for files named
// *.hlo, *.txt, *.pb or *.binpb, optionally followed by .gz (the names XLA's
// --xla_dump_to and torch-neuronx dumps use).
// Errors: a path that does not exist, a directory with no such file.
Result<std::vector<std::string>> ExpandHloPaths(const std::vector<std::string>& paths);

// The compiler flags of imported entries: those of `--flags '<text>'`
// (split as a shell would, like NEURON_CC_FLAGS) when given, else the
// compiler flags of NEURON_CC_FLAGS (its cache options left out).
// Errors: an unterminated quote; a cache option (--cache_dir, --no_cache,
// --retry_failed_compilation, ...) inside --flags, naming it.
Result<std::vector<std::string>> ImportCompilerFlags(const ToolOptions& options);

// `npc import [options] [--] <files or folders...>`: ExpandHloPaths, then
// ImportHloFiles into the compiler directory of the selected backend, with
// ImportCompilerFlags; prints one line per file and entry. Exit status 2
// for bad --flags.
// --keep_going imports what reads and reports the rest. 0 on success, 1 on
// error (or, with --keep_going, when some file was not imported), 2 when no
// file is given.
int RunImport(const ToolOptions& options, const std::vector<std::string>& files);

}  // namespace npc::tool
