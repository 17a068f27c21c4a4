# The compile step of npc_precompile_trial() / npc_precompile_hlo(), run at
# build time as `cmake -D...=... -P NpcPrecompileDriver.cmake`:
#   npc generate <options>      build.ninja with one edge per graph to compile
#   ninja -C <build dir>        compiles them in parallel (nothing when nothing is new)
# Variables (all set by NpcPrecompile.cmake; empty means "not given"):
#   NPC_TOOL NPC_NINJA NPC_CACHE_DIR NPC_BUILD_DIR NPC_BACKEND NPC_COMPILER
#   NPC_FLAGS (NEURON_CC_FLAGS text) NPC_JOBS NPC_MEMORY_PER_COMPILE (bytes, K/M/G)
#   NPC_MANIFEST NPC_OFFLINE
cmake_minimum_required(VERSION 3.20)

foreach(var NPC_TOOL NPC_NINJA NPC_CACHE_DIR NPC_BUILD_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "NpcPrecompileDriver.cmake: ${var} is not set")
  endif()
endforeach()

# Programs run from here see exactly the project's compiler flags, not the
# caller's NEURON_CC_FLAGS (which could name another cache).
set(ENV{NEURON_CC_FLAGS} "${NPC_FLAGS}")

set(jobs "${NPC_JOBS}")
if(NPC_MEMORY_PER_COMPILE)
  if(NOT NPC_MEMORY_PER_COMPILE MATCHES "^([0-9]+)([KMG]?)$")
    message(FATAL_ERROR "npc: MEMORY_PER_COMPILE '${NPC_MEMORY_PER_COMPILE}' is not bytes[K|M|G]")
  endif()
  set(per_compile_kib "${CMAKE_MATCH_1}")
  if(CMAKE_MATCH_2 STREQUAL "")
    math(EXPR per_compile_kib "(${per_compile_kib} + 1023) / 1024")
  elseif(CMAKE_MATCH_2 STREQUAL "M")
    math(EXPR per_compile_kib "${per_compile_kib} * 1024")
  elseif(CMAKE_MATCH_2 STREQUAL "G")
    math(EXPR per_compile_kib "${per_compile_kib} * 1024 * 1024")
  endif()
  set(mem_line "")
  if(EXISTS /proc/meminfo)
    file(STRINGS /proc/meminfo mem_line REGEX "^MemAvailable:")
  endif()
  if(mem_line MATCHES "MemAvailable:[ \t]*([0-9]+)[ \t]*kB" AND per_compile_kib GREATER 0)
    math(EXPR by_memory "${CMAKE_MATCH_1} / ${per_compile_kib}")
    if(by_memory LESS 1)
      set(by_memory 1)
    endif()
    if(NOT jobs OR by_memory LESS jobs)
      set(jobs ${by_memory})
    endif()
  else()
    message(STATUS "npc: available memory unknown; MEMORY_PER_COMPILE not applied")
  endif()
endif()

set(args --cache_dir "${NPC_CACHE_DIR}" --build_dir "${NPC_BUILD_DIR}")
if(NPC_BACKEND)
  list(APPEND args --backend "${NPC_BACKEND}")
endif()
if(NPC_COMPILER)
  list(APPEND args --compiler "${NPC_COMPILER}")
endif()
if(jobs)
  list(APPEND args --num_parallel "${jobs}")
endif()
if(NPC_MANIFEST)
  if(EXISTS "${NPC_MANIFEST}")
    list(APPEND args --manifest "${NPC_MANIFEST}")
    if(NPC_OFFLINE)
      list(APPEND args --offline)
    endif()
  elseif(NPC_OFFLINE)
    message(FATAL_ERROR "npc: the manifest ${NPC_MANIFEST} does not exist; an OFFLINE build needs it "
                        "(write it with the <target>_manifest target or `npc manifest`)")
  else()
    message(WARNING "npc: the manifest ${NPC_MANIFEST} does not exist yet; compiling what the trial run "
                    "collected. Write it with the <target>_manifest target (or `npc manifest`).")
  endif()
endif()

execute_process(COMMAND "${NPC_TOOL}" generate ${args} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "npc: `npc generate` failed (${status}); see above")
endif()

set(ninja_args -C "${NPC_BUILD_DIR}" -k 0)
if(jobs)
  list(APPEND ninja_args -j "${jobs}")
endif()
execute_process(COMMAND "${NPC_NINJA}" ${ninja_args} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "npc: compiling graphs failed (ninja: ${status}); the compiler output is above and in each "
                      "failed entry's model.log (cache ${NPC_CACHE_DIR})")
endif()
