// Cache scan and build plan: which entries of one compiler directory need
// compiling (DESIGN.md sections 1 and 2).
//
// The scan lists `<compiler dir>/` through the Store interface, keeps the
// directories named MODULE_<graph key>+<flags hash> and classifies each with
// npc::cache::GetEntryState. Anything else (files, other directories, entries
// with nothing npc understands) is ignored and never touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npc/cache.h"
#include "npc/result.h"

namespace npc::tool {

struct ScannedEntry {
  cache::EntryRef ref;
  cache::EntryState state = cache::EntryState::kEmpty;
  std::string hlo_file;    // "model.hlo_module.pb" or "model.hlo.pb"; empty when none
  int64_t hlo_bytes = 0;   // size of the HLO file in bytes (the cost estimate); 0 when none
};

// All MODULE_* entries of `compiler_dir` (relative to the store root), sorted
// by directory name, EMPTY ones included (callers skip them). `check`: how
// far DONE entries' artifacts are checked against model.done (a mismatch
// scans as DAMAGED; kDigest reads every artifact).
// Errors: store I/O failures other than an absent directory (which scans as empty).
Result<std::vector<ScannedEntry>> ScanCompilerDir(cache::Store& store, const std::string& compiler_dir,
                                                  std::string_view artifact_name,
                                                  cache::ArtifactCheck check = cache::ArtifactCheck::kSize);

struct PlanOptions {
  bool retry_failed_compilation = false;  // FAILED entries become edges too
};

struct BuildPlan {
  // Entries to compile, costliest first (HLO bytes descending, then graph key,
  // then flags hash): TODO, DAMAGED and LOCKED ones (the per-edge command
  // waits for or takes over the lock), FAILED ones only with
  // retry_failed_compilation.
  std::vector<ScannedEntry> to_compile;
  // FAILED entries that are not retried: reported as failures.
  std::vector<ScannedEntry> cached_failures;
  // DONE entries: nothing to do.
  std::vector<ScannedEntry> done;
};

BuildPlan MakeBuildPlan(const std::vector<ScannedEntry>& scan, const PlanOptions& options);

// Orders entries costliest first, deterministically (see BuildPlan::to_compile).
void SortCostliestFirst(std::vector<ScannedEntry>& entries);

}  // namespace npc::tool
