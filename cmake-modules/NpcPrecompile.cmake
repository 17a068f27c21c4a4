# Precompiling XLA graphs with npc as part of a CMake build.
#
# Included by npc's package config (find_package(npc CONFIG REQUIRED)). Needs
# the imported target npc::npc and, for the compile step, `ninja` (the one
# CMake builds with under the Ninja generators, else the first in PATH; set
# NPC_NINJA_PROGRAM to choose). For single-configuration generators (Ninja,
# Unix Makefiles); tested with both.
#
# ---------------------------------------------------------------------------
# NPC_CACHE_DIR (cache variable, default <top build dir>/npc-cache)
#   The project's compile cache: where every function below puts and looks for
#   graphs unless given CACHE_DIR.
#
# npc_precompile_trial(<name>
#     COMMAND <program or executable target> [args...]
#     [DEPENDS <files or targets>...]     re-collect when these change (the program always counts)
#     [WORKING_DIRECTORY <dir>]           of the trial run (default: the current binary dir)
#     [ALL]                               part of the default build
#     <common options>)
#   A target <name> that precompiles the graphs of a trial run of COMMAND:
#    1. collect (a custom command with a stamp file, so it runs only when the
#       program, the listed inputs or npc change): `npc collect -- <command>`
#       runs the program with NEURON_EXTRACT_GRAPHS_ONLY=1; its graphs go into
#       the cache (outputs of a trial run are zeros: do not use them);
#    2. compile (every build; cheap when nothing is new): `npc generate` writes
#       <build dir>/build.ninja with one edge per graph that has no artifact
#       yet, then `ninja -C <build dir>` compiles them in parallel, with
#       progress on the terminal. Only new or changed graphs compile.
#   An executable target as the COMMAND's first word is replaced by its path
#   and depended on.
#
# npc_precompile_hlo(<name>
#     FILES <hlo files>...                serialized HloModuleProto / HloProto (optionally gzip), or HLO text
#     [ALL]
#     <common options>)
#   A target <name> that imports HLO files kept in the project into the cache
#   (`npc import`, again only when a file changes) and compiles them as above.
#
# Common options:
#     [CACHE_DIR <dir>]                   default ${NPC_CACHE_DIR}
#     [BUILD_DIR <dir>]                   the sub-build (build.ninja, logs); default <binary dir>/npc/<name>
#     [BACKEND host|neuronx-cc]           default: NPC_BACKEND at build time, else host
#     [COMPILER <program>]                the backend's compiler program (NPC_COMPILER)
#     [FLAGS <compiler flags>...]         the graphs' compiler flags: they become NEURON_CC_FLAGS of the
#                                         trial run and are part of every cache key (pass the same FLAGS
#                                         to npc_link_runtime so the program's real runs find the graphs)
#     [JOBS <n>]                          most compiles at once
#     [MEMORY_PER_COMPILE <bytes>[K|M|G]] compiles at once <= MemAvailable at build time / this
#     [MANIFEST <file> [OFFLINE]]         build exactly the entries of this manifest (lock file, written by
#                                         the target <name>_manifest / `npc manifest`): a graph of the trial
#                                         run or an HLO file that differs from it stops the build with an
#                                         error naming the entry and file; OFFLINE refuses network caches
#   With MANIFEST, a target <name>_manifest is also made: it (re)writes the
#   manifest from the cache after the graphs are compiled.
#
# npc_link_runtime(<target>
#     [CACHE_DIR <dir>] [FLAGS <compiler flags>...] [BACKEND <backend>] [COMPILER <program>])
#   Links <target> with npc::runtime and points it at the project's cache,
#   without environment variables: compile definitions
#     NPC_DEFAULT_CACHE_URL="<cache dir>"   NPC_DEFAULT_CC_FLAGS="<flags>"
#     NPC_DEFAULT_BACKEND="<backend>"       NPC_DEFAULT_COMPILER="<program>"   (the last two when given)
#   and the header <npc_project_cache.h>, whose npc_project::RuntimeOptions() /
#   npc_project::CreateRuntime() are npc::RuntimeOptionsFromEnvironment() /
#   npc::Runtime::FromEnvironment() with those defaults for whatever the
#   environment leaves unset (NEURON_COMPILE_CACHE_URL / --cache_dir in
#   NEURON_CC_FLAGS, NEURON_CC_FLAGS, NPC_BACKEND, NPC_COMPILER). A trial run
#   under `npc collect` still goes to the cache npc names.
# ---------------------------------------------------------------------------
include_guard(GLOBAL)

