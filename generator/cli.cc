#include "generator/cli.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "compilers/process.h"
#include "generator/analyze.h"
#include "generator/commands.h"
#include "generator/explain.h"
#include "generator/manifest.h"  // manifest, verify, import; --manifest, --offline
#include "generator/prune.h"
#include "npc/log.h"

namespace npc::tool {

namespace {

// Index of the first word of the training command in argv[begin...]: the
// first word that is neither an option nor an option's value, or the word
// after "--". *dashdash tells whether "--" was seen (it is not part of the
// command).
size_t SplitAtCommand(const CLI::App& app, const std::vector<std::string>& argv, size_t begin, bool* dashdash) {
  *dashdash = false;
  size_t i = begin;
  while (i < argv.size()) {
    const std::string& a = argv[i];
    if (a == "--") {
      *dashdash = true;
      return i;
    }
    if (a.size() < 2 || a[0] != '-') return i;  // the command's first word ("-" alone too)
    if (a.find('=') != std::string::npos) {
      ++i;
      continue;
    }
    const CLI::Option* opt = app.get_option_no_throw(a);
    i += (opt != nullptr && opt->get_items_expected_min() > 0) ? 2 : 1;
  }
  return argv.size();
}

void AddCommonOptions(CLI::App& app, ToolOptions& o) {
  app.add_option("--cache_dir,--cache", o.cache_dir,
                 "Compile cache root (default: --cache_dir in NEURON_CC_FLAGS, else NEURON_COMPILE_CACHE_URL, "
                 "else /var/tmp/neuron-compile-cache)");
  app.add_option("--build_dir", o.build_dir,
                 "Where build.ninja, per-entry results and ninja's logs go "
                 "(default: <cache root>/<compiler dir>/.npc-build; for an s3:// cache "
                 "<local copy dir>/.npc-build/<compiler dir>, the local copy dir being $NPC_LOCAL_CACHE_DIR, "
                 "else ~/.cache/npc/<cache URL>)");
  app.add_option("--backend", o.backend, "Compiler backend (default: NPC_BACKEND, else host)")
      ->check(CLI::IsMember({"host", "neuronx-cc", "neuron", "pjrt"}));
  app.add_option("--compiler", o.compiler,
                 "Compiler program: the C++ compiler for host, neuronx-cc for neuronx-cc, the PJRT plugin for pjrt "
                 "(default: NPC_COMPILER; pjrt: NPC_PJRT_PLUGIN first)");
  app.add_option("--num_parallel", o.num_parallel,
                 "Most compiles at once (default: the number of CPUs); also bounded by available memory "
                 "divided by the memory one compile needs")
      ->check(CLI::Range(1, 100000));
  app.add_option("--log_level", o.log_level, "Log level: debug, info, warning, error")
      ->check([](const std::string& s) {
        std::string l;
        for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (const char* ok : {"debug", "info", "warning", "warn", "error"}) {
          if (l == ok) return std::string();
        }
        return "unknown log level '" + s + "'";
      });
  app.add_flag("--retry_failed_compilation", o.retry_failed_compilation,
               "Recompile entries whose earlier compile failed (cached failures)");
}

// Parses argv[begin, split) with `app`, takes argv[split...] as the command.
ParsedCommandLine ParseWith(CLI::App& app, ToolOptions& o, const std::vector<std::string>& argv, size_t begin) {
  ParsedCommandLine out;
  bool dashdash = false;
  size_t split = SplitAtCommand(app, argv, begin, &dashdash);
  std::vector<std::string> args(argv.begin() + static_cast<long>(begin), argv.begin() + static_cast<long>(split));
  std::reverse(args.begin(), args.end());  // CLI11 takes them in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    std::ostringstream sout, serr;
    out.exit_now = true;
    out.exit_status = app.exit(e, sout, serr);
    out.message = sout.str() + serr.str();
    return out;
  }
  o.command.assign(argv.begin() + static_cast<long>(split + (dashdash ? 1 : 0)), argv.end());
  out.options = o;
  return out;
}

ParsedCommandLine UsageError(const std::string& message) {
  ParsedCommandLine out;
  out.exit_now = true;
  out.exit_status = 2;
  out.message = message + "\n";
  return out;
}

bool TakesCommand(const std::string& verb) { return verb == "collect" || verb == "all"; }
// Verbs whose trailing words are files (or, for neuron_parallel_compile
// --command analyze, a training command), not forbidden extra arguments.
bool TakesFiles(const std::string& verb) { return verb == "import" || verb == "explain" || verb == "analyze"; }

}  // namespace

