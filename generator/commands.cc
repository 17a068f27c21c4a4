#include "generator/commands.h"
#include "generator/files.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/read_through.h"
#include "cache/s3_store.h"
#include "compilers/process.h"
#include "generator/ninja_writer.h"
#include "generator/pool.h"
#include "generator/results.h"
#include "npc/log.h"

namespace npc::tool {

namespace fs = std::filesystem;
using cache::EntryState;

namespace {

// Runs the training command or ninja in the foreground: stdin/stdout/stderr
// and the terminal inherited, Ctrl-C reaching the child (see ProcessOptions).
// Returns the exit status, 128+signal when killed by a signal.
Result<int> RunInteractive(const std::vector<std::string>& argv, const std::map<std::string, std::string>& set_env) {
  ProcessOptions options;
  options.set_env = set_env;
  options.capture_output = false;
  options.new_process_group = false;
  auto run = RunProcess(argv, options);
  if (!run) return run.error();
  return run->exit_status;
}

constexpr std::string_view kBuildDirName = ".npc-build";
constexpr std::string_view kNinjaFile = "build.ninja";
constexpr std::string_view kDumpResultsFile = "neuron_parallel_compile_results.json";
// <build dir>/store-unreachable: written by a build edge that gave up on a
// remote store (a request still failing when its retries were spent), holding
// that error. An edge that starts while the file is younger than the store's
// retry time limit fails at once, naming it, instead of spending that time
// again (with S3 down, a run of hundreds of edges ends in seconds, not hours).
// An edge that succeeds removes it, and so does `npc compile` before ninja.
constexpr std::string_view kStoreUnreachableFile = "store-unreachable";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int CpuCount() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) return path;
  return abs.lexically_normal().string();
}

bool IsUrl(const std::string& s) { return s.find("://") != std::string::npos; }

// The cache URL and the cache-layer flags of NEURON_CC_FLAGS.
struct ResolvedCache {
  std::string url;
  bool retry_failed_compilation = false;
};

Result<ResolvedCache> ResolveCache(const ToolOptions& options) {
  auto flags = cache::ParseNeuronCcFlags(Env("NEURON_CC_FLAGS"));
  if (!flags) return MakeError("NEURON_CC_FLAGS: " + flags.error().message);
  ResolvedCache out;
  out.retry_failed_compilation = options.retry_failed_compilation || flags->retry_failed_compilation;
  std::string url = options.cache_dir;
  if (url.empty()) {
    std::string env_url = Env("NEURON_COMPILE_CACHE_URL");
    url = cache::ResolveCacheUrl(*flags, env_url.empty() ? nullptr : env_url.c_str());
  } else if (flags->cache_dir && *flags->cache_dir != url) {
    log::Warning(log::kCache, "NEURON_CC_FLAGS names --cache_dir=" + *flags->cache_dir +
                                  ", which differs from the cache given to this command (" + url +
                                  "); programs run from here will use the one in NEURON_CC_FLAGS");
  }
  if (url.rfind("file://", 0) == 0) url = url.substr(7);
  if (!IsUrl(url)) url = AbsolutePath(url);
  out.url = url;
  return out;
}

CompilerOptions EffectiveCompilerOptions(const ToolOptions& options) {
  CompilerOptions co = CompilerOptionsFromEnvironment();
  if (!options.backend.empty()) co.backend = options.backend;
  if (!options.compiler.empty()) co.program = options.compiler;
  return co;
}

std::string StorePath(cache::Store& store, const std::string& path) {
  auto local = store.LocalPath(path);
  return local ? *local : store.url() + "/" + path;
}

// The last `max_lines` lines of `text`.
std::string Tail(const std::string& text, int max_lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  int lines = 0;
  while (pos > 0) {
    size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    if (++lines >= max_lines) return "...\n" + text.substr(nl + 1);
    pos = nl;
  }
  return text;
}

// Clamps a child's exit status to a failure status 1..255.
int FailureStatus(int status) { return status <= 0 || status > 255 ? 1 : status; }

// After a SIGINT/SIGTERM/SIGHUP was forwarded to the child that just ended:
// says so and gives the conventional exit status, 128 + the signal.
int StopInterrupted(int sig, const std::string& what) {
  log::Error(log::kParallelCompile, "Interrupted by signal " + std::to_string(sig) + " (" + strsignal(sig) +
                                        "): " + what);
  return 128 + sig;
}

}  // namespace

// ---- context ----------------------------------------------------------------

