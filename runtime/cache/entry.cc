// Entry names, states and inputs (see npc/cache.h).
#include <set>

#include "npc/cache.h"

namespace npc::cache {

std::string_view EntryStateName(EntryState state) {
  switch (state) {
    case EntryState::kTodo: return "TODO";
    case EntryState::kLocked: return "LOCKED";
    case EntryState::kDone: return "DONE";
    case EntryState::kFailed: return "FAILED";
    case EntryState::kEmpty: return "EMPTY";
    case EntryState::kDamaged: return "DAMAGED";
  }
  return "UNKNOWN";
}

std::string EntryRef::dir() const {
  return compiler_dir + "/" + std::string(kEntryPrefix) + graph_key + "+" + flags_hash;
}

std::optional<EntryRef> ParseEntryDirName(const std::string& compiler_dir, std::string_view name) {
  if (name.substr(0, kEntryPrefix.size()) != kEntryPrefix) return std::nullopt;
  std::string_view rest = name.substr(kEntryPrefix.size());
  size_t plus = rest.rfind('+');
  if (plus == std::string_view::npos || plus == 0 || plus + 1 >= rest.size()) return std::nullopt;
  EntryRef ref{compiler_dir, std::string(rest.substr(0, plus)), std::string(rest.substr(plus + 1))};
  auto alnum = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (char c : ref.graph_key) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return std::nullopt;
  }
  for (char c : ref.flags_hash) {
    if (!alnum(c)) return std::nullopt;
  }
  return ref;
}

Result<EntryState> GetEntryState(Store& store, const EntryRef& entry, std::string_view artifact_name,
                                 ArtifactCheck check, bool own_lock_held) {
  auto names = store.List(entry.dir());
  if (!names) return names.error();
  std::set<std::string, std::less<>> files(names->begin(), names->end());
  bool has_hlo = files.count(kHloFile) || files.count(kLegacyHloFile) || files.count(kStableHloFile);
  bool has_artifact = files.count(artifact_name) > 0;
  bool damaged = false;
  if (has_artifact && files.count(kDoneFile)) {
    auto damage = CheckEntryArtifact(store, entry, artifact_name, check);
    if (!damage) {
      // A recompile removes model.done first: gone since the listing is not damage.
      auto still = store.Exists(entry.file(kDoneFile));
      if (!still || *still) return damage.error();
    } else if (!damage->has_value()) {
      return EntryState::kDone;
    } else {
      damaged = true;
    }
  }
  if (files.count(kLockFile) && !own_lock_held) {
    auto locked = store.IsLocked(entry.dir());
    if (!locked) return locked.error();
    if (*locked) return EntryState::kLocked;
  }
  bool foreign_lock_file = false;
  for (const auto& name : files) {
    if (name != kLockFile && name.size() > 5 && name.compare(name.size() - 5, 5, ".lock") == 0) foreign_lock_file = true;
  }
  if (foreign_lock_file) {
    auto locked = store.IsForeignLocked(entry.dir());
    if (!locked) return locked.error();
    if (*locked) return EntryState::kLocked;
  }
  if (damaged) return EntryState::kDamaged;
  if (files.count(kLogFile) && !has_artifact) return EntryState::kFailed;
  if (has_hlo) return EntryState::kTodo;
  return EntryState::kEmpty;
}

Result<std::optional<std::string>> FindHloFile(Store& store, const EntryRef& entry) {
  for (std::string_view name : {kHloFile, kLegacyHloFile, kStableHloFile}) {
    auto exists = store.Exists(entry.file(name));
    if (!exists) return exists.error();
    if (*exists) return std::optional<std::string>(std::string(name));
  }
  return std::optional<std::string>();
}

Status PutEntryInputs(Store& store, const EntryRef& entry, std::string_view hlo_bytes,
                      std::string_view compile_flags_json) {
  // Flags first: a scan between the two writes sees no HLO (EMPTY, ignored),
  // never an HLO whose flags are missing.
  auto flags_exist = store.Exists(entry.file(kFlagsFile));
  if (!flags_exist) return flags_exist.error();
  if (!*flags_exist) {
    if (auto st = store.WriteAtomic(entry.file(kFlagsFile), compile_flags_json); !st) return st;
  }
  auto hlo = FindHloFile(store, entry);
  if (!hlo) return hlo.error();
  if (!hlo->has_value()) {
    if (auto st = store.WriteAtomic(entry.file(kHloFile), hlo_bytes); !st) return st;
  }
  return {};
}

}  // namespace npc::cache
