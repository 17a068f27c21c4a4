// The PJRT C API client and the pjrt backend's compile options, with XLA's real
// CPU plugin (scripts/install-deps.sh --pjrt); skipped, saying so, when npc was
// built without it. The plugin of another API version is a fake built here.
#include <gtest/gtest.h>

#include <cstring>

#include "compilers/pjrt_compiler.h"
#include "npc/hlo.h"
#include "support/test_support.h"
#if NPC_HAVE_PJRT
#include "npc/compile_options.pb.h"
#include "pjrt/pjrt_client.h"
#endif

namespace npc {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "looked for: " << (needle) << "\nin: " << (haystack)

#if NPC_HAVE_PJRT

using testing::TempDir;

// x + y and dot(x, transpose(y)), x, y: f32[2,3].
constexpr char kModuleText[] = R"(HloModule add_dot, entry_computation_layout={(f32[2,3]{1,0}, f32[2,3]{1,0})->(f32[2,3]{1,0}, f32[2,2]{1,0})}

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[2,3]{1,0} parameter(1)
  s = f32[2,3]{1,0} add(x, y)
  yt = f32[3,2]{1,0} transpose(y), dimensions={1,0}
  d = f32[2,2]{1,0} dot(x, yt), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[2,3]{1,0}, f32[2,2]{1,0}) tuple(s, d)
}
)";

// add of f32[2,3] and f32[3,2]: npc reads it, XLA's verifier rejects it.
constexpr char kRejectedText[] = R"(HloModule bad_add

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3,2]{1,0} parameter(1)
  ROOT s = f32[2,3]{1,0} add(x, y)
}
)";

std::string ModuleBytes(const char* text) {
  auto module = hlo::ParseHloModule(text, "test module");
  EXPECT_TRUE(module.ok()) << (module.ok() ? "" : module.error().message);
  if (!module.ok()) return "";
  std::string bytes;
  module->SerializeToString(&bytes);
  return bytes;
}

std::string DefaultOptions() {
  auto options = PjrtCompileOptionsFromFlags({});
  EXPECT_TRUE(options.ok());
  return options.ok() ? options->serialized : "";
}

Tensor F32(std::vector<int64_t> dims, const std::vector<float>& values) {
  Tensor t = ZeroTensor(xla::F32, std::move(dims));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out(t.element_count());
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

class PjrtClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PjrtDefaultPluginPath().empty()) GTEST_SKIP() << "no default PJRT plugin (scripts/install-deps.sh --pjrt)";
    auto client = pjrt::Client::Shared(PjrtDefaultPluginPath());
    ASSERT_TRUE(client.ok()) << client.error().message;
    client_ = *client;
  }
  pjrt::Client* client_ = nullptr;
};

TEST_F(PjrtClientTest, OpensXlaCpuPluginOfTheHeadersMajorVersion) {
  EXPECT_EQ(client_->platform_name(), "cpu");
  EXPECT_EQ(client_->api_major(), pjrt::HeaderApiMajor());
  EXPECT_FALSE(client_->platform_version().empty());
  std::printf("plugin %s: platform %s, version '%s', API %d.%d, opened in %.3f s\n", client_->plugin_path().c_str(),
              client_->platform_name().c_str(), client_->platform_version().c_str(), client_->api_major(),
              client_->api_minor(), client_->open_seconds());
}

TEST_F(PjrtClientTest, CompilerDirectoryNamesPlatformApiAndPluginBuild) {
  CompilerOptions options;
  options.backend = "pjrt";
  options.program = PjrtDefaultPluginPath();
  auto compiler = MakeCompiler(options);
  ASSERT_TRUE(compiler.ok()) << compiler.error().message;
  auto dir = (*compiler)->CacheDirectoryName();
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  EXPECT_EQ(dir->rfind("pjrt-cpu-api" + std::to_string(pjrt::HeaderApiMajor()) + ".", 0), 0u) << *dir;
  EXPECT_CONTAINS(*dir, "-shlo");
  EXPECT_EQ((*compiler)->ArtifactName(), "model.pjrt");
  auto again = MakeCompiler(options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->CacheDirectoryName(), *dir);
  std::printf("compiler directory: %s\n", dir->c_str());
  options.version_override = "test-1";
  auto overridden = MakeCompiler(options);
  ASSERT_TRUE(overridden.ok());
  EXPECT_EQ(*(*overridden)->CacheDirectoryName(), "pjrt-test-1");
}

