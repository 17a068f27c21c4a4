#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "compilers/process.h"
#include "npc/cache.h"
#include "npc/compiler.h"
#include "npc/hlo.h"
#include "npc/hlo_builder.h"

namespace npc::testing {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix) {
  std::string base = GetEnv("TMPDIR", "/tmp");
  if (base.empty()) base = "/tmp";
  std::string templ = base + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp(" << templ << "): " << std::strerror(errno);
    return;
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  if (!GetEnv("NPC_KEEP_TEST_DIRS").empty()) {
    std::cerr << "NPC_KEEP_TEST_DIRS: keeping " << path_ << "\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& data) {
  std::error_code ec;
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    ADD_FAILURE() << "cannot write " << path;
    return false;
  }
  out << data;
  out.close();
  if (!out) {
    ADD_FAILURE() << "error writing " << path;
    return false;
  }
  return true;
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

void RemoveAll(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                         const std::string& cwd) {
  ProcessOptions options;
  options.cwd = cwd;
  for (const auto& [k, v] : env) {
    if (v == "<unset>") options.unset_env.push_back(k);
    else options.set_env[k] = v;
  }
  options.capture_output = true;
  CommandResult out;
  auto result = RunProcess(argv, options);
  if (!result.ok()) {
    out.exit_status = -1;
    out.output = result.error().message;
    return out;
  }
  out.exit_status = result->exit_status;
  out.output = std::move(result->output);
  return out;
}

std::string GetEnv(const std::string& name, const std::string& fallback) {
  const char* v = std::getenv(name.c_str());
  return v ? std::string(v) : fallback;
}

xla::HloModuleProto SmallTestModule(int64_t n, float scale) {
  hlo::HloBuilder b("npc_test_" + std::to_string(n));
  auto x = b.Parameter(0, xla::F32, {n}, "x");
  auto s = b.Broadcast(b.ConstantF32(scale), {n}, {});
  auto y = b.Add(b.Mul(x, s), x);
  return b.Build(b.Tuple({y}));
}

xla::HloModuleProto UnsupportedOpModule() {
  hlo::HloBuilder b("npc_test_cholesky");
  auto a = b.Parameter(0, xla::F32, {4, 4}, "a");
  xla::HloInstructionProto chol;
  chol.set_opcode("cholesky");
  auto c = b.AddInstruction(chol, {a}, hlo::HloBuilder::ArrayShape(xla::F32, {4, 4}));
  return b.Build(b.Tuple({c}));
}

std::string HostCompilerDir(const std::string& program) {
  CompilerOptions options = CompilerOptionsFromEnvironment();
  options.backend = "host";
  if (!program.empty()) options.program = program;
  auto compiler = MakeCompiler(options);
  if (!compiler) {
    ADD_FAILURE() << compiler.error().message;
    return "";
  }
  auto dir = (*compiler)->CacheDirectoryName();
  if (!dir) {
    ADD_FAILURE() << dir.error().message;
    return "";
  }
  return *dir;
}

std::string PutTestEntryBytes(const std::string& cache_root, const std::string& compiler_dir,
                              const std::string& hlo_bytes, const std::string& graph_key) {
  const std::string flags = cache::CompileFlagsJson({});
  cache::EntryRef ref{compiler_dir, graph_key, cache::FlagsHash(flags)};
  cache::LocalStore store(cache_root);
  if (auto st = cache::PutEntryInputs(store, ref, hlo_bytes, flags); !st) {
    ADD_FAILURE() << st.error().message;
  }
  return ref.dir();
}

std::string PutTestEntry(const std::string& cache_root, const std::string& compiler_dir,
                         const xla::HloModuleProto& module, const std::string& graph_key) {
  return PutTestEntryBytes(cache_root, compiler_dir, module.SerializeAsString(),
                           graph_key.empty() ? hlo::CanonicalGraphKey(module) : graph_key);
}

}  // namespace npc::testing
