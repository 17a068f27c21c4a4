// The generator's commands: collect, generate, compile, scan, clean,
// clear-locks, and the per-edge compile-entry. Each returns the process exit
// status and logs in Neuron's format (npc/log.h).
#pragma once

#include <memory>
#include <string>

#include "generator/cli.h"
#include "generator/plan.h"
#include "npc/cache.h"
#include "npc/compiler.h"

namespace npc::tool {

// What every command needs: the store, the compiler and where things go.
struct ToolContext {
  std::string cache_url;              // resolved cache root (absolute for a local path)
  std::unique_ptr<cache::Store> store;
  CompilerOptions compiler_options;
  std::unique_ptr<Compiler> compiler;
  std::string compiler_dir;           // "<backend>-<version>" (relative to the root)
  std::string compiler_dir_path;      // absolute local path of it (or URL/path)
  std::string build_dir;              // absolute
  bool retry_failed_compilation = false;  // option or NEURON_CC_FLAGS
};

// Resolves the cache URL (option, else NEURON_CC_FLAGS --cache_dir, else
// NEURON_COMPILE_CACHE_URL, else the default), opens the store, makes the
// compiler, finds the compiler directory. Errors name what failed.
Result<ToolContext> OpenToolContext(const ToolOptions& options);

// The default build directory: <cache root>/<compiler dir>/.npc-build for a
// local cache; for a remote one (S3) <local copy root>/.npc-build/<compiler
// dir>, the local copy root being cache::DefaultLocalCopyRoot(url)
// ($NPC_LOCAL_CACHE_DIR, else ~/.cache/npc/<url>).
std::string DefaultBuildDir(const ToolContext& context);

// The build edge output of an entry of a remote store (S3), whose files are
// not local paths: <build dir>/stamps/<entry dir>.done, written by
// `compile-entry --stamp` once the entry is DONE. `npc generate` removes the
// stamps of the entries it plans to compile, so a stamp never outlives the
// cleaning of its entry.
std::string StampPath(const std::string& build_dir, const std::string& entry_dir);

// Where the `npc` executable is: next to this executable, else in PATH.
std::string FindNpcProgram();

struct GenerateOutcome {
  BuildPlan plan;
  int pool_depth = 1;
  std::string ninja_file;  // absolute path of build.ninja
};
// Scans, plans and writes <build dir>/build.ninja (atomically).
Result<GenerateOutcome> Generate(const ToolContext& context, const ToolOptions& options);

int RunCollect(const ToolOptions& options, bool then_generate);
int RunGenerate(const ToolOptions& options);
int RunCompile(const ToolOptions& options);
int RunAll(const ToolOptions& options);
int RunScan(const ToolOptions& options);
int RunClean(const ToolOptions& options);
int RunClearLocks(const ToolOptions& options);
// The per-edge command: compiles options.entry; 0 when compiled or already
// done, 1 otherwise (the compiler output tail and model.log path on stderr).
int RunCompileEntry(const ToolOptions& options);

}  // namespace npc::tool
