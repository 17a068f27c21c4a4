// Prints how long the canonical graph key (npc::hlo::CanonicalGraphKey) takes
// per module and per MB of serialized HloModuleProto. Not a test: it asserts
// nothing, it measures (scripts/bench-graph-key.sh builds and runs it).
//
//   bench_graph_key [--iterations N] [--top K] [paths...]
//
// Paths are HLO files in any form ReadHloModuleFile reads, or folders of them
// (searched recursively). Without paths: the corpus (../shared/corpus beside
// the source tree). Of all modules read, the K largest by serialized size
// (default 5) are measured, each N times (default: enough for about 0.5 s);
// the best wall time, the median wall time and the median CPU time of the
// thread (which a busy machine disturbs less: time spent descheduled is not
// counted) are printed, and the median CPU time per MB. A module that cannot
// be read is reported and skipped.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "npc/hlo.h"

namespace {

struct Module {
  std::string path;
  npc::xla::HloModuleProto proto;
  size_t bytes = 0;  // serialized HloModuleProto
};

void Collect(const std::filesystem::path& p, std::vector<std::string>* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) {
    for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec)) out->push_back(it->path().string());
    }
  } else {
    out->push_back(p.string());
  }
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 0;
  size_t top = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) {
      iterations = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--top" && i + 1 < argc) {
      top = static_cast<size_t>(std::max(1, std::atoi(argv[++i])));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [--iterations N] [--top K] [paths...]\n", argv[0]);
      return 0;
    } else {
      Collect(a, &files);
    }
  }
  if (files.empty()) {
    const std::string corpus = std::string(NPC_SOURCE_DIR) + "/../shared/corpus";
    if (!std::filesystem::is_directory(corpus)) {
      std::printf("no paths given and no corpus at %s\n", corpus.c_str());
      return 2;
    }
    Collect(corpus, &files);
  }
  std::vector<Module> modules;
  for (const auto& f : files) {
    if (f.size() >= 3 && f.compare(f.size() - 3, 3, ".md") == 0) continue;
    auto m = npc::hlo::ReadHloModuleFile(f);
    if (!m) {
      std::printf("skipped: %s\n", m.error().message.c_str());
      continue;
    }
    Module mod{f, std::move(*m), 0};
    mod.bytes = mod.proto.ByteSizeLong();
    modules.push_back(std::move(mod));
  }
  std::sort(modules.begin(), modules.end(), [](const Module& a, const Module& b) { return a.bytes > b.bytes; });
  if (modules.size() > top) modules.resize(top);
  std::printf("%-44s %9s %6s %9s %10s %10s %10s\n", "module", "bytes", "runs", "best ms", "median ms", "cpu ms",
              "cpu ms/MB");
  for (const auto& m : modules) {
    // Warm up once, then pick a run count for about half a second.
    auto t0 = std::chrono::steady_clock::now();
    std::string key = npc::hlo::CanonicalGraphKey(m.proto);
    double once = Seconds(std::chrono::steady_clock::now() - t0);
    int runs = iterations > 0 ? iterations : static_cast<int>(std::clamp(0.5 / std::max(once, 1e-6), 3.0, 2000.0));
    std::vector<double> times, cpu;
    for (int r = 0; r < runs; ++r) {
      const double c0 = ThreadCpuSeconds();
      auto s = std::chrono::steady_clock::now();
      std::string k = npc::hlo::CanonicalGraphKey(m.proto);
      times.push_back(Seconds(std::chrono::steady_clock::now() - s));
      cpu.push_back(ThreadCpuSeconds() - c0);
      if (k != key) {
        std::printf("%s: the key changed between runs (%s, %s)\n", m.path.c_str(), key.c_str(), k.c_str());
        return 1;
      }
    }
    std::sort(times.begin(), times.end());
    std::sort(cpu.begin(), cpu.end());
    const double best = times.front() * 1e3, median = times[times.size() / 2] * 1e3;
    const double cpu_median = cpu[cpu.size() / 2] * 1e3;
    const double mb = static_cast<double>(m.bytes) / 1e6;
    std::string name = std::filesystem::path(m.path).filename().string();
    std::printf("%-44s %9zu %6d %9.3f %10.3f %10.3f %10.2f\n", name.c_str(), m.bytes, runs, best, median, cpu_median,
                cpu_median / mb);
  }
  return 0;
}
