// The Neuron Persistent Cache: layout, entry states, flags hash, cache URL
// resolution, and the store interface it lives behind.
//
// Layout (DESIGN.md section 2, compatible with libneuronxla):
//   <root>/<compiler dir>/MODULE_<graph key>+<flags hash>/
//       model.hlo_module.pb   serialized HloModuleProto (older caches: model.hlo.pb)
//       compile_flags.json    the compiler flags, as Python's json.dumps(list) writes them
//       <artifact>            model.neff (neuronx-cc) or model.so (host backend)
//       model.done            written last: the commit point; npc writes the
//                             artifact's size and SHA-256 into it (below),
//                             libneuronxla writes it empty
//       model.log             compiler output of a failed compile
//       model.lock            present while the entry is being compiled
//       *.lock                locks of other tools (libneuronxla: model.hlo_module.pb.lock);
//                             an entry whose such file a live process flocks is LOCKED
// <compiler dir> is `neuronxcc-<version>` for neuronx-cc, `<backend>-<version>`
// for other backends. All paths handed to a Store are relative to <root> and
// use '/'.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "npc/result.h"

namespace npc::cache {

inline constexpr std::string_view kDefaultCacheUrl = "/var/tmp/neuron-compile-cache";
inline constexpr std::string_view kHloFile = "model.hlo_module.pb";
inline constexpr std::string_view kLegacyHloFile = "model.hlo.pb";
// The program of an entry made from StableHLO bytecode (PJRT format "mlir", what
// JAX sends; written by the PJRT plugin, compiled by the pjrt backend only),
// in place of model.hlo_module.pb. The file name records the program format.
inline constexpr std::string_view kStableHloFile = "model.stablehlo.mlirbc";
inline constexpr std::string_view kFlagsFile = "compile_flags.json";
inline constexpr std::string_view kDoneFile = "model.done";
inline constexpr std::string_view kLogFile = "model.log";
inline constexpr std::string_view kLockFile = "model.lock";
inline constexpr std::string_view kEntryPrefix = "MODULE_";

// ---- compile flags -------------------------------------------------------

// The text of compile_flags.json for `flags`: exactly what Python's
// json.dumps(flags) prints (", " between items, non-ASCII as \uXXXX).
std::string CompileFlagsJson(const std::vector<std::string>& flags);

// Parses compile_flags.json text (a JSON list of strings). Errors name `source`.
Result<std::vector<std::string>> ParseCompileFlagsJson(std::string_view text, const std::string& source);

// First 8 lowercase hex digits of the MD5 of `compile_flags_json_text`.
// FlagsHash(R"(["--target=trn1"])") == "e30acd3a"; FlagsHash("") == "d41d8cd9".
std::string FlagsHash(std::string_view compile_flags_json_text);

// NEURON_CC_FLAGS split into the flags the cache layer consumes and the flags
// passed to the compiler (everything else, in order). Both `--flag=value` and
// `--flag value` forms are accepted for the valued flags.
struct CacheFlags {
  std::optional<std::string> cache_dir;        // --cache_dir
  bool no_cache = false;                       // --no_cache
  bool retry_failed_compilation = false;       // --retry_failed_compilation
  std::optional<std::string> log_level;        // --log_level
  std::optional<std::string> dump;             // --dump
  std::optional<std::string> compile_workdir;  // --compile_workdir
  std::optional<std::string> cache_size;       // --cache_size (historic; ignored)
  std::optional<std::string> cache_ttl;        // --cache_ttl (historic; ignored)
  std::vector<std::string> compiler_flags;
};

// Splits `neuron_cc_flags` into words as a POSIX shell would (quotes and
// backslashes; no expansion). Errors: an unterminated quote.
Result<std::vector<std::string>> ShellSplit(std::string_view text);
Result<CacheFlags> ParseNeuronCcFlags(std::string_view neuron_cc_flags);

// The cache root URL: --cache_dir in NEURON_CC_FLAGS, else
// NEURON_COMPILE_CACHE_URL, else kDefaultCacheUrl. Null or empty arguments
// count as unset.
std::string ResolveCacheUrl(const CacheFlags& flags, const char* neuron_compile_cache_url);

// ---- entries ---------------------------------------------------------------

enum class EntryState {
  kTodo,    // an HLO, no artifact, no log: needs compiling
  kLocked,  // a live process holds the entry's lock (npc's, or another tool's *.lock)
  kDone,    // artifact and model.done
  kFailed,  // model.log and no artifact: a cached failure
  kEmpty,   // no HLO and nothing else npc understands (ignored)
  kDamaged, // artifact and model.done, but the artifact does not match model.done's
            // record (size or SHA-256), or model.done is unreadable: never loaded;
            // compiled again like TODO (the compile replaces the artifact)
};
// "TODO", "LOCKED", "DONE", "FAILED", "EMPTY", "DAMAGED"
std::string_view EntryStateName(EntryState state);

struct EntryRef {
  std::string compiler_dir;  // e.g. "neuronxcc-2.16.372.0+4a9b2326", "host-gcc-12.2.0-x86_64-linux-gnu-cg3"
  std::string graph_key;     // decimal uint64 (torch-xla's or CanonicalGraphKey)
  std::string flags_hash;    // 8 hex digits

