// The pjrt backend (see pjrt_compiler.h).
#include "compilers/pjrt_compiler.h"

#include <openssl/evp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "compilers/process.h"
#include "npc/compile_options.pb.h"  // generated from runtime/pjrt/compile_options.proto
#include "npc/hlo.h"
#include "pjrt/pjrt_client.h"

namespace npc {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in.good() && !in.eof()) return MakeError("cannot read " + path);
  return s.str();
}

// "0.0.1+abc/def" -> "0.0.1+abc_def": a compiler directory name holds no '/' or spaces.
std::string DirectoryWord(std::string s) {
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '+' || c == '-';
    if (!ok) c = '_';
  }
  return s.empty() ? "unknown" : s;
}

void SetOverride(pjrt_proto::OptionOverrideProto* o, const std::string& value) {
  if (value == "true" || value == "True") return o->set_bool_field(true);
  if (value == "false" || value == "False") return o->set_bool_field(false);
  char* end = nullptr;
  long long i = std::strtoll(value.c_str(), &end, 10);
  if (!value.empty() && *end == '\0') return o->set_int_field(i);
  double d = std::strtod(value.c_str(), &end);
  if (!value.empty() && *end == '\0') return o->set_double_field(d);
  o->set_string_field(value);
}

// The first 8 hex digits of the SHA-256 of `data`.
std::string Sha256Prefix(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 4; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

// 8 hex digits of the SHA-256 of the plugin file's size, first and last MiB:
// plugins report no build identity (XLA's CPU plugin says version "cpu"), and
// hashing the whole file (hundreds of MB) would cost a second per process.
Result<std::string> PluginFingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return MakeError("PJRT plugin " + path + ": cannot read");
  const std::streamoff size = in.tellg();
  const std::streamoff chunk = std::min<std::streamoff>(size, 1 << 20);
  std::string data = std::to_string(size) + "\n";
  std::string part(static_cast<size_t>(chunk), '\0');
  for (std::streamoff at : {std::streamoff{0}, size - chunk}) {
    in.seekg(at);
    in.read(part.data(), chunk);
    if (!in) return MakeError("PJRT plugin " + path + ": cannot read");
    data += part;
  }
  return Sha256Prefix(data);
}

// "<machine>-<8 hex digits of the SHA-256 of the CPU feature flags>": XLA's CPU
// executables are compiled for this host's features (AVX-512, ...) and would
// not run on a host without them, so hosts of other features keep other entries.
std::string HostCpuTag() {
  struct utsname name;
  std::string machine = uname(&name) == 0 ? name.machine : "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
      flags = line.substr(line.find(':') + 1);
      break;
    }
  }
  return DirectoryWord(machine) + "-" + Sha256Prefix(flags);
}

class PjrtCompiler : public Compiler {
 public:
  explicit PjrtCompiler(CompilerOptions options) : options_(std::move(options)) {
    const char* env = std::getenv("NPC_PJRT_PLUGIN");
    if (env && *env) plugin_path_ = env;
    else if (!options_.program.empty()) plugin_path_ = options_.program;
    else plugin_path_ = PjrtDefaultPluginPath();
  }
  std::string backend() const override { return "pjrt"; }
  Result<std::string> CacheDirectoryName() override {
    if (!options_.version_override.empty()) return "pjrt-" + DirectoryWord(options_.version_override);
    if (!cached_dir_.empty()) return cached_dir_;
    auto client = GetClient();
    if (!client) return client.error();
    const pjrt::Client& c = **client;
    auto fingerprint = PluginFingerprint(plugin_path_);
    if (!fingerprint) return fingerprint.error();
    std::string dir = "pjrt-" + DirectoryWord(c.platform_name());
    if (c.platform_version() != c.platform_name()) dir += "-" + DirectoryWord(c.platform_version());
    dir += "-api" + std::to_string(c.api_major()) + "." + std::to_string(c.api_minor());
    if (!c.stablehlo_version().empty()) dir += "-shlo" + DirectoryWord(c.stablehlo_version());
    dir += "-" + *fingerprint;
    if (c.platform_name() == "cpu") dir += "-" + HostCpuTag();
    cached_dir_ = dir;
    return cached_dir_;
  }
  std::string ArtifactName() const override { return "model.pjrt"; }
  // Before any measurement: 2 GiB per compile (XLA CPU on large training graphs).
  int64_t DefaultMemoryPerCompileBytes() const override { return int64_t{2} << 30; }
  CompileOutcome Compile(const CompileJob& job) override;

  Result<pjrt::Client*> GetClient() {
    if (plugin_path_.empty()) {
      return MakeError("pjrt backend: no PJRT plugin: set NPC_PJRT_PLUGIN to the plugin's shared object "
                       "(or run scripts/install-deps.sh --pjrt and reconfigure npc)");
    }
    return pjrt::Client::Shared(plugin_path_);
  }

 private:
  CompilerOptions options_;
  std::string plugin_path_;
  std::string cached_dir_;
};

