#include "compilers/host_compiler.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compilers/process.h"
#include "host/host_backend.h"
#include "npc/hlo.h"
#include "util/atomic_file.h"

namespace npc {

HostCompiler::HostCompiler(CompilerOptions options) : options_(std::move(options)) {
  if (options_.program.empty()) {
    const char* cxx = std::getenv("CXX");
    options_.program = (cxx && *cxx) ? cxx : NPC_DEFAULT_CXX;
  }
}

namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// What identifies the compiler binaries `program` runs, without running them:
// for each word, the file it resolves to (PATH for a bare name, symbolic links
// followed) with its size, modification time and inode; a word that is no
// file (a flag) stands for itself.
std::string CompilerStamp(const std::string& program) {
  std::istringstream words(program);
  std::string word, stamp;
  while (words >> word) {
    std::string path = word.find('/') == std::string::npos ? FindInPath(word) : word;
    struct stat st;
    std::error_code ec;
    std::string real = path.empty() ? "" : std::filesystem::canonical(path, ec).string();
    if (!real.empty() && !ec && stat(real.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      stamp += real + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
               std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino) + " ";
    } else {
      stamp += word + " ";
    }
  }
  return stamp;
}

std::string MemoFile() {
  std::string base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::string(home) + "/.cache";
  } else {
    return "";
  }
  return base + "/npc/compiler-ids.json";
}

// The memo of compiler identities, {"<stamp>": "<gcc|clang>-<version>-<triple>"}.
// Read and written best-effort: a missing or unreadable memo only costs a probe.
nlohmann::json ReadMemo(const std::string& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Runs the compiler: `--version` (gcc or clang), its version, `-dumpmachine`.
Result<std::string> ProbeCompiler(const std::string& program) {
  auto banner = RunProcess({program, "--version"});
  if (!banner) return MakeError("host backend: " + banner.error().message);
  if (banner->exit_status != 0) {
    return MakeError("host backend: `" + program + " --version` exited with status " +
                     std::to_string(banner->exit_status));
  }
  std::string id = banner->output.find("clang") != std::string::npos ? "clang" : "gcc";
  auto version = RunProcess({program, id == "gcc" ? "-dumpfullversion" : "-dumpversion"});
  if (!version || version->exit_status != 0) return MakeError("host backend: cannot ask " + program + " its version");
  auto machine = RunProcess({program, "-dumpmachine"});
  if (!machine || machine->exit_status != 0 || Trimmed(machine->output).empty()) {
    return MakeError("host backend: cannot ask " + program + " its target (-dumpmachine)");
  }
  return id + "-" + Trimmed(version->output) + "-" + Trimmed(machine->output);
}

// ProbeCompiler, memoized in this process and in MemoFile() across processes.
Result<std::string> CompilerIdentity(const std::string& program) {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  const std::string stamp = program + "|" + CompilerStamp(program);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(stamp); it != known.end()) return it->second;
  const std::string file = MemoFile();
  nlohmann::json memo = file.empty() ? nlohmann::json::object() : ReadMemo(file);
  if (auto it = memo.find(stamp); it != memo.end() && it->is_string()) return known[stamp] = it->get<std::string>();
  auto identity = ProbeCompiler(program);
  if (!identity) return identity;
  known[stamp] = *identity;
  if (!file.empty()) {
    if (memo.size() >= 64) memo = nlohmann::json::object();  // bounded: start over
    memo[stamp] = *identity;
    (void)util::WriteFileAtomic(file, memo.dump() + "\n");
  }
  return identity;
}

}  // namespace

Result<std::string> HostCompiler::CacheDirectoryName() {
  const std::string suffix = "-cg" + std::to_string(host::kCodegenVersion);
  if (!options_.version_override.empty()) {
    struct utsname u;
    std::string machine = uname(&u) == 0 ? u.machine : "unknown";
    return "host-" + options_.version_override + "-" + machine + suffix;
  }
  if (!cached_dir_.empty()) return cached_dir_;
  auto identity = CompilerIdentity(options_.program);
  if (!identity) return identity.error();
  cached_dir_ = "host-" + *identity + suffix;
  return cached_dir_;
}

CompileOutcome HostCompiler::Compile(const CompileJob& job) {
  CompileOutcome outcome;
  auto start = std::chrono::steady_clock::now();
  auto finish = [&](bool ok, int status) {
    outcome.ok = ok;
    outcome.exit_status = status;
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    struct rusage usage;
    if (getrusage(RUSAGE_CHILDREN, &usage) == 0) outcome.peak_rss_bytes = int64_t{usage.ru_maxrss} * 1024;
    return outcome;
  };
  outcome.command = "npc host backend: " + job.hlo_path + " -> " + job.artifact_path;
  if (!job.flags.empty()) {
    outcome.output += "host backend: compiler flags are part of the cache key and otherwise ignored: " +
                      ShellJoin(job.flags) + "\n";
  }
  auto module = hlo::ReadHloModuleFile(job.hlo_path);
  if (!module) {
    outcome.output += module.error().message + "\n";
    return finish(false, 1);
  }
  auto source = host::GenerateCpp(*module);
  if (!source) {
    outcome.output += source.error().message + "\n";
    return finish(false, 1);
  }
  const std::string source_path = job.work_dir + "/model.cc";
  {
    std::ofstream out(source_path, std::ios::binary);
    out << *source;
    if (!out) {
      outcome.output += "cannot write " + source_path + "\n";
      return finish(false, 1);
    }
  }
  std::string log;
  Status st = host::CompileSharedObject(options_.program, source_path, job.artifact_path, &log);
  outcome.command = log.substr(0, log.find('\n'));
  outcome.output += log;
  if (!st) {
    outcome.output += st.error().message + "\n";
    return finish(false, 1);
  }
  return finish(true, 0);
}

}  // namespace npc
