#include "generator/prune.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "generator/commands.h"
#include "npc/cache.h"
#include "npc/log.h"

namespace npc::tool {
namespace {

namespace fs = std::filesystem;

// "<number><suffix>" with a non-negative decimal number.
bool SplitNumber(const std::string& text, double* number, std::string* suffix) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  try {
    size_t used = 0;
    *number = std::stod(text.substr(0, i), &used);
    if (used != i || !std::isfinite(*number) || *number < 0) return false;
  } catch (...) {
    return false;
  }
  *suffix = text.substr(i);
  return true;
}

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

int64_t ToSeconds(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec); }

}  // namespace

Result<int64_t> ParseByteSize(const std::string& text) {
  double n = 0;
  std::string suffix;
  if (!SplitNumber(text, &n, &suffix)) return MakeError("not a size: '" + text + "' (e.g. 500M, 20G)");
  std::string s;
  for (char c : suffix) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, "IB") == 0) s.resize(s.size() - 2);
  else if (!s.empty() && s.back() == 'B') s.pop_back();
  double scale = 1;
  if (s == "") scale = 1;
  else if (s == "K") scale = 1024.0;
  else if (s == "M") scale = 1024.0 * 1024;
  else if (s == "G") scale = 1024.0 * 1024 * 1024;
  else if (s == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else return MakeError("not a size: '" + text + "' (unknown unit '" + suffix + "'; use K, M, G or T)");
  double bytes = n * scale;
  if (bytes > 9e18) return MakeError("size too large: '" + text + "'");
  return static_cast<int64_t>(bytes);
}

Result<int64_t> ParseDuration(const std::string& text) {
  double n = 0;
  std::string suffix;
  if (!SplitNumber(text, &n, &suffix)) return MakeError("not a duration: '" + text + "' (e.g. 12h, 30d)");
  double scale;
  if (suffix == "" || suffix == "s") scale = 1;
  else if (suffix == "m") scale = 60;
  else if (suffix == "h") scale = 3600;
  else if (suffix == "d") scale = 86400;
  else return MakeError("not a duration: '" + text + "' (unknown unit '" + suffix + "'; use s, m, h or d)");
  double seconds = n * scale;
  if (seconds > 9e15) return MakeError("duration too large: '" + text + "'");
  return static_cast<int64_t>(seconds);
}

std::vector<PruneCandidate> ChoosePruneVictims(std::vector<PruneCandidate> candidates,
                                               std::optional<int64_t> max_bytes,
                                               std::optional<int64_t> max_age_seconds, int64_t now) {
  std::sort(candidates.begin(), candidates.end(), [](const PruneCandidate& a, const PruneCandidate& b) {
    return a.last_use != b.last_use ? a.last_use < b.last_use : a.dir < b.dir;
  });
  int64_t total = 0;
  for (const auto& c : candidates) total += c.bytes;
  std::vector<PruneCandidate> victims;
  for (const auto& c : candidates) {
    bool too_old = max_age_seconds && now - c.last_use > *max_age_seconds;
    bool too_big = max_bytes && total > *max_bytes;
    if (!too_old && !too_big) break;  // sorted by last use: the rest are newer, and the size fits
    victims.push_back(c);
    total -= c.bytes;
  }
  return victims;
}

int RunPrune(const ToolOptions& options) {
  std::optional<int64_t> max_bytes, max_age;
  if (!options.prune_max_size.empty()) {
    auto b = ParseByteSize(options.prune_max_size);
    if (!b) {
      std::cerr << "npc prune: --max_size: " << b.error().message << "\n";
      return 2;
    }
    max_bytes = *b;
  }
  if (!options.prune_max_age.empty()) {
    auto a = ParseDuration(options.prune_max_age);
    if (!a) {
      std::cerr << "npc prune: --max_age: " << a.error().message << "\n";
      return 2;
    }
    max_age = *a;
  }
  if (!max_bytes && !max_age) {
    std::cerr << "npc prune: give --max_size and/or --max_age\n";
    return 2;
  }
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kCache, ctx.error().message);
    return 1;
  }
  auto root = ctx->store->LocalPath("");
  if (!root) {
    log::Error(log::kCache, "npc prune works on local caches; " + ctx->cache_url +
                                " is remote (for S3, use a lifecycle rule on the bucket)");
    return 1;
  }

  // Candidates: DONE or FAILED entries of every compiler directory, not locked.
  std::vector<PruneCandidate> candidates;
  int64_t kept_bytes = 0;
  auto dirs = ctx->store->List("");
  if (!dirs) {
    log::Error(log::kCache, dirs.error().message);
    return 1;
  }
  for (const auto& compiler_dir : *dirs) {
    auto names = ctx->store->List(compiler_dir);
    if (!names) continue;
    for (const auto& name : *names) {
      auto ref = cache::ParseEntryDirName(compiler_dir, name);
      if (!ref) continue;
      PruneCandidate c;
      c.dir = ref->dir();
      bool done = false, failed = false;
      std::error_code ec;
      for (const auto& file : fs::directory_iterator(*root + "/" + c.dir, ec)) {
        struct stat st;
        if (lstat(file.path().c_str(), &st) != 0) continue;
        if (S_ISREG(st.st_mode)) c.bytes += static_cast<int64_t>(st.st_size);
        c.last_use = std::max({c.last_use, ToSeconds(st.st_atim), ToSeconds(st.st_mtim)});
        const std::string f = file.path().filename().string();
        done |= f == cache::kDoneFile;
        failed |= f == cache::kLogFile;
      }
      auto locked = ctx->store->IsLocked(c.dir);
      if ((!done && !failed) || !locked || *locked) {
        kept_bytes += c.bytes;  // TODO or being compiled: never pruned
        continue;
      }
      candidates.push_back(std::move(c));
    }
  }
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The size limit counts the entries that stay anyway.
  std::optional<int64_t> budget;
  if (max_bytes) budget = std::max<int64_t>(0, *max_bytes - kept_bytes);
  int64_t total = kept_bytes;
  for (const auto& c : candidates) total += c.bytes;

  int removed = 0, errors = 0;
  int64_t freed = 0;
  for (const auto& v : ChoosePruneVictims(candidates, budget, max_age, now)) {
    const std::string shown = *root + "/" + v.dir;
    if (options.prune_dry_run) {
      std::cout << "would remove " << shown << " (" << HumanBytes(v.bytes) << ", last used "
                << (now - v.last_use) / 86400 << " days ago)\n";
      ++removed;
      freed += v.bytes;
      continue;
    }
    auto lock = ctx->store->TryLock(v.dir);
    if (!lock || !*lock) {
      log::Warning(log::kCache, "Left " + shown + ": a live process took it meanwhile");
      continue;
    }
    Status st = ctx->store->Remove(v.dir + "/" + std::string(cache::kDoneFile));
    if (st) st = ctx->store->RemoveTree(v.dir);
    if (!st) {
      log::Error(log::kCache, st.error().message);
      ++errors;
      continue;
    }
    std::cout << "removed " << shown << " (" << HumanBytes(v.bytes) << ")\n";
    ++removed;
    freed += v.bytes;
  }
  log::Info(log::kCache, std::string(options.prune_dry_run ? "Would remove " : "Removed ") + std::to_string(removed) +
                             " entries, " + HumanBytes(freed) + "; the cache " + *root + " holds " +
                             HumanBytes(total - freed) +
                             (kept_bytes ? " (" + HumanBytes(kept_bytes) + " in entries to compile or being compiled)"
                                         : ""));
  return errors ? 1 : 0;
}

}  // namespace npc::tool
