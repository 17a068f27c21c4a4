// Running child processes: compilers, ninja, training commands.
// Internal to npc (not installed).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "npc/result.h"

namespace npc {

struct ProcessOptions {
  std::string cwd;                                   // empty: inherit
  std::map<std::string, std::string> set_env;        // added to / overriding the environment
  std::vector<std::string> unset_env;                // removed from the environment
  bool capture_output = true;                        // stdout+stderr into ProcessResult::output
  double timeout_seconds = 0;                        // 0: none; on expiry SIGKILL, exit_status -1
  // true (compilers): the child leads a new process group, so a timeout kills
  // its whole tree. false (the training command, ninja): the child stays in the
  // caller's process group with its terminal, so Ctrl-C reaches it, and the
  // caller ignores SIGINT and SIGQUIT while it waits (as system(3) does), so
  // the child decides how to stop and the caller still reports what happened.
  bool new_process_group = true;
};

struct ProcessResult {
  int exit_status = -1;        // exit code; 128+signal when killed by a signal
  bool timed_out = false;
  std::string output;          // stdout and stderr interleaved (when captured)
  double seconds = 0;          // wall time
  int64_t peak_rss_bytes = 0;  // max resident set size of the child (getrusage)
};

// Runs argv[0] (looked up in PATH when it has no '/') with argv and waits.
// Errors: the program cannot be started (not found, not executable, exec
// failed, the working directory cannot be entered).
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Quotes `s` for /bin/sh (single quotes when needed).
std::string ShellQuote(const std::string& s);
std::string ShellJoin(const std::vector<std::string>& argv);

// Finds `program` in PATH; empty when absent.
std::string FindInPath(const std::string& program);

}  // namespace npc
