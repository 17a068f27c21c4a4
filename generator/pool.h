// Sizing the compile pool from memory (DESIGN.md section 3: no host
// out-of-memory from too many compiles at once).
//
//   depth = min(--num_parallel if given, max(1, MemAvailable / per-compile estimate))
//
// (The CLI passes the CPU count as num_parallel when --num_parallel is not
// given: the same bound as ninja's -j.)
//
// Per-compile estimate: neuronx-cc 64 GiB (as neuron_parallel_compile
// assumes); host backend: measured, the largest peak RSS of a host compile
// recorded in <build dir>/.npc_compile_memory times 1.5, or the compiler's
// DefaultMemoryPerCompileBytes() before any measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace npc::tool {

inline constexpr std::string_view kCompileMemoryFile = ".npc_compile_memory";

// MemAvailable from `meminfo_text` (the text of /proc/meminfo), in bytes;
// nullopt when absent or malformed.
std::optional<int64_t> ParseMemAvailable(std::string_view meminfo_text);
// MemAvailable of this host (reads /proc/meminfo); nullopt when unknown.
std::optional<int64_t> MemAvailableBytes();

// The pool depth rule above. An unknown `mem_available` or a non-positive
// `per_compile_bytes` leaves memory out of it (depth = num_parallel, else
// `fallback_depth`). Always >= 1.
int ComputePoolDepth(std::optional<int> num_parallel, std::optional<int64_t> mem_available,
                     int64_t per_compile_bytes, int fallback_depth);

// Per-compile memory estimate: measured * 1.5 when a measurement exists,
// else `default_bytes`.
int64_t PerCompileEstimate(std::optional<int64_t> measured_peak_bytes, int64_t default_bytes);

// The largest peak RSS recorded in `<build_dir>/.npc_compile_memory`.
std::optional<int64_t> ReadCompileMemory(const std::string& build_dir);
// Raises the record to `peak_rss_bytes` if larger (read-modify-write under
// flock, so concurrent edges do not lose updates). Best effort: errors are ignored.
void RecordCompileMemory(const std::string& build_dir, int64_t peak_rss_bytes);

}  // namespace npc::tool
