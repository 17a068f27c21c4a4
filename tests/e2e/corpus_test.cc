// The real corpus (../shared/corpus, see its PROVENANCE.md; skipped, saying
// so, when absent), module by module: parsed by the HLO reader, analysed
// (npc::hlo::AnalyzeModule), compiled by the host backend through the public
// runtime API (private cache), run on seeded random inputs, and compared with
// the plain HLO evaluator (tests/support/hlo_evaluator.h): integers and pred
// exactly, floats within the tolerances of support/output_compare.h (f32
// rel 1e-5 + abs 1e-6, bf16 rel 2^-7 + abs 2^-7/10). Prints one row per
// module: how far it got, or the op that stops it.
//
// Asserted: every module parses, except torch-neuronx/mlp__test.hlo, a broken
// fragment that must be rejected with a line:column position; a module whose
// ops are all supported (npc::host::UnsupportedOpcodes is empty) compiles,
// runs and matches; a module with unsupported ops fails to compile with a
// message naming one of them. NPC_CORPUS_FILTER=<substring> limits the run to
// the modules whose path contains it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "host/host_backend.h"
#include "npc/hlo.h"
#include "npc/hlo_analysis.h"
#include "npc/runtime.h"
#include "support/hlo_evaluator.h"
#include "support/output_compare.h"
#include "support/test_support.h"

namespace npc::testing {
namespace {

namespace fs = std::filesystem;

// The broken fragment of the corpus (an operand that is never defined).
constexpr char kBrokenModule[] = "torch-neuronx/mlp__test.hlo";

// The line of an error message that says why, shortened: the host backend's
// own message when the runtime wraps it (with the compile command and log
// path), else the first line naming something unsupported, else the first.
std::string Reason(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  for (std::string line; std::getline(in, line);) {
    const size_t start = line.find_first_not_of(" \t");
    lines.push_back(start == std::string::npos ? "" : line.substr(start));
  }
  std::string why = lines.empty() ? "" : lines[0];
  for (const auto& line : lines) {
    if (line.rfind("host backend:", 0) == 0) return line.size() > 200 ? line.substr(0, 200) + "..." : line;
  }
  for (const auto& line : lines) {
    if (line.find("unsupported") != std::string::npos) {
      why = line;
      break;
    }
  }
  return why.size() > 200 ? why.substr(0, 200) + "..." : why;
}

std::string Seconds(std::chrono::steady_clock::time_point since) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1)
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count() << "s";
  return out.str();
}

struct Row {
  std::string module;
  std::string parsed = "-", analyzed = "-", compiled = "-", ran = "-", matched = "-";
  std::string detail;
};

void PrintTable(const std::vector<Row>& rows) {
  size_t width = 6;
  for (const auto& r : rows) width = std::max(width, r.module.size());
  std::ostringstream out;
  auto line = [&](const std::string& m, const std::string& p, const std::string& a, const std::string& c,
                  const std::string& r, const std::string& x, const std::string& d) {
    out << "| " << std::left << std::setw(static_cast<int>(width)) << m << " | " << std::setw(6) << p << " | "
        << std::setw(22) << a << " | " << std::setw(8) << c << " | " << std::setw(3) << r << " | " << std::setw(7)
        << x << " | " << d << "\n";
  };
  line("module", "parsed", "analyzed", "compiled", "ran", "matched", "detail");
  out << "|" << std::string(width + 2, '-') << "|--------|------------------------|----------|-----|---------|------\n";
  for (const auto& r : rows) line(r.module, r.parsed, r.analyzed, r.compiled, r.ran, r.matched, r.detail);
  std::cout << "corpus modules through the host backend:\n" << out.str() << std::flush;
}