ParsedCommandLine ParseNeuronParallelCompileArgs(const std::vector<std::string>& argv) {
  ToolOptions o;
  CLI::App app{
      "Extracts the graphs of a trial run of a training command into the Neuron compile cache, then compiles "
      "them in parallel (with ninja).\n"
      "usage: neuron_parallel_compile [options] [--] <command...>\n"
      "Options end at the first word of the command (or at --); the command's own options are passed on.",
      "neuron_parallel_compile"};
  std::string command = "all";
  app.add_option("--command", command,
                 "all (default; also collect-and-compile): run the trial, then compile; collect: trial only; "
                 "compile: compile what the cache holds; clean: remove this compiler's entries; clear-locks: remove "
                 "stale lock files; scan: list entries and states; analyze: run the trial, then report the ops of its "
                 "graphs and which the backend does not support (result.json in --analyze-output)")
      ->check(CLI::IsMember({"all", "collect-and-compile", "collect", "compile", "clean", "clear-locks", "scan",
                             "analyze"}));
  AddCommonOptions(app, o);
  app.add_flag("--json", o.json, "scan: print JSON");
  AddAnalyzeOptions(app, o);
  auto parsed = ParseWith(app, o, argv, 1);
  if (parsed.exit_now) return parsed;
  parsed.options.verb = command == "collect-and-compile" ? "all" : command;
  if (command == "analyze") {
    parsed.options.analyze_trial = true;
    if (parsed.options.command.empty()) {
      return UsageError("neuron_parallel_compile: --command analyze needs a training command");
    }
    return parsed;
  }
  if (parsed.options.verb == "all" && parsed.options.command.empty()) {
    return UsageError("neuron_parallel_compile: no training command given\nusage: neuron_parallel_compile [options] "
                      "[--] <command...>\nRun with --help for the options.");
  }
  if (!TakesCommand(parsed.options.verb) && !parsed.options.command.empty()) {
    return UsageError("neuron_parallel_compile: --command " + command + " takes no training command, got '" +
                      parsed.options.command.front() + "'");
  }
  if (parsed.options.verb == "collect" && parsed.options.command.empty()) {
    return UsageError("neuron_parallel_compile: --command collect needs a training command");
  }
  return parsed;
}

namespace {

constexpr const char* kNpcUsage =
    "usage: npc <command> [options] [--] [training command...]\n"
    "\n"
    "commands:\n"
    "  collect -- <cmd...>  run the trial command; its graphs go into the cache; writes build.ninja\n"
    "  compile              compile what the cache holds (build.ninja + ninja), print the summary\n"
    "  all -- <cmd...>      collect, then compile\n"
    "  generate             write <build dir>/build.ninja only (for ninja by hand, CMake, other tools)\n"
    "  scan [--json]        list the entries of the cache with their states\n"
    "  clean                remove this compiler's entries from the cache\n"
    "  clear-locks          remove lock files no live process holds\n"
    "  compile-entry        compile one entry (the command of a build edge)\n"
    "  import <files...>    put HLO files (or folders of them) into the cache as entries to compile\n"
    "  analyze [files...]   the ops of HLO files / folders / caches (default: this backend's cache entries) and\n"
    "                       which the backend does not support; summary on stdout, result.json in\n"
    "                       --analyze-output (default ./model_analysis_result), --analyze-verbosity 1|2\n"
    "  prune --max_size S --max_age D  evict least recently used entries beyond a size / age (local caches)\n"
    "  explain <files...>   why an HLO file (or entry directory) is or is not a cache hit: the flags,\n"
    "                       compiler directory or instructions that differ from the nearest entry\n"
    "  manifest --manifest F  write the manifest (lock file) of the cache's entries: keys, flags, SHA-256 digests\n"
    "  verify --manifest F  recompile the manifest's entries in a scratch cache and compare artifact digests\n"
    "  (generate and compile take --manifest F [--offline]: build exactly the manifest's entries)\n"
    "\n"
    "Run `npc <command> --help` for its options.\n";

}  // namespace