  // "<compiler_dir>/MODULE_<graph_key>+<flags_hash>"
  std::string dir() const;
  std::string file(std::string_view name) const { return dir() + "/" + std::string(name); }
};

// Parses a directory name "MODULE_<key>+<hash>"; nullopt for anything else,
// including a key or hash that is empty or has a character outside
// [A-Za-z0-9._-] (hash: [A-Za-z0-9]): such names (a stray `MODULE_1\n2+abc`)
// cannot be written into build.ninja or a shell command, and no tool makes them.
std::optional<EntryRef> ParseEntryDirName(const std::string& compiler_dir, std::string_view name);

// ---- stores ---------------------------------------------------------------

// An exclusive lock on one cache entry. Released (and its lock object removed)
// when destroyed. A lock whose owner died is never an obstacle: the store
// detects it and lets the next TryLock take it over.
class EntryLock {
 public:
  virtual ~EntryLock() = default;
};

// Where the cache lives. Paths are relative to the root ("a/b/c").
// Implementations: LocalStore (a directory, below); S3Store (a bucket and key
// prefix, runtime/cache/s3_store.h: one PUT per atomic write, entry locks as
// lease objects). A store without local paths (LocalPath() is nullopt) is
// remote: programs get local files of its objects with cache::LocalCopy
// (runtime/cache/read_through.h).
class Store {
 public:
  virtual ~Store() = default;

  // The root URL or path, for messages.
  virtual std::string url() const = 0;

  // true when `path` exists (file or directory).
  virtual Result<bool> Exists(const std::string& path) = 0;
  virtual Result<std::string> Read(const std::string& path) = 0;
  // Size in bytes of a file.
  virtual Result<int64_t> Size(const std::string& path) = 0;
  // Writes `data` so that a reader sees either nothing or all of it (temporary
  // name, then rename). Creates missing parent directories.
  virtual Status WriteAtomic(const std::string& path, std::string_view data) = 0;
  // Moves or copies the local file `local_path` into `path` atomically. A
  // store with local paths may consume the file (rename it away); a remote
  // one (S3) reads it and leaves it in place.
  virtual Status PutFileAtomic(const std::string& path, const std::string& local_path) = 0;
  // Names of the immediate children of directory `path` (sorted); an absent
  // directory lists as empty.
  virtual Result<std::vector<std::string>> List(const std::string& path) = 0;
  // Removes a file; absent is not an error.
  virtual Status Remove(const std::string& path) = 0;
  // Removes a directory tree; absent is not an error.
  virtual Status RemoveTree(const std::string& path) = 0;

  // Tries to take the lock of the entry directory `entry_dir` without waiting.
  // Returns nullptr when another live process holds it.
  virtual Result<std::unique_ptr<EntryLock>> TryLock(const std::string& entry_dir) = 0;
  // true when a live process holds the lock of `entry_dir` (never writes).
  virtual Result<bool> IsLocked(const std::string& entry_dir) = 0;
  // true when a live process holds another tool's lock file in `entry_dir`:
  // a `*.lock` other than model.lock (libneuronxla locks
  // `model.hlo_module.pb.lock` with flock while it writes or compiles the
  // entry). Never writes. Stores without such locks (S3): false.
  virtual Result<bool> IsForeignLocked(const std::string& entry_dir) {
    (void)entry_dir;
    return false;
  }

  // A path on the local file system where `path` can be read directly, when
  // the store has one (LocalStore); nullopt otherwise.
  virtual std::optional<std::string> LocalPath(const std::string& path) const = 0;
};

// A cache directory on a local (or network) file system. Locks are `flock`s
// on `<entry>/model.lock`, removed on release; a lock file left behind by a
// dead process is not held by anyone and is taken over. Reads never write,
// so lookups work on a read-only cache.
class LocalStore : public Store {
 public:
  explicit LocalStore(std::string root);
  const std::string& root() const { return root_; }

