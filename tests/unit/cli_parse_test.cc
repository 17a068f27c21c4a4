// Command-line parsing of `neuron_parallel_compile` and `npc` (generator/cli.h),
// the summary shape and the exit status rule (generator/results.h).
#include <gtest/gtest.h>

#include "generator/cli.h"
#include "generator/results.h"

namespace npc::tool {
namespace {

using Args = std::vector<std::string>;

ParsedCommandLine Npc(Args args) {
  args.insert(args.begin(), "neuron_parallel_compile");
  return ParseNeuronParallelCompileArgs(args);
}

TEST(NeuronParallelCompileArgsTest, CommandOptionsAreNotEaten) {
  auto p = Npc({"python", "train.py", "--lr", "0.1"});
  ASSERT_FALSE(p.exit_now) << p.message;
  EXPECT_EQ(p.options.verb, "all");
  EXPECT_EQ(p.options.command, (Args{"python", "train.py", "--lr", "0.1"}));
}

TEST(NeuronParallelCompileArgsTest, OwnOptionsBeforeTheCommand) {
  auto p = Npc({"--num_parallel", "3", "--cache_dir=/c", "--retry_failed_compilation", "--log_level", "debug",
                "torchrun", "--nproc_per_node=2", "train.py", "--num_parallel", "5", "--cache_dir", "/other"});
  ASSERT_FALSE(p.exit_now) << p.message;
  EXPECT_EQ(p.options.num_parallel, 3);
  EXPECT_EQ(p.options.cache_dir, "/c");
  EXPECT_TRUE(p.options.retry_failed_compilation);
  EXPECT_EQ(p.options.log_level, "debug");
  EXPECT_EQ(p.options.command,
            (Args{"torchrun", "--nproc_per_node=2", "train.py", "--num_parallel", "5", "--cache_dir", "/other"}));
}

TEST(NeuronParallelCompileArgsTest, DoubleDashEndsOptions) {
  auto p = Npc({"--command", "collect", "--", "--weird-program", "-x", "--"});
  ASSERT_FALSE(p.exit_now) << p.message;
  EXPECT_EQ(p.options.verb, "collect");
  EXPECT_EQ(p.options.command, (Args{"--weird-program", "-x", "--"}));
}

TEST(NeuronParallelCompileArgsTest, Commands) {
  EXPECT_EQ(Npc({"--command", "compile"}).options.verb, "compile");
  EXPECT_EQ(Npc({"--command=scan", "--json"}).options.verb, "scan");
  EXPECT_TRUE(Npc({"--command=scan", "--json"}).options.json);
  EXPECT_EQ(Npc({"--command", "clean"}).options.verb, "clean");
  EXPECT_EQ(Npc({"--command", "clear-locks"}).options.verb, "clear-locks");
  EXPECT_EQ(Npc({"--command", "collect-and-compile", "x"}).options.verb, "all");
  EXPECT_EQ(Npc({"--command", "all", "x"}).options.verb, "all");
  EXPECT_EQ(Npc({"--backend", "neuronx-cc", "--command", "compile"}).options.backend, "neuronx-cc");
}

TEST(NeuronParallelCompileArgsTest, Errors) {
  auto none = Npc({});
  EXPECT_TRUE(none.exit_now);
  EXPECT_NE(none.exit_status, 0);
  EXPECT_NE(none.message.find("no training command"), std::string::npos) << none.message;

  auto unknown = Npc({"--bogus", "python"});
  EXPECT_TRUE(unknown.exit_now);
  EXPECT_NE(unknown.exit_status, 0);

  auto bad_command = Npc({"--command", "explode"});
  EXPECT_TRUE(bad_command.exit_now);
  EXPECT_NE(bad_command.exit_status, 0);

  auto bad_n = Npc({"--num_parallel", "0", "python"});
  EXPECT_TRUE(bad_n.exit_now);
  EXPECT_NE(bad_n.exit_status, 0);

  auto extra = Npc({"--command", "compile", "python", "x.py"});
  EXPECT_TRUE(extra.exit_now);
  EXPECT_NE(extra.exit_status, 0);

  auto collect_nothing = Npc({"--command", "collect"});
  EXPECT_TRUE(collect_nothing.exit_now);
  EXPECT_NE(collect_nothing.exit_status, 0);

  auto help = Npc({"--help"});
  EXPECT_TRUE(help.exit_now);
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_NE(help.message.find("--num_parallel"), std::string::npos);
}

ParsedCommandLine Tool(Args args) {
  args.insert(args.begin(), "npc");
  return ParseNpcArgs(args);
}

TEST(NpcArgsTest, Verbs) {
  auto collect = Tool({"collect", "--cache", "/c", "--", "./train", "--steps", "10"});
  ASSERT_FALSE(collect.exit_now) << collect.message;
  EXPECT_EQ(collect.options.verb, "collect");
  EXPECT_EQ(collect.options.cache_dir, "/c");
  EXPECT_EQ(collect.options.command, (Args{"./train", "--steps", "10"}));

  auto without_dashes = Tool({"all", "./train", "--build_dir", "x"});
  ASSERT_FALSE(without_dashes.exit_now) << without_dashes.message;
  EXPECT_EQ(without_dashes.options.command, (Args{"./train", "--build_dir", "x"}));
  EXPECT_EQ(without_dashes.options.build_dir, "");

  auto compile = Tool({"compile", "--num_parallel", "2", "--build_dir", "/b"});
  ASSERT_FALSE(compile.exit_now) << compile.message;
  EXPECT_EQ(compile.options.verb, "compile");
  EXPECT_EQ(compile.options.num_parallel, 2);
  EXPECT_EQ(compile.options.build_dir, "/b");

  auto gen = Tool({"generate", "--compiler_dir", "host-x"});
  ASSERT_FALSE(gen.exit_now) << gen.message;
  EXPECT_EQ(gen.options.compiler_dir, "host-x");

  auto edge = Tool({"compile-entry", "--cache", "/c", "--entry", "d/MODULE_1+abc", "--retry_failed_compilation"});
  ASSERT_FALSE(edge.exit_now) << edge.message;
  EXPECT_EQ(edge.options.entry, "d/MODULE_1+abc");
  EXPECT_TRUE(edge.options.retry_failed_compilation);

  EXPECT_TRUE(Tool({"scan", "--json"}).options.json);
  auto import = Tool({"import", "--flags=--target=trn2 -O1", "--", "a.hlo"});
  ASSERT_FALSE(import.exit_now) << import.message;
  EXPECT_EQ(import.options.import_flags, std::optional<std::string>("--target=trn2 -O1"));
  EXPECT_EQ(import.options.command, (Args{"a.hlo"}));
  EXPECT_FALSE(Tool({"import", "a.hlo"}).options.import_flags.has_value());
  EXPECT_EQ(Tool({"import", "--flags", "", "a.hlo"}).options.import_flags, std::optional<std::string>(""));
  EXPECT_EQ(Tool({"clear-locks"}).options.verb, "clear-locks");
  EXPECT_EQ(Tool({"clean"}).options.verb, "clean");
}

TEST(NeuronParallelCompileArgsTest, AnalyzeRunsTheTrialCommand) {
  auto p = Npc({"--command", "analyze", "--analyze-output", "/out", "--analyze-verbosity=2", "python", "train.py",
                "--analyze-output", "kept"});
  ASSERT_FALSE(p.exit_now) << p.message;
  EXPECT_EQ(p.options.verb, "analyze");
  EXPECT_TRUE(p.options.analyze_trial);
  EXPECT_EQ(p.options.analyze_output, "/out");
  EXPECT_EQ(p.options.analyze_verbosity, 2);
  EXPECT_EQ(p.options.command, (Args{"python", "train.py", "--analyze-output", "kept"}));

  auto defaults = Npc({"--command=analyze", "./train"});
  ASSERT_FALSE(defaults.exit_now) << defaults.message;
  EXPECT_EQ(defaults.options.analyze_output, "model_analysis_result");
  EXPECT_EQ(defaults.options.analyze_verbosity, 1);

  auto no_command = Npc({"--command", "analyze"});
  EXPECT_TRUE(no_command.exit_now);
  EXPECT_NE(no_command.exit_status, 0);
  EXPECT_NE(no_command.message.find("needs a training command"), std::string::npos) << no_command.message;

  auto bad_verbosity = Npc({"--command", "analyze", "--analyze-verbosity", "3", "./train"});
  EXPECT_TRUE(bad_verbosity.exit_now);
  EXPECT_NE(bad_verbosity.exit_status, 0);
}

TEST(NpcArgsTest, AnalyzeTakesFilesOrNothing) {
  auto files = Tool({"analyze", "--analyze_output", "/r", "a.hlo", "dumps/"});
  ASSERT_FALSE(files.exit_now) << files.message;
  EXPECT_EQ(files.options.verb, "analyze");
  EXPECT_FALSE(files.options.analyze_trial);
  EXPECT_EQ(files.options.analyze_output, "/r");
  EXPECT_EQ(files.options.command, (Args{"a.hlo", "dumps/"}));

  auto cache = Tool({"analyze", "--cache", "/c"});
  ASSERT_FALSE(cache.exit_now) << cache.message;
  EXPECT_EQ(cache.options.cache_dir, "/c");
  EXPECT_TRUE(cache.options.command.empty());

  auto bad = Tool({"analyze", "--analyze-verbosity", "0"});
  EXPECT_TRUE(bad.exit_now);
  EXPECT_NE(bad.exit_status, 0);
}

TEST(NpcArgsTest, Errors) {
  for (const Args& args : {Args{}, Args{"frobnicate"}, Args{"collect"}, Args{"compile", "extra"},
                           Args{"compile-entry", "--cache", "/c"}, Args{"scan", "--nope"}}) {
    auto p = Tool(args);
    EXPECT_TRUE(p.exit_now) << (args.empty() ? "(none)" : args[0]);
    EXPECT_NE(p.exit_status, 0) << (args.empty() ? "(none)" : args[0]);
  }
  auto help = Tool({"--help"});
  EXPECT_TRUE(help.exit_now);
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_NE(help.message.find("compile-entry"), std::string::npos);
}

TEST(ExitStatusTest, CappedNeverWraps) {
  EXPECT_EQ(ExitStatusForFailures(0), 0);
  EXPECT_EQ(ExitStatusForFailures(1), 1);
  EXPECT_EQ(ExitStatusForFailures(254), 254);
  EXPECT_EQ(ExitStatusForFailures(255), 255);
  EXPECT_EQ(ExitStatusForFailures(256), 255);  // 256 % 256 would be 0: success
  EXPECT_EQ(ExitStatusForFailures(512), 255);
  EXPECT_EQ(ExitStatusForFailures(100000), 255);
}

TEST(SummaryTest, ShapeAndOrder) {
  CompileSummary s;
  s.start_time = 1700000000.5;
  s.compilation_time = 12.25;
  s.items.push_back({"/c/d/MODULE_2+x/model.hlo_module.pb", true, 0, 3.5, "compiled", ""});
  s.items.push_back({"/c/d/MODULE_1+x/model.hlo_module.pb", false, 1, 1.0, "failed", "/c/d/MODULE_1+x/model.log"});
  s.items.push_back({"/c/d/MODULE_3+x/model.hlo_module.pb", false, 0, 0, "cached failure", "/c/d/MODULE_3+x/model.log"});
  EXPECT_EQ(s.total(), 3);
  EXPECT_EQ(s.succeeded(), 1);
  EXPECT_EQ(s.failed(), 2);
  auto j = SummaryToJson(s);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (Args{"compilation_summary", "compilation_report", "start_time", "compilation_time"}));
  EXPECT_EQ(j["compilation_summary"]["true"], 1);
  EXPECT_EQ(j["compilation_summary"]["false"], 2);
  const auto& r = j["compilation_report"]["/c/d/MODULE_1+x/model.hlo_module.pb"];
  EXPECT_EQ(r["status"], false);
  EXPECT_EQ(r["retry"], 1);
  EXPECT_EQ(r["compile_time"], 1.0);
  EXPECT_EQ(r["log"], "/c/d/MODULE_1+x/model.log");
  EXPECT_EQ(j["compilation_report"].begin().key(), "/c/d/MODULE_2+x/model.hlo_module.pb");
  EXPECT_EQ(j["start_time"], 1700000000.5);
}

TEST(ResultRecordTest, RoundTrip) {
  EntryResultRecord r;
  r.entry = "host-x/MODULE_5+d41d8cd9";
  r.hlo_path = "/c/host-x/MODULE_5+d41d8cd9/model.hlo_module.pb";
  r.status = "compiled";
  r.ok = true;
  r.retries = 2;
  r.compile_time = 1.5;
  r.peak_rss_bytes = 123456789;
  r.end_time = 1700000001.25;
  auto back = RecordFromJson(RecordToJson(r).dump(), "test");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->entry, r.entry);
  EXPECT_EQ(back->status, "compiled");
  EXPECT_TRUE(back->ok);
  EXPECT_EQ(back->retries, 2);
  EXPECT_EQ(back->peak_rss_bytes, 123456789);
  EXPECT_DOUBLE_EQ(back->end_time, r.end_time);
  EXPECT_EQ(ResultRecordPath("/b", r.entry), "/b/results/MODULE_5+d41d8cd9.json");
  EXPECT_EQ(ResultRecordPath("/b", r.entry, "run1"), "/b/results/run1/MODULE_5+d41d8cd9.json");
  EXPECT_NE(NewRunId(), NewRunId());
  EXPECT_EQ(NewRunId().find('/'), std::string::npos);
  EXPECT_FALSE(RecordFromJson("[1,2]", "x").ok());
  EXPECT_FALSE(RecordFromJson("{", "x").ok());
}

}  // namespace
}  // namespace npc::tool
