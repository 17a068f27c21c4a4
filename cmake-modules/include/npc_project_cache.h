// npc_project_cache.h: runtime options for a program linked with
// npc_link_runtime() (npc's CMake package), so that it finds the project's
// precompiled graphs without environment variables.
//
// npc_link_runtime() defines, for the target:
//   NPC_DEFAULT_CACHE_URL  the project's compile cache (a path or URL)
//   NPC_DEFAULT_CC_FLAGS   the compiler flags the graphs were precompiled with (NEURON_CC_FLAGS syntax)
//   NPC_DEFAULT_BACKEND    optional: "host" or "neuronx-cc"
//   NPC_DEFAULT_COMPILER   optional: the backend's compiler program
// RuntimeOptions() is npc::RuntimeOptionsFromEnvironment() with these as the
// defaults of what the environment leaves unset (or empty):
//   cache:          --cache_dir in NEURON_CC_FLAGS, else NEURON_COMPILE_CACHE_URL, else NPC_DEFAULT_CACHE_URL
//   compiler flags: NEURON_CC_FLAGS, else NPC_DEFAULT_CC_FLAGS
//   backend:        NPC_BACKEND, else NPC_DEFAULT_BACKEND, else host
//   compiler:       NPC_COMPILER, else NPC_DEFAULT_COMPILER, else the backend's default
// So a trial run under `npc collect` (which sets NEURON_COMPILE_CACHE_URL)
// still writes where npc says, and a plain run reads the project's cache.
//
//   #include <npc_project_cache.h>
//   auto runtime = npc_project::CreateRuntime();
//   if (!runtime) { std::cerr << runtime.error().message << "\n"; return 1; }
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "npc/cache.h"
#include "npc/result.h"
#include "npc/runtime.h"

namespace npc_project {

namespace detail {
inline bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}
}  // namespace detail

inline npc::Result<npc::RuntimeOptions> RuntimeOptions() {
  auto options = npc::RuntimeOptionsFromEnvironment();
  if (!options) return options;
#ifdef NPC_DEFAULT_CC_FLAGS
  if (!detail::EnvSet("NEURON_CC_FLAGS")) {
    auto flags = npc::cache::ParseNeuronCcFlags(NPC_DEFAULT_CC_FLAGS);
    if (!flags) return npc::MakeError("NPC_DEFAULT_CC_FLAGS: " + flags.error().message);
    options->compiler_flags = flags->compiler_flags;
    options->retry_failed_compilation = flags->retry_failed_compilation;
    options->no_cache = flags->no_cache;
  }
#endif
#ifdef NPC_DEFAULT_CACHE_URL
  bool cache_from_flags = false;
  if (detail::EnvSet("NEURON_CC_FLAGS")) {
    auto flags = npc::cache::ParseNeuronCcFlags(std::getenv("NEURON_CC_FLAGS"));
    cache_from_flags = flags && flags->cache_dir && !flags->cache_dir->empty();
  }
  if (!cache_from_flags && !detail::EnvSet("NEURON_COMPILE_CACHE_URL")) options->cache_url = NPC_DEFAULT_CACHE_URL;
#endif
#ifdef NPC_DEFAULT_BACKEND
  if (!detail::EnvSet("NPC_BACKEND")) options->compiler.backend = NPC_DEFAULT_BACKEND;
#endif
#ifdef NPC_DEFAULT_COMPILER
  if (!detail::EnvSet("NPC_COMPILER")) options->compiler.program = NPC_DEFAULT_COMPILER;
#endif
  return options;
}

inline npc::Result<std::unique_ptr<npc::Runtime>> CreateRuntime() {
  auto options = RuntimeOptions();
  if (!options) return options.error();
  return npc::Runtime::Create(std::move(*options));
}

}  // namespace npc_project