std::string DefaultBuildDir(const ToolContext& context) {
  auto local = context.store->LocalPath(context.compiler_dir);
  if (local) return AbsolutePath(*local + "/" + std::string(kBuildDirName));
  // A remote store: beside the local read-through copy of its artifacts.
  return AbsolutePath(cache::DefaultLocalCopyRoot(context.store->url()) + "/" + std::string(kBuildDirName) + "/" +
                      context.compiler_dir);
}

Result<ToolContext> OpenToolContext(const ToolOptions& options) {
  ToolContext ctx;
  auto resolved = ResolveCache(options);
  if (!resolved) return resolved.error();
  ctx.cache_url = resolved->url;
  ctx.retry_failed_compilation = resolved->retry_failed_compilation;
  auto store = cache::OpenStore(ctx.cache_url);
  if (!store) return store.error();
  ctx.store = std::move(*store);
  ctx.compiler_options = EffectiveCompilerOptions(options);
  auto compiler = MakeCompiler(ctx.compiler_options);
  if (!compiler) return compiler.error();
  ctx.compiler = std::move(*compiler);
  if (!options.compiler_dir.empty()) {
    ctx.compiler_dir = options.compiler_dir;
  } else {
    auto dir = ctx.compiler->CacheDirectoryName();
    if (!dir) return dir.error();
    ctx.compiler_dir = *dir;
  }
  ctx.compiler_dir_path = StorePath(*ctx.store, ctx.compiler_dir);
  ctx.build_dir = options.build_dir.empty() ? DefaultBuildDir(ctx) : AbsolutePath(options.build_dir);
  return ctx;
}

std::string StampPath(const std::string& build_dir, const std::string& entry_dir) {
  return build_dir + "/stamps/" + entry_dir + ".done";
}

std::string FindNpcProgram() {
  if (std::string env = Env("NPC_TOOL_PROGRAM"); !env.empty()) return env;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (self.filename() == "npc") return self.string();
    fs::path sibling = self.parent_path() / "npc";
    if (access(sibling.c_str(), X_OK) == 0) return sibling.string();
  }
  return FindInPath("npc");
}

// ---- generate -----------------------------------------------------------------

Result<GenerateOutcome> Generate(const ToolContext& ctx, const ToolOptions& options) {
  // A local cache: edges name the entries' files, and the compiler directory
  // (which must exist) is the generator edge's input. A remote store (S3):
  // edges write local stamp files, and `npc compile` regenerates each run.
  auto compiler_dir_local = ctx.store->LocalPath(ctx.compiler_dir);
  std::error_code ec;
  if (compiler_dir_local) {
    fs::create_directories(*compiler_dir_local, ec);
    if (ec) return MakeError("cannot create " + *compiler_dir_local + ": " + ec.message());
  }
  fs::create_directories(ctx.build_dir, ec);
  if (ec) return MakeError("cannot create the build directory " + ctx.build_dir + ": " + ec.message());

  // Local caches: every artifact's digest is checked (a DAMAGED entry gets an
  // edge); remote ones: sizes only (a digest would download every artifact).
  auto check = compiler_dir_local ? cache::ArtifactCheck::kDigest : cache::ArtifactCheck::kSize;
  auto scan = ScanCompilerDir(*ctx.store, ctx.compiler_dir, ctx.compiler->ArtifactName(), check);
  if (!scan) return scan.error();
  GenerateOutcome out;
  out.plan = MakeBuildPlan(*scan, PlanOptions{ctx.retry_failed_compilation});

  int64_t per_compile = ctx.compiler->DefaultMemoryPerCompileBytes();
  if (ctx.compiler->backend() == "host") per_compile = PerCompileEstimate(ReadCompileMemory(ctx.build_dir), per_compile);
  // Without --num_parallel the bound is the CPU count (what `-j` gets too):
  // more compiles than CPUs gain nothing, and the depth (and so the file)
  // then stays the same while available memory drifts.
  std::optional<int> bound = options.num_parallel ? options.num_parallel : std::optional<int>(CpuCount());
  out.pool_depth = ComputePoolDepth(bound, MemAvailableBytes(), per_compile, CpuCount());

  NinjaFileSpec spec;
  spec.npc_program = FindNpcProgram();
  if (spec.npc_program.empty()) return MakeError("cannot find the `npc` executable (next to this program or in PATH)");
  spec.compiler_dir_path = compiler_dir_local ? *compiler_dir_local : "";
  spec.stamp_outputs = !compiler_dir_local;
  spec.pool_depth = out.pool_depth;
  std::vector<std::string> common = {"--cache", ctx.cache_url, "--build_dir", ctx.build_dir, "--backend",
                                     ctx.compiler->backend()};
  if (!ctx.compiler_options.program.empty()) {
    common.push_back("--compiler");
    common.push_back(ctx.compiler_options.program);
  }
  if (ctx.retry_failed_compilation) common.push_back("--retry_failed_compilation");
  spec.compile_args = common;
  spec.generate_args = common;
  spec.generate_args.push_back("--compiler_dir");
  spec.generate_args.push_back(ctx.compiler_dir);
  if (options.num_parallel) {
    spec.generate_args.push_back("--num_parallel");
    spec.generate_args.push_back(std::to_string(*options.num_parallel));
  }

  for (const auto& e : out.plan.to_compile) {
    if (e.hlo_file.empty()) continue;  // a locked entry still being written
    NinjaCompileEdge edge;
    if (compiler_dir_local) {
      edge.output = StorePath(*ctx.store, e.ref.file(cache::kDoneFile));
      edge.inputs.push_back(StorePath(*ctx.store, e.ref.file(e.hlo_file)));
      auto flags = ctx.store->Exists(e.ref.file(cache::kFlagsFile));
      if (!flags) return flags.error();
      if (*flags) edge.inputs.push_back(StorePath(*ctx.store, e.ref.file(cache::kFlagsFile)));
    } else {
      edge.output = StampPath(ctx.build_dir, e.ref.dir());
      // The entry is not DONE, so a stamp left by an earlier build (the entry
      // was cleaned since) is stale: without this, ninja would skip the edge.
      fs::remove(edge.output, ec);
    }
    edge.entry = e.ref.dir();
    edge.graph_key = e.ref.graph_key;
    edge.always_run = e.state == EntryState::kDamaged;
    spec.edges.push_back(std::move(edge));
  }
  auto text = RenderNinjaFile(spec);
  if (!text) return text.error();
  out.ninja_file = ctx.build_dir + "/" + std::string(kNinjaFile);
  if (auto st = WriteFileAtomic(out.ninja_file, *text); !st) return st.error();
  return out;
}

