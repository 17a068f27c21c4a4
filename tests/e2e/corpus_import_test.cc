// End to end on the real corpus (../shared/corpus, skipped when absent):
// `npc import` of the whole corpus folder, then `npc compile` (build.ninja +
// the real ninja + the host backend, in parallel). Every module the host
// backend supports is DONE; every other one is FAILED with a model.log that
// names the unsupported op; the exit status counts the failures. Prints one
// row per module.
#include <filesystem>
#include <iostream>
#include <sstream>

#include <gtest/gtest.h>

#include "host/host_backend.h"
#include "npc/cache.h"
#include "npc/hlo.h"
#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;

TEST(CorpusImport, ImportThenNinjaCompilesWhatTheHostBackendSupports) {
  const std::string corpus = NPC_CORPUS_DIR;
  if (!fs::is_directory(corpus)) GTEST_SKIP() << "corpus absent: " << corpus << " not found";
  TempDir tmp;
  const std::string cache = tmp.Sub("cache");
  const std::map<std::string, std::string> env = {{"NEURON_CC_FLAGS", "<unset>"},
                                                  {"NEURON_COMPILE_CACHE_URL", "<unset>"}};

  auto imported = RunCommand({NPC_TOOL, "import", "--keep_going", "--cache_dir", cache, corpus}, env);
  // mlp__test.hlo is broken text (an operand that is not defined): reported with line and column.
  EXPECT_EQ(imported.exit_status, 1) << imported.output;
  EXPECT_NE(imported.output.find("mlp__test.hlo:4:"), std::string::npos) << imported.output;
  EXPECT_NE(imported.output.find("1 of "), std::string::npos) << imported.output;

  auto compiled = RunCommand({NPC_TOOL, "compile", "--cache_dir", cache, "--num_parallel", "2"}, env);

  const std::string dir = testing::HostCompilerDir();
  ASSERT_FALSE(dir.empty());
  cache::LocalStore store(cache);
  auto names = store.List(dir);
  ASSERT_TRUE(names.ok()) << names.error().message;
  int entries = 0, done = 0, failed = 0;
  std::ostringstream table;
  table << "corpus import + compile (host backend):\n";
  for (const auto& name : *names) {
    auto ref = cache::ParseEntryDirName(dir, name);
    if (!ref) continue;
    ++entries;
    auto module = hlo::ReadHloModuleFile(cache + "/" + ref->file(cache::kHloFile));
    ASSERT_TRUE(module.ok()) << module.error().message;
    auto unsupported = host::UnsupportedOpcodes(*module);
    auto state = cache::GetEntryState(store, *ref, "model.so");
    ASSERT_TRUE(state.ok());
    table << "  " << module->name() << " (" << name << "): " << cache::EntryStateName(*state);
    if (unsupported.empty()) {
      EXPECT_EQ(*state, cache::EntryState::kDone) << name << ": " << ReadFile(cache + "/" + ref->file("model.log"));
      ++done;
    } else {
      EXPECT_EQ(*state, cache::EntryState::kFailed) << name;
      const std::string log = ReadFile(cache + "/" + ref->file("model.log"));
      // The log names one of the instructions the backend refuses.
      bool named = false;
      for (const auto& [op, why] : unsupported) {
        const std::string opcode = op.substr(0, op.find(':'));
        named |= log.find("'" + opcode + "'") != std::string::npos || log.find(why.substr(0, why.find(" ("))) != std::string::npos;
        table << (op == unsupported.begin()->first ? " -- " : ", ") << (op.empty() ? "(module)" : op);
      }
      EXPECT_TRUE(named) << name << " log does not name an unsupported op:\n" << log;
      ++failed;
    }
    table << "\n";
  }
  table << "  " << done << " DONE, " << failed << " FAILED of " << entries << " modules\n";
  std::cout << table.str();
  EXPECT_EQ(entries, 25);
  EXPECT_GT(done, 0);
  EXPECT_EQ(compiled.exit_status, failed) << compiled.output;
  EXPECT_NE(compiled.output.find("Total failed compilations: " + std::to_string(failed)), std::string::npos)
      << compiled.output;
}

}  // namespace
}  // namespace npc