TEST_F(PjrtClientTest, CompilesSerializesLoadsAndRuns) {
  auto serialized = client_->CompileAndSerialize(ModuleBytes(kModuleText), "hlo", DefaultOptions());
  ASSERT_TRUE(serialized.ok()) << serialized.error().message;
  EXPECT_GT(serialized->size(), 0u);
  auto exe = client_->DeserializeAndLoad(*serialized);
  ASSERT_TRUE(exe.ok()) << exe.error().message;
  auto num_outputs = (*exe)->NumOutputs();
  ASSERT_TRUE(num_outputs.ok()) << num_outputs.error().message;
  EXPECT_EQ(*num_outputs, 2u);
  auto out = (*exe)->Execute({F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({2, 3}, {1, 0, 1, 0, 1, 0})});
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{2, 2, 4, 4, 6, 6}));
  EXPECT_EQ((*out)[1].dims, (std::vector<int64_t>{2, 2}));
  // x . y^T: rows of x against rows of y ([1,0,1], [0,1,0]).
  EXPECT_EQ(Floats((*out)[1]), (std::vector<float>{4, 2, 10, 5}));
}

TEST_F(PjrtClientTest, ModuleXlaRejectsIsAnErrorWithXlasTextNamingThePlugin) {
  auto serialized = client_->CompileAndSerialize(ModuleBytes(kRejectedText), "hlo", DefaultOptions());
  ASSERT_FALSE(serialized.ok());
  EXPECT_CONTAINS(serialized.error().message, "PJRT_Client_Compile");
  EXPECT_CONTAINS(serialized.error().message, PjrtDefaultPluginPath());
  std::printf("%s\n", serialized.error().message.c_str());
}

TEST_F(PjrtClientTest, BytesThatAreNoExecutableAreRefused) {
  auto exe = client_->DeserializeAndLoad("not an executable");
  ASSERT_FALSE(exe.ok());
  EXPECT_CONTAINS(exe.error().message, "PJRT_Executable_DeserializeAndLoad");
}

TEST_F(PjrtClientTest, DebugOptionFlagsReachXla) {
  auto known = PjrtCompileOptionsFromFlags({"--xla_cpu_enable_fast_math=false", "-O1"});
  ASSERT_TRUE(known.ok()) << known.error().message;
  auto compiled = client_->CompileAndSerialize(ModuleBytes(kModuleText), "hlo", known->serialized);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  // XLA looks the name up among its DebugOptions fields: an unknown one is its error.
  auto unknown = PjrtCompileOptionsFromFlags({"--xla_no_such_option_npc=1"});
  ASSERT_TRUE(unknown.ok());
  auto refused = client_->CompileAndSerialize(ModuleBytes(kModuleText), "hlo", unknown->serialized);
  ASSERT_FALSE(refused.ok());
  EXPECT_CONTAINS(refused.error().message, "xla_no_such_option_npc");
}

TEST(PjrtPluginErrors, MissingFileIsNamed) {
  auto client = pjrt::Client::Open("/nonexistent/xla_plugin.so");
  ASSERT_FALSE(client.ok());
  EXPECT_CONTAINS(client.error().message, "/nonexistent/xla_plugin.so");
  EXPECT_CONTAINS(client.error().message, "no such file");
}

TEST(PjrtPluginErrors, FileThatIsNoSharedObjectIsNamed) {
  TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.Sub("plugin.so"), "not an ELF file"));
  auto client = pjrt::Client::Open(dir.Sub("plugin.so"));
  ASSERT_FALSE(client.ok());
  EXPECT_CONTAINS(client.error().message, dir.Sub("plugin.so"));
  EXPECT_CONTAINS(client.error().message, "cannot load");
}

