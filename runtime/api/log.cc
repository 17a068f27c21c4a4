// Neuron-style log lines (see npc/log.h).
#include "npc/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <string>

namespace npc::log {
namespace {

std::optional<Level> ParseLevel(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "debug" || lower == "trace") return Level::kDebug;
  if (lower == "info") return Level::kInfo;
  if (lower == "warning" || lower == "warn") return Level::kWarning;
  if (lower == "error" || lower == "fatal") return Level::kError;
  return std::nullopt;
}

std::atomic<int>& LevelStore() {
  static std::atomic<int> level = [] {
    const char* env = std::getenv("NPC_LOG_LEVEL");
    auto parsed = env ? ParseLevel(env) : std::nullopt;
    return static_cast<int>(parsed.value_or(Level::kInfo));
  }();
  return level;
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarning: return "WARNING";
    case Level::kError: return "ERROR";
  }
  return "INFO";
}

}  // namespace

bool SetLogLevel(std::string_view name) {
  auto parsed = ParseLevel(name);
  if (!parsed) return false;
  LevelStore() = static_cast<int>(*parsed);
  return true;
}

Level GetLogLevel() { return static_cast<Level>(LevelStore().load()); }

std::string FormatLine(Level level, std::string_view component, std::string_view message) {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  char prefix[128];
  std::snprintf(prefix, sizeof prefix, "%s.%06ld:  %d  %s ||", stamp, static_cast<long>(tv.tv_usec),
                static_cast<int>(getpid()), LevelName(level));
  std::string line = prefix;
  line.append(component);
  line += "||: ";
  line.append(message);
  return line;
}

void Write(Level level, std::string_view component, std::string_view message) {
  if (static_cast<int>(level) < LevelStore().load()) return;
  std::string line = FormatLine(level, component, message);
  line += '\n';
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace npc::log
