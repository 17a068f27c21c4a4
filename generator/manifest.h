// Reproducible offline builds: the manifest (a lock file) of the cache
// entries a build needs, the checks that a cache matches it, the compile of
// exactly its entries from local files, and `verify` (recompile into a
// scratch cache and compare artifact digests).
//
// Manifest file (JSON, written by ManifestToJson: keys in this order, entries
// sorted by entry directory, two-space indent, trailing newline, so the same
// cache state gives byte-identical files):
//   {
//     "format": "npc-manifest",
//     "version": 1,
//     "backend": "host",
//     "entries": [
//       {
//         "entry": "host-gcc-12.2.0-x86_64-linux-gnu-cg3/MODULE_123+d41d8cd9",
//         "compiler_dir": "host-gcc-12.2.0-x86_64-linux-gnu-cg3",
//         "graph_key": "123",
//         "flags": ["--target=trn1"],
//         "flags_hash": "e30acd3a",
//         "hlo_file": "model.hlo_module.pb",
//         "hlo_bytes": 1234,
//         "hlo_sha256": "<64 hex digits>",
//         "artifact_file": "model.so",
//         "artifact_sha256": "<64 hex digits>"      (only when the entry was DONE)
//       }, ...
//     ]
//   }
// "entry" is redundant (compiler_dir/MODULE_<graph_key>+<flags_hash>) and is
// checked against the other fields when read. The manifest names no cache
// location: it is valid for any cache root holding the same entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generator/cli.h"
#include "npc/cache.h"
#include "npc/compiler.h"
#include "npc/result.h"

namespace CLI {
class App;
}

namespace npc::tool {

inline constexpr std::string_view kManifestFormat = "npc-manifest";
inline constexpr int kManifestVersion = 1;

struct ManifestEntry {
  std::string compiler_dir;
  std::string graph_key;
  std::vector<std::string> flags;
  std::string flags_hash;                      // FlagsHash(CompileFlagsJson(flags)) for caches npc wrote
  std::string hlo_file;                        // "model.hlo_module.pb" or "model.hlo.pb"
  int64_t hlo_bytes = 0;                       // size of the HLO file in bytes
  std::string hlo_sha256;                      // lowercase hex
  std::string artifact_file;                   // the backend's artifact name ("model.so", "model.neff")
  std::optional<std::string> artifact_sha256;  // when the entry was DONE at manifest time

