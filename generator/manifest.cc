#include "generator/manifest.h"
#include "generator/files.h"

#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compilers/process.h"
#include "generator/commands.h"
#include "generator/import.h"
#include "generator/ninja_writer.h"
#include "generator/plan.h"
#include "generator/results.h"
#include "npc/log.h"

namespace npc::tool {

namespace fs = std::filesystem;
using cache::EntryState;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string StoreShownPath(cache::Store& store, const std::string& path) {
  auto local = store.LocalPath(path);
  return local ? *local : store.url() + "/" + path;
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

int CpuCount() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

bool IsHex(const std::string& s, size_t size) {
  return s.size() == size &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsDecimal(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The cache root as the other commands resolve it (option, NEURON_CC_FLAGS
// --cache_dir, NEURON_COMPILE_CACHE_URL, default), without opening it.
Result<std::string> ResolveCacheUrlOf(const ToolOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  auto flags = cache::ParseNeuronCcFlags(Env("NEURON_CC_FLAGS"));
  if (!flags) return MakeError("NEURON_CC_FLAGS: " + flags.error().message);
  std::string env_url = Env("NEURON_COMPILE_CACHE_URL");
  return cache::ResolveCacheUrl(*flags, env_url.empty() ? nullptr : env_url.c_str());
}

// Opens the context of a manifest command: refuses network caches when
// offline, before anything is opened.
Result<ToolContext> OpenManifestContext(const ToolOptions& options, const ManifestCommandOptions& mo) {
  if (mo.offline) {
    auto url = ResolveCacheUrlOf(options);
    if (!url) return url.error();
    if (auto st = CheckOfflineCacheUrl(*url); !st) return st.error();
  }
  return OpenToolContext(options);
}

}  // namespace

// ---- digests ---------------------------------------------------------------------

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

// ---- making, writing, reading -------------------------------------------------------

Result<MakeManifestReport> MakeManifest(cache::Store& store, const std::string& compiler_dir,
                                        std::string_view artifact_name, const std::string& backend) {
  auto scan = ScanCompilerDir(store, compiler_dir, artifact_name);
  if (!scan) return scan.error();
  MakeManifestReport report;
  report.manifest.backend = backend;
  for (const auto& e : *scan) {
    const std::string dir = e.ref.dir();
    if (e.state == EntryState::kFailed) {
      report.skipped.push_back(dir + ": FAILED (a cached compile failure)");
      continue;
    }
    if (e.state == EntryState::kEmpty || e.hlo_file.empty()) {
      report.skipped.push_back(dir + ": " + std::string(cache::EntryStateName(e.state)) + " (no HLO file)");
      continue;
    }
    auto has_flags = store.Exists(e.ref.file(cache::kFlagsFile));
    if (!has_flags) return has_flags.error();
    if (!*has_flags) {
      report.skipped.push_back(dir + ": no " + std::string(cache::kFlagsFile));
      continue;
    }
    auto flags_text = store.Read(e.ref.file(cache::kFlagsFile));
    if (!flags_text) return flags_text.error();
    auto flags = cache::ParseCompileFlagsJson(*flags_text, StoreShownPath(store, e.ref.file(cache::kFlagsFile)));
    if (!flags) return flags.error();
    auto hlo = store.Read(e.ref.file(e.hlo_file));
    if (!hlo) return hlo.error();

    ManifestEntry m;
    m.compiler_dir = e.ref.compiler_dir;
    m.graph_key = e.ref.graph_key;
    m.flags = *flags;
    m.flags_hash = e.ref.flags_hash;
    m.hlo_file = e.hlo_file;
    m.hlo_bytes = static_cast<int64_t>(hlo->size());
    m.hlo_sha256 = Sha256Hex(*hlo);
    m.artifact_file = std::string(artifact_name);
    if (e.state == EntryState::kDone) {
      auto artifact = store.Read(e.ref.file(artifact_name));
      if (!artifact) return artifact.error();
      m.artifact_sha256 = Sha256Hex(*artifact);
    }
    report.manifest.entries.push_back(std::move(m));
  }
  std::sort(report.manifest.entries.begin(), report.manifest.entries.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.ref().dir() < b.ref().dir(); });
  return report;
}

std::string ManifestToJson(const Manifest& manifest) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const auto& e : manifest.entries) {
    nlohmann::ordered_json j;
    j["entry"] = e.ref().dir();
    j["compiler_dir"] = e.compiler_dir;
    j["graph_key"] = e.graph_key;
    j["flags"] = e.flags;
    j["flags_hash"] = e.flags_hash;
    j["hlo_file"] = e.hlo_file;
    j["hlo_bytes"] = e.hlo_bytes;
    j["hlo_sha256"] = e.hlo_sha256;
    j["artifact_file"] = e.artifact_file;
    if (e.artifact_sha256) j["artifact_sha256"] = *e.artifact_sha256;
    entries.push_back(std::move(j));
  }
  nlohmann::ordered_json out;
  out["format"] = kManifestFormat;
  out["version"] = manifest.version;
  out["backend"] = manifest.backend;
  out["entries"] = std::move(entries);
  return out.dump(2) + "\n";
}

Result<Manifest> ParseManifest(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return MakeError(source + ": not a valid JSON manifest: " + e.what());
  }
  auto bad = [&](const std::string& what) { return MakeError(source + ": " + what); };
  if (!j.is_object()) return bad("a manifest is a JSON object");
  if (!j.contains("format") || j["format"] != kManifestFormat) {
    return bad("not an npc manifest (\"format\" is not \"" + std::string(kManifestFormat) + "\")");
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) return bad("\"version\" is missing");
  Manifest m;
  m.version = j["version"].get<int>();
  if (m.version != kManifestVersion) {
    return bad("manifest version " + std::to_string(m.version) + " is not supported (this npc reads version " +
               std::to_string(kManifestVersion) + ")");
  }
  if (j.contains("backend")) {
    if (!j["backend"].is_string()) return bad("\"backend\" is not a string");
    m.backend = j["backend"].get<std::string>();
  }
  if (!j.contains("entries") || !j["entries"].is_array()) return bad("\"entries\" is missing or not a list");
  std::set<std::string> seen;
  size_t index = 0;
  for (const auto& je : j["entries"]) {
    const std::string where = "entry " + std::to_string(index++);
    if (!je.is_object()) return bad(where + " is not an object");
    auto str = [&](const char* key, std::string* out) -> Status {
      if (!je.contains(key) || !je[key].is_string()) return bad(where + ": \"" + key + "\" is missing or not a string");
      *out = je[key].get<std::string>();
      return {};
    };
    ManifestEntry e;
    std::string entry_dir;
    for (auto [key, out] : {std::pair<const char*, std::string*>{"entry", &entry_dir},
                            {"compiler_dir", &e.compiler_dir},
                            {"graph_key", &e.graph_key},
                            {"flags_hash", &e.flags_hash},
                            {"hlo_file", &e.hlo_file},
                            {"hlo_sha256", &e.hlo_sha256},
                            {"artifact_file", &e.artifact_file}}) {
      if (auto st = str(key, out); !st) return st.error();
    }
    if (!je.contains("flags") || !je["flags"].is_array()) return bad(where + ": \"flags\" is missing or not a list");
    for (const auto& f : je["flags"]) {
      if (!f.is_string()) return bad(where + ": \"flags\" holds a non-string");
      e.flags.push_back(f.get<std::string>());
    }
    if (je.contains("hlo_bytes")) {
      if (!je["hlo_bytes"].is_number_integer()) return bad(where + ": \"hlo_bytes\" is not an integer");
      e.hlo_bytes = je["hlo_bytes"].get<int64_t>();
    }
    if (je.contains("artifact_sha256")) {
      if (!je["artifact_sha256"].is_string()) return bad(where + ": \"artifact_sha256\" is not a string");
      e.artifact_sha256 = je["artifact_sha256"].get<std::string>();
      if (!IsHex(*e.artifact_sha256, 64)) return bad(where + ": \"artifact_sha256\" is not 64 lowercase hex digits");
    }
    if (e.compiler_dir.empty() || e.compiler_dir.find('/') != std::string::npos || e.compiler_dir[0] == '.') {
      return bad(where + ": \"compiler_dir\" '" + e.compiler_dir + "' is not a directory name");
    }
    if (!IsDecimal(e.graph_key)) return bad(where + ": \"graph_key\" '" + e.graph_key + "' is not decimal");
    if (!IsHex(e.flags_hash, 8)) return bad(where + ": \"flags_hash\" '" + e.flags_hash + "' is not 8 hex digits");
    if (!IsHex(e.hlo_sha256, 64)) return bad(where + ": \"hlo_sha256\" is not 64 lowercase hex digits");
    if (e.hlo_file != cache::kHloFile && e.hlo_file != cache::kLegacyHloFile && e.hlo_file != cache::kStableHloFile) {
      return bad(where + ": \"hlo_file\" '" + e.hlo_file + "' is not " + std::string(cache::kHloFile) + ", " +
                 std::string(cache::kLegacyHloFile) + " or " + std::string(cache::kStableHloFile));
    }
    if (e.artifact_file.empty() || e.artifact_file.find('/') != std::string::npos) {
      return bad(where + ": \"artifact_file\" '" + e.artifact_file + "' is not a file name");
    }
    if (entry_dir != e.ref().dir()) {
      return bad(where + ": \"entry\" '" + entry_dir + "' disagrees with its fields (" + e.ref().dir() + ")");
    }
    if (!seen.insert(entry_dir).second) return bad("entry " + entry_dir + " is listed twice");
    m.entries.push_back(std::move(e));
  }
  std::sort(m.entries.begin(), m.entries.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.ref().dir() < b.ref().dir(); });
  return m;
}

