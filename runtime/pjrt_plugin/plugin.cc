// libnpc_pjrt.so: npc's runtime as a PJRT C API plugin (exports GetPjrtApi).
//
// The inner plugin: $NPC_PJRT_INNER_PLUGIN, else $NPC_PJRT_PLUGIN, else the
// pjrt backend's default plugin (npc::PjrtDefaultPluginPath()). GetPjrtApi
// loads it and returns a copy of its API table in which PJRT_Client_Compile is
// npc's compile hook (compile_hook.h); every other function is the inner
// plugin's, so all objects (clients, buffers, executables) are the inner
// plugin's. Executables loaded from the cache serialize to their artifact
// (serialize.h). The error functions are wrapped as well: they recognize the
// plugin's own errors (failures of the cache or of a compile through it) and
// forward the inner plugin's.
// Errors at load time (no inner plugin, another PJRT C API major version) are
// logged and GetPjrtApi returns null, which frameworks report as a plugin that
// failed to load.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "compilers/pjrt_compiler.h"
#include "npc/log.h"
#include "pjrt_c_api.h"
#include "pjrt_plugin/compile_hook.h"
#include "pjrt_plugin/serialize.h"

namespace {

struct OwnError {
  std::string message;
  PJRT_Error_Code code = PJRT_Error_Code_INTERNAL;
};

const PJRT_Api* g_inner = nullptr;
std::string g_inner_path;
PJRT_Api g_api;
std::mutex g_errors_mu;
std::unordered_set<const void*>* g_errors = new std::unordered_set<const void*>();

PJRT_Error* MakeOwnError(std::string message) {
  auto* error = new OwnError{"libnpc_pjrt: " + std::move(message)};
  std::lock_guard<std::mutex> lock(g_errors_mu);
  g_errors->insert(error);
  return reinterpret_cast<PJRT_Error*>(error);
}

const OwnError* FindOwnError(const PJRT_Error* error) {
  std::lock_guard<std::mutex> lock(g_errors_mu);
  return g_errors->count(error) ? reinterpret_cast<const OwnError*>(error) : nullptr;
}

void ErrorDestroy(PJRT_Error_Destroy_Args* args) {
  if (const OwnError* own = FindOwnError(args->error)) {
    {
      std::lock_guard<std::mutex> lock(g_errors_mu);
      g_errors->erase(own);
    }
    delete own;
    return;
  }
  g_inner->PJRT_Error_Destroy(args);
}

void ErrorMessage(PJRT_Error_Message_Args* args) {
  if (const OwnError* own = FindOwnError(args->error)) {
    args->message = own->message.data();
    args->message_size = own->message.size();
    return;
  }
  g_inner->PJRT_Error_Message(args);
}

PJRT_Error* ErrorGetCode(PJRT_Error_GetCode_Args* args) {
  if (const OwnError* own = FindOwnError(args->error)) {
    args->code = own->code;
    return nullptr;
  }
  return g_inner->PJRT_Error_GetCode(args);
}

PJRT_Error* ClientCompile(PJRT_Client_Compile_Args* args) {
  const std::string format(args->program->format, args->program->format_size);
  if (format != "hlo" && format != "mlir") return g_inner->PJRT_Client_Compile(args);
  auto exe = npc::pjrt_plugin::CompileThroughCache(g_inner, g_inner_path, args);
  if (!exe) {
    npc::log::Error(npc::log::kCache, exe.error().message);
    return MakeOwnError(exe.error().message);
  }
  args->executable = *exe;
  return nullptr;
}

struct CountersAtExit {
  ~CountersAtExit() { npc::pjrt_plugin::LogCounters(); }
};
CountersAtExit g_counters_at_exit;

std::string InnerPluginPath() {
  for (const char* name : {"NPC_PJRT_INNER_PLUGIN", "NPC_PJRT_PLUGIN"}) {
    const char* value = std::getenv(name);
    if (value && *value) return value;
  }
  return npc::PjrtDefaultPluginPath();
}

const PJRT_Api* LoadInner() {
  g_inner_path = InnerPluginPath();
  if (g_inner_path.empty()) {
    npc::log::Error(npc::log::kCache, "libnpc_pjrt: no inner PJRT plugin: set NPC_PJRT_INNER_PLUGIN");
    return nullptr;
  }
  void* handle = dlopen(g_inner_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    npc::log::Error(npc::log::kCache, "libnpc_pjrt: cannot load the inner plugin " + g_inner_path + ": " + dlerror());
    return nullptr;
  }
  using GetApi = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApi>(dlsym(handle, "GetPjrtApi"));
  const PJRT_Api* inner = get_api ? get_api() : nullptr;
  if (!inner) {
    npc::log::Error(npc::log::kCache, "libnpc_pjrt: " + g_inner_path + " is no PJRT plugin (no GetPjrtApi)");
    return nullptr;
  }
  if (inner->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    npc::log::Error(npc::log::kCache, "libnpc_pjrt: inner plugin " + g_inner_path + " has PJRT C API major version " +
                                          std::to_string(inner->pjrt_api_version.major_version) +
                                          ", libnpc_pjrt was built for " + std::to_string(PJRT_API_MAJOR));
    return nullptr;
  }
  return inner;
}

const PJRT_Api* MakeApi() {
  g_inner = LoadInner();
  if (!g_inner) return nullptr;
  // The fields both sides know: an older inner plugin's table is shorter, a newer one's
  // functions past this header's table are not offered.
  const size_t size = std::min(g_inner->struct_size, sizeof(PJRT_Api));
  std::memset(&g_api, 0, sizeof(g_api));
  std::memcpy(&g_api, g_inner, size);
  g_api.struct_size = size;
  if (g_inner->pjrt_api_version.minor_version > PJRT_API_MINOR) g_api.pjrt_api_version.minor_version = PJRT_API_MINOR;
  g_api.PJRT_Error_Destroy = ErrorDestroy;
  g_api.PJRT_Error_Message = ErrorMessage;
  g_api.PJRT_Error_GetCode = ErrorGetCode;
  g_api.PJRT_Client_Compile = ClientCompile;
  npc::pjrt_plugin::InstallSerializeHooks(g_api, g_inner);
  return &g_api;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static const PJRT_Api* api = MakeApi();
  return api;
}
