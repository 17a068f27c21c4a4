// The pjrt backend: XLA itself, through a PJRT C API plugin (a shared object
// exporting GetPjrtApi, e.g. XLA's CPU plugin from the xla-cpu-pjrt wheel, or
// the CUDA plugin of jax-cuda13-pjrt). Internal to npc; use npc::MakeCompiler.
//
// Plugin: $NPC_PJRT_PLUGIN, else NPC_COMPILER (CompilerOptions::program), else
// the one scripts/install-deps.sh --pjrt installed under the build directory
// (PjrtDefaultPluginPath()). Loaded once per process.
//
// Compile: the entry's HloModuleProto file, its bytes as stored, goes to
// PJRT_Client_Compile (format "hlo"; an entry's model.stablehlo.mlirbc,
// written by the PJRT plugin, goes as format "mlir") with a CompileOptionsProto
// (runtime/pjrt/compile_options.proto) built from the flags, then
// PJRT_Executable_Serialize; the artifact `model.pjrt` is the serialized
// executable. Flags with a meaning for XLA (PjrtCompileOptionsFromFlags):
//   --xla_<DebugOptions field>=<value>  that DebugOptions field (bool, integer,
//                                        float or string, as the value reads)
//   -O<n>, --optlevel=<n>, --optlevel <n> xla_backend_optimization_level = n
// Every other flag (neuronx-cc's --target, --model-type, ...) is part of the
// cache key only; the compile output lists them.
// Compiler directory: "pjrt-<platform>[-<platform version>]-api<major>.<minor>
// -shlo<StableHLO version>-<plugin fingerprint>" (e.g. XLA's CPU plugin of
// xla-cpu-pjrt 0.0.1: "pjrt-cpu-api0.81-shlo1.13.3-<8 hex>-x86_64-<8 hex>"; the platform
// version is left out when it only repeats the platform, as XLA CPU's "cpu"
// does). Plugins carry no build identity, so the fingerprint is the first 8 hex
// digits of the SHA-256 of the plugin file's size, first and last MiB: two
// plugin builds never share entries. For the "cpu" platform, "-<machine>-<8 hex
// digits of the SHA-256 of the CPU feature flags of /proc/cpuinfo>" follows:
// XLA compiles for the host's CPU features (its executables record them), so an
// artifact made on an AVX-512 host is never loaded on a host without.
// NPC_COMPILER_VERSION=<v> gives "pjrt-<v>".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "npc/compiler.h"
#include "npc/runtime.h"

namespace npc {

namespace pjrt {
class Client;
}

// The plugin installed by scripts/install-deps.sh --pjrt in npc's build tree
// (empty when npc was built without it).
std::string PjrtDefaultPluginPath();

// Errors: the pjrt backend is not part of this build (no PJRT C API header
// was found at configure time).
Result<std::unique_ptr<Compiler>> MakePjrtCompiler(const CompilerOptions& options);

// Loads a pjrt artifact (a serialized executable) for `module`, the module it
// was compiled from, with `compiler`'s plugin; one load per artifact file
// (path, size, modification time) per process. Errors: `compiler` is not the
// pjrt backend; the plugin cannot load the file; tuple-shaped parameters.
Result<std::shared_ptr<Executable>> LoadPjrtArtifact(Compiler& compiler, const std::string& path,
                                                     const xla::HloModuleProto& module);

struct PjrtCompileOptions {
  std::string serialized;             // the CompileOptionsProto
  std::vector<std::string> applied;   // flags mapped to compile options
  std::vector<std::string> ignored;   // flags without a meaning for XLA
};
// Errors: a malformed value of a flag it maps (e.g. -Ox).
Result<PjrtCompileOptions> PjrtCompileOptionsFromFlags(const std::vector<std::string>& flags);

}  // namespace npc