Result<Manifest> ReadManifestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError("cannot read the manifest " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return MakeError("cannot read the manifest " + path);
  return ParseManifest(text, path);
}

Status WriteManifestFile(const std::string& path, const Manifest& manifest) {
  return WriteFileAtomic(path, ManifestToJson(manifest));
}

// ---- checking -------------------------------------------------------------------------

Status CheckOfflineCacheUrl(const std::string& cache_url) {
  size_t scheme = cache_url.find("://");
  if (scheme == std::string::npos || cache_url.rfind("file://", 0) == 0) return {};
  return MakeError("offline build: the cache " + cache_url + " needs the network (" + cache_url.substr(0, scheme) +
                   "://); an offline build reads a cache on the local file system only (--cache_dir <path>)");
}

Status CheckManifest(cache::Store& store, const Manifest& manifest, const CheckManifestOptions& options) {
  std::vector<std::string> problems;
  for (const auto& e : manifest.entries) {
    const cache::EntryRef ref = e.ref();
    const std::string prefix = "manifest entry " + ref.dir() + ": ";
    if (!options.compiler_dir.empty() && e.compiler_dir != options.compiler_dir) {
      problems.push_back(prefix + "made for compiler directory " + e.compiler_dir + ", but the compiler in use is " +
                         options.compiler_dir + " (install the same compiler version, or make a new manifest)");
      continue;
    }
    auto exists = store.Exists(ref.dir());
    if (!exists) return exists.error();
    if (!*exists) {
      problems.push_back(prefix + "not in the cache " + store.url() +
                         " (run the trial run (npc collect) or import its HLO (npc import) first)");
      continue;
    }
    const std::string hlo_path = ref.file(e.hlo_file);
    auto hlo_exists = store.Exists(hlo_path);
    if (!hlo_exists) return hlo_exists.error();
    if (!*hlo_exists) {
      problems.push_back(prefix + StoreShownPath(store, hlo_path) + " is missing");
    } else {
      auto hlo = store.Read(hlo_path);
      if (!hlo) return hlo.error();
      std::string digest = Sha256Hex(*hlo);
      if (digest != e.hlo_sha256) {
        problems.push_back(prefix + StoreShownPath(store, hlo_path) + " differs from the manifest: SHA-256 " + digest +
                           " (" + std::to_string(hlo->size()) + " bytes), the manifest records " + e.hlo_sha256 +
                           " (" + std::to_string(e.hlo_bytes) + " bytes); the HLO changed after the manifest was "
                           "written");
      }
    }
    const std::string flags_path = ref.file(cache::kFlagsFile);
    auto flags_exists = store.Exists(flags_path);
    if (!flags_exists) return flags_exists.error();
    if (!*flags_exists) {
      problems.push_back(prefix + StoreShownPath(store, flags_path) + " is missing");
    } else {
      auto text = store.Read(flags_path);
      if (!text) return text.error();
      auto flags = cache::ParseCompileFlagsJson(*text, StoreShownPath(store, flags_path));
      if (!flags) {
        problems.push_back(prefix + flags.error().message);
      } else if (*flags != e.flags || cache::FlagsHash(*text) != e.flags_hash) {
        problems.push_back(prefix + StoreShownPath(store, flags_path) + " differs from the manifest: it holds " +
                           *text + " (hash " + cache::FlagsHash(*text) + "), the manifest records " +
                           cache::CompileFlagsJson(e.flags) + " (hash " + e.flags_hash + ")");
      }
    }
    if (options.check_artifacts && e.artifact_sha256) {
      const std::string artifact_path = ref.file(e.artifact_file);
      auto done = store.Exists(ref.file(cache::kDoneFile));
      if (!done) return done.error();
      if (*done) {
        auto artifact = store.Read(artifact_path);
        if (!artifact) return artifact.error();
        std::string digest = Sha256Hex(*artifact);
        if (digest != *e.artifact_sha256) {
          problems.push_back(prefix + StoreShownPath(store, artifact_path) + " differs from the manifest: SHA-256 " +
                             digest + ", the manifest records " + *e.artifact_sha256);
        }
      }
    }
  }
  if (problems.empty()) return {};
  std::string message = std::to_string(problems.size()) + (problems.size() == 1 ? " problem" : " problems") +
                        " with the cache " + store.url() + " against the manifest:";
  for (const auto& p : problems) message += "\n  " + p;
  return MakeError(message);
}