  std::string url() const override { return root_; }
  Result<bool> Exists(const std::string& path) override;
  Result<std::string> Read(const std::string& path) override;
  Result<int64_t> Size(const std::string& path) override;
  Status WriteAtomic(const std::string& path, std::string_view data) override;
  Status PutFileAtomic(const std::string& path, const std::string& local_path) override;
  Result<std::vector<std::string>> List(const std::string& path) override;
  Status Remove(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Result<std::unique_ptr<EntryLock>> TryLock(const std::string& entry_dir) override;
  Result<bool> IsLocked(const std::string& entry_dir) override;
  Result<bool> IsForeignLocked(const std::string& entry_dir) override;
  std::optional<std::string> LocalPath(const std::string& path) const override;

 private:
  std::string Abs(const std::string& path) const;
  std::string root_;
};

// Whether a live process holds an flock on the local file `path`, probed with
// a non-blocking flock on a descriptor opened for writing (flock over NFS
// rejects a read-only one; a read-only file or file system falls back to a
// shared probe on a read-only descriptor). false when the file is absent.
// Errors: the file cannot be opened or probed (the caller must not take it
// for free).
Result<bool> IsFileLockHeld(const std::string& path);

// Opens the store for a cache URL: a local path (or file:// URL) gives a
// LocalStore; s3://bucket[/prefix] an S3Store configured from the environment
// (endpoint, region, credentials: runtime/cache/s3_client.h,
// S3ConfigFromEnvironment). Opening sends no request. Errors: an empty path,
// another scheme, a malformed s3:// URL or S3 configuration.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url);

// ---- model.done: the commit record -----------------------------------------
//
// Commit order of an entry (CompileEntry, PutEntryInputs): compile_flags.json,
// then the HLO (a scan never sees an HLO without its flags); after a compile
// the artifact (fsynced, renamed into place, directory fsynced), then
// model.done, written the same way. npc's model.done is one line of JSON:
//   {"artifact":"model.so","size":123456,"sha256":"<64 lowercase hex digits>"}
// (size in bytes; keys in this order; a reader ignores other keys).
// libneuronxla writes model.done empty and only checks that it exists, so
// either tool reads the other's entries. An empty model.done (or one of only
// whitespace) still means DONE, but there is nothing to check the artifact
// against: such an artifact is loaded unchecked (the trade-off of reading
// libneuronxla's entries; an entry npc compiles again gets a record).

struct ArtifactRecord {
  std::string artifact;  // the artifact's file name in the entry
  int64_t size = 0;      // bytes
  std::string sha256;    // 64 lowercase hex digits
};

// The text of npc's model.done for `record` (one line, with a newline).
std::string DoneFileText(const ArtifactRecord& record);

// Parses model.done: empty or whitespace -> nullopt (libneuronxla's, nothing
// to check); npc's record -> it. Errors (anything else, e.g. a record with
// damaged bytes) name `source`.
Result<std::optional<ArtifactRecord>> ParseDoneFile(std::string_view text, const std::string& source);

// How far GetEntryState checks a DONE entry's artifact against model.done:
// kSize reads model.done and the artifact's size (cheap: a stat locally);
// kDigest also reads the whole artifact and compares its SHA-256 (on a
// remote store this downloads it).
enum class ArtifactCheck { kSize, kDigest };

// Why the artifact file at `local_path` does not match `record` ("model.so is
// 100 bytes, model.done records 200"), or nullopt when it matches (or when
// `record` is nullopt: nothing to check). `kDigest` also compares SHA-256.
// Errors: the file cannot be read.
Result<std::optional<std::string>> CheckArtifactFile(const std::string& local_path,
                                                     const std::optional<ArtifactRecord>& record, ArtifactCheck check);

// Reads and parses the entry's model.done. Errors: it cannot be read, or it
// is neither empty nor npc's record (the message says which).
Result<std::optional<ArtifactRecord>> ReadDoneFile(Store& store, const EntryRef& entry);

// Why the artifact of an entry with an artifact and model.done is damaged
// (model.done unparseable, size or digest differing), or nullopt when it
// matches as far as `check` looks. Errors: store I/O failures.
Result<std::optional<std::string>> CheckEntryArtifact(Store& store, const EntryRef& entry,
                                                      std::string_view artifact_name, ArtifactCheck check);

// ---- entry-level operations -------------------------------------------------

// The state of one entry (see EntryState). `artifact_name` is the backend's
// artifact file name (model.neff, model.so). An entry with artifact and
// model.done is DONE when CheckEntryArtifact(check) finds nothing, else
// DAMAGED (LOCKED while a live process holds its lock). `own_lock_held`: the
// caller holds the entry's model.lock, which then does not make it LOCKED
// (another tool's held lock still does).
Result<EntryState> GetEntryState(Store& store, const EntryRef& entry, std::string_view artifact_name,
                                 ArtifactCheck check = ArtifactCheck::kSize, bool own_lock_held = false);

// The entry's HLO file name: kHloFile, or kLegacyHloFile when only that exists,
// or kStableHloFile when only that exists; nullopt when none.
Result<std::optional<std::string>> FindHloFile(Store& store, const EntryRef& entry);

// Writes compile_flags.json, then the HLO of a new entry (each atomically;
// in this order, so that an HLO is never seen without its flags). Existing
// files are left alone.
Status PutEntryInputs(Store& store, const EntryRef& entry, std::string_view hlo_bytes,
                      std::string_view compile_flags_json);

}  // namespace npc::cache
