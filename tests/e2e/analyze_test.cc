// End to end: `npc analyze` on a folder of HLO files in every format (HLO
// text, HloModuleProto, HloProto, gzip), on a cache filled by `npc import`,
// on the real corpus (when present), and `neuron_parallel_compile --command
// analyze` on the sample trainer, run as the real programs. Checks
// result.json (schema in generator/analyze.h) and the stdout summary.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "npc/hlo_builder.h"
#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

std::map<std::string, std::string> CleanEnv(std::map<std::string, std::string> extra = {}) {
  for (const char* name :
       {"NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL", "NEURON_EXTRACT_GRAPHS_ONLY", "NEURON_PARALLEL_COMPILE",
        "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE", "NPC_BACKEND"}) {
    extra.emplace(name, "<unset>");
  }
  return extra;
}

CommandResult Npc(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), NPC_TOOL);
  return RunCommand(args, CleanEnv(std::move(env)));
}

json ReadResult(const std::string& dir) {
  const std::string path = dir + "/result.json";
  if (!testing::FileExists(path)) {
    ADD_FAILURE() << path << " was not written";
    return json::object();
  }
  json j = json::parse(testing::ReadFile(path), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not JSON";
  return j.is_discarded() ? json::object() : j;
}

// The module of result.json whose source ends with `suffix`.
json ModuleBySource(const json& result, const std::string& suffix) {
  for (const auto& m : result["modules"]) {
    const std::string source = m["source"];
    if (source.size() >= suffix.size() && source.compare(source.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return m;
    }
  }
  ADD_FAILURE() << "no module from *" << suffix << " in " << result.dump(2);
  return json::object();
}

std::string Gzip(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// x f32[8] -> x * 2 + x: parameter, constant, broadcast, multiply, add.
xla::HloModuleProto Scaled() {
  hlo::HloBuilder b("scaled");
  hlo::Op x = b.Parameter(0, xla::F32, {8}, "x");
  hlo::Op two = b.Broadcast(b.ConstantF32(2.0f), {8}, {});
  return b.Build(b.Add(b.Mul(x, two), x));
}

// a f32[4,4] -> (cholesky(a)) with the metadata a framework would attach.
xla::HloModuleProto NeedsCholesky() {
  hlo::HloBuilder b("needs_cholesky");
  hlo::Op a = b.Parameter(0, xla::F32, {4, 4}, "a");
  xla::HloInstructionProto chol;
  chol.set_opcode("cholesky");
  chol.set_name("chol");
  chol.mutable_metadata()->set_op_type("aten__linalg_cholesky");
  chol.mutable_metadata()->set_source_file("train.py");
  chol.mutable_metadata()->set_source_line(7);
  hlo::Op c = b.AddInstruction(chol, {a}, hlo::HloBuilder::ArrayShape(xla::F32, {4, 4}));
  return b.Build(b.Tuple({c}));
}

constexpr char kTextModule[] = R"(HloModule text_module

ENTRY %main (p: s32[3], q: s32[3]) -> (s32[3], pred[3]) {
  %p = s32[3]{0} parameter(0)
  %q = s32[3]{0} parameter(1)
  %s = s32[3]{0} subtract(s32[3]{0} %p, s32[3]{0} %q)
  %lt = pred[3]{0} compare(s32[3]{0} %p, s32[3]{0} %q), direction=LT
  ROOT %t = (s32[3]{0}, pred[3]{0}) tuple(s32[3]{0} %s, pred[3]{0} %lt)
}
)";

class AnalyzeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = tmp_.Sub("in");
    ASSERT_TRUE(testing::WriteFile(in_ + "/scaled.pb", Scaled().SerializeAsString()));
    xla::HloProto wrapper;
    *wrapper.mutable_hlo_module() = NeedsCholesky();
    ASSERT_TRUE(testing::WriteFile(in_ + "/sub/cholesky.pb.gz", Gzip(wrapper.SerializeAsString())));
    ASSERT_TRUE(testing::WriteFile(in_ + "/text.hlo", kTextModule));
    ASSERT_TRUE(testing::WriteFile(in_ + "/notes.md", "not an HLO file; not picked from the folder"));
  }
  TempDir tmp_{"npc-analyze-test"};
  std::string in_;
};

