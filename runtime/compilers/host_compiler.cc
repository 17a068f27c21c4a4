#include "compilers/host_compiler.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "compilers/process.h"
#include "host/host_backend.h"
#include "npc/hlo.h"

namespace npc {

HostCompiler::HostCompiler(CompilerOptions options) : options_(std::move(options)) {
  if (options_.program.empty()) {
    const char* cxx = std::getenv("CXX");
    options_.program = (cxx && *cxx) ? cxx : NPC_DEFAULT_CXX;
  }
}

Result<std::string> HostCompiler::CacheDirectoryName() {
  const std::string suffix = "-cg" + std::to_string(host::kCodegenVersion);
  if (!options_.version_override.empty()) return "host-" + options_.version_override + suffix;
  if (!cached_dir_.empty()) return cached_dir_;
  auto banner = RunProcess({options_.program, "--version"});
  if (!banner) return MakeError("host backend: " + banner.error().message);
  if (banner->exit_status != 0) {
    return MakeError("host backend: `" + options_.program + " --version` exited with status " +
                     std::to_string(banner->exit_status));
  }
  std::string id = banner->output.find("clang") != std::string::npos ? "clang" : "gcc";
  auto version = RunProcess({options_.program, id == "gcc" ? "-dumpfullversion" : "-dumpversion"});
  if (!version || version->exit_status != 0) return MakeError("host backend: cannot ask " + options_.program + " its version");
  std::string v = version->output;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
  cached_dir_ = "host-" + id + "-" + v + suffix;
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
