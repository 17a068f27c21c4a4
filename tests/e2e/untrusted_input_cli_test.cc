// End to end (issue 10, untrusted input): the real `npc` on inputs that used
// to kill it with a signal (stack overflow, bad_alloc, an exception from the
// JSON writer on a byte that is not UTF-8): each is an error naming the file
// and the position, exit status below 128, and the other files are still
// analysed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace npc {
namespace {

using testing::RunCommand;
using testing::TempDir;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin: " << (haystack)

testing::CommandResult Npc(std::vector<std::string> args) {
  args.insert(args.begin(), NPC_TOOL);
  return RunCommand(args, {{"NEURON_CC_FLAGS", "<unset>"}, {"NEURON_COMPILE_CACHE_URL", "<unset>"},
                           {"NPC_BACKEND", "<unset>"}});
}

TEST(UntrustedInputCli, AnalyzeReportsCrashingInputsAsErrors) {
  TempDir dir;
  const std::string in = dir.path() + "/in";
  std::filesystem::create_directories(in);
  // 600 KB of nested tuple shapes (was SIGSEGV).
  ASSERT_TRUE(testing::WriteFile(in + "/deep.hlo", "HloModule m\nENTRY e {\n  ROOT p = " + std::string(600000, '(') +
                                                       "f32[] parameter(0)\n}\n"));
  // About 100 bytes, a huge iota device list (was bad_alloc, SIGABRT).
  ASSERT_TRUE(testing::WriteFile(in + "/iota.hlo",
                                 "HloModule m\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0), "
                                 "sharding={devices=[2]<=[100000000000]}\n}\n"));
  // A byte that is not UTF-8 in a string (was SIGABRT: the JSON writer threw).
  ASSERT_TRUE(testing::WriteFile(in + "/latin1.hlo",
                                 "HloModule m\nENTRY e {\n  p = f32[2]{0} parameter(0)\n"
                                 "  ROOT c = f32[2]{0} custom-call(p), custom_call_target=\"caf\xe9\"\n}\n"));
  // A valid module whose file name (in result.json) is not UTF-8.
  ASSERT_TRUE(testing::WriteFile(in + "/caf\xe9.hlo",
                                 "HloModule m\nENTRY e {\n  p = f32[2]{0} parameter(0)\n"
                                 "  ROOT a = f32[2]{0} add(p, p)\n}\n"));
  const std::string out = dir.path() + "/out";
  auto r = Npc({"analyze", "--analyze-output", out, in});
  EXPECT_EQ(r.exit_status, 1) << r.output;  // some file could not be read; no signal
  EXPECT_CONTAINS(r.output, "deep.hlo:3:");
  EXPECT_CONTAINS(r.output, "nested deeper than 64 levels");
  EXPECT_CONTAINS(r.output, "iota.hlo:3:");
  EXPECT_CONTAINS(r.output, "iota device list longer than");
  EXPECT_CONTAINS(r.output, "latin1.hlo:4:");
  EXPECT_CONTAINS(r.output, "string is not valid UTF-8");
  auto j = nlohmann::json::parse(testing::ReadFile(out + "/result.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "result.json is not JSON";
  EXPECT_EQ(j["summary"]["modules"], 1);
  EXPECT_EQ(j["summary"]["errors"], 3);
  ASSERT_EQ(j["modules"].size(), 1u);
  // U+FFFD for the invalid byte of the file name.
  const std::string source = j["modules"][0]["source"];
  EXPECT_CONTAINS(source, "/caf\xef\xbf\xbd.hlo");
}

TEST(UntrustedInputCli, ImportRefusesAProtobufOfAnotherTypeWithoutLibprotobufNoise) {
  TempDir dir;
  std::string other = "\x0a\x04\xff\xfe";
  other += std::string("\x00\x01\x10\x07", 4);
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/executable.bin", other));
  auto r = RunCommand({NPC_TOOL, "import", dir.path() + "/executable.bin"},
                      {{"NEURON_CC_FLAGS", "<unset>"}, {"NEURON_COMPILE_CACHE_URL", dir.path() + "/cache"}});
  EXPECT_GT(r.exit_status, 0) << r.output;
  EXPECT_LT(r.exit_status, 128) << r.output;
  EXPECT_CONTAINS(r.output, "executable.bin: not an HloModuleProto or HloProto");
  EXPECT_EQ(r.output.find("libprotobuf"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace npc