int RunGenerate(const ToolOptions& options) {
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  auto gen = Generate(*ctx, options);
  if (!gen) {
    log::Error(log::kParallelCompile, gen.error().message);
    return 1;
  }
  log::Info(log::kParallelCompile, "Wrote " + gen->ninja_file + ": " + std::to_string(gen->plan.to_compile.size()) +
                                       " graphs to compile, pool depth " + std::to_string(gen->pool_depth));
  return 0;
}

// ---- collect ------------------------------------------------------------------

int RunCollect(const ToolOptions& options, bool then_generate) {
  if (options.command.empty()) {
    log::Error(log::kParallelCompile, "no training command given (usage: ... [options] [--] <command...>)");
    return 2;
  }
  auto resolved = ResolveCache(options);
  if (!resolved) {
    log::Error(log::kParallelCompile, resolved.error().message);
    return 1;
  }
  log::Info(log::kCache, "Compile cache path: " + resolved->url);
  log::Info(log::kParallelCompile, "Running trial run to extract graphs: " + ShellJoin(options.command));
  std::map<std::string, std::string> env = {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"},
                                            {"NEURON_PARALLEL_COMPILE", "1"},
                                            {"NEURON_FALL_BACK_TO_NULL_NEFF", "1"},
                                            {"NEURON_COMPILE_CACHE_URL", resolved->url}};
  if (!options.backend.empty()) env["NPC_BACKEND"] = options.backend;
  if (!options.compiler.empty()) env["NPC_COMPILER"] = options.compiler;
  auto status = RunInteractive(options.command, env);
  if (!status) {
    log::Error(log::kParallelCompile, "cannot run the training command: " + status.error().message);
    return 127;
  }
  if (int sig = InterruptSignal(); sig != 0) {
    return StopInterrupted(sig, "the training command exited with status " + std::to_string(*status));
  }
  if (*status != 0) {
    if (Env("NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE") == "1") {
      log::Warning(log::kParallelCompile,
                   "The training command exited with status " + std::to_string(*status) +
                       "; compiling the extracted graphs anyway (NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE=1)");
    } else {
      log::Error(log::kParallelCompile,
                 "The training command exited with status " + std::to_string(*status) +
                     "; not compiling (set NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE=1 to compile the "
                     "graphs extracted so far)");
      return FailureStatus(*status);
    }
  }
  if (!then_generate) return 0;
  ToolOptions gen_options = options;
  gen_options.cache_dir = resolved->url;
  auto ctx = OpenToolContext(gen_options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  auto gen = Generate(*ctx, gen_options);
  if (!gen) {
    log::Error(log::kParallelCompile, gen.error().message);
    return 1;
  }
  log::Info(log::kParallelCompile, "Extracted graphs are in " + ctx->compiler_dir_path + "; " +
                                       std::to_string(gen->plan.to_compile.size()) +
                                       " to compile. Compile them with `ninja -C " + ShellQuote(ctx->build_dir) +
                                       "` or `neuron_parallel_compile --command compile`");
  return 0;
}

// ---- compile ------------------------------------------------------------------

namespace {

// The summary item of an entry without a result record from this run, from
// its state in the cache. *store_error is set at the first failure to read
// a state and then no further state is asked: when the store is unreachable,
// every request would spend its retries.
SummaryItem ItemFromState(const ToolContext& ctx, const ScannedEntry& e, const std::string& hlo_path,
                          std::optional<std::string>* store_error) {
  SummaryItem item;
  item.hlo_path = hlo_path;
  if (*store_error) {
    item.detail = "not compiled; its state is unknown (" + **store_error + ")";
    return item;
  }
  auto state = cache::GetEntryState(*ctx.store, e.ref, ctx.compiler->ArtifactName());
  if (!state) {
    *store_error = state.error().message;
    item.detail = "not compiled; its state is unknown (" + **store_error + ")";
    return item;
  }
  if (*state == EntryState::kDone) {
    item.ok = true;
    item.detail = "already done";
  } else if (*state == EntryState::kFailed) {
    item.detail = "failed";
    item.log_path = StorePath(*ctx.store, e.ref.file(cache::kLogFile));
  } else {
    item.detail = "not compiled (the build stopped before this entry finished)";
  }
  return item;
}

}  // namespace

int RunCompile(const ToolOptions& options) {
  const double start_time = EpochSeconds();
  const auto start = std::chrono::steady_clock::now();
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  log::Info(log::kCache, "Compile cache path: " + ctx->cache_url);
  auto gen = Generate(*ctx, options);
  if (!gen) {
    log::Error(log::kParallelCompile, gen.error().message);
    return 1;
  }
  const BuildPlan& plan = gen->plan;
  log::Info(log::kParallelCompile,
            "Found " + std::to_string(plan.to_compile.size()) + " graphs to compile in " + ctx->compiler_dir_path +
                " (" + std::to_string(plan.done.size()) + " already compiled, " +
                std::to_string(plan.cached_failures.size()) + " cached failures not retried); build file " +
                gen->ninja_file + ", pool depth " + std::to_string(gen->pool_depth));

  int ninja_status = 0;
  // This run's result records (see generator/results.h), moved up after the summary.
  const std::string run_id = NewRunId();
  RunResultsPublisher publish_results(ctx->build_dir, run_id);
  if (!plan.to_compile.empty()) {
    std::string ninja = Env("NPC_NINJA");
    if (ninja.empty()) ninja = FindInPath("ninja");
    if (ninja.empty()) {
      log::Error(log::kParallelCompile, "cannot find `ninja` in PATH (set NPC_NINJA to its path)");
      return 1;
    }
    std::error_code ec;
    fs::remove(ctx->build_dir + "/" + std::string(kStoreUnreachableFile), ec);  // from an earlier run
    int jobs = options.num_parallel ? *options.num_parallel : CpuCount();
    std::vector<std::string> argv = {ninja, "-C", ctx->build_dir, "-k", "0", "-j", std::to_string(std::max(1, jobs))};
    log::Info(log::kParallelCompile, "Running " + ShellJoin(argv));
    auto run = RunInteractive(argv, {{kRunIdVariable, run_id}});
    if (!run) {
      log::Error(log::kParallelCompile, "cannot run ninja: " + run.error().message);
      return 1;
    }
    ninja_status = *run;
    if (int sig = InterruptSignal(); sig != 0) return StopInterrupted(sig, "ninja and its compiles were stopped");
  } else {
    log::Info(log::kParallelCompile, "Nothing to compile");
  }

  CompileSummary summary;
  summary.start_time = start_time;
  std::optional<std::string> store_error;
  // Remote stores: compiled artifacts that could not be uploaded, kept locally
  // (see KeptArtifactPath): entry directory -> local file.
  std::vector<std::pair<std::string, std::string>> not_uploaded;
  const bool remote = !ctx->store->LocalPath(ctx->compiler_dir).has_value();
  for (const auto& e : plan.to_compile) {
    std::string hlo_path = e.hlo_file.empty() ? StorePath(*ctx->store, e.ref.dir())
                                              : StorePath(*ctx->store, e.ref.file(e.hlo_file));
    auto record = ReadResultRecord(ctx->build_dir, e.ref.dir(), run_id);
    // No record (the edge did not run) or an old one: ask the cache.
    if (record && record->end_time >= start_time) {
      SummaryItem item;
      item.hlo_path = hlo_path;
      item.ok = record->ok;
      item.retry = record->retries;
      item.compile_time = record->compile_time;
      item.detail = record->status + (record->message.empty() ? "" : ": " + record->message);
      if (!record->ok) item.log_path = record->log_path;
      summary.items.push_back(std::move(item));
    } else {
      summary.items.push_back(ItemFromState(*ctx, e, hlo_path, &store_error));
    }
    if (remote) {
      std::string kept = KeptArtifactPath(ctx->cache_url, e.ref, ctx->compiler->ArtifactName());
      std::error_code ec;
      if (!summary.items.back().ok && fs::exists(kept, ec)) not_uploaded.emplace_back(e.ref.dir(), kept);
    }
  }
  for (const auto& e : plan.cached_failures) {
    SummaryItem item;
    item.hlo_path = e.hlo_file.empty() ? StorePath(*ctx->store, e.ref.dir())
                                       : StorePath(*ctx->store, e.ref.file(e.hlo_file));
    item.detail = "cached failure (not retried; pass --retry_failed_compilation to recompile)";
    item.log_path = StorePath(*ctx->store, e.ref.file(cache::kLogFile));
    log::Warning(log::kCache, "Got a cached failed neff at " + StorePath(*ctx->store, e.ref.dir()) +
                                  ". Not recompiled (pass --retry_failed_compilation to retry); counted as a "
                                  "failed compilation. Compiler log: " + item.log_path);
    summary.items.push_back(std::move(item));
  }
  summary.compilation_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  auto json = SummaryToJson(summary);
  log::Info(log::kParallelCompile, json.dump(4, ' ', false, nlohmann::json::error_handler_t::replace));
  log::Info(log::kParallelCompile, "Total graphs: " + std::to_string(summary.total()));
  log::Info(log::kParallelCompile, "Total successful compilations: " + std::to_string(summary.succeeded()));
  log::Info(log::kParallelCompile, "Total failed compilations: " + std::to_string(summary.failed()));
  for (const auto& item : summary.items) {
    if (item.ok) continue;
    log::Error(log::kParallelCompile, "Failed: " + item.hlo_path + " (" + item.detail + ")" +
                                          (item.log_path.empty() ? "" : "; compiler log: " + item.log_path));
  }
  for (const auto& [entry, kept] : not_uploaded) {
    log::Error(log::kParallelCompile, "Not uploaded to " + ctx->cache_url + ": " + entry +
                                          " (compiled; the artifact is kept at " + kept + ")");
  }
  if (!not_uploaded.empty()) {
    log::Error(log::kParallelCompile,
               std::to_string(not_uploaded.size()) + " compiled " +
                   (not_uploaded.size() == 1 ? "artifact was" : "artifacts were") + " not uploaded to " +
                   ctx->cache_url + " and " + (not_uploaded.size() == 1 ? "is" : "are") + " kept under " +
                   cache::DefaultLocalCopyRoot(ctx->cache_url) +
                   "; run the compile again once the store is reachable: it uploads them without recompiling");
  }
  if (Env("NEURON_PARALLEL_COMPILE_DUMP_RESULTS") == "1") {
    std::string path = AbsolutePath(std::string(kDumpResultsFile));
    if (auto st = WriteFileAtomic(path, json.dump(4, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"); !st) {
      log::Warning(log::kParallelCompile, st.error().message);
    } else {
      log::Info(log::kParallelCompile, "Wrote the compilation results to " + path);
    }
  }
  int status = ExitStatusForFailures(summary.failed());
  if (status == 0 && ninja_status != 0) {
    log::Error(log::kParallelCompile, "ninja exited with status " + std::to_string(ninja_status));
    status = FailureStatus(ninja_status);
  }
  return status;
}

int RunAll(const ToolOptions& options) {
  ToolOptions o = options;
  auto resolved = ResolveCache(options);
  if (!resolved) {
    log::Error(log::kParallelCompile, resolved.error().message);
    return 1;
  }
  o.cache_dir = resolved->url;
  if (int status = RunCollect(o, /*then_generate=*/false); status != 0) return status;
  return RunCompile(o);
}

// ---- scan ------------------------------------------------------------------

int RunScan(const ToolOptions& options) {
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  // Local caches: digests checked (DAMAGED); remote ones: sizes only.
  auto check = ctx->store->LocalPath("") ? cache::ArtifactCheck::kDigest : cache::ArtifactCheck::kSize;
  auto scan = ScanCompilerDir(*ctx->store, ctx->compiler_dir, ctx->compiler->ArtifactName(), check);
  if (!scan) {
    log::Error(log::kParallelCompile, scan.error().message);
    return 1;
  }
  std::map<std::string, int> counts;
  if (options.json) {
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    for (const auto& e : *scan) {
      entries.push_back({{"entry", e.ref.dir()},
                         {"state", std::string(cache::EntryStateName(e.state))},
                         {"graph_key", e.ref.graph_key},
                         {"flags_hash", e.ref.flags_hash},
                         {"hlo_file", e.hlo_file},
                         {"hlo_bytes", e.hlo_bytes}});
    }
    nlohmann::ordered_json out{{"cache", ctx->cache_url}, {"compiler_dir", ctx->compiler_dir}, {"entries", entries}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "cache: " << ctx->compiler_dir_path << "\n";
  for (const auto& e : *scan) {
    std::string state(cache::EntryStateName(e.state));
    counts[state]++;
    std::string line = state;
    line.resize(8, ' ');
    std::string bytes = std::to_string(e.hlo_bytes);
    if (bytes.size() < 12) bytes.insert(0, 12 - bytes.size(), ' ');
    std::cout << line << bytes << "  " << e.ref.dir() << "\n";
    if (e.state == EntryState::kDamaged) {
      auto why = cache::CheckEntryArtifact(*ctx->store, e.ref, ctx->compiler->ArtifactName(), check);
      if (why && why->has_value()) std::cout << "        " << **why << "\n";
    }
  }
  std::cout << scan->size() << " entries";
  for (const char* s : {"TODO", "LOCKED", "DONE", "FAILED", "EMPTY", "DAMAGED"}) {
    if (counts.count(s)) std::cout << ", " << counts[s] << " " << s;
  }
  std::cout << "\n";
  return 0;
}

// ---- clean, clear-locks -------------------------------------------------------

int RunClean(const ToolOptions& options) {
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  auto names = ctx->store->List(ctx->compiler_dir);
  if (!names) {
    log::Error(log::kParallelCompile, names.error().message);
    return 1;
  }
  int removed = 0, kept = 0, errors = 0;
  for (const auto& name : *names) {
    std::string path = ctx->compiler_dir + "/" + name;
    // An entry is removed holding its lock, so no compile starts in it
    // meanwhile; one that another process (npc or another tool) holds is left.
    std::unique_ptr<cache::EntryLock> lock;
    if (auto ref = cache::ParseEntryDirName(ctx->compiler_dir, name)) {
      auto taken = ctx->store->TryLock(ref->dir());
      if (!taken) {
        log::Error(log::kCache, "Left " + StorePath(*ctx->store, path) + ": " + taken.error().message);
        ++errors;
        continue;
      }
      auto foreign = *taken ? ctx->store->IsForeignLocked(ref->dir()) : Result<bool>(false);
      if (!*taken || !foreign || *foreign) {
        std::string why = !*taken ? "a live process is compiling it"
                          : !foreign ? foreign.error().message
                                     : "a live process of another tool holds one of its lock files";
        log::Warning(log::kCache, "Left " + StorePath(*ctx->store, path) + ": " + why);
        ++kept;
        continue;
      }
      lock = std::move(*taken);
    }
    if (auto st = ctx->store->RemoveTree(path); !st) {
      log::Error(log::kCache, st.error().message);
      ++errors;
      continue;
    }
    ++removed;
  }
  log::Info(log::kCache, "Removed " + std::to_string(removed) + " items from " + ctx->compiler_dir_path +
                             (kept ? " (" + std::to_string(kept) + " in use left)" : ""));
  return errors ? 1 : 0;
}

int RunClearLocks(const ToolOptions& options) {
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  auto names = ctx->store->List(ctx->compiler_dir);
  if (!names) {
    log::Error(log::kParallelCompile, names.error().message);
    return 1;
  }
  int cleared = 0, held = 0, errors = 0;
  for (const auto& name : *names) {
    auto ref = cache::ParseEntryDirName(ctx->compiler_dir, name);
    if (!ref) continue;
    auto files = ctx->store->List(ref->dir());
    if (!files) continue;
    for (const auto& file : *files) {
      if (file.size() < 5 || file.compare(file.size() - 5, 5, ".lock") != 0) continue;
      std::string shown = StorePath(*ctx->store, ref->file(file));
      if (file == cache::kLockFile) {
        // Taking the lock and releasing it removes a stale lock file safely
        // (no window in which a new holder's file could be deleted).
        auto lock = ctx->store->TryLock(ref->dir());
        if (!lock) {
          log::Error(log::kCache, lock.error().message);
          ++errors;
        } else if (!*lock) {
          log::Info(log::kCache, "Held by a live process, left: " + shown);
          ++held;
        } else {
          lock->reset();
          ++cleared;
        }
        continue;
      }
      // Lock files of other tools: probe with flock when the file is local
      // (on a writable descriptor: see cache::IsFileLockHeld). One that
      // cannot be probed is left: it may be live.
      auto local = ctx->store->LocalPath(ref->file(file));
      bool is_held = false;
      if (local) {
        auto held = cache::IsFileLockHeld(*local);
        if (!held) {
          log::Error(log::kCache, "Left " + shown + ": " + held.error().message);
          ++errors;
          continue;
        }
        is_held = *held;
      }
      if (is_held) {
        log::Info(log::kCache, "Held by a live process, left: " + shown);
        ++held;
        continue;
      }
      if (auto st = ctx->store->Remove(ref->file(file)); !st) {
        log::Error(log::kCache, st.error().message);
        ++errors;
      } else {
        ++cleared;
      }
    }
  }
  log::Info(log::kCache, "Cleared " + std::to_string(cleared) + " stale lock files in " + ctx->compiler_dir_path +
                             (held ? "; " + std::to_string(held) + " held by live processes were left" : ""));
  return errors ? 1 : 0;
}

// ---- compile-entry (one build edge) ---------------------------------------------

namespace {

// The edge was stopped by a signal (forwarded to its compiler, which ended;
// the entry lock is released, nothing was written into the entry).
int EntryInterrupted(int sig, EntryResultRecord& record, const std::string& build_dir, const std::string& run_id) {
  record.status = "interrupted";
  record.ok = false;
  record.message = std::string("stopped by ") + strsignal(sig) + "; the entry is left to compile";
  record.end_time = EpochSeconds();
  if (!build_dir.empty()) (void)WriteResultRecord(build_dir, record, run_id);
  std::cerr << "npc compile-entry: " << record.entry << ": " << record.message << "\n";
  return 128 + sig;
}

}  // namespace

int RunCompileEntry(const ToolOptions& options) {
  std::string rel = options.entry;
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  size_t slash = rel.rfind('/');
  std::optional<cache::EntryRef> ref;
  if (slash != std::string::npos && slash > 0) ref = cache::ParseEntryDirName(rel.substr(0, slash), rel.substr(slash + 1));
  if (!ref) {
    std::cerr << "npc compile-entry: --entry must be <compiler dir>/MODULE_<graph key>+<flags hash>, got '"
              << options.entry << "'\n";
    return 2;
  }
  EntryResultRecord record;
  record.entry = ref->dir();
  const std::string build_dir = options.build_dir.empty() ? "" : AbsolutePath(options.build_dir);
  const std::string run_id = Env(kRunIdVariable);
  if (run_id.find('/') != std::string::npos || run_id == "." || run_id == "..") {
    std::cerr << "npc compile-entry: " << kRunIdVariable << " must be a file name, got '" << run_id << "'\n";
    return 2;
  }
  const std::string unreachable_file = build_dir.empty() ? "" : build_dir + "/" + std::string(kStoreUnreachableFile);
  cache::S3Store* s3 = nullptr;  // the store, when remote
  auto fail = [&](const std::string& message) {
    record.status = "error";
    record.ok = false;
    record.message = message;
    record.end_time = EpochSeconds();
    if (!build_dir.empty()) (void)WriteResultRecord(build_dir, record, run_id);
    if (s3 && s3->stats().gave_up > 0 && !unreachable_file.empty()) {
      (void)WriteFileAtomic(unreachable_file, message);  // tell the edges that start next
    }
    std::cerr << "npc compile-entry: " << ref->dir() << ": " << message << "\n";
    return 1;
  };

  auto resolved = ResolveCache(options);
  if (!resolved) return fail(resolved.error().message);
  auto store = cache::OpenStore(resolved->url);
  if (!store) return fail(store.error().message);
  s3 = dynamic_cast<cache::S3Store*>(store->get());
  if (s3 && !unreachable_file.empty()) {
    std::error_code ec;
    const auto written = fs::last_write_time(unreachable_file, ec);
    if (!ec) {
      const double age = std::chrono::duration<double>(fs::file_time_type::clock::now() - written).count();
      if (age < s3->config().retry_max_total_seconds) {
        std::ifstream in(unreachable_file);
        std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        while (!why.empty() && why.back() == '\n') why.pop_back();
        s3 = nullptr;  // this edge sent nothing: leave the file as it is
        return fail("not tried: another build edge gave up on " + resolved->url + " " +
                    std::to_string(static_cast<int64_t>(age)) + " s ago (" + why +
                    "); compile again once the store answers");
      }
    }
  }
  auto compiler = MakeCompiler(EffectiveCompilerOptions(options));
  if (!compiler) return fail(compiler.error().message);

  EntryCompileOptions eo;
  eo.retry_failed_compilation = resolved->retry_failed_compilation;
  eo.wait_for_lock = true;
  std::string retries = Env("NEURON_PARALLEL_COMPILE_MAX_RETRIES");
  if (!retries.empty()) {
    char* end = nullptr;
    long n = std::strtol(retries.c_str(), &end, 10);
    if (end && *end == '\0' && n >= 0) eo.max_retries = static_cast<int>(std::min<long>(n, 100));
    else log::Warning(log::kParallelCompile, "ignoring NEURON_PARALLEL_COMPILE_MAX_RETRIES=" + retries);
  }

  auto hlo = cache::FindHloFile(**store, *ref);
  if (hlo && hlo->has_value()) record.hlo_path = StorePath(**store, ref->file(**hlo));
  else record.hlo_path = StorePath(**store, ref->file(cache::kHloFile));

  auto result = CompileEntry(**store, **compiler, *ref, eo);
  if (!result) {
    if (int sig = InterruptSignal(); sig != 0) return EntryInterrupted(sig, record, build_dir, run_id);
    return fail(result.error().message);
  }
  if (result->status == EntryCompileResult::Status::kInterrupted) {
    return EntryInterrupted(InterruptSignal(), record, build_dir, run_id);
  }

  using S = EntryCompileResult::Status;
  record.status = std::string(EntryCompileStatusName(result->status));
  record.ok = result->status == S::kCompiled || result->status == S::kAlreadyDone;
  record.retries = std::max(0, result->attempts - 1);
  record.compile_time = result->compile_seconds;
  record.peak_rss_bytes = result->peak_rss_bytes;
  record.end_time = EpochSeconds();
  if (result->uploaded_kept_artifact) {
    record.message = "uploaded the artifact that an earlier run compiled but could not upload";
  }
  if (result->status == S::kFailed || result->status == S::kCachedFailure) {
    record.log_path = StorePath(**store, ref->file(cache::kLogFile));
  }
  if (!build_dir.empty()) {
    if (auto st = WriteResultRecord(build_dir, record, run_id); !st) {
      log::Warning(log::kParallelCompile, st.error().message);
    }
    if (result->status == S::kCompiled && (*compiler)->backend() == "host") {
      RecordCompileMemory(build_dir, result->peak_rss_bytes);
    }
  }
  const int interrupted = InterruptSignal();  // arrived after the compile: finished, then stop
  if (record.ok) {
    if (s3 && !unreachable_file.empty()) {
      std::error_code ec;
      fs::remove(unreachable_file, ec);  // the store answers again
    }
    if (!options.stamp.empty()) {
      // The build edge's output for a remote store (see NinjaFileSpec::stamp_outputs).
      std::error_code ec;
      fs::create_directories(fs::path(options.stamp).parent_path(), ec);
      if (auto st = WriteFileAtomic(options.stamp, ""); !st) return fail(st.error().message);
    }
    return interrupted ? 128 + interrupted : 0;
  }

  std::ostringstream msg;
  msg << "npc: " << record.status << ": " << ref->dir();
  if (result->status == S::kFailed) {
    msg << " (" << result->attempts << (result->attempts == 1 ? " attempt" : " attempts") << ")";
  }
  msg << "\n";
  if (!result->log.empty()) msg << Tail(result->log, 40) << (result->log.back() == '\n' ? "" : "\n");
  if (result->status == S::kLocked) msg << "another process still holds the entry's lock\n";
  if (result->status == S::kNoHlo) msg << "the entry has no HLO file\n";
  if (!record.log_path.empty()) msg << "full compiler log: " << record.log_path << "\n";
  std::cerr << msg.str();
  return interrupted ? 128 + interrupted : 1;
}

}  // namespace npc::tool
