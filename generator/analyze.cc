#include "generator/analyze.h"
#include "generator/files.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "compilers/process.h"
#include "generator/commands.h"
#include "generator/import.h"  // ExpandHloPaths
#include "host/host_backend.h"
#include "npc/cache.h"
#include "npc/compiler.h"
#include "npc/hlo.h"
#include "npc/log.h"

namespace npc::tool {

namespace fs = std::filesystem;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

std::string CanonicalBackend(const std::string& backend) { return backend == "neuron" ? "neuronx-cc" : backend; }

// The backend a command line selects: --backend, else NPC_BACKEND, else host.
std::string SelectedBackend(const ToolOptions& options) {
  if (!options.backend.empty()) return CanonicalBackend(options.backend);
  return CanonicalBackend(CompilerOptionsFromEnvironment().backend);
}

// The cache entry `file` belongs to ("<compiler dir>/MODULE_<key>+<hash>"),
// when it is an entry's HLO file.
std::optional<cache::EntryRef> EntryOfFile(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name != cache::kHloFile && name != cache::kLegacyHloFile) return std::nullopt;
  const fs::path entry_dir = file.parent_path();
  return cache::ParseEntryDirName(entry_dir.parent_path().filename().string(), entry_dir.filename().string());
}

std::string Join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string CountList(const std::map<std::string, int64_t>& counts) {
  std::vector<std::string> items;
  for (const auto& [key, n] : counts) items.push_back(key + " x" + std::to_string(n));
  return Join(items, ", ");
}

