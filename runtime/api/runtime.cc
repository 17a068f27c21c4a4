// The runtime API (see npc/runtime.h).
#include "npc/runtime.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "cache/read_through.h"
#include "compilers/pjrt_compiler.h"
#include "host/host_backend.h"
#include "npc/hlo.h"
#include "npc/log.h"

namespace npc {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool EnvTrue(const char* name) {
  std::string v = Env(name);
  return !v.empty() && v != "0" && v != "false" && v != "FALSE" && v != "False";
}

// Leaves of `shape`, depth-first.
void FlattenShape(const xla::ShapeProto& shape, std::vector<TensorSpec>* out) {
  if (shape.element_type() == xla::TUPLE) {
    for (const auto& t : shape.tuple_shapes()) FlattenShape(t, out);
    return;
  }
  out->push_back(TensorSpec{shape.element_type(), {shape.dimensions().begin(), shape.dimensions().end()}});
}

Status CheckArguments(const std::vector<TensorSpec>& params, const std::vector<Tensor>& args) {
  if (args.size() != params.size()) {
    return MakeError("expected " + std::to_string(params.size()) + " arguments, got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].type != params[i].type || args[i].dims != params[i].dims) {
      return MakeError("argument " + std::to_string(i) + " does not match parameter " + std::to_string(i) + " (" +
                       PrimitiveTypeName(params[i].type) + ", " + std::to_string(params[i].dims.size()) + " dims)");
    }
  }
  return {};
}

// Whether this process may write `dir`, or create it: the nearest existing
// directory on its path is writable.
bool CanCreateIn(std::string dir) {
  for (;;) {
    if (access(dir.c_str(), F_OK) == 0) return access(dir.c_str(), W_OK) == 0;
    size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash == 0) return access("/", W_OK) == 0;
    dir.resize(slash);
  }
}

// The executable of a trial run: outputs are zeros of the right shapes.
class PlaceholderExecutable : public Executable {
 public:
  explicit PlaceholderExecutable(const xla::HloModuleProto& module) {
    const auto* entry = hlo::EntryComputation(module);
    std::map<int64_t, xla::ShapeProto> params;
    for (const auto& inst : entry->instructions()) {
      if (inst.opcode() == "parameter") params[inst.parameter_number()] = inst.shape();
      if (inst.id() == entry->root_id()) FlattenShape(inst.shape(), &outputs_);
    }
    for (const auto& [n, shape] : params) FlattenShape(shape, &parameters_);
  }
  const std::vector<TensorSpec>& parameters() const override { return parameters_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }
  Result<std::vector<Tensor>> Run(const std::vector<Tensor>& arguments) const override {
    if (auto st = CheckArguments(parameters_, arguments); !st) return st.error();
    std::vector<Tensor> out;
    for (const auto& spec : outputs_) out.push_back(ZeroTensor(spec.type, spec.dims));
    return out;
  }
  bool is_placeholder() const override { return true; }

 private:
  std::vector<TensorSpec> parameters_;
  std::vector<TensorSpec> outputs_;
};

// A host-backend artifact loaded into this process.
class HostArtifactExecutable : public Executable {
 public:
  explicit HostArtifactExecutable(std::unique_ptr<host::HostExecutable> exe) : exe_(std::move(exe)) {
    for (const auto& s : exe_->parameters()) parameters_.push_back(TensorSpec{s.type, s.dims});
    for (const auto& s : exe_->outputs()) outputs_.push_back(TensorSpec{s.type, s.dims});
  }
  const std::vector<TensorSpec>& parameters() const override { return parameters_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }
  Result<std::vector<Tensor>> Run(const std::vector<Tensor>& arguments) const override { return exe_->Run(arguments); }

 private:
  std::unique_ptr<host::HostExecutable> exe_;
  std::vector<TensorSpec> parameters_;
  std::vector<TensorSpec> outputs_;
};

}  // namespace