// ---- verify -------------------------------------------------------------------------------

Result<VerifyReport> Verify(cache::Store& store, Compiler& compiler, const Manifest& manifest,
                            const VerifyOptions& options) {
  if (options.scratch_dir.empty()) return MakeError("verify: no scratch directory given");
  std::error_code ec;
  fs::create_directories(options.scratch_dir, ec);
  if (ec) return MakeError("verify: cannot create " + options.scratch_dir + ": " + ec.message());
  cache::LocalStore scratch(AbsolutePath(options.scratch_dir));
  auto compiler_dir = compiler.CacheDirectoryName();  // asked once, before the threads start
  if (!compiler_dir) return compiler_dir.error();

  VerifyReport report;
  report.entries.resize(manifest.entries.size());
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  std::optional<Error> io_error;

  auto verify_one = [&](size_t i) -> Status {
    const ManifestEntry& e = manifest.entries[i];
    VerifyEntryResult& r = report.entries[i];
    const cache::EntryRef ref = e.ref();
    r.entry = ref.dir();
    if (e.compiler_dir != *compiler_dir) {
      r.message = "made for compiler directory " + e.compiler_dir + ", the compiler in use is " + *compiler_dir;
      return {};
    }
    if (e.artifact_sha256) {
      r.expected_sha256 = *e.artifact_sha256;
    } else if (auto done = store.Exists(ref.file(cache::kDoneFile)); done && *done) {
      auto artifact = store.Read(ref.file(e.artifact_file));
      if (!artifact) return artifact.error();
      r.expected_sha256 = Sha256Hex(*artifact);
    }
    auto hlo = store.Read(ref.file(e.hlo_file));
    if (!hlo) {
      r.message = hlo.error().message;
      return {};
    }
    if (Sha256Hex(*hlo) != e.hlo_sha256) {
      r.message = StoreShownPath(store, ref.file(e.hlo_file)) + " differs from the manifest (SHA-256 " +
                  Sha256Hex(*hlo) + ", the manifest records " + e.hlo_sha256 + ")";
      return {};
    }
    std::string flags_json = cache::CompileFlagsJson(e.flags);
    if (auto text = store.Read(ref.file(cache::kFlagsFile)); text && cache::FlagsHash(*text) == e.flags_hash) {
      flags_json = *text;  // exactly the bytes the hash was made from
    }
    // A leftover entry from an earlier run in a reused scratch directory would
    // be found DONE and not recompiled.
    if (auto st = scratch.RemoveTree(ref.dir()); !st) return st.error();
    if (auto st = cache::PutEntryInputs(scratch, ref, *hlo, flags_json); !st) return st.error();
    auto result = CompileEntry(scratch, compiler, ref, EntryCompileOptions{});
    if (!result) return result.error();
    if (result->status != EntryCompileResult::Status::kCompiled) {
      r.message = "recompile " + std::string(EntryCompileStatusName(result->status)) + ": see " +
                  StoreShownPath(scratch, ref.file(cache::kLogFile));
      return {};
    }
    auto artifact = scratch.Read(ref.file(e.artifact_file));
    if (!artifact) return artifact.error();
    r.compiled = true;
    r.actual_sha256 = Sha256Hex(*artifact);
    if (r.expected_sha256.empty()) {
      r.message = "no artifact digest to compare with (the entry was not compiled when the manifest was made)";
    } else if (r.actual_sha256 == r.expected_sha256) {
      r.match = true;
    } else {
      r.message = "the recompiled artifact differs: SHA-256 " + r.actual_sha256 + ", expected " + r.expected_sha256 +
                  " (recompiled copy: " + StoreShownPath(scratch, ref.file(e.artifact_file)) + ")";
    }
    return {};
  };

  auto worker = [&] {
    for (size_t i = next++; i < manifest.entries.size(); i = next++) {
      Status st = verify_one(i);
      if (!st) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!io_error) io_error = st.error();
      }
    }
  };
  const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(manifest.entries.size())));
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (io_error) return *io_error;

  for (const auto& r : report.entries) {
    if (r.match) ++report.matched;
    else if (!r.compiled) ++report.failed;
    else if (r.expected_sha256.empty()) ++report.unreferenced;
    else ++report.mismatched;
  }
  return report;
}

