// `npc prune`: cache size and age limits with least-recently-used eviction
// (DESIGN.md section 3; the original only has the historic, unused
// --cache_size / --cache_ttl flags).
//
// Every entry of every compiler directory of a local cache is a candidate,
// except entries that are being compiled (locked by a live process) or still
// waiting to be compiled (TODO: the work of a trial run). An entry's last use
// is the latest access or modification time of its files: a cache hit reads
// the artifact, which updates its access time (on file systems mounted with
// `relatime`, the Linux default, at most once a day: the LRU order is exact
// to a day). Entries older than the age limit go first; then, while the
// cache is larger than the size limit, the least recently used.
//
// An entry is removed under its lock, `model.done` first (so no reader takes
// a half-removed entry for DONE), then the rest. S3 caches are refused: use a
// bucket lifecycle rule there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "generator/cli.h"
#include "npc/result.h"

namespace npc::tool {

// "512", "10K", "1.5G", "2T" (binary multiples, optional trailing "B" or
// "iB") -> bytes. Errors: anything else, naming the text.
Result<int64_t> ParseByteSize(const std::string& text);
// "3600", "3600s", "90m", "12h", "30d" -> seconds. Errors: anything else.
Result<int64_t> ParseDuration(const std::string& text);

// One entry as prune sees it.
struct PruneCandidate {
  std::string dir;          // relative to the cache root: <compiler dir>/MODULE_<key>+<hash>
  int64_t bytes = 0;        // sum of its files' sizes
  int64_t last_use = 0;     // seconds since the epoch
};

// Which candidates to remove, oldest use first: every one whose last use is
// more than `max_age_seconds` before `now`, then the least recently used
// until the total of the rest is at most `max_bytes`. Ties are broken by dir,
// so the choice is deterministic.
std::vector<PruneCandidate> ChoosePruneVictims(std::vector<PruneCandidate> candidates,
                                               std::optional<int64_t> max_bytes,
                                               std::optional<int64_t> max_age_seconds, int64_t now);

// `npc prune [--max_size SIZE] [--max_age DURATION] [--dry_run]`: prints each
// entry it removes (or would remove) and the totals. 0 on success, 1 on an
// error, 2 on bad options.
int RunPrune(const ToolOptions& options);

}  // namespace npc::tool