Result<RuntimeOptions> RuntimeOptionsFromEnvironment() {
  RuntimeOptions options;
  auto flags = cache::ParseNeuronCcFlags(Env("NEURON_CC_FLAGS"));
  if (!flags) return flags.error();
  std::string cache_url_env = Env("NEURON_COMPILE_CACHE_URL");
  options.cache_url = cache::ResolveCacheUrl(*flags, cache_url_env.c_str());
  options.compiler_flags = flags->compiler_flags;
  options.retry_failed_compilation = flags->retry_failed_compilation;
  options.no_cache = flags->no_cache;
  options.extract_graphs_only = EnvTrue("NEURON_EXTRACT_GRAPHS_ONLY");
  options.compiler = CompilerOptionsFromEnvironment();
  if (flags->log_level) log::SetLogLevel(*flags->log_level);
  return options;
}

Result<std::unique_ptr<Runtime>> Runtime::FromEnvironment() {
  auto options = RuntimeOptionsFromEnvironment();
  if (!options) return options.error();
  return Create(std::move(*options));
}

Result<std::unique_ptr<Runtime>> Runtime::Create(RuntimeOptions options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = std::move(options);
  std::string url = rt->options_.cache_url;
  if (rt->options_.no_cache) {
    // --no_cache: compile into a private scratch cache, removed with the runtime.
    std::string tmpl = (std::filesystem::temp_directory_path() / "npc-nocache-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return MakeError("cannot create a scratch directory for --no_cache");
    rt->scratch_dir_ = url = tmpl;
  }
  auto store = cache::OpenStore(url);
  if (!store) return store.error();
  rt->store_ = std::move(*store);
  auto compiler = MakeCompiler(rt->options_.compiler);
  if (!compiler) return compiler.error();
  rt->compiler_ = std::move(*compiler);
  auto dir = rt->compiler_->CacheDirectoryName();
  if (!dir) return dir.error();
  rt->compiler_dir_ = *dir;
  rt->flags_json_ = cache::CompileFlagsJson(rt->options_.compiler_flags);
  rt->flags_hash_ = cache::FlagsHash(rt->flags_json_);
  log::Info(log::kCache, "Compile cache path: " + rt->store_->url());
  return rt;
}

Runtime::~Runtime() {
  if (!scratch_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir_, ec);
  }
}

std::string Runtime::compiler_cache_path() const { return store_->url() + "/" + compiler_dir_; }

CacheCounters Runtime::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

Result<std::shared_ptr<Executable>> Runtime::GetExecutableFromBytes(std::string_view hlo_bytes,
                                                                    const std::string& graph_key) {
  auto module = hlo::ParseHloModule(hlo_bytes, "HLO module bytes (" + std::to_string(hlo_bytes.size()) + " bytes)");
  if (!module) return module.error();
  return Lookup(*module, graph_key, /*validated=*/true);
}

Result<std::shared_ptr<Executable>> Runtime::GetExecutable(const xla::HloModuleProto& module,
                                                           const std::string& graph_key) {
  return Lookup(module, graph_key, /*validated=*/false);
}

void Runtime::Bump(int64_t CacheCounters::*counter) {
  std::lock_guard<std::mutex> lock(mu_);
  ++(counters_.*counter);
}

Result<std::shared_ptr<Executable>> Runtime::LoadArtifactFile(const std::string& path, const std::string& shown,
                                                              const xla::HloModuleProto& module) const {
  if (compiler_->backend() != "host" && compiler_->backend() != "pjrt") {
    return MakeError("cannot run " + shown + ": running a " + compiler_->backend() +
                     " artifact needs its device runtime; npc runs host and pjrt artifacts only");
  }
  if (compiler_->backend() == "pjrt") return LoadPjrtArtifact(*compiler_, path, module);
  auto exe = host::HostExecutable::Load(path);
  if (!exe) return exe.error();
  return std::shared_ptr<Executable>(new HostArtifactExecutable(std::move(*exe)));
}

