// Running the interactive children of the CLI: the training command and ninja.
//
// Unlike npc::RunProcess (which puts each child in a new process group, right
// for compilers), these children stay in the caller's process group and
// inherit its terminal, so Ctrl-C reaches them and they can read the
// terminal. While waiting, the caller ignores SIGINT and SIGQUIT (as
// system(3) does) so that the child decides how to stop and the caller
// still reports what happened.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "npc/result.h"

namespace npc::tool {

// Runs argv (argv[0] looked up in PATH) with `set_env` added to the
// environment; stdin, stdout and stderr inherited. Returns the exit status,
// 128+signal when killed by a signal. Errors: the program cannot be started.
Result<int> RunInteractive(const std::vector<std::string>& argv, const std::map<std::string, std::string>& set_env);

}  // namespace npc::tool
