// Log lines in Neuron's format:
//   2024-05-01 12:34:56.000123:  4242  INFO ||NEURON_CACHE||: Compile cache path: /var/tmp/neuron-compile-cache
// "<local date time with microseconds>:  <pid>  <LEVEL> ||<COMPONENT>||: <message>", to stderr.
// Level threshold: NEURON_RT_LOG_LEVEL-style names (DEBUG, INFO, WARNING, ERROR),
// set by SetLogLevel or the environment variable NPC_LOG_LEVEL; default INFO.
#pragma once

#include <string>
#include <string_view>

namespace npc::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Accepts debug/info/warning/warn/error in any case; false for anything else.
bool SetLogLevel(std::string_view name);
Level GetLogLevel();

// The formatted line without trailing newline (for tests and files).
std::string FormatLine(Level level, std::string_view component, std::string_view message);
void Write(Level level, std::string_view component, std::string_view message);

inline void Info(std::string_view component, std::string_view message) { Write(Level::kInfo, component, message); }
inline void Warning(std::string_view component, std::string_view message) { Write(Level::kWarning, component, message); }
inline void Error(std::string_view component, std::string_view message) { Write(Level::kError, component, message); }
inline void Debug(std::string_view component, std::string_view message) { Write(Level::kDebug, component, message); }

inline constexpr std::string_view kCache = "NEURON_CACHE";
inline constexpr std::string_view kCcWrapper = "NEURON_CC_WRAPPER";
inline constexpr std::string_view kParallelCompile = "NEURON_PARALLEL_COMPILE";

}  // namespace npc::log