set(_NPC_PACKAGE_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(NPC_CACHE_DIR "${CMAKE_BINARY_DIR}/npc-cache" CACHE PATH
    "The project's npc compile cache (npc_precompile_* and npc_link_runtime)")

# `words` as one /bin/sh-style string, quoted where needed (npc splits
# NEURON_CC_FLAGS the way a POSIX shell would).
function(_npc_shell_join out_var)
  set(text "")
  foreach(word IN LISTS ARGN)
    if(word MATCHES "^[A-Za-z0-9_./=:+,@%-]+$")
      set(quoted "${word}")
    else()
      string(REPLACE "'" "'\\''" quoted "${word}")
      set(quoted "'${quoted}'")
    endif()
    if(text STREQUAL "")
      set(text "${quoted}")
    else()
      string(APPEND text " ${quoted}")
    endif()
  endforeach()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

function(_npc_find_ninja out_var)
  if(NPC_NINJA_PROGRAM)
    set(${out_var} "${NPC_NINJA_PROGRAM}" PARENT_SCOPE)
    return()
  endif()
  if(CMAKE_GENERATOR MATCHES "Ninja" AND CMAKE_MAKE_PROGRAM)
    set(${out_var} "${CMAKE_MAKE_PROGRAM}" PARENT_SCOPE)
    return()
  endif()
  find_program(NPC_NINJA_PROGRAM NAMES ninja ninja-build DOC "ninja, for npc's compile sub-builds")
  if(NOT NPC_NINJA_PROGRAM)
    message(FATAL_ERROR "npc: the compile step runs `ninja`, which is not in PATH; install it "
                        "(Debian: ninja-build) or set NPC_NINJA_PROGRAM")
  endif()
  set(${out_var} "${NPC_NINJA_PROGRAM}" PARENT_SCOPE)
endfunction()

function(_npc_check_target)
  if(NOT TARGET npc::npc)
    message(FATAL_ERROR "npc: the imported target npc::npc is missing; call find_package(npc CONFIG REQUIRED) first")
  endif()
endfunction()

# Shared by the precompile functions: parses the common options of
# `prefix`_* variables of the caller (cmake_parse_arguments output) and sets,
# in the caller's scope:
#   _npc_cache_dir _npc_build_dir _npc_flags_text _npc_tool_args _npc_driver
macro(_npc_common_setup fn name prefix)
  _npc_check_target()
  if(NOT "${${prefix}_UNPARSED_ARGUMENTS}" STREQUAL "")
    message(FATAL_ERROR "${fn}(${name}): unknown arguments: ${${prefix}_UNPARSED_ARGUMENTS}")
  endif()
  if(TARGET ${name})
    message(FATAL_ERROR "${fn}(${name}): a target named ${name} already exists")
  endif()
  set(_npc_cache_dir "${NPC_CACHE_DIR}")
  if(${prefix}_CACHE_DIR)
    set(_npc_cache_dir "${${prefix}_CACHE_DIR}")
  endif()
  get_filename_component(_npc_cache_dir "${_npc_cache_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(_npc_build_dir "${CMAKE_CURRENT_BINARY_DIR}/npc/${name}")
  if(${prefix}_BUILD_DIR)
    get_filename_component(_npc_build_dir "${${prefix}_BUILD_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  if(${prefix}_BACKEND AND NOT ${prefix}_BACKEND MATCHES "^(host|neuronx-cc|neuron)$")
    message(FATAL_ERROR "${fn}(${name}): BACKEND must be host or neuronx-cc, got '${${prefix}_BACKEND}'")
  endif()
  if(${prefix}_JOBS AND NOT ${prefix}_JOBS MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "${fn}(${name}): JOBS must be a positive integer, got '${${prefix}_JOBS}'")
  endif()
  if(${prefix}_MEMORY_PER_COMPILE AND NOT ${prefix}_MEMORY_PER_COMPILE MATCHES "^[1-9][0-9]*[KMG]?$")
    message(FATAL_ERROR "${fn}(${name}): MEMORY_PER_COMPILE must be bytes, optionally with K, M or G "
                        "(binary units), got '${${prefix}_MEMORY_PER_COMPILE}'")
  endif()
  if(${prefix}_OFFLINE AND NOT ${prefix}_MANIFEST)
    message(FATAL_ERROR "${fn}(${name}): OFFLINE needs MANIFEST <file>")
  endif()
  set(_npc_manifest "")
  if(${prefix}_MANIFEST)
    get_filename_component(_npc_manifest "${${prefix}_MANIFEST}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()
  _npc_shell_join(_npc_flags_text ${${prefix}_FLAGS})
  set(_npc_tool_args --cache_dir "${_npc_cache_dir}" --build_dir "${_npc_build_dir}")
  if(${prefix}_BACKEND)
    list(APPEND _npc_tool_args --backend "${${prefix}_BACKEND}")
  endif()
  if(${prefix}_COMPILER)
    list(APPEND _npc_tool_args --compiler "${${prefix}_COMPILER}")
  endif()
  _npc_find_ninja(_npc_ninja)
  set(_npc_driver
    "${CMAKE_COMMAND}"
    "-DNPC_TOOL=$<TARGET_FILE:npc::npc>"
    "-DNPC_NINJA=${_npc_ninja}"
    "-DNPC_CACHE_DIR=${_npc_cache_dir}"
    "-DNPC_BUILD_DIR=${_npc_build_dir}"
    "-DNPC_BACKEND=${${prefix}_BACKEND}"
    "-DNPC_COMPILER=${${prefix}_COMPILER}"
    "-DNPC_FLAGS=${_npc_flags_text}"
    "-DNPC_JOBS=${${prefix}_JOBS}"
    "-DNPC_MEMORY_PER_COMPILE=${${prefix}_MEMORY_PER_COMPILE}"
    "-DNPC_MANIFEST=${_npc_manifest}"
    "-DNPC_OFFLINE=${${prefix}_OFFLINE}"
    -P "${_NPC_PACKAGE_DIR}/NpcPrecompileDriver.cmake")
  file(MAKE_DIRECTORY "${_npc_build_dir}")
endmacro()

# The compile target (and <name>_manifest) on top of the collect/import stamp.
function(_npc_add_compile_target name all stamp what)
  add_custom_target(${name} ${all}
    COMMAND ${_npc_driver}
    DEPENDS "${stamp}"
    COMMENT "npc: compiling the graphs of ${what} (cache ${_npc_cache_dir})"
    USES_TERMINAL
    VERBATIM)
  set_target_properties(${name} PROPERTIES
    NPC_CACHE_DIR "${_npc_cache_dir}"
    NPC_BUILD_DIR "${_npc_build_dir}")
  if(_npc_manifest)
    # Rewrites the manifest from the cache once the graphs are compiled
    # (compiled here without the manifest, which is what is being replaced).
    add_custom_target(${name}_manifest
      COMMAND ${CMAKE_COMMAND} -E env "NEURON_CC_FLAGS=${_npc_flags_text}"
              "$<TARGET_FILE:npc::npc>" compile ${_npc_tool_args}
      COMMAND "$<TARGET_FILE:npc::npc>" manifest ${_npc_tool_args} --manifest "${_npc_manifest}"
      DEPENDS "${stamp}"
      COMMENT "npc: writing the manifest ${_npc_manifest}"
      USES_TERMINAL
      VERBATIM)
  endif()
endfunction()

function(npc_precompile_trial name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "ALL;OFFLINE"
    "CACHE_DIR;BUILD_DIR;BACKEND;COMPILER;JOBS;MEMORY_PER_COMPILE;WORKING_DIRECTORY;MANIFEST"
    "COMMAND;DEPENDS;FLAGS")
  _npc_common_setup(npc_precompile_trial ${name} arg)
  if(NOT arg_COMMAND)
    message(FATAL_ERROR "npc_precompile_trial(${name}): COMMAND <program> [args...] is required")
  endif()
  list(POP_FRONT arg_COMMAND program)
  set(depends ${arg_DEPENDS})
  if(TARGET "${program}")
    get_target_property(type "${program}" TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
      message(FATAL_ERROR "npc_precompile_trial(${name}): COMMAND names target ${program}, which is not an executable")
    endif()
    list(APPEND depends "${program}")
    set(program "$<TARGET_FILE:${program}>")
  endif()
  set(workdir "${CMAKE_CURRENT_BINARY_DIR}")
  if(arg_WORKING_DIRECTORY)
    set(workdir "${arg_WORKING_DIRECTORY}")
  endif()
  set(all "")
  if(arg_ALL)
    set(all ALL)
  endif()
  set(stamp "${_npc_build_dir}/collect.stamp")
  add_custom_command(OUTPUT "${stamp}"
    COMMAND ${CMAKE_COMMAND} -E env "NEURON_CC_FLAGS=${_npc_flags_text}"
            "$<TARGET_FILE:npc::npc>" collect ${_npc_tool_args} -- "${program}" ${arg_COMMAND}
    COMMAND ${CMAKE_COMMAND} -E touch "${stamp}"
    DEPENDS ${depends} "$<TARGET_FILE:npc::npc>"
    WORKING_DIRECTORY "${workdir}"
    COMMENT "npc: trial run of ${name} to collect its graphs"
    USES_TERMINAL
    VERBATIM)
  _npc_add_compile_target(${name} "${all}" "${stamp}" "${name}")
endfunction()

function(npc_precompile_hlo name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "ALL;OFFLINE"
    "CACHE_DIR;BUILD_DIR;BACKEND;COMPILER;JOBS;MEMORY_PER_COMPILE;MANIFEST"
    "FILES;FLAGS")
  _npc_common_setup(npc_precompile_hlo ${name} arg)
  if(NOT arg_FILES)
    message(FATAL_ERROR "npc_precompile_hlo(${name}): FILES <hlo files>... is required")
  endif()
  set(files "")
  foreach(file IN LISTS arg_FILES)
    get_filename_component(file "${file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND files "${file}")
  endforeach()
  set(all "")
  if(arg_ALL)
    set(all ALL)
  endif()
  set(stamp "${_npc_build_dir}/import.stamp")
  add_custom_command(OUTPUT "${stamp}"
    COMMAND ${CMAKE_COMMAND} -E env "NEURON_CC_FLAGS=${_npc_flags_text}"
            "$<TARGET_FILE:npc::npc>" import ${_npc_tool_args} -- ${files}
    COMMAND ${CMAKE_COMMAND} -E touch "${stamp}"
    DEPENDS ${files} "$<TARGET_FILE:npc::npc>"
    COMMENT "npc: importing the HLO files of ${name}"
    USES_TERMINAL
    VERBATIM)
  _npc_add_compile_target(${name} "${all}" "${stamp}" "${name}")
endfunction()

function(npc_link_runtime target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "CACHE_DIR;BACKEND;COMPILER" "FLAGS")
  _npc_check_target()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "npc_link_runtime(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "npc_link_runtime(${target}): no such target")
  endif()
  set(cache_dir "${NPC_CACHE_DIR}")
  if(arg_CACHE_DIR)
    set(cache_dir "${arg_CACHE_DIR}")
  endif()
  if(NOT cache_dir MATCHES "^[a-zA-Z][a-zA-Z0-9+.-]*://")
    get_filename_component(cache_dir "${cache_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  _npc_shell_join(flags_text ${arg_FLAGS})
  target_link_libraries(${target} PRIVATE npc::runtime)
  target_compile_definitions(${target} PRIVATE
    "NPC_DEFAULT_CACHE_URL=\"${cache_dir}\""
    "NPC_DEFAULT_CC_FLAGS=\"${flags_text}\"")
  if(arg_BACKEND)
    target_compile_definitions(${target} PRIVATE "NPC_DEFAULT_BACKEND=\"${arg_BACKEND}\"")
  endif()
  if(arg_COMPILER)
    target_compile_definitions(${target} PRIVATE "NPC_DEFAULT_COMPILER=\"${arg_COMPILER}\"")
  endif()
  target_include_directories(${target} PRIVATE "${_NPC_PACKAGE_DIR}/include")
  set_target_properties(${target} PROPERTIES NPC_CACHE_DIR "${cache_dir}")
endfunction()
