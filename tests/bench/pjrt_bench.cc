// Benchmark: what one plugin load per `npc compile-entry` process (the cost of
// the Ninja design: every build edge is its own process) costs against the
// compiles themselves, with XLA's CPU plugin.
//
//   pjrt_bench [HLO files...]   (default: the graphs of samples/mlp_train and, when
//                               present, the modules of ../shared/corpus)
//
// Plugin load: dlopen + GetPjrtApi + PJRT_Client_Create, measured in 5 fresh
// processes (this program re-run with --open-only), median. Compile:
// PJRT_Client_Compile + PJRT_Executable_Serialize of each module in this process,
// each module compiled twice, the faster time kept. Modules XLA (or npc's
// reader) refuses are listed and left out. Prints one line per module and the
// ratio of the plugin load to the median compile, the rank correlation of module
// size and compile time (does byte size predict XLA's compile time for the
// longest-first order?), and, without arguments, the warm-start ratio of
// samples/mlp_train (a cold JIT run against a run after neuron_parallel_compile).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "compilers/pjrt_compiler.h"
#include "npc/hlo.h"
#include "pjrt/pjrt_client.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using npc::testing::RunCommand;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The HLO files of mlp_train's trial run (collected into `cache`) and of the corpus.
std::vector<std::string> DefaultModules(const std::string& cache) {
  std::vector<std::string> files;
  auto collect = RunCommand({NPC_TOOL, "collect", "--cache", cache, "--backend", "pjrt", "--", NPC_MLP_TRAIN,
                             "--steps", "2"});
  if (collect.exit_status != 0) std::fprintf(stderr, "collect failed:\n%s\n", collect.output.c_str());
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().filename() == "model.hlo_module.pb") files.push_back(e.path().string());
  }
  const std::string corpus = NPC_CORPUS_DIR;
  if (!fs::is_directory(corpus)) {
    std::printf("corpus %s absent: mlp_train's graphs only\n", corpus.c_str());
    return files;
  }
  for (const auto& e : fs::recursive_directory_iterator(corpus)) {
    const std::string ext = e.path().extension().string();
    if (ext == ".hlo" || ext == ".binpb") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Ranks of `v` (0-based, ties averaged).
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = (i + j) / 2.0;
    i = j + 1;
  }
  return ranks;
}

// Spearman's rank correlation of x and y.
double RankCorrelation(const std::vector<double>& x, const std::vector<double>& y) {
  const std::vector<double> rx = Ranks(x), ry = Ranks(y);
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += rx[i] / n, my += ry[i] / n;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
}

// Wall seconds of `argv` run with `env`.
double TimedRun(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  const auto start = std::chrono::steady_clock::now();
  auto r = RunCommand(argv, env);
  if (r.exit_status != 0) std::fprintf(stderr, "%s failed:\n%s\n", argv[0].c_str(), r.output.c_str());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// mlp_train with the pjrt backend: a first run that compiles every graph on
// demand (JIT) against a run after neuron_parallel_compile precompiled them.
void WarmStart(const std::string& dir) {
  const std::map<std::string, std::string> env = {{"NPC_BACKEND", "pjrt"}, {"NEURON_CC_FLAGS", "<unset>"},
                                                  {"NEURON_COMPILE_CACHE_URL", dir + "/cold"}};
  const double cold = TimedRun({NPC_MLP_TRAIN, "--steps", "100"}, env);
  auto warm_env = env;
  warm_env["NEURON_COMPILE_CACHE_URL"] = dir + "/warm";
  TimedRun({NPC_CLI, NPC_MLP_TRAIN, "--steps", "2"}, warm_env);
  const double warm = TimedRun({NPC_MLP_TRAIN, "--steps", "100"}, warm_env);
  std::printf("warm start (mlp_train --steps 100, pjrt): cold JIT run %.2f s, after neuron_parallel_compile %.2f s: "
              "%.1fx\n", cold, warm, cold / warm);
}

double OpenSecondsInFreshProcess(const char* self) {
  auto r = RunCommand({self, "--open-only"});
  double seconds = -1;
  if (r.exit_status != 0 || std::sscanf(r.output.c_str(), "open %lf", &seconds) != 1) {
    std::fprintf(stderr, "--open-only failed:\n%s\n", r.output.c_str());
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string plugin = npc::PjrtDefaultPluginPath();
  if (plugin.empty()) {
    std::printf("npc was built without a default PJRT plugin (scripts/install-deps.sh --pjrt): nothing to measure\n");
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--open-only") {
    auto client = npc::pjrt::Client::Open(plugin);
    if (!client) return std::fprintf(stderr, "%s\n", client.error().message.c_str()), 1;
    std::printf("open %.6f\n", (*client)->open_seconds());
    return 0;
  }
  npc::testing::TempDir tmp("npc-pjrt-bench");
  std::vector<std::string> files(argv + 1, argv + argc);
  if (files.empty()) files = DefaultModules(tmp.Sub("cache"));

  std::vector<double> opens;
  for (int i = 0; i < 5; ++i) opens.push_back(OpenSecondsInFreshProcess(argv[0]));
  auto client = npc::pjrt::Client::Shared(plugin);
  if (!client) return std::fprintf(stderr, "%s\n", client.error().message.c_str()), 1;
  auto options = npc::PjrtCompileOptionsFromFlags({});

  std::vector<double> compiles, sizes;
  for (const auto& file : files) {
    auto module = npc::hlo::ReadHloModuleFile(file);
    if (!module) {
      std::printf("  skipped  %s: npc cannot read it\n", file.c_str());
      continue;
    }
    std::string bytes;
    module->SerializeToString(&bytes);
    double best = 1e30;
    std::string error;
    for (int i = 0; i < 2 && error.empty(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto exe = (*client)->CompileAndSerialize(bytes, "hlo", options->serialized);
      if (!exe) error = exe.error().message;
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!error.empty()) {
      std::string why = error.substr(error.find("PJRT_Client_Compile")).substr(0, 160);
      std::replace(why.begin(), why.end(), '\n', ' ');
      std::printf("  refused  %s: %s\n", file.c_str(), why.c_str());
      continue;
    }
    compiles.push_back(best);
    sizes.push_back(static_cast<double>(bytes.size()));
    std::printf("  %8.3f s  %s (%zu bytes)\n", best, file.c_str(), bytes.size());
  }
  const double open = Median(opens), compile = Median(compiles);
  std::printf("plugin load (fresh process, median of 5): %.3f s\n", open);
  std::printf("compile (median of %zu modules): %.3f s; min %.3f s, max %.3f s\n", compiles.size(), compile,
              compiles.empty() ? 0 : *std::min_element(compiles.begin(), compiles.end()),
              compiles.empty() ? 0 : *std::max_element(compiles.begin(), compiles.end()));
  if (compile > 0) std::printf("plugin load / median compile: %.1f%%\n", 100 * open / compile);
  if (compiles.size() >= 3) {
    std::printf("rank correlation of HloModuleProto bytes and XLA compile time (%zu modules): %.2f\n",
                compiles.size(), RankCorrelation(sizes, compiles));
  }
  if (argc == 1) WarmStart(tmp.Sub("warm-start"));
  return 0;
}