// ---- commands --------------------------------------------------------------------------------

int RunManifest(const ToolOptions& options, const ManifestCommandOptions& mo) {
  if (mo.manifest_path.empty()) {
    std::cerr << "npc manifest: --manifest <file> is required (where to write the manifest)\n";
    return 2;
  }
  auto ctx = OpenManifestContext(options, mo);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  auto made = MakeManifest(*ctx->store, ctx->compiler_dir, ctx->compiler->ArtifactName(), ctx->compiler->backend());
  if (!made) {
    log::Error(log::kParallelCompile, made.error().message);
    return 1;
  }
  for (const auto& s : made->skipped) log::Warning(log::kParallelCompile, "Not in the manifest: " + s);
  if (auto st = WriteManifestFile(mo.manifest_path, made->manifest); !st) {
    log::Error(log::kParallelCompile, st.error().message);
    return 1;
  }
  size_t with_artifact = std::count_if(made->manifest.entries.begin(), made->manifest.entries.end(),
                                       [](const ManifestEntry& e) { return e.artifact_sha256.has_value(); });
  log::Info(log::kParallelCompile, "Wrote " + AbsolutePath(mo.manifest_path) + ": " +
                                       std::to_string(made->manifest.entries.size()) + " entries of " +
                                       ctx->compiler_dir_path + " (" + std::to_string(with_artifact) +
                                       " with artifact digests)");
  return 0;
}

