#include "generator/pool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace npc::tool {

namespace {

std::optional<int64_t> ParseInt64(std::string_view text) {
  size_t b = 0;
  while (b < text.size() && (text[b] == ' ' || text[b] == '\t')) ++b;
  size_t e = text.size();
  while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\n' || text[e - 1] == '\t' || text[e - 1] == '\r')) --e;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data() + b, text.data() + e, v);
  if (ec != std::errc() || ptr != text.data() + e || b == e) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> ParseMemAvailable(std::string_view text) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    std::string_view rest = line.substr(kKey.size());
    int64_t multiplier = 1;
    size_t unit = rest.find("kB");
    if (unit != std::string_view::npos) {
      multiplier = 1024;
      rest = rest.substr(0, unit);
    }
    auto v = ParseInt64(rest);
    if (!v || *v < 0) return std::nullopt;
    return *v * multiplier;
  }
  return std::nullopt;
}

std::optional<int64_t> MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMemAvailable(ss.str());
}

int ComputePoolDepth(std::optional<int> num_parallel, std::optional<int64_t> mem_available,
                     int64_t per_compile_bytes, int fallback_depth) {
  std::optional<int64_t> by_memory;
  if (mem_available && per_compile_bytes > 0) {
    by_memory = std::max<int64_t>(1, *mem_available / per_compile_bytes);
  }
  int64_t depth;
  if (num_parallel && by_memory) depth = std::min<int64_t>(*num_parallel, *by_memory);
  else if (num_parallel) depth = *num_parallel;
  else if (by_memory) depth = *by_memory;
  else depth = fallback_depth;
  depth = std::min<int64_t>(depth, 1 << 20);
  return static_cast<int>(std::max<int64_t>(1, depth));
}

int64_t PerCompileEstimate(std::optional<int64_t> measured_peak_bytes, int64_t default_bytes) {
  if (measured_peak_bytes && *measured_peak_bytes > 0) return *measured_peak_bytes + *measured_peak_bytes / 2;
  return default_bytes;
}

std::optional<int64_t> ReadCompileMemory(const std::string& build_dir) {
  std::string path = build_dir + "/" + std::string(kCompileMemoryFile);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<int64_t> v;
  if (flock(fd, LOCK_SH) == 0) {  // a writer truncates and rewrites under LOCK_EX
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) v = ParseInt64(std::string_view(buf, static_cast<size_t>(n)));
    flock(fd, LOCK_UN);
  }
  close(fd);
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

void RecordCompileMemory(const std::string& build_dir, int64_t peak_rss_bytes) {
  if (peak_rss_bytes <= 0) return;
  std::string path = build_dir + "/" + std::string(kCompileMemoryFile);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (flock(fd, LOCK_EX) == 0) {
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    std::optional<int64_t> old;
    if (n > 0) old = ParseInt64(std::string_view(buf, static_cast<size_t>(n)));
    if (!old || *old < peak_rss_bytes) {
      std::string text = std::to_string(peak_rss_bytes) + "\n";
      if (ftruncate(fd, 0) == 0) {
        ssize_t w = pwrite(fd, text.data(), text.size(), 0);
        (void)w;
      }
    }
    flock(fd, LOCK_UN);
  }
  close(fd);
}

}  // namespace npc::tool
