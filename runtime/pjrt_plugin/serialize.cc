// Serializing executables that libnpc_pjrt.so loaded from the cache (see serialize.h).
#include "pjrt_plugin/serialize.h"

#include <mutex>
#include <unordered_map>

namespace npc::pjrt_plugin {
namespace {

using Bytes = std::shared_ptr<const std::string>;

const PJRT_Api* g_inner = nullptr;
std::mutex g_mu;
// Never destroyed: frameworks may destroy executables during static destruction.
auto* g_loaded = new std::unordered_map<const void*, Bytes>();
auto* g_executables = new std::unordered_map<const void*, Bytes>();

Bytes Find(const std::unordered_map<const void*, Bytes>& map, const void* key) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = map.find(key);
  return it == map.end() ? nullptr : it->second;
}

void Forget(std::unordered_map<const void*, Bytes>& map, const void* key) {
  std::lock_guard<std::mutex> lock(g_mu);
  map.erase(key);
}

PJRT_Error* GetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  PJRT_Error* error = g_inner->PJRT_LoadedExecutable_GetExecutable(args);
  if (error) return error;
  if (Bytes bytes = Find(*g_loaded, args->loaded_executable)) {
    std::lock_guard<std::mutex> lock(g_mu);
    (*g_executables)[args->executable] = bytes;
  }
  return nullptr;
}

void DeleteSerialized(PJRT_SerializedExecutable* serialized) { delete reinterpret_cast<Bytes*>(serialized); }

PJRT_Error* Serialize(PJRT_Executable_Serialize_Args* args) {
  Bytes bytes = Find(*g_executables, args->executable);
  if (!bytes) return g_inner->PJRT_Executable_Serialize(args);
  auto* holder = new Bytes(bytes);
  args->serialized_bytes = (*holder)->data();
  args->serialized_bytes_size = (*holder)->size();
  args->serialized_executable = reinterpret_cast<PJRT_SerializedExecutable*>(holder);
  args->serialized_executable_deleter = DeleteSerialized;
  return nullptr;
}

PJRT_Error* ExecutableDestroy(PJRT_Executable_Destroy_Args* args) {
  Forget(*g_executables, args->executable);
  return g_inner->PJRT_Executable_Destroy(args);
}

PJRT_Error* LoadedExecutableDestroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  Forget(*g_loaded, args->executable);
  return g_inner->PJRT_LoadedExecutable_Destroy(args);
}

}  // namespace

void RememberArtifact(PJRT_LoadedExecutable* loaded, std::shared_ptr<const std::string> artifact) {
  std::lock_guard<std::mutex> lock(g_mu);
  (*g_loaded)[loaded] = std::move(artifact);
}

void InstallSerializeHooks(PJRT_Api& api, const PJRT_Api* inner) {
  g_inner = inner;
  api.PJRT_LoadedExecutable_GetExecutable = GetExecutable;
  api.PJRT_Executable_Serialize = Serialize;
  api.PJRT_Executable_Destroy = ExecutableDestroy;
  api.PJRT_LoadedExecutable_Destroy = LoadedExecutableDestroy;
}

}  // namespace npc::pjrt_plugin