namespace {

struct ManifestBuild {
  ToolContext ctx;
  Manifest manifest;
  std::string ninja_file;
  int pool_depth = 1;
};

// Reads and checks the manifest, writes build.ninja. Errors are logged.
std::optional<ManifestBuild> GenerateFromManifest(const ToolOptions& options, const ManifestCommandOptions& mo) {
  if (mo.manifest_path.empty()) {
    log::Error(log::kParallelCompile, "--manifest <file> is required");
    return std::nullopt;
  }
  auto ctx = OpenManifestContext(options, mo);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return std::nullopt;
  }
  auto manifest = ReadManifestFile(mo.manifest_path);
  if (!manifest) {
    log::Error(log::kParallelCompile, manifest.error().message);
    return std::nullopt;
  }
  if (!manifest->backend.empty() && manifest->backend != ctx->compiler->backend()) {
    log::Error(log::kParallelCompile, mo.manifest_path + " was made for the " + manifest->backend +
                                          " backend; this build uses " + ctx->compiler->backend() +
                                          " (--backend " + manifest->backend + ")");
    return std::nullopt;
  }
  // A remote store (S3): edges write local stamp files (see StampPath).
  const bool remote = !ctx->store->LocalPath(ctx->compiler_dir).has_value();
  if (auto st = CheckManifest(*ctx->store, *manifest, CheckManifestOptions{ctx->compiler_dir, false}); !st) {
    log::Error(log::kParallelCompile, st.error().message);
    return std::nullopt;
  }
  // Graphs the cache has but the manifest lacks (a changed program, a new
  // import) are not built: say so, since the program would compile them on
  // first use. (Only a message: build.ninja does not depend on the cache.)
  if (auto scan = ScanCompilerDir(*ctx->store, ctx->compiler_dir, ctx->compiler->ArtifactName())) {
    std::set<std::string> listed;
    for (const auto& e : manifest->entries) listed.insert(e.ref().dir());
    std::vector<std::string> extra;
    for (const auto& e : *scan) {
      if (e.state == EntryState::kTodo && !listed.count(e.ref.dir())) extra.push_back(e.ref.dir());
    }
    if (!extra.empty()) {
      std::string names;
      for (size_t i = 0; i < extra.size() && i < 5; ++i) names += "\n  " + extra[i];
      if (extra.size() > 5) names += "\n  ...";
      log::Warning(log::kParallelCompile, std::to_string(extra.size()) + " uncompiled entries of " +
                                              ctx->compiler_dir_path + " are not in the manifest " +
                                              AbsolutePath(mo.manifest_path) +
                                              " and are not built (update it with `npc manifest` if the program's "
                                              "graphs changed):" + names);
    }
  }
  std::error_code ec;
  fs::create_directories(ctx->build_dir, ec);
  if (ec) {
    log::Error(log::kParallelCompile, "cannot create the build directory " + ctx->build_dir + ": " + ec.message());
    return std::nullopt;
  }