int64_t CountOf(const std::map<std::string, int64_t>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

namespace {

// Why the support of `backend` (canonical name) is not checked; empty when it is.
std::string NotCheckedNote(const std::string& backend) {
  if (backend == "host") return "";
  if (backend == "neuronx-cc") {
    return "not checked: which HLO ops neuronx-cc supports is known only to neuronx-cc, and analyze does not run "
           "it (compile the graphs, e.g. `neuron_parallel_compile --command compile`, to find out)";
  }
  if (backend == "pjrt") {
    return "not checked: the pjrt backend compiles what XLA compiles, and analyze does not run XLA (compile the "
           "graphs to find out)";
  }
  return "not checked: unknown backend '" + backend + "'";
}

}  // namespace

BackendSupport CheckBackendSupport(const std::string& backend_name, const xla::HloModuleProto& module) {
  BackendSupport s;
  s.backend = CanonicalBackend(backend_name);
  s.note = NotCheckedNote(s.backend);
  s.checked = s.note.empty();
  if (s.backend == "host") s.unsupported = host::UnsupportedOpcodes(module);
  return s;
}

void AnalyzePaths(const std::vector<std::string>& paths, AnalysisReport* report) {
  std::vector<std::string> files;
  for (const auto& path : paths) {
    auto expanded = ExpandHloPaths({path});
    if (!expanded) {
      report->errors.push_back({AbsolutePath(path), expanded.error().message});
      continue;
    }
    files.insert(files.end(), expanded->begin(), expanded->end());
  }
  std::set<std::string> seen;
  for (const auto& file : files) {
    const std::string abs = AbsolutePath(file);
    if (!seen.insert(abs).second) continue;  // named twice
    auto entry = EntryOfFile(abs);
    // An entry with both HLO files is read from model.hlo_module.pb, as the cache does.
    if (entry && fs::path(abs).filename().string() == cache::kLegacyHloFile &&
        fs::exists(fs::path(abs).parent_path() / std::string(cache::kHloFile))) {
      continue;
    }
    auto module = hlo::ReadHloModuleFile(abs);
    if (!module) {
      report->errors.push_back({abs, module.error().message});
      continue;
    }
    AnalyzedModule m;
    m.source = abs;
    if (entry) {
      m.entry = entry->dir();
      m.graph_key = entry->graph_key;
    } else {
      m.graph_key = hlo::CanonicalGraphKey(*module);
    }
    m.analysis = hlo::AnalyzeModule(*module);
    m.support = CheckBackendSupport(report->backend, *module);
    if (report->verbosity >= 2) {
      for (const auto& [key, reason] : m.support.unsupported) {
        auto found = hlo::InstructionsWithOpKey(*module, key);
        m.unsupported_instructions.insert(m.unsupported_instructions.end(), found.begin(), found.end());
      }
    }
    report->modules.push_back(std::move(m));
  }
}

nlohmann::ordered_json AnalysisReportToJson(const AnalysisReport& report) {
  using J = nlohmann::ordered_json;
  const std::string note = NotCheckedNote(CanonicalBackend(report.backend));
  const bool checked = note.empty();
  J out;
  out["format"] = kAnalysisFormat;
  out["version"] = kAnalysisVersion;
  out["backend"] = report.backend;
  out["support_checked"] = checked;
  if (!checked) out["support_note"] = note;
  out["verbosity"] = report.verbosity;
  if (report.verbosity >= 2 && CanonicalBackend(report.backend) == "host") {
    out["backend_supported_ops"] = host::SupportedOpcodes();
  }
  out["inputs"] = report.inputs;
  if (report.command) {
    out["command"] = *report.command;
    out["command_exit_status"] = report.command_exit_status;
  }

  int64_t supported = 0, unsupported = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> unsupported_ops, targets;  // key -> (modules, instructions)
  J modules = J::array();
  for (const auto& m : report.modules) {
    const hlo::ModuleAnalysis& a = m.analysis;
    J j;
    j["source"] = m.source;
    if (!m.entry.empty()) j["entry"] = m.entry;
    j["name"] = a.name;
    j["graph_key"] = m.graph_key;
    j["computations"] = a.computations;
    j["computations_reachable"] = a.computations_reachable;
    j["instructions"] = a.instructions;
    j["instructions_reachable"] = a.instructions_reachable;
    j["element_types"] = a.element_types;
    j["custom_call_targets"] = J::object();
    for (const auto& [target, n] : a.custom_call_targets) {
      j["custom_call_targets"][target] = n;
      targets[target].first += 1;
      targets[target].second += n;
    }
    j["input_output_aliases"] = a.input_output_aliases;
    j["elided_constants"] = a.elided_constants;
    J ops = J::array();
    if (m.support.checked) {
      j["supported"] = m.support.unsupported.empty();
      (m.support.unsupported.empty() ? supported : unsupported) += 1;
      for (const auto& [key, reason] : m.support.unsupported) {
        const int64_t n = CountOf(a.op_keys, key);
        ops.push_back(J{{"op", key}, {"instructions", n}, {"reason", reason}});
        unsupported_ops[key].first += 1;
        unsupported_ops[key].second += n;
      }
    } else {
      j["supported"] = nullptr;
    }
    j["unsupported_ops"] = ops;
    if (report.verbosity >= 2) {
      j["opcodes"] = a.opcodes;
      j["opcodes_reachable"] = a.opcodes_reachable;
      J params = J::array();
      for (const auto& p : a.parameters)
        params.push_back(J{{"number", p.number}, {"name", p.name}, {"shape", p.shape}});
      j["parameters"] = params;
      j["result_shape"] = a.result_shape;
      j["outputs"] = a.outputs;
      if (m.support.checked) {
        J supported_ops = J::array();
        for (const auto& [key, n] : a.op_keys_reachable) {
          if (!m.support.unsupported.count(key)) supported_ops.push_back(key);
        }
        j["supported_ops"] = supported_ops;
      }
      J insts = J::array();
      for (const auto& i : m.unsupported_instructions) {
        insts.push_back(J{{"op", i.op_key},
                          {"computation", i.computation},
                          {"instruction", i.name},
                          {"reachable", i.reachable},
                          {"shape", i.shape},
                          {"operand_shapes", i.operand_shapes},
                          {"op_type", i.op_type},
                          {"op_name", i.op_name},
                          {"source_file", i.source_file},
                          {"source_line", i.source_line}});
      }
      j["unsupported_instructions"] = insts;
    }
    modules.push_back(std::move(j));
  }

  J summary;
  summary["modules"] = report.modules.size();
  summary["errors"] = report.errors.size();
  summary["supported"] = checked ? J(supported) : J(nullptr);
  summary["unsupported"] = checked ? J(unsupported) : J(nullptr);
  summary["unsupported_ops"] = J::object();
  for (const auto& [key, c] : unsupported_ops)
    summary["unsupported_ops"][key] = J{{"modules", c.first}, {"instructions", c.second}};
  summary["custom_call_targets"] = J::object();
  for (const auto& [key, c] : targets)
    summary["custom_call_targets"][key] = J{{"modules", c.first}, {"instructions", c.second}};
  out["summary"] = summary;
  out["modules"] = modules;
  J errors = J::array();
  for (const auto& e : report.errors) errors.push_back(J{{"source", e.source}, {"error", e.message}});
  out["errors"] = errors;
  return out;
}

std::string AnalysisReportToText(const AnalysisReport& report) {
  std::ostringstream out;
  int64_t supported = 0;
  std::map<std::string, int64_t> unsupported_modules;
  for (const auto& m : report.modules) {
    const hlo::ModuleAnalysis& a = m.analysis;
    out << a.name << "  " << (m.entry.empty() ? m.source : m.entry) << "\n";
    out << "  " << a.instructions << (a.instructions == 1 ? " instruction in " : " instructions in ") << a.computations
        << (a.computations == 1 ? " computation" : " computations") << "; element types " << Join(a.element_types, ", ")
        << "\n";
    if (!a.custom_call_targets.empty()) out << "  custom-calls: " << CountList(a.custom_call_targets) << "\n";
    if (report.verbosity >= 2) {
      std::vector<std::string> params;
      for (const auto& p : a.parameters) params.push_back(p.name + ": " + p.shape);
      out << "  parameters: " << (params.empty() ? "none" : Join(params, ", ")) << "\n";
      out << "  outputs: " << Join(a.outputs, ", ") << "\n";
      out << "  opcodes: " << CountList(a.opcodes) << "\n";
    }
    if (!m.support.checked) {
      out << "  " << m.support.backend << " support " << m.support.note << "\n";
    } else if (m.support.unsupported.empty()) {
      ++supported;
      out << "  supported by the " << m.support.backend << " backend\n";
    } else {
      out << "  NOT supported by the " << m.support.backend << " backend:\n";
      for (const auto& [key, reason] : m.support.unsupported) {
        ++unsupported_modules[key];
        if (key.empty()) {
          out << "    (the module itself): " << reason << "\n";
        } else {
          out << "    " << key << " x" << CountOf(a.op_keys, key) << ": " << reason << "\n";
        }
      }
      for (const auto& i : m.unsupported_instructions) {
        out << "      %" << i.name << " in " << i.computation << (i.reachable ? "" : " (unreachable)") << ": "
            << i.shape << " " << i.op_key << "(" << Join(i.operand_shapes, ", ") << ")";
        if (!i.op_type.empty()) out << "  op_type=" << i.op_type;
        if (!i.source_file.empty()) out << "  at " << i.source_file << ":" << i.source_line;
        out << "\n";
      }
    }
  }
  for (const auto& e : report.errors) out << "error: " << e.message << "\n";
  out << "analyzed " << report.modules.size() << (report.modules.size() == 1 ? " module" : " modules");
  if (!report.errors.empty()) out << ", " << report.errors.size() << " unreadable";
  const bool checked = NotCheckedNote(CanonicalBackend(report.backend)).empty();
  if (checked) {
    out << "; " << supported << " supported by the " << report.backend << " backend";
    if (!unsupported_modules.empty()) {
      std::vector<std::string> items;
      for (const auto& [key, n] : unsupported_modules) {
        items.push_back(key + " (" + std::to_string(n) + (n == 1 ? " module)" : " modules)"));
      }
      out << "; unsupported: " << Join(items, ", ");
    }
  } else if (!report.modules.empty()) {
    out << "; " << report.backend << " support not checked";
  }
  out << "\n";
  return out.str();
}

void AddAnalyzeOptions(CLI::App& app, ToolOptions& options) {
  app.add_option("--analyze-output,--analyze_output", options.analyze_output,
                 "analyze: directory of result.json (default: ./model_analysis_result)");
  app.add_option("--analyze-verbosity,--analyze_verbosity", options.analyze_verbosity,
                 "analyze: 1 (default): per-module summary and unsupported ops; 2: adds opcode counts, "
                 "parameter and output shapes, and every unsupported instruction")
      ->check(CLI::Range(1, 2));
}

namespace {

// NEURON_CC_FLAGS for the trial run: the compiler flags (and log level) of
// the caller's, without the cache location flags, so that the runtime
// extracts into NEURON_COMPILE_CACHE_URL (the trial cache).
Result<std::string> TrialNeuronCcFlags() {
  auto flags = cache::ParseNeuronCcFlags(Env("NEURON_CC_FLAGS"));
  if (!flags) return MakeError("NEURON_CC_FLAGS: " + flags.error().message);
  std::vector<std::string> words = flags->compiler_flags;
  if (flags->log_level) words.push_back("--log_level=" + *flags->log_level);
  return ShellJoin(words);
}

int Finish(const ToolOptions& options, AnalysisReport& report, int failure_status) {
  std::cout << AnalysisReportToText(report);
  const std::string dir = AbsolutePath(options.analyze_output.empty() ? kDefaultAnalyzeOutput : options.analyze_output);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    log::Error(log::kParallelCompile, "cannot create the analyze output directory " + dir + ": " + ec.message());
    return 1;
  }
  const std::string path = dir + "/" + kAnalysisResultFile;
  // Names and messages taken from the input need not be UTF-8: invalid bytes
  // become U+FFFD instead of an exception.
  const std::string text = AnalysisReportToJson(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (auto st = WriteFileAtomic(path, text + "\n"); !st) {
    log::Error(log::kParallelCompile, st.error().message);
    return 1;
  }
  std::cout << "wrote " << path << "\n";
  if (failure_status != 0) return failure_status;
  return report.errors.empty() ? 0 : 1;
}

int RunAnalyzeTrial(const ToolOptions& options, AnalysisReport& report) {
  const std::string out_dir =
      AbsolutePath(options.analyze_output.empty() ? kDefaultAnalyzeOutput : options.analyze_output);
  const std::string trial_cache = out_dir + "/" + kTrialCacheDir;
  std::error_code ec;
  fs::remove_all(trial_cache, ec);
  if (!ec) fs::create_directories(trial_cache, ec);
  if (ec) {
    log::Error(log::kParallelCompile, "cannot create the trial cache " + trial_cache + ": " + ec.message());
    return 1;
  }
  auto cc_flags = TrialNeuronCcFlags();
  if (!cc_flags) {
    log::Error(log::kParallelCompile, cc_flags.error().message);
    return 1;
  }
  log::Info(log::kCache, "Compile cache path: " + trial_cache);
  log::Info(log::kParallelCompile, "Running trial run to extract graphs for analysis: " + ShellJoin(options.command));
  ProcessOptions po;
  po.capture_output = false;
  po.new_process_group = false;
  po.set_env = {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"},
                {"NEURON_PARALLEL_COMPILE", "1"},
                {"NEURON_FALL_BACK_TO_NULL_NEFF", "1"},
                {"NEURON_COMPILE_CACHE_URL", trial_cache},
                {"NEURON_CC_FLAGS", *cc_flags}};
  if (!options.backend.empty()) po.set_env["NPC_BACKEND"] = options.backend;
  if (!options.compiler.empty()) po.set_env["NPC_COMPILER"] = options.compiler;
  auto run = RunProcess(options.command, po);
  if (!run) {
    log::Error(log::kParallelCompile, "cannot run the training command: " + run.error().message);
    return 127;
  }
  report.command = options.command;
  report.command_exit_status = run->exit_status;
  int failure = 0;
  if (run->exit_status != 0) {
    failure = run->exit_status > 0 && run->exit_status <= 255 ? run->exit_status : 1;
    log::Error(log::kParallelCompile, "The training command exited with status " + std::to_string(run->exit_status) +
                                          "; analysing the graphs it extracted before that");
  }
  report.inputs = {trial_cache};
  bool any = false;
  for (fs::recursive_directory_iterator it(trial_cache, ec), end; !ec && it != end; it.increment(ec)) {
    if (EntryOfFile(it->path())) {
      any = true;
      break;
    }
  }
  if (any) {
    AnalyzePaths({trial_cache}, &report);
  } else {
    log::Warning(log::kParallelCompile, "The trial run extracted no graphs into " + trial_cache +
                                            " (does the program use the Neuron/npc runtime?)");
  }
  return Finish(options, report, failure);
}

}  // namespace

int RunAnalyze(const ToolOptions& options) {
  AnalysisReport report;
  report.backend = SelectedBackend(options);
  report.verbosity = options.analyze_verbosity;
  if (options.analyze_trial) {
    if (options.command.empty()) {
      std::cerr << "neuron_parallel_compile: --command analyze needs a training command\n";
      return 2;
    }
    return RunAnalyzeTrial(options, report);
  }
  std::vector<std::string> paths = options.command;
  if (paths.empty()) {
    // The selected backend's entries in the resolved cache.
    auto ctx = OpenToolContext(options);
    if (!ctx) {
      log::Error(log::kParallelCompile, ctx.error().message);
      return 1;
    }
    if (!ctx->store->LocalPath(ctx->compiler_dir)) {
      log::Error(log::kParallelCompile, "npc analyze reads local files; " + ctx->cache_url +
                                            " is not a local cache (give HLO files or folders)");
      return 1;
    }
    paths.push_back(ctx->compiler_dir_path);
  }
  report.inputs = paths;
  AnalyzePaths(paths, &report);
  return Finish(options, report, 0);
}

}  // namespace npc::tool
