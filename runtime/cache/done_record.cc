// model.done records and artifact checks (see npc/cache.h).
#include <cctype>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "npc/cache.h"
#include "util/digest.h"

namespace npc::cache {

std::string DoneFileText(const ArtifactRecord& record) {
  nlohmann::ordered_json j{{"artifact", record.artifact}, {"size", record.size}, {"sha256", record.sha256}};
  return j.dump() + "\n";
}

Result<std::optional<ArtifactRecord>> ParseDoneFile(std::string_view text, const std::string& source) {
  bool blank = true;
  for (char c : text) blank &= std::isspace(static_cast<unsigned char>(c)) != 0;
  if (blank) return std::optional<ArtifactRecord>();
  auto fail = [&](const std::string& why) {
    return MakeError(source + ": neither empty (libneuronxla's) nor npc's record of the artifact: " + why);
  };
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  ArtifactRecord record;
  auto size = j.find("size");
  auto sha = j.find("sha256");
  if (size == j.end() || !size->is_number_integer() || size->get<int64_t>() < 0) return fail("no valid \"size\"");
  if (sha == j.end() || !sha->is_string()) return fail("no \"sha256\"");
  record.size = size->get<int64_t>();
  record.sha256 = sha->get<std::string>();
  if (record.sha256.size() != 64) return fail("\"sha256\" is not 64 hex digits");
  for (char c : record.sha256) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) {
      return fail("\"sha256\" is not 64 lowercase hex digits");
    }
  }
  if (auto a = j.find("artifact"); a != j.end() && a->is_string()) record.artifact = a->get<std::string>();
  return std::optional<ArtifactRecord>(std::move(record));
}

namespace {

std::string SizeMismatch(std::string_view name, int64_t actual, int64_t recorded) {
  return std::string(name) + " is " + std::to_string(actual) + " bytes, model.done records " + std::to_string(recorded);
}

std::string DigestMismatch(std::string_view name, const std::string& actual, const std::string& recorded) {
  return "the SHA-256 of " + std::string(name) + " is " + actual + ", model.done records " + recorded;
}

}  // namespace

Result<std::optional<std::string>> CheckArtifactFile(const std::string& local_path,
                                                     const std::optional<ArtifactRecord>& record, ArtifactCheck check) {
  if (!record) return std::optional<std::string>();
  const std::string name = local_path.substr(local_path.rfind('/') + 1);
  if (check == ArtifactCheck::kSize) {
    std::error_code ec;
    auto size = static_cast<int64_t>(std::filesystem::file_size(local_path, ec));
    if (ec) return MakeError("cannot stat " + local_path + ": " + ec.message());
    if (size != record->size) return std::optional<std::string>(SizeMismatch(name, size, record->size));
    return std::optional<std::string>();
  }
  auto digest = util::Sha256File(local_path);
  if (!digest) return digest.error();
  if (digest->size != record->size) return std::optional<std::string>(SizeMismatch(name, digest->size, record->size));
  if (digest->sha256 != record->sha256) {
    return std::optional<std::string>(DigestMismatch(name, digest->sha256, record->sha256));
  }
  return std::optional<std::string>();
}

Result<std::optional<ArtifactRecord>> ReadDoneFile(Store& store, const EntryRef& entry) {
  auto text = store.Read(entry.file(kDoneFile));
  if (!text) return text.error();
  return ParseDoneFile(*text, store.url() + "/" + entry.file(kDoneFile));
}

Result<std::optional<std::string>> CheckEntryArtifact(Store& store, const EntryRef& entry,
                                                      std::string_view artifact_name, ArtifactCheck check) {
  auto text = store.Read(entry.file(kDoneFile));
  if (!text) return text.error();
  auto record = ParseDoneFile(*text, store.url() + "/" + entry.file(kDoneFile));
  if (!record) return std::optional<std::string>(record.error().message);
  if (!record->has_value()) return std::optional<std::string>();
  const std::string artifact = entry.file(artifact_name);
  if (auto local = store.LocalPath(artifact)) return CheckArtifactFile(*local, *record, check);
  const ArtifactRecord& r = **record;
  if (check == ArtifactCheck::kSize) {
    auto size = store.Size(artifact);
    if (!size) return size.error();
    if (*size != r.size) return std::optional<std::string>(SizeMismatch(artifact_name, *size, r.size));
    return std::optional<std::string>();
  }
  auto bytes = store.Read(artifact);
  if (!bytes) return bytes.error();
  const auto size = static_cast<int64_t>(bytes->size());
  if (size != r.size) return std::optional<std::string>(SizeMismatch(artifact_name, size, r.size));
  std::string sha = util::Sha256Hex(*bytes);
  if (sha != r.sha256) return std::optional<std::string>(DigestMismatch(artifact_name, sha, r.sha256));
  return std::optional<std::string>();
}

}  // namespace npc::cache
