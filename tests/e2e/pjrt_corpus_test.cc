// XLA as the oracle of the host backend: every corpus module (../shared/corpus;
// skipped, saying so, when absent) that both the host backend and the pjrt
// backend (XLA's CPU plugin) compile is run on both, through the public runtime
// API, with the same seeded inputs, and the outputs compared with the
// tolerances of support/output_compare.h (integers and pred exactly; f32 rel
// 1e-5 + abs 1e-6, bf16 two ulps). Prints one row per module: which backend
// compiled it (or why not) and the comparison. Skipped when npc was built
// without the pjrt backend. NPC_CORPUS_FILTER=<substring> limits the modules.
//
// Modules XLA refuses are not given to the host backend (its compiles of the
// large graphs take minutes). Asserted: every module both compile runs on both and matches, and (on the
// whole corpus) at least one module is compiled by both.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "compilers/pjrt_compiler.h"
#include "npc/hlo.h"
#include "npc/runtime.h"
#include "support/output_compare.h"
#include "support/test_support.h"

namespace npc::testing {
namespace {

namespace fs = std::filesystem;

// The first line of `message` that says why, shortened.
std::string Why(const std::string& message) {
  std::string why = message;
  for (const char* marker : {"PJRT_Client_Compile: ", "host backend: "}) {
    const size_t at = why.find(marker);
    if (at != std::string::npos) why = why.substr(at);
  }
  why = why.substr(0, why.find('\n'));
  return why.size() > 120 ? why.substr(0, 120) + "..." : why;
}

std::unique_ptr<Runtime> MakeRuntime(const std::string& cache, const std::string& backend,
                                     std::vector<std::string> flags = {}) {
  RuntimeOptions options;
  options.cache_url = cache;
  options.compiler.backend = backend;
  options.compiler_flags = std::move(flags);
  auto runtime = Runtime::Create(options);
  EXPECT_TRUE(runtime.ok()) << backend << ": " << runtime.error().message;
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

std::vector<fs::path> CorpusFiles(const fs::path& corpus) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(corpus)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".hlo" || ext == ".txt" || ext == ".pb" || ext == ".binpb")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  const std::string filter = GetEnv("NPC_CORPUS_FILTER");
  if (!filter.empty()) {
    files.erase(std::remove_if(files.begin(), files.end(),
                               [&](const fs::path& p) { return p.string().find(filter) == std::string::npos; }),
                files.end());
  }
  return files;
}

TEST(PjrtCorpusTest, ModulesBothBackendsCompileGiveTheSameOutputs) {
#if !NPC_HAVE_PJRT
  GTEST_SKIP() << "npc was built without the pjrt backend (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
#endif
  if (PjrtDefaultPluginPath().empty()) GTEST_SKIP() << "no default PJRT plugin (scripts/install-deps.sh --pjrt)";
  const fs::path corpus = NPC_CORPUS_DIR;
  if (!fs::is_directory(corpus)) GTEST_SKIP() << "corpus " << corpus.string() << " is absent; nothing to compare";
  TempDir tmp("npc-pjrt-corpus");
  auto host_rt = MakeRuntime(tmp.Sub("host"), "host");
  // XLA keeps bf16/f16 intermediates in f32 unless told not to (xla_allow_excess_precision,
  // on by default); the host backend rounds every op's result to its type, as the HLO says.
  auto pjrt_rt = MakeRuntime(tmp.Sub("pjrt"), "pjrt", {"--xla_allow_excess_precision=false"});
  ASSERT_TRUE(host_rt && pjrt_rt);

  std::ostringstream table;
  int both = 0, matched = 0;
  const std::vector<fs::path> files = CorpusFiles(corpus);
  for (const fs::path& path : files) {
    const std::string name = fs::relative(path, corpus).generic_string();
    auto row = [&](const std::string& host, const std::string& pjrt, const std::string& detail) {
      table << "| " << std::left << std::setw(50) << name << " | " << std::setw(4) << host << " | " << std::setw(4)
            << pjrt << " | " << detail << "\n";
    };
    auto module = hlo::ReadHloModuleFile(path.string());
    if (!module.ok()) {
      row("-", "-", "npc cannot read it: " + Why(module.error().message));
      continue;
    }
    // XLA first: it compiles in seconds and refuses most torch-neuronx graphs (Neuron
    // custom-calls); the host backend (minutes on the large graphs) only where XLA compiled.
    auto pjrt = pjrt_rt->GetExecutable(*module);
    if (!pjrt.ok()) {
      row("-", "no", "XLA: " + Why(pjrt.error().message));
      continue;
    }
    auto host = host_rt->GetExecutable(*module);
    if (!host.ok()) {
      row("no", "yes", "host: " + Why(host.error().message));
      continue;
    }
    ++both;
    std::vector<Tensor> args = RandomArguments((*host)->parameters(), 2024, InputRanges{0, 7, true});
    auto host_out = (*host)->Run(args);
    auto pjrt_out = (*pjrt)->Run(args);
    ASSERT_TRUE(host_out.ok()) << name << ": " << host_out.error().message;
    ASSERT_TRUE(pjrt_out.ok()) << name << ": " << pjrt_out.error().message;
    Comparison c = CompareOutputs(*host_out, *pjrt_out);
    std::ostringstream detail;
    detail << (c.matched ? "match: " : "DIFFER: ") << c.identical << "/" << c.float_values
           << " floats identical, max rel err " << std::setprecision(2) << c.max_relative_error;
    row("yes", "yes", detail.str());
    if (c.matched) ++matched;
    EXPECT_TRUE(c.matched) << name << ": the host backend and XLA differ:\n" << c.first_mismatches;
  }
  std::cout << "corpus modules, host backend against XLA (pjrt, CPU plugin):\n"
            << "| " << std::left << std::setw(50) << "module" << " | host | xla  | comparison\n"
            << table.str() << "corpus: " << files.size() << " files, " << both << " compiled by both, " << matched
            << " matched" << std::endl;
  if (GetEnv("NPC_CORPUS_FILTER").empty()) {
    EXPECT_GT(both, 0) << "no corpus module compiled by both backends";
  }
}

}  // namespace
}  // namespace npc::testing