CompileOutcome PjrtCompiler::Compile(const CompileJob& job) {
  CompileOutcome outcome;
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](bool ok) {
    outcome.ok = ok;
    outcome.exit_status = ok ? 0 : 1;
    outcome.seconds = SecondsSince(start);
    // XLA compiles inside this process: its peak is this process's (compile-entry runs one compile).
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) == 0) outcome.peak_rss_bytes = int64_t{usage.ru_maxrss} * 1024;
    return outcome;
  };
  outcome.command = "npc pjrt backend: PJRT_Client_Compile(" + job.hlo_path + ") with " + plugin_path_ + " -> " +
                    job.artifact_path;
  auto options = PjrtCompileOptionsFromFlags(job.flags);
  if (!options) {
    outcome.output += "pjrt backend: " + options.error().message + "\n";
    return finish(false);
  }
  if (!options->applied.empty()) outcome.output += "pjrt backend: compile options from flags: " + ShellJoin(options->applied) + "\n";
  if (!options->ignored.empty()) {
    outcome.output += "pjrt backend: flags without a meaning for XLA (part of the cache key only): " +
                      ShellJoin(options->ignored) + "\n";
  }
  auto client = GetClient();
  if (!client) {
    outcome.output += client.error().message + "\n";
    return finish(false);
  }
  outcome.output += "pjrt backend: plugin " + plugin_path_ + " (" + (*client)->platform_name() + " " +
                    (*client)->platform_version() + ", API " + std::to_string((*client)->api_major()) + "." +
                    std::to_string((*client)->api_minor()) + ") loaded in " +
                    std::to_string((*client)->open_seconds()) + " s\n";
  // An entry under another pjrt compiler directory (made with another plugin, e.g. NPC_PJRT_PLUGIN
  // set for the trial run but not for `ninja` run by hand) is not compiled with this one.
  const std::string entry_compiler_dir =
      std::filesystem::path(job.hlo_path).parent_path().parent_path().filename().string();
  if (entry_compiler_dir.rfind("pjrt-", 0) == 0) {
    auto dir = CacheDirectoryName();
    if (dir && *dir != entry_compiler_dir) {
      outcome.output += "pjrt backend: entry " + job.hlo_path + " belongs to compiler directory " +
                        entry_compiler_dir + ", but plugin " + plugin_path_ + " compiles for " + *dir +
                        " (set NPC_PJRT_PLUGIN to the plugin the entry was made with)\n";
      return finish(false);
    }
  }
  auto code = ReadWholeFile(job.hlo_path);
  if (!code) {
    outcome.output += code.error().message + "\n";
    return finish(false);
  }
  const auto compile_start = std::chrono::steady_clock::now();
  // The entry's file name records its program format (npc/cache.h): StableHLO bytecode or HloModuleProto.
  const bool is_mlir = std::filesystem::path(job.hlo_path).filename() == cache::kStableHloFile;
  auto serialized = (*client)->CompileAndSerialize(*code, is_mlir ? "mlir" : "hlo", options->serialized);
  if (!serialized) {
    outcome.output += "entry HLO " + job.hlo_path + ": " + serialized.error().message + "\n";
    return finish(false);
  }
  outcome.output += "pjrt backend: compiled and serialized in " + std::to_string(SecondsSince(compile_start)) +
                    " s (" + std::to_string(serialized->size()) + " bytes)\n";
  std::ofstream out(job.artifact_path, std::ios::binary);
  out << *serialized;
  out.close();
  if (!out) {
    outcome.output += "cannot write " + job.artifact_path + "\n";
    return finish(false);
  }
  return finish(true);
}

// ---- running artifacts ----------------------------------------------------------

void FlattenShape(const xla::ShapeProto& shape, std::vector<TensorSpec>* out) {
  if (shape.element_type() == xla::TUPLE) {
    for (const auto& t : shape.tuple_shapes()) FlattenShape(t, out);
    return;
  }
  out->push_back(TensorSpec{shape.element_type(), {shape.dimensions().begin(), shape.dimensions().end()}});
}

class PjrtArtifactExecutable : public Executable {
 public:
  PjrtArtifactExecutable(std::shared_ptr<pjrt::LoadedExecutable> exe, std::vector<TensorSpec> parameters,
                         std::vector<TensorSpec> outputs, std::string path)
      : exe_(std::move(exe)), parameters_(std::move(parameters)), outputs_(std::move(outputs)), path_(std::move(path)) {}
  const std::vector<TensorSpec>& parameters() const override { return parameters_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }
  Result<std::vector<Tensor>> Run(const std::vector<Tensor>& arguments) const override {
    if (arguments.size() != parameters_.size()) {
      return MakeError(path_ + ": expected " + std::to_string(parameters_.size()) + " arguments, got " +
                       std::to_string(arguments.size()));
    }
    for (size_t i = 0; i < arguments.size(); ++i) {
      const Tensor& a = arguments[i];
      if (a.type != parameters_[i].type || a.dims != parameters_[i].dims ||
          static_cast<int64_t>(a.bytes.size()) != a.element_count() * ElementSize(a.type)) {
        return MakeError(path_ + ": argument " + std::to_string(i) + " does not match parameter " +
                         std::to_string(i) + " (" + PrimitiveTypeName(parameters_[i].type) + ", " +
                         std::to_string(parameters_[i].dims.size()) + " dims)");
      }
    }
    auto out = exe_->Execute(arguments);
    if (!out) return MakeError(path_ + ": " + out.error().message);
    return out;
  }