  cache::EntryRef ref() const { return cache::EntryRef{compiler_dir, graph_key, flags_hash}; }
};

struct Manifest {
  int version = kManifestVersion;
  std::string backend;                         // "host", "neuronx-cc"
  std::vector<ManifestEntry> entries;          // sorted by ref().dir()
};

// SHA-256 of `bytes`, 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);

// ---- making, writing, reading -------------------------------------------------

struct MakeManifestReport {
  Manifest manifest;
  // Entries left out, with the reason ("FAILED: a cached failure", "EMPTY: no HLO", "LOCKED: being written").
  std::vector<std::string> skipped;
};

// Records every entry of `compiler_dir` that has an HLO and is TODO or DONE
// (FAILED, EMPTY and LOCKED-without-HLO entries are skipped and listed).
// Reads each HLO (and artifact of a DONE entry) to digest it, and
// compile_flags.json for the flags. Errors: store I/O failures, a malformed
// compile_flags.json (naming the file).
Result<MakeManifestReport> MakeManifest(cache::Store& store, const std::string& compiler_dir,
                                        std::string_view artifact_name, const std::string& backend);

// The manifest file text (see the top of this file). Deterministic.
std::string ManifestToJson(const Manifest& manifest);
// Errors: not JSON, wrong format or version, missing or malformed fields, an
// "entry" that disagrees with its fields, duplicate entries; all name `source`.
Result<Manifest> ParseManifest(std::string_view text, const std::string& source);
Result<Manifest> ReadManifestFile(const std::string& path);
// Written atomically (temporary file, then rename).
Status WriteManifestFile(const std::string& path, const Manifest& manifest);

// ---- checking -----------------------------------------------------------------

// Offline builds use local files only: errors for a cache URL that needs the
// network (s3://, http(s)://, any other "scheme://" except file://).
Status CheckOfflineCacheUrl(const std::string& cache_url);

struct CheckManifestOptions {
  // The compiler directory of the compiler in use; every entry must belong to
  // it (an artifact made by another compiler version is not reproducible).
  // Empty: not checked.
  std::string compiler_dir;
  // Also compare the digests of artifacts present in the cache with the
  // manifest's artifact_sha256.
  bool check_artifacts = false;
};

// Checks that `store` holds every entry of `manifest` exactly: the entry
// directory exists, its HLO file has the recorded SHA-256, its
// compile_flags.json lists the recorded flags with the recorded hash, and the
// entry belongs to options.compiler_dir. Every problem found is reported, one
// line each, in the error: "manifest entry <entry>: <file>: <what differs>".
Status CheckManifest(cache::Store& store, const Manifest& manifest, const CheckManifestOptions& options);

// ---- verify ---------------------------------------------------------------------

struct VerifyEntryResult {
  std::string entry;            // entry directory
  std::string expected_sha256;  // manifest's artifact digest, else the cache's artifact; empty when neither
  std::string actual_sha256;    // digest of the recompiled artifact; empty when the compile failed
  bool compiled = false;
  bool match = false;           // compiled and equal to expected (false when nothing to compare with)
  std::string message;          // why not, for humans
};

struct VerifyReport {
  std::vector<VerifyEntryResult> entries;  // in manifest order
  int matched = 0;
  int mismatched = 0;           // compiled, digest differs
  int failed = 0;               // compile failed (or input check failed)
  int unreferenced = 0;         // compiled, nothing to compare with
  bool ok() const { return mismatched == 0 && failed == 0; }
};

struct VerifyOptions {
  std::string scratch_dir;      // an empty or absent directory; entries are recompiled under it
  int jobs = 1;                 // compiles at once
};

// Recompiles every entry of `manifest` from `store`'s HLO and flags into a
// fresh cache at options.scratch_dir with `compiler`, and compares each new
// artifact's SHA-256 with the manifest's artifact_sha256 (else with the
// digest of the artifact in `store`, when present). The HLO digest is checked
// first; an entry whose HLO differs counts as failed. Errors: I/O failures of
// the scratch cache.
Result<VerifyReport> Verify(cache::Store& store, Compiler& compiler, const Manifest& manifest,
                            const VerifyOptions& options);

// ---- command entry points (npc manifest / generate|compile --manifest / verify) ----

// The options of these commands (from ToolOptions' manifest, offline and
// scratch_dir on the command line; see ManifestCommandOptionsOf).
struct ManifestCommandOptions {
  std::string manifest_path;          // --manifest: the file to write (manifest) or read (others)
  bool offline = false;               // --offline: refuse network caches (s3://)
  std::string scratch_dir;            // verify: where to recompile (default: a temporary directory, removed)
};

// `npc manifest --manifest F`: writes the manifest of the cache's compiler
// directory. 0 on success.
int RunManifest(const ToolOptions& options, const ManifestCommandOptions& manifest_options);
// `npc generate --manifest F [--offline]`: checks the cache against the
// manifest, then writes <build dir>/build.ninja with one edge per manifest
// entry (DONE ones too; ninja skips what is up to date), costliest first by
// the manifest's hlo_bytes; the pool depth is --num_parallel, else the number
// of CPUs (not the available memory), so the file is a pure function of the
// manifest, the cache path, the build directory and the options.
int RunGenerateFromManifest(const ToolOptions& options, const ManifestCommandOptions& manifest_options);
// `npc compile --manifest F [--offline]`: RunGenerateFromManifest, then
// ninja, then checks that every entry is DONE and that every artifact whose
// digest the manifest records is byte-identical. Prints Neuron's summary.
// Exit status: failures (capped), or 1 for a check that fails.
int RunCompileFromManifest(const ToolOptions& options, const ManifestCommandOptions& manifest_options);
// `npc verify --manifest F [--scratch_dir D]`: Verify(); prints one line per
// entry; 0 when every digest matches.
int RunVerify(const ToolOptions& options, const ManifestCommandOptions& manifest_options);

// ---- CLI wiring (called from generator/cli.cc) ------------------------------------

// The options of a command line as these commands take them.
ManifestCommandOptions ManifestCommandOptionsOf(const ToolOptions& options);

// true for the verbs added here: "manifest", "verify", "import".
bool IsManifestVerb(const std::string& verb);

// Adds this file's options to `app` for `verb`: --manifest and --offline
// (generate, compile, manifest, verify), --scratch_dir (verify), --compiler_dir
// (manifest, verify, import).
void AddManifestOptions(CLI::App& app, const std::string& verb, ToolOptions& options);

// Runs `npc manifest`, `npc verify`, `npc import` (files: options.command),
// and `npc generate|compile` when options.manifest is set; nullopt for any
// other command line (the caller runs it). --offline without --manifest is a
// usage error (exit status 2).
std::optional<int> RunManifestVerb(const ToolOptions& options);

}  // namespace npc::tool