Result<std::shared_ptr<Executable>> Runtime::LoadCheckedArtifact(const cache::EntryRef& entry,
                                                                 const xla::HloModuleProto& module, std::string* damage) {
  const std::string artifact = entry.file(compiler_->ArtifactName());
  const std::string shown = store_->url() + "/" + artifact;
  if (compiler_->backend() != "host" && compiler_->backend() != "pjrt") return LoadArtifactFile("", shown, module);
  auto record = cache::ReadDoneFile(*store_, entry);
  if (!record) {
    *damage = record.error().message;
    return std::shared_ptr<Executable>();
  }
  const std::string local_root = cache::DefaultLocalCopyRoot(store_->url());
  auto path = cache::LocalCopy(*store_, artifact, local_root);
  if (!path) return path.error();
  auto why = cache::CheckArtifactFile(*path, *record, cache::ArtifactCheck::kDigest);
  if (why && why->has_value() && !store_->LocalPath(artifact)) {
    // A damaged local copy of a remote object: fetch it once more.
    std::error_code ec;
    std::filesystem::remove(*path, ec);
    path = cache::LocalCopy(*store_, artifact, local_root);
    if (!path) return path.error();
    why = cache::CheckArtifactFile(*path, *record, cache::ArtifactCheck::kDigest);
  }
  if (!why) return why.error();
  if (why->has_value()) {
    *damage = **why;
    return std::shared_ptr<Executable>();
  }
  return LoadArtifactFile(*path, shown, module);
}

Result<std::shared_ptr<Executable>> Runtime::Lookup(const xla::HloModuleProto& module, const std::string& graph_key,
                                                    bool validated) {
  // A hit neither validates nor serializes the module: the entry was written
  // from a module with this key, validated then. Only a miss writes or compiles.
  auto validate = [&]() -> Status {
    if (validated) return {};
    return hlo::ValidateModule(module, "module '" + module.name() + "'");
  };
  cache::EntryRef entry{compiler_dir_, graph_key.empty() ? hlo::CanonicalGraphKey(module) : graph_key, flags_hash_};
  const std::string entry_path = store_->url() + "/" + entry.dir();
  auto state = cache::GetEntryState(*store_, entry, compiler_->ArtifactName());
  if (!state) return state.error();

  if (options_.extract_graphs_only) {
    if (auto st = validate(); !st) return st.error();
    if (*state == cache::EntryState::kDone) {
      Bump(&CacheCounters::hits);
    } else {
      std::string serialized;
      module.SerializeToString(&serialized);
      if (auto st = cache::PutEntryInputs(*store_, entry, serialized, flags_json_); !st) return st.error();
      Bump(&CacheCounters::misses);
      Bump(&CacheCounters::extracted);
      log::Info(log::kCcWrapper, "Extracting graphs (" + store_->url() + "/" + entry.file(cache::kHloFile) +
                                     ") for ahead-of-time parallel compilation. No compilation was done.");
    }
    return std::shared_ptr<Executable>(new PlaceholderExecutable(module));
  }

  std::string damage;
  if (*state == cache::EntryState::kDone) {
    auto exe = LoadCheckedArtifact(entry, module, &damage);
    if (!exe) return exe.error();
    if (*exe) {
      Bump(&CacheCounters::hits);
      log::Debug(log::kCache, "Using a cached neff at " + entry_path + "/" + compiler_->ArtifactName());
      return *exe;
    }
  } else if (*state == cache::EntryState::kDamaged) {
    auto why = cache::CheckEntryArtifact(*store_, entry, compiler_->ArtifactName(), cache::ArtifactCheck::kSize);
    damage = why && why->has_value() ? **why : "its artifact does not match model.done";
  }
  if (!damage.empty()) {
    log::Warning(log::kCache, "Damaged artifact in " + entry_path + ": " + damage + "; not loaded");
  }
  if (*state == cache::EntryState::kFailed && !options_.retry_failed_compilation) {
    Bump(&CacheCounters::failed_compiles);
    log::Warning(log::kCache, "Got a cached failed neff at " + entry_path + "/" + std::string(cache::kLogFile) +
                                  ". Will skip compilation.");
    return MakeError("cached compile failure of " + entry_path + " (see " + entry_path + "/" +
                     std::string(cache::kLogFile) + "; set --retry_failed_compilation in NEURON_CC_FLAGS to retry)");
  }
  if (auto st = validate(); !st) return st.error();
  Bump(&CacheCounters::misses);
  return CompileMiss(module, entry);
}

