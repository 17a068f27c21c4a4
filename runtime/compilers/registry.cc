// MakeCompiler and the compiler options from the environment.
#include <cstdlib>

#include "compilers/host_compiler.h"
#include "compilers/neuronx_cc.h"
#include "compilers/pjrt_compiler.h"

namespace npc {

CompilerOptions CompilerOptionsFromEnvironment() {
  CompilerOptions options;
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (!env("NPC_BACKEND").empty()) options.backend = env("NPC_BACKEND");
  options.program = env("NPC_COMPILER");
  options.version_override = env("NPC_COMPILER_VERSION");
  if (!env("NEURON_PLATFORM_TARGET_OVERRIDE").empty()) options.target = env("NEURON_PLATFORM_TARGET_OVERRIDE");
  return options;
}

Result<std::unique_ptr<Compiler>> MakeCompiler(const CompilerOptions& options) {
  if (options.backend == "host") return std::unique_ptr<Compiler>(new HostCompiler(options));
  if (options.backend == "neuronx-cc" || options.backend == "neuron") {
    return std::unique_ptr<Compiler>(new NeuronxCcCompiler(options));
  }
  if (options.backend == "pjrt") return MakePjrtCompiler(options);
  return MakeError("unknown compiler backend '" + options.backend + "' (known: host, neuronx-cc, pjrt)");
}

}  // namespace npc
