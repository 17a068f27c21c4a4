#include "generator/results.h"
#include "generator/files.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <random>
#include <fstream>
#include <sstream>

namespace npc::tool {

namespace fs = std::filesystem;
using nlohmann::json;

json RecordToJson(const EntryResultRecord& r) {
  return json{{"entry", r.entry},
              {"hlo_path", r.hlo_path},
              {"status", r.status},
              {"ok", r.ok},
              {"retries", r.retries},
              {"compile_time", r.compile_time},
              {"peak_rss_bytes", r.peak_rss_bytes},
              {"end_time", r.end_time},
              {"log_path", r.log_path},
              {"message", r.message}};
}

Result<EntryResultRecord> RecordFromJson(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return MakeError(source + ": not a JSON object");
  EntryResultRecord r;
  try {
    r.entry = j.value("entry", "");
    r.hlo_path = j.value("hlo_path", "");
    r.status = j.value("status", "");
    r.ok = j.value("ok", false);
    r.retries = j.value("retries", 0);
    r.compile_time = j.value("compile_time", 0.0);
    r.peak_rss_bytes = j.value("peak_rss_bytes", int64_t{0});
    r.end_time = j.value("end_time", 0.0);
    r.log_path = j.value("log_path", "");
    r.message = j.value("message", "");
  } catch (const json::exception& e) {
    return MakeError(source + ": " + e.what());
  }
  return r;
}

std::string NewRunId() {
  std::random_device random;
  char text[96];
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::snprintf(text, sizeof text, "%04d%02d%02dT%02d%02d%02dZ-%d-%08x", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(getpid()),
                static_cast<unsigned>(random()));
  return text;
}

std::string ResultsDir(const std::string& build_dir, const std::string& run_id) {
  return build_dir + "/results" + (run_id.empty() ? "" : "/" + run_id);
}

RunResultsPublisher::~RunResultsPublisher() {
  const std::string run_dir = ResultsDir(build_dir_, run_id_);
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code move_ec;
    fs::rename(it->path(), ResultsDir(build_dir_) + "/" + it->path().filename().string(), move_ec);
  }
  fs::remove_all(run_dir, ec);
}

std::string ResultRecordPath(const std::string& build_dir, const std::string& entry, const std::string& run_id) {
  std::string name = entry;
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  return ResultsDir(build_dir, run_id) + "/" + name + ".json";
}

Status WriteResultRecord(const std::string& build_dir, const EntryResultRecord& record, const std::string& run_id) {
  return WriteFileAtomic(ResultRecordPath(build_dir, record.entry, run_id),
                         RecordToJson(record).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::optional<EntryResultRecord> ReadResultRecord(const std::string& build_dir, const std::string& entry,
                                                  const std::string& run_id) {
  std::string path = ResultRecordPath(build_dir, entry, run_id);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = RecordFromJson(ss.str(), path);
  if (!r) return std::nullopt;
  return std::move(r).value();
}

int64_t CompileSummary::succeeded() const {
  int64_t n = 0;
  for (const auto& i : items) n += i.ok ? 1 : 0;
  return n;
}

int64_t CompileSummary::failed() const { return total() - succeeded(); }

nlohmann::ordered_json SummaryToJson(const CompileSummary& s) {
  using ojson = nlohmann::ordered_json;
  ojson report = ojson::object();
  for (const auto& i : s.items) {
    ojson item{{"status", i.ok}, {"retry", i.retry}, {"compile_time", i.compile_time}, {"detail", i.detail}};
    if (!i.log_path.empty()) item["log"] = i.log_path;
    report[i.hlo_path] = std::move(item);
  }
  ojson counts = ojson::object();
  if (s.succeeded() > 0) counts["true"] = s.succeeded();
  if (s.failed() > 0) counts["false"] = s.failed();
  return ojson{{"compilation_summary", counts},
              {"compilation_report", report},
              {"start_time", s.start_time},
              {"compilation_time", s.compilation_time}};
}

int ExitStatusForFailures(int64_t failures) {
  if (failures <= 0) return 0;
  return failures > 255 ? 255 : static_cast<int>(failures);
}

double EpochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace npc::tool
