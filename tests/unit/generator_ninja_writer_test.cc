// build.ninja writer (generator/ninja_writer.h): escaping, determinism, and a
// real ninja running the file against paths with spaces, '$' and ':'.
#include "generator/ninja_writer.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "compilers/process.h"
#include "support/test_support.h"

namespace npc::tool {
namespace {

using npc::testing::ReadFile;
using npc::testing::TempDir;
using npc::testing::WriteFile;

TEST(NinjaEscapeTest, Paths) {
  EXPECT_EQ(*NinjaEscapePath("/a/b/model.done"), "/a/b/model.done");
  EXPECT_EQ(*NinjaEscapePath("/my cache/x"), "/my$ cache/x");
  EXPECT_EQ(*NinjaEscapePath("/c/$HOME/x"), "/c/$$HOME/x");
  EXPECT_EQ(*NinjaEscapePath("C:/x:y"), "C$:/x$:y");
  EXPECT_EQ(*NinjaEscapePath("a $:b"), "a$ $$$:b");
  auto bad = NinjaEscapePath("/a\nb");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line break"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(NinjaEscapePath(std::string("a\0b", 3)).ok());
  // '|' separates implicit inputs; Ninja has no escape for it in a path.
  auto pipe = NinjaEscapePath("/tmp/a|b/cache");
  ASSERT_FALSE(pipe.ok());
  EXPECT_NE(pipe.error().message.find("\"/tmp/a|b/cache\""), std::string::npos) << pipe.error().message;
  EXPECT_NE(pipe.error().message.find("'|'"), std::string::npos) << pipe.error().message;
  auto newline = NinjaEscapePath("/tmp/a\nb");
  ASSERT_FALSE(newline.ok());
  EXPECT_NE(newline.error().message.find("\"/tmp/a\\nb\""), std::string::npos) << newline.error().message;
  EXPECT_TRUE(NinjaEscapeValue("echo 'a|b'").ok());  // a command may hold it (shell-quoted)
}

TEST(NinjaEscapeTest, Values) {
  EXPECT_EQ(*NinjaEscapeValue("echo 'a b' $x: y"), "echo 'a b' $$x: y");
  EXPECT_FALSE(NinjaEscapeValue("a\rb").ok());
}

NinjaFileSpec SampleSpec() {
  NinjaFileSpec spec;
  spec.npc_program = "/opt/npc/bin/npc";
  spec.compile_args = {"--cache", "/cache", "--build_dir", "/cache/d/.npc-build", "--backend", "host"};
  spec.generate_args = spec.compile_args;
  spec.generate_args.push_back("--compiler_dir");
  spec.generate_args.push_back("d");
  spec.compiler_dir_path = "/cache/d";
  spec.pool_depth = 3;
  for (std::string key : {"30", "10", "20"}) {
    NinjaCompileEdge e;
    e.entry = "d/MODULE_" + key + "+d41d8cd9";
    e.output = "/cache/" + e.entry + "/model.done";
    e.inputs = {"/cache/" + e.entry + "/model.hlo_module.pb", "/cache/" + e.entry + "/compile_flags.json"};
    e.graph_key = key;
    spec.edges.push_back(e);
  }
  return spec;
}

TEST(NinjaWriterTest, ShapeOfTheFile) {
  auto text = RenderNinjaFile(SampleSpec());
  ASSERT_TRUE(text.ok()) << text.error().message;
  const std::string& t = *text;
  EXPECT_NE(t.find("pool compile_pool\n  depth = 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("rule npc_compile\n"), std::string::npos);
  EXPECT_NE(t.find("  restat = 1\n"), std::string::npos);
  EXPECT_NE(t.find("  pool = compile_pool\n"), std::string::npos);
  EXPECT_NE(t.find("  description = NPC $key\n"), std::string::npos);
  EXPECT_NE(t.find("  generator = 1\n"), std::string::npos);
  EXPECT_NE(t.find("build build.ninja: npc_generate /cache/d\n"), std::string::npos);
  EXPECT_NE(t.find("build /cache/d/MODULE_30+d41d8cd9/model.done: npc_compile "
                   "/cache/d/MODULE_30+d41d8cd9/model.hlo_module.pb /cache/d/MODULE_30+d41d8cd9/compile_flags.json\n"
                   "  entry = d/MODULE_30+d41d8cd9\n  key = 30\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("default all\n"), std::string::npos);
  // Edges stay in the given (costliest-first) order.
  size_t a = t.find("MODULE_30+"), b = t.find("MODULE_10+"), c = t.find("MODULE_20+");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  // No timestamps, no pid: rendering is a pure function of the spec.
  EXPECT_EQ(*RenderNinjaFile(SampleSpec()), t);
}

TEST(NinjaWriterTest, DamagedEntryEdgeAlwaysRuns) {
  NinjaFileSpec spec = SampleSpec();
  EXPECT_EQ(RenderNinjaFile(spec)->find("npc_always_run"), std::string::npos);
  spec.edges[1].always_run = true;
  auto text = RenderNinjaFile(spec);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_NE(text->find("/cache/d/MODULE_10+d41d8cd9/compile_flags.json | npc_always_run\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("\nbuild npc_always_run: phony\n"), std::string::npos) << *text;
}

TEST(NinjaWriterTest, PoolDepthAtLeastOne) {
  NinjaFileSpec spec = SampleSpec();
  spec.pool_depth = 0;
  EXPECT_NE(RenderNinjaFile(spec)->find("  depth = 1\n"), std::string::npos);
}

TEST(NinjaWriterTest, NoEdgesStillValid) {
  NinjaFileSpec spec = SampleSpec();
  spec.edges.clear();
  auto text = RenderNinjaFile(spec);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("build all: phony\ndefault all\n"), std::string::npos) << *text;
}

TEST(NinjaWriterTest, RejectsNewlineInPath) {
  NinjaFileSpec spec = SampleSpec();
  spec.edges[1].output = "/cache/a\nb/model.done";
  auto text = RenderNinjaFile(spec);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message.find("line break"), std::string::npos);
}

// Writes a build.ninja whose paths and arguments hold spaces, '$', ':' and
// quotes, and runs the real ninja on it with a fake npc that touches each
// edge's output. Every edge must run with its exact entry argument.
TEST(NinjaWriterTest, RealNinjaRunsEdgesWithAwkwardPaths) {
  if (FindInPath("ninja").empty()) GTEST_SKIP() << "ninja not in PATH";
  TempDir tmp;
  const std::string root = tmp.Sub("ca che $HOME: it's");
  const std::string build_dir = tmp.Sub("build dir");
  const std::string compiler_dir = root + "/d";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(compiler_dir.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(build_dir.c_str(), 0755), 0);
  const std::string fake = tmp.Sub("fake npc");
  ASSERT_TRUE(WriteFile(fake,
                        "#!/bin/sh\n"
                        "# fake npc: compile-entry --cache <root> ... --entry <rel>\n"
                        "[ \"$1\" = compile-entry ] || exit 3\n"
                        "root=; entry=\n"
                        "while [ $# -gt 0 ]; do\n"
                        "  case \"$1\" in --cache) root=$2; shift;; --entry) entry=$2; shift;; esac; shift\n"
                        "done\n"
                        "printf '%s\\n' \"$entry\" >> \"$root/../edges.log\"\n"
                        ": > \"$root/$entry/model.done\"\n"));
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);

  NinjaFileSpec spec;
  spec.npc_program = fake;
  spec.compile_args = {"--cache", root, "--build_dir", build_dir};
  spec.generate_args = {"--never-run"};
  spec.compiler_dir_path = compiler_dir;
  spec.pool_depth = 2;
  std::vector<std::string> entries = {"d/MODULE_1+a b", "d/MODULE_2+$x", "d/MODULE_3+c:d", "d/MODULE_4+'q'"};
  for (const auto& entry : entries) {
    std::string dir = root + "/" + entry;
    ASSERT_TRUE(WriteFile(dir + "/model.hlo_module.pb", "hlo"));
    ASSERT_TRUE(WriteFile(dir + "/compile_flags.json", "[]"));
    NinjaCompileEdge e;
    e.entry = entry;
    e.output = dir + "/model.done";
    e.inputs = {dir + "/model.hlo_module.pb", dir + "/compile_flags.json"};
    e.graph_key = entry.substr(9, 1);
    spec.edges.push_back(e);
  }
  auto text = RenderNinjaFile(spec);
  ASSERT_TRUE(text.ok()) << text.error().message;
  // build.ninja must be newer than the generator's input directory.
  ASSERT_TRUE(WriteFile(build_dir + "/build.ninja", *text));

  auto run = npc::testing::RunCommand({"ninja", "-C", build_dir});
  ASSERT_EQ(run.exit_status, 0) << run.output << "\n" << *text;
  for (const auto& entry : entries) {
    EXPECT_TRUE(npc::testing::FileExists(root + "/" + entry + "/model.done")) << entry;
  }
  std::string log = ReadFile(tmp.Sub("edges.log"));
  for (const auto& entry : entries) EXPECT_NE(log.find(entry + "\n"), std::string::npos) << log;

  // Incremental: nothing left to do.
  auto again = npc::testing::RunCommand({"ninja", "-C", build_dir});
  ASSERT_EQ(again.exit_status, 0) << again.output;
  EXPECT_NE(again.output.find("no work to do"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace npc::tool
