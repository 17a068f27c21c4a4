// The compile hook of libnpc_pjrt.so (see compile_hook.h).
#include "pjrt_plugin/compile_hook.h"
#include "pjrt_plugin/serialize.h"

#include <openssl/evp.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "compilers/pjrt_compiler.h"
#include "npc/cache.h"
#include "npc/compile_options.pb.h"
#include "npc/compiler.h"
#include "npc/hlo.h"
#include "npc/log.h"
#include "npc/runtime.h"
#include "util/digest.h"

namespace npc::pjrt_plugin {
namespace {

struct Session {
  RuntimeOptions options;
  std::unique_ptr<cache::Store> store;
  std::unique_ptr<Compiler> compiler;
  std::string compiler_dir;
  std::string flags_json;
  std::string flags_hash;
  std::mutex mu;  // counters
  CacheCounters counters;
};

std::mutex g_session_mu;
Session* g_session = nullptr;  // never destroyed: executables may outlive static destruction

Result<Session*> CreateSession(const std::string& inner_path) {
  auto options = RuntimeOptionsFromEnvironment();
  if (!options) return options.error();
  if (options->no_cache) return MakeError("libnpc_pjrt: --no_cache in NEURON_CC_FLAGS is not supported by the plugin");
  const char* backend_plugin = std::getenv("NPC_PJRT_PLUGIN");
  if (backend_plugin && *backend_plugin && inner_path != backend_plugin) {
    return MakeError("libnpc_pjrt: NPC_PJRT_INNER_PLUGIN (" + inner_path + ") and NPC_PJRT_PLUGIN (" +
                     backend_plugin + ") name different plugins; the cache entries would not match");
  }
  auto session = std::make_unique<Session>();
  session->options = std::move(*options);
  session->options.compiler.backend = "pjrt";
  session->options.compiler.program = inner_path;
  auto store = cache::OpenStore(session->options.cache_url);
  if (!store) return store.error();
  session->store = std::move(*store);
  auto compiler = MakeCompiler(session->options.compiler);
  if (!compiler) return compiler.error();
  session->compiler = std::move(*compiler);
  auto dir = session->compiler->CacheDirectoryName();
  if (!dir) return dir.error();
  session->compiler_dir = *dir;
  session->flags_json = cache::CompileFlagsJson(session->options.compiler_flags);
  session->flags_hash = cache::FlagsHash(session->flags_json);
  log::Info(log::kCache, "Compile cache path: " + session->store->url());
  return session.release();
}

Result<Session*> GetSession(const std::string& inner_path) {
  std::lock_guard<std::mutex> lock(g_session_mu);
  if (!g_session) {
    auto created = CreateSession(inner_path);
    if (!created) return created.error();
    g_session = *created;
  }
  return g_session;
}

void Bump(Session& s, int64_t CacheCounters::*counter) {
  std::lock_guard<std::mutex> lock(s.mu);
  ++(s.counters.*counter);
}

std::string InnerErrorText(const PJRT_Api* inner, PJRT_Error* error, const std::string& call) {
  PJRT_Error_Message_Args margs{};
  margs.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  margs.error = error;
  inner->PJRT_Error_Message(&margs);
  std::string text = call + ": " + std::string(margs.message, margs.message_size);
  PJRT_Error_Destroy_Args dargs{};
  dargs.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  dargs.error = error;
  inner->PJRT_Error_Destroy(&dargs);
  return text;
}

// Loads the entry's serialized executable; nullptr with *damage set when its
// bytes do not match model.done (then the entry is compiled again, never loaded).
Result<PJRT_LoadedExecutable*> LoadArtifact(const PJRT_Api* inner, Session& s, const cache::EntryRef& entry,
                                            PJRT_Client* client, std::string* damage) {
  const std::string path = entry.file(s.compiler->ArtifactName());
  auto read = s.store->Read(path);
  if (!read) return read.error();
  // The bytes loaded are the bytes checked: size and SHA-256 against model.done
  // (an empty model.done, written by another tool, records nothing to check).
  auto record = cache::ReadDoneFile(*s.store, entry);
  if (!record) return record.error();
  if (*record && (static_cast<int64_t>(read->size()) != (*record)->size ||
                  util::Sha256Hex(*read) != (*record)->sha256)) {
    *damage = "its " + std::to_string(read->size()) + " bytes do not match model.done (" +
              std::to_string((*record)->size) + " bytes, sha256 " + (*record)->sha256 + ")";
    return static_cast<PJRT_LoadedExecutable*>(nullptr);
  }
  auto bytes = std::make_shared<const std::string>(std::move(*read));
  PJRT_Executable_DeserializeAndLoad_Args args{};
  args.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  args.client = client;
  args.serialized_executable = bytes->data();
  args.serialized_executable_size = bytes->size();
  if (PJRT_Error* error = inner->PJRT_Executable_DeserializeAndLoad(&args)) {
    return MakeError(s.store->url() + "/" + path + ": " +
                     InnerErrorText(inner, error, "PJRT_Executable_DeserializeAndLoad"));
  }
  RememberArtifact(args.loaded_executable, bytes);
  return args.loaded_executable;
}

// The framework's compile options with XLA's cheapest settings added.
std::string CheapCompileOptions(std::string_view framework_options) {
  pjrt_proto::CompileOptionsProto options;
  if (!options.ParseFromArray(framework_options.data(), static_cast<int>(framework_options.size()))) {
    return std::string(framework_options);
  }
  auto& overrides = *options.mutable_env_option_overrides();
  overrides["xla_backend_optimization_level"].set_int_field(0);
  overrides["xla_llvm_disable_expensive_passes"].set_bool_field(true);
  return options.SerializeAsString();
}

Result<PJRT_LoadedExecutable*> CompileCheaply(const PJRT_Api* inner, PJRT_Client_Compile_Args* args) {
  const std::string options = CheapCompileOptions(std::string_view(args->compile_options, args->compile_options_size));
  PJRT_Client_Compile_Args cheap = *args;
  cheap.compile_options = options.data();
  cheap.compile_options_size = options.size();
  if (PJRT_Error* error = inner->PJRT_Client_Compile(&cheap)) {
    return MakeError(InnerErrorText(inner, error, "PJRT_Client_Compile (trial run)"));
  }
  return cheap.executable;
}

// Writes the program and compile_flags.json of a new entry; existing files stay.
Status PutProgram(Session& s, const cache::EntryRef& entry, std::string_view program, std::string_view file) {
  auto existing = cache::FindHloFile(*s.store, entry);
  if (!existing) return existing.error();
  if (!existing->has_value()) {
    if (auto st = s.store->WriteAtomic(entry.file(file), program); !st) return st;
  }
  auto flags = s.store->Exists(entry.file(cache::kFlagsFile));
  if (!flags) return flags.error();
  if (!*flags) return s.store->WriteAtomic(entry.file(cache::kFlagsFile), s.flags_json);
  return {};
}

// The artifact an entry transaction has just committed; a mismatch now is an error.
Result<PJRT_LoadedExecutable*> LoadCompiled(const PJRT_Api* inner, Session& s, const cache::EntryRef& entry,
                                            PJRT_Client* client) {
  std::string damage;
  auto exe = LoadArtifact(inner, s, entry, client, &damage);
  if (exe && *exe == nullptr) {
    return MakeError("the artifact of " + s.store->url() + "/" + entry.dir() + " compiled now does not match: " + damage);
  }
  return exe;
}

Result<PJRT_LoadedExecutable*> CompileMiss(const PJRT_Api* inner, Session& s, const cache::EntryRef& entry,
                                           PJRT_Client* client) {
  const std::string entry_path = s.store->url() + "/" + entry.dir();
  Bump(s, &CacheCounters::misses);
  EntryCompileOptions copts;
  copts.retry_failed_compilation = s.options.retry_failed_compilation;
  copts.wait_for_lock = true;
  auto compiled = CompileEntry(*s.store, *s.compiler, entry, copts);
  if (!compiled) return compiled.error();
  switch (compiled->status) {
    case EntryCompileResult::Status::kCompiled:
      Bump(s, &CacheCounters::compiles);
      log::Info(log::kCache, "Compiled " + entry_path + " in " + std::to_string(compiled->compile_seconds) + " s");
      return LoadCompiled(inner, s, entry, client);
    case EntryCompileResult::Status::kAlreadyDone:
      return LoadCompiled(inner, s, entry, client);
    default:
      Bump(s, &CacheCounters::failed_compiles);
      log::Error(log::kCache, "Compilation of " + entry_path + " failed (" +
                                  std::string(EntryCompileStatusName(compiled->status)) + "); see " + entry_path +
                                  "/" + std::string(cache::kLogFile));
      return MakeError("compile of " + entry_path + " " + std::string(EntryCompileStatusName(compiled->status)) +
                       " (log: " + entry_path + "/" + std::string(cache::kLogFile) + ")\n" + compiled->log);
  }
}

}  // namespace

std::string MlirProgramKey(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | digest[i];
  return std::to_string(key);
}

Result<PJRT_LoadedExecutable*> CompileThroughCache(const PJRT_Api* inner, const std::string& inner_path,
                                                   PJRT_Client_Compile_Args* args) {
  auto session = GetSession(inner_path);
  if (!session) return session.error();
  Session& s = **session;
  const std::string_view format(args->program->format, args->program->format_size);
  const std::string_view code(args->program->code, args->program->code_size);
  std::string key;
  std::string_view file;
  if (format == "hlo") {
    auto module = hlo::ParseHloModule(code, "HloModuleProto from PJRT_Client_Compile");
    if (!module) return module.error();
    key = hlo::CanonicalGraphKey(*module);
    file = cache::kHloFile;
  } else {
    key = MlirProgramKey(code);
    file = cache::kStableHloFile;
  }
  const cache::EntryRef entry{s.compiler_dir, key, s.flags_hash};
  const std::string entry_path = s.store->url() + "/" + entry.dir();
  // No size check here: LoadArtifact checks size and digest of the bytes it loads.
  auto state = cache::GetEntryState(*s.store, entry, s.compiler->ArtifactName(), cache::ArtifactCheck::kNone);
  if (!state) return state.error();
  if (*state == cache::EntryState::kDone) {
    std::string damage;
    auto exe = LoadArtifact(inner, s, entry, args->client, &damage);
    if (!exe) return exe.error();
    if (*exe != nullptr) {
      Bump(s, &CacheCounters::hits);
      log::Debug(log::kCache, "Using a cached neff at " + entry_path + "/" + s.compiler->ArtifactName());
      return exe;
    }
    log::Warning(log::kCache, "Damaged artifact in " + entry_path + ": " + damage + "; not loaded");
  }
  if (s.options.extract_graphs_only) {
    if (auto st = PutProgram(s, entry, code, file); !st) return st.error();
    Bump(s, &CacheCounters::misses);
    Bump(s, &CacheCounters::extracted);
    log::Info(log::kCcWrapper, "Extracting graphs (" + entry_path + "/" + std::string(file) +
                                   ") for ahead-of-time parallel compilation. No compilation was done.");
    return CompileCheaply(inner, args);
  }
  if (*state == cache::EntryState::kFailed && !s.options.retry_failed_compilation) {
    Bump(s, &CacheCounters::failed_compiles);
    log::Warning(log::kCache, "Got a cached failed neff at " + entry_path + "/" + std::string(cache::kLogFile) +
                                  ". Will skip compilation.");
    return MakeError("cached compile failure of " + entry_path + " (see " + entry_path + "/" +
                     std::string(cache::kLogFile) + "; set --retry_failed_compilation in NEURON_CC_FLAGS to retry)");
  }
  if (auto st = PutProgram(s, entry, code, file); !st) return st.error();
  return CompileMiss(inner, s, entry, args->client);
}

void LogCounters() {
  Session* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_session_mu);
    s = g_session;
  }
  if (!s) return;
  std::lock_guard<std::mutex> lock(s->mu);
  const CacheCounters& c = s->counters;
  log::Info(log::kCache, "npc cache: hits=" + std::to_string(c.hits) + " misses=" + std::to_string(c.misses) +
                             " compiles=" + std::to_string(c.compiles) + " failed_compiles=" +
                             std::to_string(c.failed_compiles) + " extracted=" + std::to_string(c.extracted));
}

}  // namespace npc::pjrt_plugin
