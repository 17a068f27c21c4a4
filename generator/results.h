// Per-entry result records and the compilation summary (DESIGN.md section 2).
//
// Each build edge (`npc compile-entry`) writes one record,
// <build dir>/results/<run id>/<entry name>.json, where the run id is the
// environment variable NPC_RUN_ID that `npc compile` sets for its ninja (so
// concurrent runs on one build directory each read their own edges' records;
// after its summary a run moves them up to <build dir>/results/); ninja run by
// hand (no NPC_RUN_ID): <build dir>/results/<entry name>.json. For example
//   {"entry": "host-gcc-12.2.0-x86_64-linux-gnu-cg3/MODULE_123+d41d8cd9", "hlo_path": "/cache/.../model.hlo_module.pb",
//    "status": "compiled", "ok": true, "retries": 0, "compile_time": 2.5,
//    "peak_rss_bytes": 104857600, "end_time": 1714567890.25, "log_path": "", "message": ""}
// status is EntryCompileStatusName() ("compiled", "already done", "failed",
// "cached failure", "locked", "no HLO") or "error" (an I/O error; see message).
// Times are seconds; end_time is seconds since the Unix epoch.
//
// After ninja, the CLI turns the records of the planned entries (and the
// cached failures that were not retried) into the summary that
// neuron_parallel_compile prints:
//   {"compilation_summary": {"true": S, "false": F},
//    "compilation_report": {<hlo path>: {"status": bool, "retry": n, "compile_time": s, "detail": "...", ...}},
//    "start_time": <epoch s>, "compilation_time": <s>}
// followed by "Total graphs: N", "Total successful compilations: S",
// "Total failed compilations: F".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npc/result.h"

namespace npc::tool {

struct EntryResultRecord {
  std::string entry;          // entry directory relative to the cache root
  std::string hlo_path;       // the entry's HLO file (local path, or URL/path)
  std::string status;         // see above
  bool ok = false;            // compiled now or already done
  int retries = 0;            // attempts beyond the first
  double compile_time = 0;    // seconds, all attempts
  int64_t peak_rss_bytes = 0;
  double end_time = 0;        // seconds since the epoch
  std::string log_path;       // model.log of a failure
  std::string message;        // error text for status "error"
};

nlohmann::json RecordToJson(const EntryResultRecord& record);
Result<EntryResultRecord> RecordFromJson(const std::string& text, const std::string& source);

// The environment variable naming the run whose records an edge writes.
inline constexpr const char* kRunIdVariable = "NPC_RUN_ID";
// A new run id: "<UTC time>-<pid>-<random hex>", unique among concurrent runs.
std::string NewRunId();
// <build_dir>/results[/<run_id>] (run_id empty: no sub-folder).
std::string ResultsDir(const std::string& build_dir, const std::string& run_id = "");
// <ResultsDir(build_dir, run_id)>/<last path component of entry>.json
std::string ResultRecordPath(const std::string& build_dir, const std::string& entry, const std::string& run_id = "");
// Written atomically (temporary name, then rename).
Status WriteResultRecord(const std::string& build_dir, const EntryResultRecord& record,
                         const std::string& run_id = "");
// When destroyed (the run's summary printed): moves the records of run
// `run_id` up into <build_dir>/results/ (where ninja run by hand leaves them:
// the latest finished run's record of each entry) and removes the run's folder.
class RunResultsPublisher {
 public:
  RunResultsPublisher(std::string build_dir, std::string run_id)
      : build_dir_(std::move(build_dir)), run_id_(std::move(run_id)) {}
  ~RunResultsPublisher();
  RunResultsPublisher(const RunResultsPublisher&) = delete;
  RunResultsPublisher& operator=(const RunResultsPublisher&) = delete;

 private:
  std::string build_dir_;
  std::string run_id_;
};

// nullopt when absent or unreadable.
std::optional<EntryResultRecord> ReadResultRecord(const std::string& build_dir, const std::string& entry,
                                                  const std::string& run_id = "");

struct SummaryItem {
  std::string hlo_path;
  bool ok = false;
  int retry = 0;
  double compile_time = 0;
  std::string detail;    // "compiled", "already done", "failed", "cached failure (not retried)", ...
  std::string log_path;  // model.log of a failure, when known
};

struct CompileSummary {
  std::vector<SummaryItem> items;
  double start_time = 0;        // seconds since the epoch
  double compilation_time = 0;  // seconds
  int64_t succeeded() const;
  int64_t failed() const;
  int64_t total() const { return static_cast<int64_t>(items.size()); }
};

nlohmann::ordered_json SummaryToJson(const CompileSummary& summary);

// The process exit status for `failures` failed compiles: 0 when none, else
// the count capped at 255 so it never wraps to 0 (256 failures -> 255).
int ExitStatusForFailures(int64_t failures);

// Seconds since the Unix epoch, now.
double EpochSeconds();

}  // namespace npc::tool