TEST_F(AnalyzeTest, FolderOfEveryFormatVerbosity1) {
  const std::string out = tmp_.Sub("out");
  auto r = Npc({"analyze", "--backend", "host", "--analyze-output", out, in_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  json result = ReadResult(out);
  EXPECT_EQ(result["format"], "npc-analysis");
  EXPECT_EQ(result["version"], 1);
  EXPECT_EQ(result["backend"], "host");
  EXPECT_EQ(result["support_checked"], true);
  EXPECT_EQ(result["verbosity"], 1);
  ASSERT_EQ(result["modules"].size(), 3u) << result.dump(2);
  EXPECT_TRUE(result["errors"].empty());
  EXPECT_EQ(result["summary"]["modules"], 3);
  EXPECT_EQ(result["summary"]["errors"], 0);
  EXPECT_EQ(result["summary"]["supported"], 2);
  EXPECT_EQ(result["summary"]["unsupported"], 1);
  EXPECT_EQ(result["summary"]["unsupported_ops"], (json{{"cholesky", {{"modules", 1}, {"instructions", 1}}}}));

  json scaled = ModuleBySource(result, "/scaled.pb");
  EXPECT_EQ(scaled["name"], "scaled");
  EXPECT_EQ(scaled["instructions"], 5);
  EXPECT_EQ(scaled["computations"], 1);
  EXPECT_EQ(scaled["element_types"], json({"f32"}));
  EXPECT_EQ(scaled["supported"], true);
  EXPECT_TRUE(scaled["unsupported_ops"].empty());
  EXPECT_FALSE(scaled.contains("opcodes")) << "per-opcode counts are verbosity 2";
  EXPECT_FALSE(scaled.contains("entry"));
  EXPECT_TRUE(std::regex_match(scaled["graph_key"].get<std::string>(), std::regex("[0-9]+")));

  json chol = ModuleBySource(result, "/sub/cholesky.pb.gz");
  EXPECT_EQ(chol["name"], "needs_cholesky");
  EXPECT_EQ(chol["supported"], false);
  ASSERT_EQ(chol["unsupported_ops"].size(), 1u);
  EXPECT_EQ(chol["unsupported_ops"][0]["op"], "cholesky");
  EXPECT_EQ(chol["unsupported_ops"][0]["instructions"], 1);
  EXPECT_FALSE(chol["unsupported_ops"][0]["reason"].get<std::string>().empty());

  json text = ModuleBySource(result, "/text.hlo");
  EXPECT_EQ(text["name"], "text_module");
  EXPECT_EQ(text["element_types"], json({"pred", "s32"}));
  EXPECT_EQ(text["supported"], true);

  // The summary on stdout.
  EXPECT_NE(r.output.find("needs_cholesky"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("NOT supported by the host backend"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cholesky x1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("analyzed 3 modules; 2 supported by the host backend; unsupported: cholesky (1 module)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("wrote " + out + "/result.json"), std::string::npos) << r.output;
}

TEST_F(AnalyzeTest, Verbosity2AddsOpcodesShapesAndUnsupportedInstructions) {
  const std::string out = tmp_.Sub("out2");
  auto r = Npc({"analyze", "--analyze-verbosity", "2", "--analyze-output", out, in_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  json result = ReadResult(out);
  EXPECT_EQ(result["verbosity"], 2);
  EXPECT_EQ(result["backend"], "host");  // the default

  // The host backend's own list, consistent with the per-module verdicts.
  std::set<std::string> backend_ops = result["backend_supported_ops"].get<std::set<std::string>>();
  EXPECT_TRUE(backend_ops.count("dot") && backend_ops.count("custom-call:AwsNeuronTransferWithStaticRing"))
      << result["backend_supported_ops"];
  EXPECT_FALSE(backend_ops.count("cholesky"));

  json scaled = ModuleBySource(result, "/scaled.pb");
  for (const auto& op : scaled["supported_ops"]) EXPECT_TRUE(backend_ops.count(op.get<std::string>())) << op;
  EXPECT_EQ(scaled["opcodes"],
            (json{{"add", 1}, {"broadcast", 1}, {"constant", 1}, {"multiply", 1}, {"parameter", 1}}));
  EXPECT_EQ(scaled["opcodes_reachable"], scaled["opcodes"]);
  EXPECT_EQ(scaled["parameters"], (json::array({{{"number", 0}, {"name", "x"}, {"shape", "f32[8]{0}"}}})));
  EXPECT_EQ(scaled["outputs"], json({"f32[8]{0}"}));
  EXPECT_EQ(scaled["result_shape"], "f32[8]{0}");
  EXPECT_EQ(scaled["supported_ops"], json({"add", "broadcast", "constant", "multiply", "parameter"}));
  EXPECT_TRUE(scaled["unsupported_instructions"].empty());

  json text = ModuleBySource(result, "/text.hlo");
  EXPECT_EQ(text["parameters"][1]["shape"], "s32[3]{0}");
  EXPECT_EQ(text["outputs"], json({"s32[3]{0}", "pred[3]{0}"}));
  EXPECT_EQ(text["result_shape"], "(s32[3]{0}, pred[3]{0})");

  json chol = ModuleBySource(result, "/sub/cholesky.pb.gz");
  EXPECT_EQ(chol["supported_ops"], json({"parameter", "tuple"}));
  ASSERT_EQ(chol["unsupported_instructions"].size(), 1u);
  const json& inst = chol["unsupported_instructions"][0];
  EXPECT_EQ(inst["op"], "cholesky");
  EXPECT_EQ(inst["instruction"], "chol");
  EXPECT_EQ(inst["computation"], "needs_cholesky");
  EXPECT_EQ(inst["reachable"], true);
  EXPECT_EQ(inst["shape"], "f32[4,4]{1,0}");
  EXPECT_EQ(inst["operand_shapes"], json({"f32[4,4]{1,0}"}));
  EXPECT_EQ(inst["op_type"], "aten__linalg_cholesky");
  EXPECT_EQ(inst["source_file"], "train.py");
  EXPECT_EQ(inst["source_line"], 7);
  EXPECT_NE(
      r.output.find("%chol in needs_cholesky: f32[4,4]{1,0} cholesky(f32[4,4]{1,0})  op_type=aten__linalg_cholesky"
                    "  at train.py:7"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("opcodes: add x1, broadcast x1, constant x1, multiply x1, parameter x1"), std::string::npos)
      << r.output;
}

TEST_F(AnalyzeTest, BadFileIsReportedAndTheOthersStillAnalysed) {
  ASSERT_TRUE(testing::WriteFile(in_ + "/broken.hlo", "HloModule m\nENTRY e {\n  %p = f32[2 parameter(0)\n}\n"));
  ASSERT_TRUE(testing::WriteFile(tmp_.Sub("garbage.pb"), "\x08\x96\x01 definitely not a module"));
  const std::string out = tmp_.Sub("out3");
  auto r = Npc({"analyze", "--analyze-output", out, in_, tmp_.Sub("garbage.pb"), tmp_.Sub("absent.hlo")});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  json result = ReadResult(out);
  EXPECT_EQ(result["modules"].size(), 3u);
  ASSERT_EQ(result["errors"].size(), 3u) << result.dump(2);
  std::set<std::string> sources;
  for (const auto& e : result["errors"]) {
    const std::string source = e["source"];
    sources.insert(source);
    EXPECT_NE(e["error"].get<std::string>().find(source), std::string::npos) << "the error names the file: " << e;
  }
  EXPECT_EQ(sources, (std::set<std::string>{in_ + "/broken.hlo", tmp_.Sub("garbage.pb"), tmp_.Sub("absent.hlo")}));
  EXPECT_EQ(result["summary"]["errors"], 3);
  EXPECT_NE(r.output.find("error: " + in_ + "/broken.hlo:3:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("analyzed 3 modules, 3 unreadable"), std::string::npos) << r.output;
}

TEST_F(AnalyzeTest, NeuronxCcSupportIsNotChecked) {
  const std::string out = tmp_.Sub("out4");
  auto r = Npc({"analyze", "--analyze-output", out, in_}, {{"NPC_BACKEND", "neuronx-cc"}});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  json result = ReadResult(out);
  EXPECT_EQ(result["backend"], "neuronx-cc");
  EXPECT_EQ(result["support_checked"], false);
  EXPECT_NE(result["support_note"].get<std::string>().find("not checked"), std::string::npos);
  EXPECT_TRUE(result["summary"]["supported"].is_null());
  EXPECT_TRUE(result["summary"]["unsupported"].is_null());
  for (const auto& m : result["modules"]) {
    EXPECT_TRUE(m["supported"].is_null()) << m;
    EXPECT_TRUE(m["unsupported_ops"].empty()) << m;
  }
  EXPECT_NE(r.output.find("neuronx-cc support not checked"), std::string::npos) << r.output;
}

TEST_F(AnalyzeTest, CacheEntriesAreNamedByEntry) {
  const std::string cache = tmp_.Sub("cache");
  auto imported = Npc({"import", "--cache_dir", cache, in_});
  ASSERT_EQ(imported.exit_status, 0) << imported.output;
  const std::string compiler_dir = testing::HostCompilerDir();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"analyze", "--analyze-output", tmp_.Sub("out5"), cache},                    // the cache root, given
           {"analyze", "--analyze-output", tmp_.Sub("out6"), "--cache_dir", cache}}) {  // the resolved cache
    auto r = Npc(args);
    EXPECT_EQ(r.exit_status, 0) << r.output;
    json result = ReadResult(args[2]);
    ASSERT_EQ(result["modules"].size(), 3u) << result.dump(2);
    std::set<std::string> names;
    for (const auto& m : result["modules"]) {
      names.insert(m["name"].get<std::string>());
      ASSERT_TRUE(m.contains("entry")) << m;
      const std::string entry = m["entry"];
      std::smatch key;
      ASSERT_TRUE(std::regex_match(entry, key, std::regex(compiler_dir + "/MODULE_([0-9]+)\\+[0-9a-f]{8}"))) << entry;
      EXPECT_EQ(m["graph_key"], key[1].str());
      EXPECT_EQ(m["source"], cache + "/" + entry + "/model.hlo_module.pb");
    }
    EXPECT_EQ(names, (std::set<std::string>{"scaled", "needs_cholesky", "text_module"}));
  }
}

TEST(AnalyzeCli, UsageErrors) {
  auto bad_verbosity = Npc({"analyze", "--analyze-verbosity", "3", "x.hlo"});
  EXPECT_NE(bad_verbosity.exit_status, 0) << bad_verbosity.output;
  EXPECT_NE(bad_verbosity.output.find("--analyze-verbosity"), std::string::npos) << bad_verbosity.output;
  auto no_command = RunCommand({NPC_CLI, "--command", "analyze"}, CleanEnv());
  EXPECT_EQ(no_command.exit_status, 2) << no_command.output;
  EXPECT_NE(no_command.output.find("--command analyze needs a training command"), std::string::npos)
      << no_command.output;
}

// The corpus: every HLO file is analysed or, for the one fragment, reported
// as unreadable; known facts of the torch-neuronx dumps are in the result.
TEST(AnalyzeCorpus, EveryModuleWithItsCustomCalls) {
  const std::string corpus = NPC_CORPUS_DIR;
  if (!fs::is_directory(corpus)) GTEST_SKIP() << "corpus absent: " << corpus << " not found";
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(corpus)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".hlo" || ext == ".txt" || ext == ".binpb")) ++files;
  }
  TempDir tmp("npc-analyze-corpus");
  auto r = Npc({"analyze", "--analyze-verbosity", "2", "--analyze-output", tmp.path(), corpus});
  EXPECT_EQ(r.exit_status, 1) << "mlp__test.hlo is a fragment, not a module\n" << r.output;
  json result = ReadResult(tmp.path());
  ASSERT_EQ(result["errors"].size(), 1u) << result["errors"].dump(2);
  EXPECT_EQ(result["errors"][0]["source"],
            fs::absolute(corpus + "/torch-neuronx/mlp__test.hlo").lexically_normal().string());
  EXPECT_EQ(result["modules"].size() + 1, files);

  json mini = ModuleBySource(result, "/torch-neuronx/mlp__mini_mlp_single.hlo");
  EXPECT_EQ(mini["name"], "SyncTensorsGraph.142");
  EXPECT_EQ(mini["custom_call_targets"], (json{{"AwsNeuronTransferWithStaticRing", 4}}));
  EXPECT_EQ(mini["input_output_aliases"], 4);
  EXPECT_EQ(mini["supported"], true) << "every op of this training step runs on the host backend";
  EXPECT_EQ(mini["parameters"].size(), 5u);
  EXPECT_EQ(mini["outputs"].size(), 8u);

  json bert = ModuleBySource(result, "/torch-neuronx/bert__bert_single_graph_4.hlo");
  EXPECT_EQ(bert["custom_call_targets"],
            (json{{"AwsNeuronGelu", 2}, {"AwsNeuronGeluBackward", 2}, {"AwsNeuronTransferWithStaticRing", 62}}));
  EXPECT_EQ(bert["opcodes"]["custom-call"], 66);

  json graphsage = ModuleBySource(result, "/xla-cpu-bench/graphsage_tf.hlo");
  EXPECT_EQ(graphsage["elided_constants"], true);
  EXPECT_TRUE(graphsage["custom_call_targets"].empty());
  json jax = ModuleBySource(result, "/jax-binpb/example1.binpb");
  EXPECT_EQ(jax["name"], "jit_f");
  EXPECT_EQ(jax["opcodes"], (json{{"constant", 1}, {"divide", 1}, {"multiply", 1}, {"parameter", 1}}));
  EXPECT_EQ(jax["graph_key"], ModuleBySource(result, "/jax-binpb/example1.txt")["graph_key"])
      << "the binary module and its text form are the same graph";

  EXPECT_GE(result["summary"]["custom_call_targets"]["AwsNeuronTransferWithStaticRing"]["modules"], 15);
  // Whatever the host backend supports today: the report is consistent.
  int supported = 0;
  for (const auto& m : result["modules"]) {
    EXPECT_EQ(m["supported"].get<bool>(), m["unsupported_ops"].empty()) << m["source"];
    if (m["supported"].get<bool>()) ++supported;
    size_t unsupported_instructions = 0;
    for (const auto& op : m["unsupported_ops"]) {
      // "" is a failure not tied to an instruction; every other key is an op the module has.
      if (op["op"] != "") {
        EXPECT_GE(op["instructions"].get<int>(), 1) << m["source"] << " " << op;
      }
      EXPECT_FALSE(op["reason"].get<std::string>().empty()) << m["source"] << " " << op;
      unsupported_instructions += op["instructions"].get<size_t>();
    }
    EXPECT_EQ(m["unsupported_instructions"].size(), unsupported_instructions) << m["source"];
  }
  EXPECT_EQ(result["summary"]["supported"], supported);
}

// The drop-in form: a trial run of the sample trainer, then the analysis of
// the graphs it extracted; the user's cache is not touched.
TEST(AnalyzeTrial, SampleTrainerGraphsAreAllHostSupported) {
  TempDir tmp("npc-analyze-trial");
  const std::string out = tmp.Sub("analysis");
  const std::string cache = tmp.Sub("main-cache");
  auto r = RunCommand({NPC_CLI, "--command", "analyze", "--cache_dir", cache, "--analyze-output", out,
                       "--analyze-verbosity", "2", NPC_MLP_TRAIN, "--steps", "2"},
                      CleanEnv({{"NEURON_CC_FLAGS", "--O1 --cache_dir=" + cache}}));
  ASSERT_EQ(r.exit_status, 0) << r.output;
  json result = ReadResult(out);
  EXPECT_EQ(result["command"], json({NPC_MLP_TRAIN, "--steps", "2"}));
  EXPECT_EQ(result["command_exit_status"], 0);
  EXPECT_EQ(result["inputs"], json({out + "/trial-cache"}));
  EXPECT_TRUE(result["errors"].empty());
  // The sample's graphs: init, the train step (two batch sizes) and eval
  // (samples/mlp_train/model.h); a 2-step run uses at least init and one step.
  ASSERT_GE(result["modules"].size(), 2u) << result.dump(2);
  std::set<std::string> names;
  for (const auto& m : result["modules"]) {
    names.insert(m["name"].get<std::string>());
    EXPECT_EQ(m["supported"], true) << m;
    EXPECT_TRUE(m["entry"].get<std::string>().find("/MODULE_") != std::string::npos) << m;
    EXPECT_EQ(m["source"].get<std::string>().rfind(out + "/trial-cache/", 0), 0u) << m["source"];
  }
  EXPECT_TRUE(names.count("mlp_init")) << r.output;
  bool has_step = false;
  for (const auto& name : names) has_step |= name.rfind("mlp_train_step_b", 0) == 0;
  EXPECT_TRUE(has_step) << r.output;
  for (const auto& m : result["modules"]) {
    if (m["name"].get<std::string>().rfind("mlp_train_step_b", 0) != 0) continue;
    // w1, b1, w2, b2, x, labels, lr -> (w1', b1', w2', b2', loss)
    EXPECT_EQ(m["parameters"].size(), 7u) << m;
    EXPECT_EQ(m["parameters"][6]["shape"], "f32[]") << m;
    EXPECT_EQ(m["outputs"].size(), 5u) << m;
    EXPECT_EQ(m["outputs"][4], "f32[]") << m;
  }
  EXPECT_EQ(result["summary"]["supported"], result["modules"].size());
  EXPECT_FALSE(fs::exists(cache)) << "the trial run wrote into the user's cache";
  EXPECT_NE(r.output.find("supported by the host backend"), std::string::npos) << r.output;
}

// A failing training command: its status is the exit status, and what it
// extracted before failing (here: nothing) is still reported.
TEST(AnalyzeTrial, FailingCommandStatusIsReturnedAndResultStillWritten) {
  TempDir tmp("npc-analyze-trial-fail");
  const std::string out = tmp.Sub("analysis");
  auto r = RunCommand({NPC_CLI, "--command", "analyze", "--analyze-output", out, "--", "/bin/sh", "-c", "exit 3"},
                      CleanEnv());
  EXPECT_EQ(r.exit_status, 3) << r.output;
  EXPECT_NE(r.output.find("The training command exited with status 3"), std::string::npos) << r.output;
  json result = ReadResult(out);
  EXPECT_EQ(result["command"], json({"/bin/sh", "-c", "exit 3"}));
  EXPECT_EQ(result["command_exit_status"], 3);
  EXPECT_TRUE(result["modules"].empty());
  EXPECT_TRUE(fs::is_directory(out + "/trial-cache"));
}

}  // namespace
}  // namespace npc
