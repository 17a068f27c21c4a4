// The neuronx-cc driver. Internal to npc; use npc::MakeCompiler.
#pragma once

#include <string>
#include <vector>

#include "npc/compiler.h"

namespace npc {

// The version in the output of `neuronx-cc --version` ("... version 2.16.372.0+4a9b2326").
Result<std::string> ParseNeuronxCcVersion(const std::string& version_output);

class NeuronxCcCompiler : public Compiler {
 public:
  explicit NeuronxCcCompiler(CompilerOptions options);
  std::string backend() const override { return "neuronx-cc"; }
  Result<std::string> CacheDirectoryName() override;
  std::string ArtifactName() const override { return "model.neff"; }
  int64_t DefaultMemoryPerCompileBytes() const override { return int64_t{64} << 30; }
  CompileOutcome Compile(const CompileJob& job) override;

  // `neuronx-cc compile --framework=XLA <hlo> --output <neff> --target=<t> <flags> --verbose=35`;
  // --target=<t> is left out when the flags name a target.
  std::vector<std::string> CommandLine(const CompileJob& job) const;

 private:
  CompilerOptions options_;
  std::string cached_dir_;
};

}  // namespace npc
