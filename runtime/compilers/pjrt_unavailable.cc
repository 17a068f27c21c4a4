// The pjrt backend of a build without the PJRT C API header (see runtime/pjrt/CMakeLists.txt).
#include "compilers/pjrt_compiler.h"

namespace npc {
namespace {
const char kNotBuilt[] =
    "the pjrt backend is not part of this build of npc: no PJRT C API header (pjrt_c_api.h) was found when it was "
    "configured (run scripts/install-deps.sh --pjrt, then reconfigure; or set NPC_PJRT_INCLUDE_DIR)";
}  // namespace

std::string PjrtDefaultPluginPath() { return ""; }

Result<std::unique_ptr<Compiler>> MakePjrtCompiler(const CompilerOptions&) { return MakeError(kNotBuilt); }

Result<std::shared_ptr<Executable>> LoadPjrtArtifact(Compiler&, const std::string& path, const xla::HloModuleProto&) {
  return MakeError("cannot run " + path + ": " + kNotBuilt);
}

Result<PjrtCompileOptions> PjrtCompileOptionsFromFlags(const std::vector<std::string>&) { return MakeError(kNotBuilt); }

}  // namespace npc