  ManifestBuild out;
  out.pool_depth = std::max(1, options.num_parallel ? *options.num_parallel : CpuCount());
  NinjaFileSpec spec;
  spec.npc_program = FindNpcProgram();
  if (spec.npc_program.empty()) {
    log::Error(log::kParallelCompile, "cannot find the `npc` executable (next to this program or in PATH)");
    return std::nullopt;
  }
  const std::string manifest_abs = AbsolutePath(mo.manifest_path);
  // build.ninja is rewritten when the manifest changes (not when the cache does).
  spec.compiler_dir_path = manifest_abs;
  spec.stamp_outputs = remote;
  spec.pool_depth = out.pool_depth;
  std::vector<std::string> common = {"--cache", ctx->cache_url, "--build_dir", ctx->build_dir, "--backend",
                                     ctx->compiler->backend()};
  if (!ctx->compiler_options.program.empty()) {
    common.push_back("--compiler");
    common.push_back(ctx->compiler_options.program);
  }
  spec.compile_args = common;
  spec.generate_args = common;
  for (const std::string& a : {std::string("--compiler_dir"), ctx->compiler_dir, std::string("--manifest"), manifest_abs}) {
    spec.generate_args.push_back(a);
  }
  if (mo.offline) spec.generate_args.push_back("--offline");
  if (options.num_parallel) {
    spec.generate_args.push_back("--num_parallel");
    spec.generate_args.push_back(std::to_string(*options.num_parallel));
  }
  // Costliest first, as the cache-driven generator orders them; a pure
  // function of the manifest.
  std::vector<const ManifestEntry*> order;
  for (const auto& e : manifest->entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const ManifestEntry* a, const ManifestEntry* b) {
    if (a->hlo_bytes != b->hlo_bytes) return a->hlo_bytes > b->hlo_bytes;
    return a->ref().dir() < b->ref().dir();
  });
  for (const ManifestEntry* e : order) {
    const cache::EntryRef ref = e->ref();
    NinjaCompileEdge edge;
    if (remote) {
      // Each `generate`/`compile --manifest` re-checks every entry against the
      // bucket (a DONE one costs a few requests): a stamp of an earlier build
      // may name an entry that was cleaned since.
      edge.output = StampPath(ctx->build_dir, ref.dir());
      fs::remove(edge.output, ec);
    } else {
      edge.output = StoreShownPath(*ctx->store, ref.file(cache::kDoneFile));
      edge.inputs = {StoreShownPath(*ctx->store, ref.file(e->hlo_file)),
                     StoreShownPath(*ctx->store, ref.file(cache::kFlagsFile))};
    }
    edge.entry = ref.dir();
    edge.graph_key = e->graph_key;
    spec.edges.push_back(std::move(edge));
  }
  auto text = RenderNinjaFile(spec);
  if (!text) {
    log::Error(log::kParallelCompile, text.error().message);
    return std::nullopt;
  }
  out.ninja_file = ctx->build_dir + "/build.ninja";
  // Rewritten only when the text changes, so that ninja sees no new build file.
  std::ifstream old(out.ninja_file, std::ios::binary);
  std::string old_text((std::istreambuf_iterator<char>(old)), std::istreambuf_iterator<char>());
  if (!old || old_text != *text) {
    if (auto st = WriteFileAtomic(out.ninja_file, *text); !st) {
      log::Error(log::kParallelCompile, st.error().message);
      return std::nullopt;
    }
  }
  out.ctx = std::move(*ctx);
  out.manifest = std::move(*manifest);
  return out;
}

}  // namespace

int RunGenerateFromManifest(const ToolOptions& options, const ManifestCommandOptions& mo) {
  auto build = GenerateFromManifest(options, mo);
  if (!build) return 1;
  log::Info(log::kParallelCompile, "Wrote " + build->ninja_file + " from " + AbsolutePath(mo.manifest_path) + ": " +
                                       std::to_string(build->manifest.entries.size()) + " entries, pool depth " +
                                       std::to_string(build->pool_depth));
  return 0;
}

