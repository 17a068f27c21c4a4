// build.ninja for one compiler directory of the cache: one build edge per
// HLO module to compile (DESIGN.md section 1, steps 2 and 3).
//
// The file is a pure function of its NinjaFileSpec: no timestamps, edges in
// the given order, so the same cache state gives byte-identical output.
//
// Shape of the output:
//   npc = <npc executable>                      (shell-quoted, ninja-escaped)
//   pool compile_pool
//     depth = <pool depth>
//   rule npc_generate   (generator = 1): re-scans the cache, rewrites build.ninja
//   rule npc_compile    (pool compile_pool, restat = 1): `npc compile-entry ...`
//   build build.ninja: npc_generate <compiler dir>     (a directory's mtime changes
//                                                      when an entry is added; no
//                                                      input for a remote store)
//   build <entry>/model.done: npc_compile <entry>/<hlo file> <entry>/compile_flags.json
//     entry = <compiler dir>/MODULE_<key>+<hash>
//     key = <graph key>
//   (a remote store (S3): build <build dir>/stamps/<entry>.done: npc_compile,
//    no inputs, and the command adds `--stamp $out`; ninja cannot see the
//    bucket change, so `npc generate` is what picks up new entries)
//   (a DAMAGED entry's edge also has `| npc_always_run`, and then
//    `build npc_always_run: phony` is written)
//   build all: phony <every model.done>
//   default all
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "npc/result.h"

namespace npc::tool {

// Escapes a path for a build statement ("build <outputs>: rule <inputs>"):
// '$' -> "$$", ' ' -> "$ ", ':' -> "$:". Errors: a line break, NUL or '|'
// (ninja cannot express them in a path), naming the path (escaped).
Result<std::string> NinjaEscapePath(std::string_view path);

// Escapes text for the value of a ninja variable (e.g. a command): '$' -> "$$".
// Errors: a newline or NUL.
Result<std::string> NinjaEscapeValue(std::string_view text);

struct NinjaCompileEdge {
  std::string output;               // absolute path of the entry's model.done (or its stamp file, see below)
  std::vector<std::string> inputs;  // absolute paths: the HLO file, compile_flags.json (none for a remote store)
  std::string entry;                // entry directory relative to the cache root
  std::string graph_key;            // for the description "NPC <graph key>"
  // Run even when the output looks up to date: a DAMAGED entry, whose
  // model.done exists. Adds the implicit input `npc_always_run`, a phony
  // target without inputs (always out of date), written once when needed.
  bool always_run = false;
};

struct NinjaFileSpec {
  std::string npc_program;                    // absolute path of the npc executable
  // Arguments after "<npc> compile-entry", shared by every compile edge
  // (--cache, --build_dir, --backend, ...); "--entry <dir>" is appended per edge.
  std::vector<std::string> compile_args;
  // Arguments after "<npc> generate" that rewrite this file.
  std::vector<std::string> generate_args;
  std::string compiler_dir_path;              // absolute path of <cache root>/<compiler dir> (generator input);
                                              // empty for a remote store (S3): no generator input
  // Remote stores: the cache's files are not local paths, so each edge's
  // output is a local stamp file (<build dir>/stamps/<entry>.done) that
  // `compile-entry --stamp $out` writes after the entry is DONE.
  bool stamp_outputs = false;
  int pool_depth = 1;                         // depth of compile_pool (>= 1)
  std::vector<NinjaCompileEdge> edges;        // in the order to write (costliest first)
};

// The text of build.ninja. Errors: a path or argument ninja cannot express.
Result<std::string> RenderNinjaFile(const NinjaFileSpec& spec);

}  // namespace npc::tool
