// Helpers shared by npc's tests: temporary directories, file I/O, running
// commands. Failures inside the helpers are reported as gtest failures
// (ADD_FAILURE) and the helper returns an empty/neutral value, so a test can
// keep going and report more.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "npc/hlo.pb.h"

namespace npc::testing {

// A fresh directory made with mkdtemp under $TMPDIR (else /tmp), removed with
// everything in it when destroyed, unless the environment variable
// NPC_KEEP_TEST_DIRS is set (non-empty), in which case its path is printed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "npc-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + relative
  std::string Sub(const std::string& relative) const { return path_ + "/" + relative; }

 private:
  std::string path_;
};

// Whole-file read; on error an empty string and a gtest failure.
std::string ReadFile(const std::string& path);
// Whole-file write (creating missing parent directories); returns false (and
// records a gtest failure) on error.
bool WriteFile(const std::string& path, const std::string& data);
bool FileExists(const std::string& path);
// Removes a file or a directory tree; absent is fine.
void RemoveAll(const std::string& path);

struct CommandResult {
  int exit_status = -1;  // exit code; 128+signal when killed by a signal; -1 when not started
  std::string output;    // stdout and stderr interleaved
};

// Runs argv (argv[0] looked up in PATH when it has no '/'), with `env`
// added to / overriding the environment, in `cwd` (empty: the current one).
// An entry of `env` whose value is the string "<unset>" removes that variable.
// When the program cannot be started: exit_status -1 and the reason in output.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         const std::string& cwd = "");

// The value of the environment variable `name`, or `fallback`.
std::string GetEnv(const std::string& name, const std::string& fallback = "");

// ---- compile-cache fixtures -------------------------------------------------

// A small valid module the host backend compiles: f32[n] x -> ((x * scale) + x).
// Different n or scale give different graph keys.
xla::HloModuleProto SmallTestModule(int64_t n, float scale = 2.0f);
// A valid module with an op the host backend does not implement ("cholesky").
xla::HloModuleProto UnsupportedOpModule();

// The host backend's compiler directory name (e.g. "host-gcc-12.2.0-x86_64-linux-gnu-cg3") for
// the C++ compiler `program` (empty: NPC_COMPILER / CXX / the default, as the
// runtime picks). Empty string and a gtest failure on error.
std::string HostCompilerDir(const std::string& program = "");

// Writes a TODO entry (HLO and compile_flags.json "[]") into the local cache
// at `cache_root`, as the runtime's trial run would; returns the entry
// directory relative to the root ("<compiler dir>/MODULE_<key>+<hash>").
// `graph_key` empty: the module's canonical key (needs a parseable module).
std::string PutTestEntry(const std::string& cache_root, const std::string& compiler_dir,
                         const xla::HloModuleProto& module, const std::string& graph_key = "");
std::string PutTestEntryBytes(const std::string& cache_root, const std::string& compiler_dir,
                              const std::string& hlo_bytes, const std::string& graph_key);

}  // namespace npc::testing
