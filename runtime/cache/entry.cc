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
  for (char c : ref.graph_key) {
    if (c == '/' || c == '\0') return std::nullopt;
  }
  return ref;
}

Result<EntryState> GetEntryState(Store& store, const EntryRef& entry, std::string_view artifact_name) {
  auto names = store.List(entry.dir());
  if (!names) return names.error();
  std::set<std::string, std::less<>> files(names->begin(), names->end());
  bool has_hlo = files.count(kHloFile) || files.count(kLegacyHloFile) || files.count(kStableHloFile);
  bool has_artifact = files.count(artifact_name) > 0;
  if (has_artifact && files.count(kDoneFile)) return EntryState::kDone;
  if (files.count(kLockFile)) {
    auto locked = store.IsLocked(entry.dir());
    if (!locked) return locked.error();
    if (*locked) return EntryState::kLocked;
  }
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
  auto hlo = FindHloFile(store, entry);
  if (!hlo) return hlo.error();
  if (!hlo->has_value()) {
    if (auto st = store.WriteAtomic(entry.file(kHloFile), hlo_bytes); !st) return st;
  }
  auto flags_exist = store.Exists(entry.file(kFlagsFile));
  if (!flags_exist) return flags_exist.error();
  if (!*flags_exist) {
    if (auto st = store.WriteAtomic(entry.file(kFlagsFile), compile_flags_json); !st) return st;
  }
  return {};
}

}  // namespace npc::cache