Result<std::shared_ptr<Executable>> Runtime::CompileInScratch(const xla::HloModuleProto& module,
                                                              const cache::EntryRef& entry) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "npc-scratch-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return MakeError("cannot create a scratch directory in " + tmpl);
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove{tmpl};
  cache::LocalStore scratch(tmpl);
  std::string serialized;
  module.SerializeToString(&serialized);
  if (auto st = cache::PutEntryInputs(scratch, entry, serialized, flags_json_); !st) return st.error();
  EntryCompileOptions copts;
  copts.retry_failed_compilation = true;
  auto compiled = CompileEntry(scratch, *compiler_, entry, copts);
  if (!compiled) return compiled.error();
  if (compiled->status != EntryCompileResult::Status::kCompiled) {
    Bump(&CacheCounters::failed_compiles);
    return MakeError("compile of " + store_->url() + "/" + entry.dir() + " (in " + tmpl + ") " +
                     std::string(EntryCompileStatusName(compiled->status)) + "\n" + compiled->log);
  }
  Bump(&CacheCounters::compiles);
  // Loaded before the scratch directory goes: the loaded object stays mapped.
  return LoadArtifactFile(tmpl + "/" + entry.file(compiler_->ArtifactName()), store_->url() + "/" + entry.dir(), module);
}

Result<std::shared_ptr<Executable>> Runtime::CompileMiss(const xla::HloModuleProto& module,
                                                         const cache::EntryRef& entry) {
  const std::string entry_path = store_->url() + "/" + entry.dir();
  auto load = [&]() -> Result<std::shared_ptr<Executable>> {
    std::string damage;
    auto exe = LoadCheckedArtifact(entry, module, &damage);
    if (exe && !*exe) return MakeError("the artifact of " + entry_path + " compiled now does not match: " + damage);
    return exe;
  };
  // A local cache this process cannot write (read-only): compile privately, store nothing.
  if (auto dir = store_->LocalPath(entry.dir()); dir && !CanCreateIn(*dir)) {
    log::Warning(log::kCache, "Cache " + store_->url() + " is not writable here (" + *dir + "): compiling " +
                                  entry.dir() + " in a scratch directory; the result is not stored");
    return CompileInScratch(module, entry);
  }
  std::string serialized;
  module.SerializeToString(&serialized);
  if (auto st = cache::PutEntryInputs(*store_, entry, serialized, flags_json_); !st) return st.error();
  EntryCompileOptions copts;
  copts.retry_failed_compilation = options_.retry_failed_compilation;
  copts.wait_for_lock = true;
  auto compiled = CompileEntry(*store_, *compiler_, entry, copts);
  if (!compiled) {
    // A remote store that could not take the compiled artifact (an upload
    // failed, the server went away): CompileEntry kept it locally. The
    // program runs that copy; the next compile of the entry uploads it.
    const std::string kept = KeptArtifactPath(store_->url(), entry, compiler_->ArtifactName());
    std::error_code ec;
    if (!store_->LocalPath(entry.dir()) && std::filesystem::is_regular_file(kept, ec)) {
      auto exe = LoadArtifactFile(kept, kept, module);
      if (exe) {
        Bump(&CacheCounters::compiles);
        log::Warning(log::kCache, "Running the artifact of " + entry_path +
                                      " from its local copy; storing it failed: " + compiled.error().message);
        return exe;
      }
    }
    return compiled.error();
  }
  switch (compiled->status) {
    case EntryCompileResult::Status::kCompiled:
      Bump(&CacheCounters::compiles);
      if (compiled->uploaded_kept_artifact) {
        log::Info(log::kCache, "Uploaded the artifact of " + entry_path + " that an earlier run compiled");
      } else {
        log::Info(log::kCache, "Compiled " + entry_path + " in " + std::to_string(compiled->compile_seconds) + " s");
      }
      return load();
    case EntryCompileResult::Status::kAlreadyDone:
      return load();
    default:
      Bump(&CacheCounters::failed_compiles);
      log::Error(log::kCache, "Compilation of " + entry_path + " failed (" +
                                  std::string(EntryCompileStatusName(compiled->status)) + "); see " + entry_path +
                                  "/" + std::string(cache::kLogFile));
      return MakeError("compile of " + entry_path + " " + std::string(EntryCompileStatusName(compiled->status)) +
                       " (log: " + entry_path + "/" + std::string(cache::kLogFile) + ")\n" + compiled->log);
  }
}

}  // namespace npc