TEST(CorpusTest, EveryModuleParsesAndEverySupportedOneRunsAndMatches) {
  const fs::path corpus = NPC_CORPUS_DIR;
  if (!fs::is_directory(corpus)) GTEST_SKIP() << "corpus " << corpus.string() << " is absent; nothing to run";
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(corpus)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".hlo" || ext == ".txt" || ext == ".pb" || ext == ".binpb")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no HLO files in " << corpus.string();
  // NPC_CORPUS_FILTER=<substring>: only the modules whose path contains it.
  const std::string filter = GetEnv("NPC_CORPUS_FILTER");
  if (!filter.empty()) {
    files.erase(std::remove_if(files.begin(), files.end(),
                               [&](const fs::path& p) { return p.string().find(filter) == std::string::npos; }),
                files.end());
  }

  TempDir cache("npc-corpus");
  RuntimeOptions options;
  options.cache_url = cache.path();
  auto runtime = Runtime::Create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.error().message;

  const auto start = std::chrono::steady_clock::now();
  std::vector<Row> rows;
  int supported = 0, matched = 0;
  for (const fs::path& path : files) {
    Row row;
    row.module = fs::relative(path, corpus).generic_string();
    auto module = hlo::ReadHloModuleFile(path.string());
    if (!module.ok()) {
      row.parsed = "no";
      row.detail = Reason(module.error().message);
      if (row.module == kBrokenModule) {
        // Rejected with its position: "<path>:<line>:<column>: ...".
        EXPECT_TRUE(std::regex_search(module.error().message, std::regex("mlp__test\\.hlo:[0-9]+:[0-9]+: ")))
            << module.error().message;
      } else {
        ADD_FAILURE() << row.module << " does not parse: " << module.error().message;
      }
      rows.push_back(row);
      continue;
    }
    EXPECT_NE(row.module, kBrokenModule) << "the broken fragment parsed";
    row.parsed = "yes";
    const hlo::ModuleAnalysis analysis = hlo::AnalyzeModule(*module);
    row.analyzed = std::to_string(analysis.instructions_reachable) + " instr, " +
                   std::to_string(analysis.op_keys_reachable.size()) + " ops";

    const auto unsupported = host::UnsupportedOpcodes(*module);
    auto t = std::chrono::steady_clock::now();
    auto exe = (*runtime)->GetExecutable(*module);
    const std::string compile_time = Seconds(t);
    if (!unsupported.empty()) {
      std::string ops;
      for (const auto& [op, why] : unsupported) ops += (ops.empty() ? "" : ", ") + (op.empty() ? "(module)" : op);
      row.compiled = "no";
      row.detail = "unsupported: " + ops;
      EXPECT_FALSE(exe.ok()) << row.module << " compiled although UnsupportedOpcodes lists " << ops;
      if (!exe.ok()) {
        // The compile error names one of the refused instructions.
        bool named = false;
        for (const auto& [op, why] : unsupported) named |= exe.error().message.find(why) != std::string::npos;
        EXPECT_TRUE(named) << row.module << ": the compile error names none of " << ops << ":\n"
                           << exe.error().message;
        row.detail += " -- " + Reason(exe.error().message);
      }
      rows.push_back(row);
      continue;
    }
    ++supported;
    if (!exe.ok()) {
      row.compiled = "FAILED";
      row.detail = Reason(exe.error().message);
      ADD_FAILURE() << row.module << " has only supported ops but does not compile:\n" << exe.error().message;
      rows.push_back(row);
      continue;
    }
    row.compiled = "yes";
    // Integer inputs (labels, indices, positions, rng states) in [0, 7];
    // floats positive, as the optimizer states, variances and learning rates
    // these graphs take are (negative ones make NaNs that compare equal but
    // test little).
    std::vector<Tensor> args = RandomArguments((*exe)->parameters(), 2024, InputRanges{0, 7, true});
    t = std::chrono::steady_clock::now();
    auto host = (*exe)->Run(args);
    const std::string run_time = Seconds(t);
    if (!host.ok()) {
      row.ran = "NO";
      row.detail = Reason(host.error().message);
      ADD_FAILURE() << row.module << " does not run: " << host.error().message;
      rows.push_back(row);
      continue;
    }
    row.ran = "yes";
    t = std::chrono::steady_clock::now();
    auto ref = EvaluateHlo(*module, args);
    const std::string eval_time = Seconds(t);
    args.clear();
    if (!ref.ok()) {
      row.matched = "NO";
      row.detail = "evaluator: " + Reason(ref.error().message);
      ADD_FAILURE() << row.module << ": the evaluator fails: " << ref.error().message;
      rows.push_back(row);
      continue;
    }
    Comparison c = CompareOutputs(*host, *ref);
    std::ostringstream detail;
    detail << c.identical << "/" << c.float_values << " floats identical";
    if (c.nan_values) detail << " (" << c.nan_values << " NaN)";
    detail << ", max rel err " << std::setprecision(2) << c.max_relative_error << "; compile " << compile_time
           << ", run " << run_time << ", evaluate " << eval_time;
    row.matched = c.matched ? "yes" : "NO";
    row.detail = detail.str();
    if (c.matched) ++matched;
    EXPECT_TRUE(c.matched) << row.module << ": host backend and evaluator differ:\n" << c.first_mismatches;
    rows.push_back(row);
  }
  PrintTable(rows);
  std::cout << "corpus: " << files.size() << " files, " << supported << " with only supported ops, " << matched
            << " matched the evaluator, in " << Seconds(start) << std::endl;
  if (filter.empty()) {
    EXPECT_GT(supported, 0) << "no corpus module has only supported ops";
  }
}

}  // namespace
}  // namespace npc::testing
