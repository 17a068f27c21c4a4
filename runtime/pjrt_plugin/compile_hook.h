// The compile hook of libnpc_pjrt.so: what the plugin does instead of the
// inner plugin's PJRT_Client_Compile (see plugin.cc for the API table).
//
// Program formats (PJRT_Program.format):
//   "hlo"  a serialized HloModuleProto (PyTorch/XLA): graph key =
//          npc::hlo::CanonicalGraphKey of the module; entry file model.hlo_module.pb.
//   "mlir" StableHLO bytecode (JAX): graph key = MlirProgramKey(bytes), the
//          first 8 bytes of the SHA-256 of the bytes as a decimal uint64 (the
//          bytes as sent, location information included: JAX's bytecode is
//          deterministic for one program, and stripping locations would need an
//          MLIR parser); entry file model.stablehlo.mlirbc.
//   anything else is forwarded to the inner plugin untouched (no cache).
// Flags hash: of the compiler flags of NEURON_CC_FLAGS, as npc's C++ runtime.
// The framework's CompileOptionsProto is not part of the key: the stored
// executable is compiled by `npc compile-entry` with npc's options (one
// device; the flags), which is what a single-device program needs.
//
//  - hit (entry DONE): PJRT_Executable_DeserializeAndLoad of the stored
//    model.pjrt with the framework's client; no compile.
//  - miss: the program and compile_flags.json go into the entry, CompileEntry
//    (the transaction of `npc compile-entry`) compiles it with the pjrt backend
//    (the same inner plugin), then the artifact is loaded as on a hit.
//  - trial run (NEURON_EXTRACT_GRAPHS_ONLY=1): a DONE entry is loaded as on a
//    hit; otherwise the program is stored as a TODO entry and the inner plugin
//    compiles it with the framework's options and XLA's cheapest settings
//    (xla_backend_optimization_level=0, xla_llvm_disable_expensive_passes=true):
//    outputs are right, only slower to compute, and the compile is cheaper.
//  - a cached failure (FAILED, no --retry_failed_compilation) is an error.
// Log lines as npc's C++ runtime writes them (npc/log.h); the counters
// (npc::CacheCounters) are logged at process exit as
//   "npc cache: hits=H misses=M compiles=C failed_compiles=F extracted=E".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "npc/result.h"
#include "pjrt_c_api.h"

namespace npc::pjrt_plugin {

// Decimal uint64 of the first 8 bytes (big-endian) of SHA-256(bytes).
std::string MlirProgramKey(std::string_view bytes);

// Replaces PJRT_Client_Compile. `inner` is the inner plugin's API table.
// Errors: every failure of the cache or a compile, as a message; the caller
// turns it into a PJRT_Error.
Result<PJRT_LoadedExecutable*> CompileThroughCache(const PJRT_Api* inner, const std::string& inner_path,
                                                   PJRT_Client_Compile_Args* args);

// Logs the counters (called once, at process exit).
void LogCounters();

}  // namespace npc::pjrt_plugin
