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
  // the child decides how to stop and the caller still reports what happened
  // (with InstallInterruptForwarding, SIGINT is handled as described there).
  // Either way the child is stopped when the calling thread dies (Linux
  // PR_SET_PDEATHSIG): SIGKILL for a group leader (a compiler), SIGTERM for a
  // foreground child (ninja, which then stops its build edges).
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

// ---- interruption (the command-line tools) ---------------------------------

// After this call, SIGINT, SIGTERM and SIGHUP (those not ignored when it is
// called, so `nohup` keeps working) received by the process are
// recorded (InterruptSignal) and forwarded to every child RunProcess is
// running: to the child's whole process group when it leads one
// (new_process_group), and to a foreground child only when a process sent the
// signal (kill(1), a job scheduler): Ctrl-C or a hangup from the terminal has
// reached the foreground child already. RunProcess then waits for the child
// as usual, and starts no new child once a signal has arrived (an error
// naming the signal).
// `defer` false: a signal that arrives while no child runs ends the process
// at once (its default action). true: it is only recorded; the program checks
// InterruptSignal() and stops by itself (npc compile-entry, which releases its
// entry lock first and exits with 128 + the signal).
void InstallInterruptForwarding(bool defer);
// The first SIGINT/SIGTERM/SIGHUP recorded since InstallInterruptForwarding;
// 0 when none (always 0 without it).
int InterruptSignal();

// Quotes `s` for /bin/sh (single quotes when needed).
std::string ShellQuote(const std::string& s);
std::string ShellJoin(const std::vector<std::string>& argv);

// Finds `program` in PATH; empty when absent.
std::string FindInPath(const std::string& program);

}  // namespace npc