int RunCompileFromManifest(const ToolOptions& options, const ManifestCommandOptions& mo) {
  const double start_time = EpochSeconds();
  const auto start = std::chrono::steady_clock::now();
  auto build = GenerateFromManifest(options, mo);
  if (!build) return 1;
  ToolContext& ctx = build->ctx;
  log::Info(log::kCache, "Compile cache path: " + ctx.cache_url);
  log::Info(log::kParallelCompile, "Compiling the " + std::to_string(build->manifest.entries.size()) +
                                       " entries of " + AbsolutePath(mo.manifest_path) + (mo.offline ? " (offline)" : "") +
                                       "; build file " + build->ninja_file + ", pool depth " +
                                       std::to_string(build->pool_depth));
  int ninja_status = 0;
  // This run's result records (see generator/results.h), moved up after the summary.
  const std::string run_id = NewRunId();
  RunResultsPublisher publish_results(ctx.build_dir, run_id);
  if (!build->manifest.entries.empty()) {
    std::string ninja = Env("NPC_NINJA");
    if (ninja.empty()) ninja = FindInPath("ninja");
    if (ninja.empty()) {
      log::Error(log::kParallelCompile, "cannot find `ninja` in PATH (set NPC_NINJA to its path)");
      return 1;
    }
    std::vector<std::string> argv = {ninja, "-C", ctx.build_dir, "-k", "0", "-j", std::to_string(build->pool_depth)};
    log::Info(log::kParallelCompile, "Running " + ShellJoin(argv));
    // In the foreground, like `npc compile`: Ctrl-C reaches ninja, which
    // stops its edges; SIGTERM to npc is forwarded (InstallInterruptForwarding).
    ProcessOptions po;
    po.capture_output = false;
    po.new_process_group = false;
    po.set_env[kRunIdVariable] = run_id;
    auto run = RunProcess(argv, po);
    if (!run) {
      log::Error(log::kParallelCompile, "cannot run ninja: " + run.error().message);
      return 1;
    }
    ninja_status = run->exit_status;
    if (int sig = InterruptSignal(); sig != 0) {
      log::Error(log::kParallelCompile, "Interrupted by signal " + std::to_string(sig) + " (" + strsignal(sig) +
                                            "): ninja and its compiles were stopped");
      return 128 + sig;
    }
  }

  CompileSummary summary;
  summary.start_time = start_time;
  std::vector<std::string> mismatches;
  for (const auto& e : build->manifest.entries) {
    const cache::EntryRef ref = e.ref();
    SummaryItem item;
    item.hlo_path = StoreShownPath(*ctx.store, ref.file(e.hlo_file));
    auto record = ReadResultRecord(ctx.build_dir, ref.dir(), run_id);
    auto state = cache::GetEntryState(*ctx.store, ref, e.artifact_file);
    item.ok = state && *state == EntryState::kDone;
    if (record && record->end_time >= start_time) {
      item.retry = record->retries;
      item.compile_time = record->compile_time;
      item.detail = record->status;
      if (!record->ok) item.log_path = record->log_path;
    } else {
      item.detail = item.ok ? "already done" : "not compiled";
    }
    if (state && *state == EntryState::kFailed) item.log_path = StoreShownPath(*ctx.store, ref.file(cache::kLogFile));
    if (item.ok && e.artifact_sha256) {
      auto artifact = ctx.store->Read(ref.file(e.artifact_file));
      std::string digest = artifact ? Sha256Hex(*artifact) : "(unreadable: " + artifact.error().message + ")";
      if (digest != *e.artifact_sha256) {
        item.ok = false;
        item.detail = "artifact differs from the manifest";
        mismatches.push_back(StoreShownPath(*ctx.store, ref.file(e.artifact_file)) + ": SHA-256 " + digest +
                             ", the manifest records " + *e.artifact_sha256);
      }
    }
    summary.items.push_back(std::move(item));
  }
  summary.compilation_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::Info(log::kParallelCompile, SummaryToJson(summary).dump(4, ' ', false, nlohmann::json::error_handler_t::replace));
  log::Info(log::kParallelCompile, "Total graphs: " + std::to_string(summary.total()));
  log::Info(log::kParallelCompile, "Total successful compilations: " + std::to_string(summary.succeeded()));
  log::Info(log::kParallelCompile, "Total failed compilations: " + std::to_string(summary.failed()));
  for (const auto& m : mismatches) log::Error(log::kParallelCompile, "Not reproduced: " + m);
  for (const auto& item : summary.items) {
    if (item.ok || item.detail == "artifact differs from the manifest") continue;
    log::Error(log::kParallelCompile, "Failed: " + item.hlo_path + " (" + item.detail + ")" +
                                          (item.log_path.empty() ? "" : "; compiler log: " + item.log_path));
  }
  int status = ExitStatusForFailures(summary.failed());
  if (status == 0 && ninja_status != 0) {
    log::Error(log::kParallelCompile, "ninja exited with status " + std::to_string(ninja_status));
    status = 1;
  }
  return status;
}

