// npc's runtime API: the C++ equivalent of Neuron's compile hook.
//
// Given an HLO module and compiler flags, return an executable:
//  - hit:  the cache entry is DONE: load its artifact;
//  - miss: compile now (JIT), store the artifact in the cache, load it;
//  - trial run (NEURON_EXTRACT_GRAPHS_ONLY=1): write the HLO and
//    compile_flags.json into the entry, log "Extracting graphs (...)", and
//    return a placeholder executable whose outputs are zeros of the right shapes.
// Log lines use Neuron's format (see npc/log.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "npc/cache.h"
#include "npc/compiler.h"
#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto
#include "npc/result.h"
#include "npc/tensor.h"

namespace npc {

struct RuntimeOptions {
  std::string cache_url;                    // cache root (local path or URL)
  std::vector<std::string> compiler_flags;  // flags for compile_flags.json and the compiler
  bool extract_graphs_only = false;         // NEURON_EXTRACT_GRAPHS_ONLY
  bool retry_failed_compilation = false;    // NEURON_CC_FLAGS --retry_failed_compilation
  bool no_cache = false;                    // NEURON_CC_FLAGS --no_cache: compile, never read or write the cache
  CompilerOptions compiler;
};

// Reads NEURON_CC_FLAGS, NEURON_COMPILE_CACHE_URL, NEURON_EXTRACT_GRAPHS_ONLY,
// NPC_BACKEND, NPC_COMPILER, NPC_COMPILER_VERSION. Errors: malformed NEURON_CC_FLAGS.
Result<RuntimeOptions> RuntimeOptionsFromEnvironment();

// An array's element type and dimensions (row-major).
struct TensorSpec {
  xla::PrimitiveType type = xla::PRIMITIVE_TYPE_INVALID;
  std::vector<int64_t> dims;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Entry parameters, in parameter_number order (tuple parameters flattened).
  virtual const std::vector<TensorSpec>& parameters() const = 0;
  // Leaves of the entry result, depth-first (a non-tuple result is one output).
  virtual const std::vector<TensorSpec>& outputs() const = 0;
  // Runs on host buffers. Errors: argument count, types or shapes that do not
  // match parameters(); an artifact that cannot run on this host.
  virtual Result<std::vector<Tensor>> Run(const std::vector<Tensor>& arguments) const = 0;
  // true for the placeholder of a trial run (outputs are zeros).
  virtual bool is_placeholder() const { return false; }
};

struct CacheCounters {
  int64_t hits = 0;             // artifact found in the cache
  int64_t misses = 0;           // not in the cache (compiled now, or extracted in a trial run)
  int64_t compiles = 0;         // successful JIT compiles
  int64_t failed_compiles = 0;  // JIT compiles that failed (or cached failures met)
  int64_t extracted = 0;        // graphs written for ahead-of-time compilation
};

class Runtime {
 public:
  // Errors: the cache URL cannot be opened; an unknown backend.
  static Result<std::unique_ptr<Runtime>> Create(RuntimeOptions options);
  static Result<std::unique_ptr<Runtime>> FromEnvironment();
  ~Runtime();

  // The executable for `module` compiled with options().compiler_flags.
  // `graph_key`: the caller's key (torch-xla passes a uint64 decimal); empty
  // means CanonicalGraphKey(module). Thread-safe.
  // Errors: an invalid module, a compile failure (message includes the
  // compiler output and the path of model.log), a cached failure, I/O errors.
  // A hit checks the artifact against model.done (size and SHA-256; an empty
  // model.done, libneuronxla's, has nothing to check) before loading it, and
  // neither validates nor re-serializes the module. A damaged artifact is
  // never loaded: a warning names the entry and what differs, and it is a
  // miss (compiled again, the artifact replaced). A miss on a local cache
  // this process cannot write is compiled in a private scratch directory
  // (warning) and not stored.
  // Not an error: a module compiled here whose artifact a remote store (S3)
  // could not take; CompileEntry keeps it (KeptArtifactPath in npc/compiler.h)
  // and it is loaded from there, with a warning; the next compile of the
  // entry uploads it.
  Result<std::shared_ptr<Executable>> GetExecutable(const xla::HloModuleProto& module,
                                                    const std::string& graph_key = "");
  // The same for a serialized module (any format npc::hlo::ParseHloModule reads).
  Result<std::shared_ptr<Executable>> GetExecutableFromBytes(std::string_view hlo_bytes,
                                                             const std::string& graph_key = "");

  CacheCounters counters() const;
  const RuntimeOptions& options() const { return options_; }
  // "<cache url>/<compiler dir>"
  std::string compiler_cache_path() const;

 private:
  Runtime() = default;
  Result<std::shared_ptr<Executable>> Lookup(const xla::HloModuleProto& module, const std::string& graph_key,
                                             bool validated);
  // The entry's artifact checked against model.done (size and SHA-256) and
  // loaded; nullptr with *damage set when it does not match.
  Result<std::shared_ptr<Executable>> LoadCheckedArtifact(const cache::EntryRef& entry, const xla::HloModuleProto& module,
                                                          std::string* damage);
  Result<std::shared_ptr<Executable>> LoadArtifactFile(const std::string& path, const std::string& shown,
                                                       const xla::HloModuleProto& module) const;
  Result<std::shared_ptr<Executable>> CompileMiss(const xla::HloModuleProto& module, const cache::EntryRef& entry);
  Result<std::shared_ptr<Executable>> CompileInScratch(const xla::HloModuleProto& module, const cache::EntryRef& entry);
  void Bump(int64_t CacheCounters::*counter);
  RuntimeOptions options_;
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<Compiler> compiler_;
  std::string compiler_dir_;
  std::string flags_json_;
  std::string flags_hash_;
  std::string scratch_dir_;  // --no_cache: a private cache removed with the runtime
  mutable std::mutex mu_;
  CacheCounters counters_;
};

}  // namespace npc
