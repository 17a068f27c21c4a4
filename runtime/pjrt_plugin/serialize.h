// Serializing executables that libnpc_pjrt.so loaded from the cache.
//
// XLA's CPU plugin cannot serialize an executable it deserialized (the bytes
// it writes then fail at execution: "Function ... not found"), yet a framework
// may serialize any executable (JAX's own compilation cache does). So the
// plugin keeps the artifact bytes of every executable it loads and answers
// PJRT_Executable_Serialize of it (through PJRT_LoadedExecutable_GetExecutable)
// with those bytes: the executable as the cache holds it. Other executables
// go to the inner plugin. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "pjrt_c_api.h"

namespace npc::pjrt_plugin {

// `loaded` was deserialized from `artifact` (kept until its PJRT_LoadedExecutable_Destroy).
void RememberArtifact(PJRT_LoadedExecutable* loaded, std::shared_ptr<const std::string> artifact);

// Replaces GetExecutable, Serialize and the two Destroy functions of `api`
// (a copy of `inner`'s table) with the wrappers above.
void InstallSerializeHooks(PJRT_Api& api, const PJRT_Api* inner);

}  // namespace npc::pjrt_plugin