int RunVerify(const ToolOptions& options, const ManifestCommandOptions& mo) {
  if (mo.manifest_path.empty()) {
    std::cerr << "npc verify: --manifest <file> is required\n";
    return 2;
  }
  auto ctx = OpenManifestContext(options, mo);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  auto manifest = ReadManifestFile(mo.manifest_path);
  if (!manifest) {
    log::Error(log::kParallelCompile, manifest.error().message);
    return 1;
  }
  std::string scratch = mo.scratch_dir;
  bool remove_scratch = false;
  if (scratch.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "npc-verify-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      log::Error(log::kParallelCompile, "cannot make a scratch directory " + tmpl);
      return 1;
    }
    scratch = tmpl;
    remove_scratch = true;
  }
  VerifyOptions vo;
  vo.scratch_dir = scratch;
  vo.jobs = options.num_parallel ? *options.num_parallel : CpuCount();
  log::Info(log::kParallelCompile, "Recompiling the " + std::to_string(manifest->entries.size()) + " entries of " +
                                       AbsolutePath(mo.manifest_path) + " into " + scratch);
  auto report = Verify(*ctx->store, *ctx->compiler, *manifest, vo);
  if (remove_scratch && (!report || report->ok())) {
    std::error_code ec;
    fs::remove_all(scratch, ec);
  }
  if (!report) {
    log::Error(log::kParallelCompile, report.error().message);
    return 1;
  }
  for (const auto& r : report->entries) {
    if (r.match) {
      std::cout << "same     " << r.entry << "  " << r.actual_sha256 << "\n";
    } else if (!r.compiled) {
      std::cout << "FAILED   " << r.entry << ": " << r.message << "\n";
    } else if (r.expected_sha256.empty()) {
      std::cout << "new      " << r.entry << "  " << r.actual_sha256 << ": " << r.message << "\n";
    } else {
      std::cout << "DIFFERS  " << r.entry << ": " << r.message << "\n";
    }
  }
  std::cout << report->entries.size() << " entries: " << report->matched << " reproduced, " << report->mismatched
            << " differ, " << report->failed << " failed, " << report->unreferenced << " without a reference digest\n";
  return report->ok() ? 0 : 1;
}

// ---- CLI wiring ------------------------------------------------------------------------------

ManifestCommandOptions ManifestCommandOptionsOf(const ToolOptions& options) {
  ManifestCommandOptions mo;
  mo.manifest_path = options.manifest;
  mo.offline = options.offline;
  mo.scratch_dir = options.scratch_dir;
  return mo;
}

bool IsManifestVerb(const std::string& verb) { return verb == "manifest" || verb == "verify" || verb == "import"; }

void AddManifestOptions(CLI::App& app, const std::string& verb, ToolOptions& o) {
  if (verb == "manifest") {
    app.add_option("--manifest,-o", o.manifest, "The manifest file to write")->required();
  } else if (verb == "verify") {
    app.add_option("--manifest", o.manifest, "The manifest whose entries to recompile and compare")->required();
  } else if (verb == "generate" || verb == "compile") {
    app.add_option("--manifest", o.manifest,
                   "Build exactly the entries of this manifest (checking every HLO's digest; the build file is "
                   "byte-identical for the same manifest)");
  }
  if (verb == "generate" || verb == "compile" || verb == "verify" || verb == "manifest") {
    app.add_flag("--offline", o.offline, "Use local files only: refuse a network cache (s3://)");
  }
  if (verb == "verify") {
    app.add_option("--scratch_dir", o.scratch_dir,
                   "Where to recompile (default: a temporary directory, removed when every digest matches)");
  }
  if (verb == "import") {
    app.add_option("--flags", o.import_flags,
                   "The compiler flags of the imported entries, as one string split like a shell would "
                   "(e.g. --flags='--target=trn2 -O1'); instead of the compiler flags of NEURON_CC_FLAGS "
                   "(the default). Only compiler flags: cache options (--cache_dir, ...) are refused");
    app.add_flag("-k,--keep_going", o.keep_going,
                 "Import every file that reads and report the others (exit status 1), instead of importing "
                 "nothing when one file is bad");
  }
  if (IsManifestVerb(verb)) {
    app.add_option("--compiler_dir", o.compiler_dir,
                   "Compiler directory name under the cache root (default: asked from the compiler)");
  }
}

std::optional<int> RunManifestVerb(const ToolOptions& options) {
  const std::string& v = options.verb;
  const bool manifest_mode = (v == "generate" || v == "compile") && !options.manifest.empty();
  if (!IsManifestVerb(v) && !manifest_mode) {
    if (options.offline) {
      std::cerr << "npc " << v << ": --offline needs --manifest <file>\n";
      return 2;
    }
    return std::nullopt;
  }
  if (v == "import") return RunImport(options, options.command);
  ManifestCommandOptions mo = ManifestCommandOptionsOf(options);
  if (v == "manifest") return RunManifest(options, mo);
  if (v == "verify") return RunVerify(options, mo);
  if (v == "generate") return RunGenerateFromManifest(options, mo);
  return RunCompileFromManifest(options, mo);
}

}  // namespace npc::tool