ParsedCommandLine ParseNpcArgs(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return UsageError(kNpcUsage);
  const std::string& verb = argv[1];
  if (verb == "-h" || verb == "--help" || verb == "help") {
    ParsedCommandLine out;
    out.exit_now = true;
    out.message = kNpcUsage;
    return out;
  }
  if (verb == "--version" || verb == "version") {
    ParsedCommandLine out;
    out.exit_now = true;
    out.message = std::string("npc ") + NPC_TOOL_VERSION + "\n";
    return out;
  }
  static const std::vector<std::string> kVerbs = {"collect", "compile", "all",         "generate",
                                                  "scan",    "clean",   "clear-locks", "compile-entry",
                                                  "import",  "manifest", "verify",      "explain",
                                                  "prune",   "analyze"};
  if (std::find(kVerbs.begin(), kVerbs.end(), verb) == kVerbs.end()) {
    return UsageError("npc: unknown command '" + verb + "'\n\n" + kNpcUsage);
  }
  ToolOptions o;
  CLI::App app{"npc " + verb, "npc " + verb};
  AddCommonOptions(app, o);
  if (verb == "scan") app.add_flag("--json", o.json, "Print JSON");
  if (verb == "generate" || verb == "compile" || verb == "scan" || verb == "clean" || verb == "clear-locks") {
    app.add_option("--compiler_dir", o.compiler_dir,
                   "Compiler directory name under the cache root (default: asked from the compiler)");
  }
  if (verb == "compile-entry") {
    app.add_option("--entry", o.entry, "Entry directory relative to the cache root: <compiler dir>/MODULE_<key>+<hash>")
        ->required();
    app.add_option("--stamp", o.stamp, "A local file to write once the entry is DONE (the build edge's output for S3)");
  }
  if (verb == "prune") {
    app.add_option("--max_size", o.prune_max_size, "Size limit of the cache, e.g. 500M, 20G (binary units)");
    app.add_option("--max_age", o.prune_max_age, "Remove entries not used for longer than this, e.g. 12h, 30d");
    app.add_flag("--dry_run", o.prune_dry_run, "Only print what would be removed");
  }
  if (verb == "analyze") AddAnalyzeOptions(app, o);
  AddManifestOptions(app, verb, o);  // --manifest, --offline, --scratch_dir; manifest/verify/import options
  auto parsed = ParseWith(app, o, argv, 2);
  if (parsed.exit_now) return parsed;
  parsed.options.verb = verb;
  if (TakesCommand(verb) && parsed.options.command.empty()) {
    return UsageError("npc " + verb + ": no training command given (npc " + verb + " [options] -- <command...>)");
  }
  if (!TakesCommand(verb) && !TakesFiles(verb) && !parsed.options.command.empty()) {
    return UsageError("npc " + verb + ": unexpected argument '" + parsed.options.command.front() + "'");
  }
  return parsed;
}

int RunTool(const ToolOptions& options) {
  if (!options.log_level.empty()) {
    log::SetLogLevel(options.log_level);
    setenv("NPC_LOG_LEVEL", options.log_level.c_str(), 1);  // for the trial run, ninja's edges
  }
  const std::string& v = options.verb;
  // SIGINT/SIGTERM/SIGHUP reach the children (ninja, compilers, the training
  // command) and are waited for; compile-entry then releases its lock itself.
  InstallInterruptForwarding(/*defer=*/v == "compile-entry");
  if (auto status = RunManifestVerb(options)) return *status;  // manifest, verify, import, --manifest
  if (v == "all") return RunAll(options);
  if (v == "collect") return RunCollect(options, /*then_generate=*/true);
  if (v == "compile") return RunCompile(options);
  if (v == "generate") return RunGenerate(options);
  if (v == "scan") return RunScan(options);
  if (v == "clean") return RunClean(options);
  if (v == "clear-locks") return RunClearLocks(options);
  if (v == "compile-entry") return RunCompileEntry(options);
  if (v == "explain") return RunExplain(options, options.command);
  if (v == "prune") return RunPrune(options);
  if (v == "analyze") return RunAnalyze(options);
  std::cerr << "npc: unknown command '" << v << "'\n";
  return 2;
}

namespace {

int Finish(const ParsedCommandLine& parsed) {
  if (parsed.exit_now) {
    (parsed.exit_status == 0 ? std::cout : std::cerr) << parsed.message;
    return parsed.exit_status;
  }
  return RunTool(parsed.options);
}

}  // namespace

int NeuronParallelCompileMain(int argc, char** argv) {
  return Finish(ParseNeuronParallelCompileArgs(std::vector<std::string>(argv, argv + argc)));
}

int NpcMain(int argc, char** argv) { return Finish(ParseNpcArgs(std::vector<std::string>(argv, argv + argc))); }

}  // namespace npc::tool
