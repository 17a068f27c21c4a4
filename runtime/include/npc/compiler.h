// Compiler drivers and the compile of one cache entry.
//
// Backends:
//  - "host" (the embedded default): HLO -> C++ -> the system C++ compiler ->
//    a shared object `model.so` that npc's runtime loads and runs on the CPU.
//  - "neuronx-cc": AWS Neuron's compiler, run as
//      neuronx-cc compile --framework=XLA <hlo> --output <neff> --target=<t> <flags> --verbose=35
//    in a private work directory; artifact `model.neff`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "npc/cache.h"
#include "npc/result.h"

namespace npc {

struct CompilerOptions {
  // "host" or "neuronx-cc". Environment: NPC_BACKEND.
  std::string backend = "host";
  // The compiler program: the C++ compiler for "host" (default: $CXX, else the
  // compiler npc was built with), the neuronx-cc executable for "neuronx-cc"
  // (default: `neuronx-cc` in PATH). Environment: NPC_COMPILER.
  std::string program;
  // Overrides the version part of the compiler directory (e.g. "2.16.372.0+4a9b2326"
  // gives "neuronxcc-2.16.372.0+4a9b2326") without running the compiler.
  // Environment: NPC_COMPILER_VERSION.
  std::string version_override;
  // neuronx-cc --target, unless the flags already name one. Environment: NEURON_PLATFORM_TARGET_OVERRIDE.
  std::string target = "trn1";
};

// CompilerOptions with the environment variables above applied.
CompilerOptions CompilerOptionsFromEnvironment();

struct CompileJob {
  std::string hlo_path;               // input: the entry's HLO file (any format ReadHloModuleFile reads)
  std::vector<std::string> flags;     // compiler flags (compile_flags.json)
  std::string work_dir;               // private, empty, writable directory for this compile
  std::string artifact_path;          // where the artifact must be written (inside work_dir)
};

struct CompileOutcome {
  bool ok = false;
  int exit_status = 0;                // the compiler's exit status (or 1 for an in-process failure)
  std::string command;                // the command line run, shell-quoted
  std::string output;                 // compiler output (stdout+stderr) and npc's own messages
  double seconds = 0;                 // wall time
  int64_t peak_rss_bytes = 0;         // peak resident memory of the compiler process
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual std::string backend() const = 0;
  // The compiler directory under the cache root ("neuronxcc-<version>", "host-...").
  // Errors: the compiler cannot be run to ask its version.
  virtual Result<std::string> CacheDirectoryName() = 0;
  // The artifact file name inside an entry ("model.neff", "model.so").
  virtual std::string ArtifactName() const = 0;
  // Estimated peak memory of one compile, in bytes, before any measurement
  // (neuronx-cc: 64 GiB as neuron_parallel_compile assumes).
  virtual int64_t DefaultMemoryPerCompileBytes() const = 0;
  // Compiles; never throws. The artifact appears at job.artifact_path only when ok.
  virtual CompileOutcome Compile(const CompileJob& job) = 0;
};

// Errors: unknown backend name.
Result<std::unique_ptr<Compiler>> MakeCompiler(const CompilerOptions& options);

// ---- compiling one cache entry ------------------------------------------------

struct EntryCompileOptions {
  int max_retries = 0;                 // extra attempts after a failure (NEURON_PARALLEL_COMPILE_MAX_RETRIES)
  bool retry_failed_compilation = false;  // recompile a cached failure
  bool wait_for_lock = false;          // wait while another process compiles the entry (else report kLocked)
  double lock_wait_seconds = 3600;     // how long wait_for_lock waits at most
};

struct EntryCompileResult {
  enum class Status {
    kCompiled,       // compiled now; artifact and model.done written
    kAlreadyDone,    // found DONE (maybe after waiting for another process)
    kFailed,         // compiled now and failed; model.log written
    kCachedFailure,  // found FAILED and not retried
    kLocked,         // another live process holds the lock (wait_for_lock false)
    kNoHlo,          // the entry has no HLO file
    kInterrupted,    // a signal arrived (see InstallInterruptForwarding in compilers/process.h): the
                     // compile was stopped (or not started); nothing written, the lock released
  };
  Status status = Status::kFailed;
  int attempts = 0;                    // compile attempts made
  double compile_seconds = 0;          // total compile wall time of all attempts
  int64_t peak_rss_bytes = 0;
  std::string log;                     // model.log text on failure
  bool uploaded_kept_artifact = false;  // kCompiled without compiling: an artifact kept by an earlier run was uploaded
  std::string damage;                  // non-empty: the entry was DAMAGED (why); model.done was removed and it was compiled again
};
std::string_view EntryCompileStatusName(EntryCompileResult::Status status);

// Where CompileEntry keeps a compiled artifact that it could not upload to the
// remote store `store_url`: <cache::DefaultLocalCopyRoot(store_url)>/<entry
// dir>/<artifact name>.not-uploaded.
std::string KeptArtifactPath(const std::string& store_url, const cache::EntryRef& entry,
                             const std::string& artifact_name);

// Locks the entry (another tool's held `*.lock` counts as locked too:
// waited for, never compiled over), re-checks its state (a cached failure
// found after waiting is reported, not compiled again), compiles with up to 1 + max_retries
// attempts in a private work directory inside the entry, moves the artifact
// in atomically and then writes model.done with its size and SHA-256
// (npc/cache.h); on failure writes model.log
// (command, exit status, compiler output) and removes nothing else. A kill at
// any point leaves no artifact or model.done visible and no lock blocking.
// Remote stores (S3): the compile runs in a local temporary directory; the
// artifact is moved to KeptArtifactPath, uploaded from there, and removed
// once model.done is written. When the upload of the artifact or of
// model.done fails (store unreachable, retries spent), or the process dies
// meanwhile, it stays there and the error says so; the next CompileEntry of
// that entry uploads it instead of compiling again (the entry names its
// graph, flags and compiler, so the artifact is the one it would compile),
// and one that finds the entry DONE removes it. Waiting for another
// process's lock polls every 0.1 s on a local store, every second on a
// remote one.
// A DONE entry's artifact is checked against model.done (size and SHA-256):
// a DAMAGED one is compiled again (a warning names the entry and what
// differs; model.done is removed first, then replaced by the new commit).
// Errors: store I/O failures (not compile failures, which are results).
Result<EntryCompileResult> CompileEntry(cache::Store& store, Compiler& compiler, const cache::EntryRef& entry,
                                        const EntryCompileOptions& options);

}  // namespace npc
