// Unit tests of the neuronx-cc driver with a test double: a shell script
// standing in for neuronx-cc that records its command line.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "compilers/neuronx_cc.h"
#include "support/test_support.h"

namespace npc {
namespace {

using npc::testing::ReadFile;
using npc::testing::TempDir;
using npc::testing::WriteFile;

// A fake neuronx-cc: prints a version, or records argv and cwd and writes the
// --output file (unless FAKE_FAIL is in the flags).
std::string MakeFakeNeuronxCc(const TempDir& dir) {
  const std::string path = dir.Sub("bin/neuronx-cc");
  WriteFile(path, R"SH(#!/bin/sh
if [ "$1" = "--version" ]; then
  echo "NeuronX Compiler version 2.16.372.0+4a9b2326"
  echo ""
  echo "Python version 3.10.12"
  exit 0
fi
printf '%s\n' "$@" > )SH" + dir.Sub("argv.txt") + R"SH(
pwd > )SH" + dir.Sub("cwd.txt") + R"SH(
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "--output" ] && out="$a"
  [ "$a" = "FAKE_FAIL" ] && { echo "ERROR: compilation failed (fake)"; exit 70; }
  prev="$a"
done
echo NEFF > "$out"
)SH");
  chmod(path.c_str(), 0755);
  return path;
}

TEST(NeuronxCc, CommandLineMatchesNeuronParallelCompile) {
  TempDir dir;
  CompilerOptions options;
  options.backend = "neuronx-cc";
  options.program = MakeFakeNeuronxCc(dir);
  NeuronxCcCompiler cc(options);
  CompileJob job{"/c/MODULE_1+2/model.hlo_module.pb", {"--model-type=transformer", "-O1"}, "/w", "/w/model.neff"};
  EXPECT_EQ(cc.CommandLine(job),
            (std::vector<std::string>{options.program, "compile", "--framework=XLA", "/c/MODULE_1+2/model.hlo_module.pb",
                                      "--output", "/w/model.neff", "--target=trn1", "--model-type=transformer", "-O1",
                                      "--verbose=35"}));
  // A target in the flags replaces the default.
  job.flags = {"--target=trn2"};
  auto argv = cc.CommandLine(job);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--target=trn1"), 0);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--target=trn2"), 1);
}

TEST(NeuronxCc, VersionDirectoryFromTheCompiler) {
  TempDir dir;
  CompilerOptions options;
  options.program = MakeFakeNeuronxCc(dir);
  NeuronxCcCompiler cc(options);
  auto name = cc.CacheDirectoryName();
  ASSERT_TRUE(name.ok()) << name.error().message;
  EXPECT_EQ(*name, "neuronxcc-2.16.372.0+4a9b2326");
  options.version_override = "9.9.9";
  EXPECT_EQ(*NeuronxCcCompiler(options).CacheDirectoryName(), "neuronxcc-9.9.9");
  EXPECT_FALSE(ParseNeuronxCcVersion("no numbers here").ok());
}

TEST(NeuronxCc, RunsInTheWorkDirectoryAndReportsFailures) {
  TempDir dir;
  CompilerOptions options;
  options.program = MakeFakeNeuronxCc(dir);
  NeuronxCcCompiler cc(options);
  ASSERT_TRUE(WriteFile(dir.Sub("work/.keep"), ""));
  CompileJob job{dir.Sub("model.hlo_module.pb"), {}, dir.Sub("work"), dir.Sub("work/model.neff")};
  CompileOutcome ok = cc.Compile(job);
  EXPECT_TRUE(ok.ok) << ok.output;
  EXPECT_EQ(ReadFile(dir.Sub("work/model.neff")), "NEFF\n");
  EXPECT_EQ(ReadFile(dir.Sub("cwd.txt")), dir.Sub("work") + "\n");
  EXPECT_NE(ok.command.find("compile --framework=XLA"), std::string::npos);

  job.flags = {"FAKE_FAIL"};
  job.artifact_path = dir.Sub("work/other.neff");
  CompileOutcome bad = cc.Compile(job);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.exit_status, 70);
  EXPECT_NE(bad.output.find("compilation failed (fake)"), std::string::npos);
}

TEST(NeuronxCc, MissingCompilerIsAClearError) {
  CompilerOptions options;
  options.backend = "neuronx-cc";
  options.program = "/nonexistent/neuronx-cc";
  auto compiler = MakeCompiler(options);
  ASSERT_TRUE(compiler.ok());
  auto name = (*compiler)->CacheDirectoryName();
  ASSERT_FALSE(name.ok());
  EXPECT_NE(name.error().message.find("/nonexistent/neuronx-cc"), std::string::npos);
  CompilerOptions unknown;
  unknown.backend = "tpu-magic";
  EXPECT_FALSE(MakeCompiler(unknown).ok());
}

}  // namespace
}  // namespace npc
