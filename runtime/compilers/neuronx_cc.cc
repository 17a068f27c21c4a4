// The neuronx-cc driver (see npc/compiler.h).
#include "compilers/neuronx_cc.h"

#include <filesystem>
#include <regex>

#include "compilers/process.h"

namespace npc {

NeuronxCcCompiler::NeuronxCcCompiler(CompilerOptions options) : options_(std::move(options)) {
  if (options_.program.empty()) options_.program = "neuronx-cc";
}

Result<std::string> ParseNeuronxCcVersion(const std::string& version_output) {
  // `neuronx-cc --version` prints e.g. "NeuronX Compiler version 2.16.372.0+4a9b2326".
  static const std::regex re(R"(version\s+([0-9][0-9A-Za-z.+_-]*))", std::regex::icase);
  std::smatch m;
  if (std::regex_search(version_output, m, re)) return m[1].str();
  return MakeError("cannot find a version in the output of `neuronx-cc --version`: " + version_output.substr(0, 200));
}

Result<std::string> NeuronxCcCompiler::CacheDirectoryName() {
  if (!options_.version_override.empty()) return "neuronxcc-" + options_.version_override;
  if (!cached_dir_.empty()) return cached_dir_;
  auto run = RunProcess({options_.program, "--version"});
  if (!run) return MakeError("neuronx-cc backend: " + run.error().message);
  if (run->exit_status != 0) {
    return MakeError("neuronx-cc backend: `" + options_.program + " --version` exited with status " +
                     std::to_string(run->exit_status) + ": " + run->output.substr(0, 500));
  }
  auto version = ParseNeuronxCcVersion(run->output);
  if (!version) return version.error();
  cached_dir_ = "neuronxcc-" + *version;
  return cached_dir_;
}

std::vector<std::string> NeuronxCcCompiler::CommandLine(const CompileJob& job) const {
  std::vector<std::string> argv = {options_.program, "compile", "--framework=XLA", job.hlo_path,
                                   "--output", job.artifact_path};
  bool has_target = false;
  for (const auto& f : job.flags) has_target |= f.rfind("--target", 0) == 0;
  if (!has_target) argv.push_back("--target=" + options_.target);
  argv.insert(argv.end(), job.flags.begin(), job.flags.end());
  argv.push_back("--verbose=35");
  return argv;
}

CompileOutcome NeuronxCcCompiler::Compile(const CompileJob& job) {
  CompileOutcome outcome;
  std::vector<std::string> argv = CommandLine(job);
  outcome.command = ShellJoin(argv);
  ProcessOptions popts;
  popts.cwd = job.work_dir;
  auto run = RunProcess(argv, popts);
  if (!run) {
    outcome.exit_status = 127;
    outcome.output = run.error().message;
    return outcome;
  }
  outcome.exit_status = run->exit_status;
  outcome.output = run->output;
  outcome.seconds = run->seconds;
  outcome.peak_rss_bytes = run->peak_rss_bytes;
  std::error_code ec;
  bool has_artifact = std::filesystem::is_regular_file(job.artifact_path, ec);
  outcome.ok = run->exit_status == 0 && has_artifact;
  if (run->exit_status == 0 && !has_artifact) {
    outcome.exit_status = 1;
    outcome.output += "\nnpc: neuronx-cc exited 0 but wrote no " + job.artifact_path + "\n";
  }
  return outcome;
}

}  // namespace npc
