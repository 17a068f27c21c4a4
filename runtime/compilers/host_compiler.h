// The host backend's compiler driver. Internal to npc; use npc::MakeCompiler.
#pragma once

#include <string>

#include "npc/compiler.h"

namespace npc {

// Lowers the HLO to C++ (runtime/host) and compiles it with the system C++
// compiler into `model.so`. Compiler flags from compile_flags.json are part of
// the cache key but do not change the host compile (reported in the output).
class HostCompiler : public Compiler {
 public:
  explicit HostCompiler(CompilerOptions options);
  std::string backend() const override { return "host"; }
  // "host-<gcc|clang>-<compiler version>-<target triple>-cg<code generator
  // version>", e.g. "host-gcc-12.2.0-x86_64-linux-gnu-cg3": the triple (from
  // `<compiler> -dumpmachine`) keeps x86-64 and aarch64 objects apart in a
  // shared (S3) cache. With CompilerOptions::version_override:
  // "host-<override>-<uname machine>-cg<N>", without running the compiler.
  // The compiler is run (three short processes) once per compiler binary:
  // the answer is memoized in the process and in
  // $XDG_CACHE_HOME/npc/compiler-ids.json (default ~/.cache), keyed by the
  // program string and each of its binaries' resolved path, size,
  // modification time and inode, so a hit does not pay for it. Trade-off: a
  // wrapper script whose underlying compiler is upgraded keeps its old
  // identity until the wrapper itself changes (or the memo is deleted).
  Result<std::string> CacheDirectoryName() override;
  std::string ArtifactName() const override { return "model.so"; }
  // Before any measurement: 1 GiB per compile.
  int64_t DefaultMemoryPerCompileBytes() const override { return int64_t{1} << 30; }
  CompileOutcome Compile(const CompileJob& job) override;

 private:
  CompilerOptions options_;
  std::string cached_dir_;
};

}  // namespace npc
