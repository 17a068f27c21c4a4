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
  // "host-<gcc|clang>-<compiler version>-cg<code generator version>"
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
