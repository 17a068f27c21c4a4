#include "generator/plan.h"

#include <algorithm>
#include <tuple>

#include "npc/log.h"
#include "util/printable.h"

namespace npc::tool {

Result<std::vector<ScannedEntry>> ScanCompilerDir(cache::Store& store, const std::string& compiler_dir,
                                                  std::string_view artifact_name, cache::ArtifactCheck check) {
  auto names = store.List(compiler_dir);
  if (!names) return names.error();
  std::vector<std::string> sorted = *names;
  std::sort(sorted.begin(), sorted.end());
  std::vector<ScannedEntry> out;
  for (const auto& name : sorted) {
    auto ref = cache::ParseEntryDirName(compiler_dir, name);
    if (!ref) {
      // Not an entry: ignored. Named like one but malformed (a stray
      // `MODULE_1\n2+abc`): ignored too, with a warning, so that one bad name
      // does not stop the build of the whole cache.
      if (name.rfind(cache::kEntryPrefix, 0) == 0) {
        log::Warning(log::kParallelCompile, "ignoring " + store.url() + "/" + compiler_dir + "/" + util::Printable(name) +
                                                ": not a valid entry name (MODULE_<graph key>+<flags hash>, "
                                                "letters, digits, '.', '_' and '-' only)");
      }
      continue;
    }
    ScannedEntry e;
    e.ref = *ref;
    // Something named like an entry that cannot be listed (a plain file, an
    // unreadable directory) is not an entry we can compile: skip it, say so.
    auto state = cache::GetEntryState(store, e.ref, artifact_name, check);
    if (!state) {
      auto size = store.Size(e.ref.dir());
      if (size) {
        log::Warning(log::kParallelCompile, "ignoring " + store.url() + "/" + e.ref.dir() + ": " +
                                                state.error().message);
        continue;
      }
      return state.error();
    }
    e.state = *state;
    auto hlo = cache::FindHloFile(store, e.ref);
    if (!hlo) return hlo.error();
    if (hlo->has_value()) {
      e.hlo_file = **hlo;
      auto size = store.Size(e.ref.file(e.hlo_file));
      if (!size) return size.error();
      e.hlo_bytes = *size;
    }
    out.push_back(std::move(e));
  }
  return out;
}

void SortCostliestFirst(std::vector<ScannedEntry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const ScannedEntry& a, const ScannedEntry& b) {
    if (a.hlo_bytes != b.hlo_bytes) return a.hlo_bytes > b.hlo_bytes;
    return std::tie(a.ref.graph_key, a.ref.flags_hash, a.ref.compiler_dir) <
           std::tie(b.ref.graph_key, b.ref.flags_hash, b.ref.compiler_dir);
  });
}

BuildPlan MakeBuildPlan(const std::vector<ScannedEntry>& scan, const PlanOptions& options) {
  BuildPlan plan;
  for (const auto& e : scan) {
    switch (e.state) {
      case cache::EntryState::kTodo:
      case cache::EntryState::kDamaged:
      case cache::EntryState::kLocked:
        plan.to_compile.push_back(e);
        break;
      case cache::EntryState::kFailed:
        if (options.retry_failed_compilation) plan.to_compile.push_back(e);
        else plan.cached_failures.push_back(e);
        break;
      case cache::EntryState::kDone:
        plan.done.push_back(e);
        break;
      case cache::EntryState::kEmpty:
        break;
    }
  }
  SortCostliestFirst(plan.to_compile);
  return plan;
}

}  // namespace npc::tool