// Builds a shared object from `source` with the system C++ compiler.
std::string BuildSharedObject(const TempDir& dir, const std::string& name, const std::string& source) {
  const std::string src = dir.Sub(name + ".cc"), so = dir.Sub(name + ".so");
  EXPECT_TRUE(testing::WriteFile(src, source));
  auto r = testing::RunCommand({"c++", "-shared", "-fPIC", "-o", so, src});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return so;
}

TEST(PjrtPluginErrors, SharedObjectWithoutGetPjrtApiIsNotAPlugin) {
  TempDir dir;
  std::string so = BuildSharedObject(dir, "noapi", "extern \"C\" int SomethingElse() { return 1; }\n");
  auto client = pjrt::Client::Open(so);
  ASSERT_FALSE(client.ok());
  EXPECT_CONTAINS(client.error().message, so);
  EXPECT_CONTAINS(client.error().message, "no GetPjrtApi");
}

TEST(PjrtPluginErrors, PluginOfAnotherApiMajorVersionIsRefused) {
  TempDir dir;
  // The leading fields of PJRT_Api: struct_size, extension_start, then PJRT_Api_Version
  // {struct_size, extension_start, major_version, minor_version}.
  const int other_major = pjrt::HeaderApiMajor() + 1;
  std::string so = BuildSharedObject(dir, "othermajor",
                                     "#include <cstddef>\n"
                                     "struct Version { size_t size; void* ext; int major; int minor; };\n"
                                     "struct Api { size_t size; void* ext; Version version; void* functions[512]; };\n"
                                     "static Api api = {sizeof(Api), nullptr, {sizeof(Version), nullptr, " +
                                         std::to_string(other_major) + ", 7}, {}};\n"
                                     "extern \"C\" const Api* GetPjrtApi() { return &api; }\n");
  auto client = pjrt::Client::Open(so);
  ASSERT_FALSE(client.ok());
  EXPECT_CONTAINS(client.error().message, so);
  EXPECT_CONTAINS(client.error().message, "PJRT C API version " + std::to_string(other_major) + ".7");
  EXPECT_CONTAINS(client.error().message, "major version " + std::to_string(pjrt::HeaderApiMajor()));
}

TEST(PjrtCompileOptions, FlagsMapToXlaOptionsAndTheRestIsListed) {
  auto options = PjrtCompileOptionsFromFlags(
      {"--target=trn1", "-O1", "--xla_cpu_enable_fast_math=true", "--xla_cpu_fast_math_honor_nans=false",
       "--xla_dump_to=/tmp/x", "--xla_some_ratio=0.5", "--model-type=transformer"});
  ASSERT_TRUE(options.ok()) << options.error().message;
  EXPECT_EQ(options->ignored, (std::vector<std::string>{"--target=trn1", "--model-type=transformer"}));
  EXPECT_EQ(options->applied.size(), 5u);
  pjrt_proto::CompileOptionsProto proto;
  ASSERT_TRUE(proto.ParseFromString(options->serialized));
  EXPECT_EQ(proto.executable_build_options().num_replicas(), 1);
  EXPECT_EQ(proto.executable_build_options().num_partitions(), 1);
  const auto& o = proto.env_option_overrides();
  EXPECT_EQ(o.at("xla_backend_optimization_level").int_field(), 1);
  EXPECT_TRUE(o.at("xla_cpu_enable_fast_math").bool_field());
  EXPECT_TRUE(o.at("xla_cpu_fast_math_honor_nans").has_bool_field());
  EXPECT_FALSE(o.at("xla_cpu_fast_math_honor_nans").bool_field());
  EXPECT_EQ(o.at("xla_dump_to").string_field(), "/tmp/x");
  EXPECT_DOUBLE_EQ(o.at("xla_some_ratio").double_field(), 0.5);
}

TEST(PjrtCompileOptions, MalformedOptimizationLevelIsAnError) {
  auto options = PjrtCompileOptionsFromFlags({"-Ofast"});
  ASSERT_FALSE(options.ok());
  EXPECT_CONTAINS(options.error().message, "-Ofast");
}

#else

TEST(PjrtClient, NotBuilt) {
  GTEST_SKIP() << "npc was built without the pjrt backend (no pjrt_c_api.h; scripts/install-deps.sh --pjrt)";
}

#endif

}  // namespace
}  // namespace npc