 private:
  std::shared_ptr<pjrt::LoadedExecutable> exe_;
  std::vector<TensorSpec> parameters_;
  std::vector<TensorSpec> outputs_;
  std::string path_;
};

// One loaded executable per artifact file per process.
Result<std::shared_ptr<pjrt::LoadedExecutable>> LoadOnce(pjrt::Client& client, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return MakeError("cannot read " + path);
  const std::string key = client.plugin_path() + "\n" + path + "\n" + std::to_string(st.st_size) + "\n" +
                          std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, std::shared_ptr<pjrt::LoadedExecutable>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded->find(key); it != loaded->end()) return it->second;
  auto bytes = ReadWholeFile(path);
  if (!bytes) return bytes.error();
  auto exe = client.DeserializeAndLoad(*bytes);
  if (!exe) return MakeError("cannot load " + path + ": " + exe.error().message);
  std::shared_ptr<pjrt::LoadedExecutable> shared = std::move(*exe);
  (*loaded)[key] = shared;
  return shared;
}

}  // namespace

std::string PjrtDefaultPluginPath() { return NPC_PJRT_DEFAULT_PLUGIN; }

Result<std::unique_ptr<Compiler>> MakePjrtCompiler(const CompilerOptions& options) {
  return std::unique_ptr<Compiler>(new PjrtCompiler(options));
}

Result<std::shared_ptr<Executable>> LoadPjrtArtifact(Compiler& compiler, const std::string& path,
                                                     const xla::HloModuleProto& module) {
  auto* pjrt_compiler = dynamic_cast<PjrtCompiler*>(&compiler);
  if (!pjrt_compiler) return MakeError("cannot run " + path + ": not a pjrt backend artifact");
  const auto* entry = hlo::EntryComputation(module);
  if (!entry) return MakeError("cannot run " + path + ": module '" + module.name() + "' has no entry computation");
  std::map<int64_t, xla::ShapeProto> params;
  std::vector<TensorSpec> parameters, outputs;
  for (const auto& inst : entry->instructions()) {
    if (inst.opcode() == "parameter") params[inst.parameter_number()] = inst.shape();
    if (inst.id() == entry->root_id()) FlattenShape(inst.shape(), &outputs);
  }
  for (const auto& [n, shape] : params) {
    if (shape.element_type() == xla::TUPLE) {
      return MakeError("cannot run " + path + ": parameter " + std::to_string(n) +
                       " is a tuple; the pjrt backend passes array parameters only");
    }
    FlattenShape(shape, &parameters);
  }
  auto client = pjrt_compiler->GetClient();
  if (!client) return client.error();
  auto exe = LoadOnce(**client, path);
  if (!exe) return exe.error();
  return std::shared_ptr<Executable>(new PjrtArtifactExecutable(std::move(*exe), std::move(parameters),
                                                                std::move(outputs), path));
}

Result<PjrtCompileOptions> PjrtCompileOptionsFromFlags(const std::vector<std::string>& flags) {
  pjrt_proto::CompileOptionsProto proto;
  auto* build = proto.mutable_executable_build_options();
  build->set_device_ordinal(-1);
  build->set_num_replicas(1);
  build->set_num_partitions(1);
  PjrtCompileOptions result;
  auto set_level = [&](const std::string& flag, const std::string& value) -> Status {
    if (value.size() != 1 || value[0] < '0' || value[0] > '3') {
      return MakeError("flag " + flag + ": optimization level must be 0, 1, 2 or 3");
    }
    (*proto.mutable_env_option_overrides())["xla_backend_optimization_level"].set_int_field(value[0] - '0');
    return {};
  };
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    Status st;
    if (f.rfind("--xla_", 0) == 0 && f.find('=') != std::string::npos) {
      const size_t eq = f.find('=');
      SetOverride(&(*proto.mutable_env_option_overrides())[f.substr(2, eq - 2)], f.substr(eq + 1));
      result.applied.push_back(f);
      continue;
    }
    if (f.rfind("-O", 0) == 0) {
      st = set_level(f, f.substr(2));
    } else if (f.rfind("--optlevel=", 0) == 0) {
      st = set_level(f, f.substr(11));
    } else if (f == "--optlevel" && i + 1 < flags.size()) {
      st = set_level(f, flags[++i]);
      if (st) result.applied.push_back(f);
    } else {
      result.ignored.push_back(f);
      continue;
    }
    if (!st) return st.error();
    result.applied.push_back(flags[i]);
  }
  proto.SerializeToString(&result.serialized);
  return result;
}

}  // namespace npc
