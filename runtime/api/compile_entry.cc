// Compiling one cache entry (see npc/compiler.h, CompileEntry).
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cache/read_through.h"
#include "compilers/process.h"
#include "npc/compiler.h"
#include "npc/log.h"
#include "util/atomic_file.h"
#include "util/digest.h"

namespace npc {
namespace fs = std::filesystem;
using cache::EntryState;
using Outcome = EntryCompileResult::Status;

std::string_view EntryCompileStatusName(EntryCompileResult::Status status) {
  switch (status) {
    case Outcome::kCompiled: return "compiled";
    case Outcome::kAlreadyDone: return "already done";
    case Outcome::kFailed: return "failed";
    case Outcome::kCachedFailure: return "cached failure";
    case Outcome::kLocked: return "locked";
    case Outcome::kNoHlo: return "no HLO";
    case Outcome::kInterrupted: return "interrupted";
  }
  return "unknown";
}

namespace {

constexpr std::string_view kWorkDirPrefix = ".npc-work-";

// A private work directory: inside the entry for a local store (so the
// artifact moves in with a rename), else under TMPDIR. Removed when done.
class WorkDir {
 public:
  ~WorkDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  Status Create(const std::string& parent) {
    std::string tmpl = parent + "/" + std::string(kWorkDirPrefix) + std::to_string(getpid()) + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return MakeError("cannot create a work directory in " + parent);
    path_ = tmpl;
    return {};
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string FailureLog(const CompileOutcome& outcome, int attempts) {
  std::string log = "command: " + outcome.command + "\n";
  log += "exit status: " + std::to_string(outcome.exit_status) + "\n";
  log += "attempts: " + std::to_string(attempts) + "\n";
  log += "compile time: " + std::to_string(outcome.seconds) + " s\n\n";
  log += outcome.output;
  if (!log.empty() && log.back() != '\n') log += '\n';
  return log;
}

// Moves (or copies, across file systems) the compiled artifact to `kept`,
// atomically and durably: a reader sees all of it or nothing.
Status KeepArtifact(const std::string& artifact_path, const std::string& kept) {
  if (auto st = util::PutFileAtomic(artifact_path, kept, /*consume=*/true); !st) {
    return MakeError("cannot keep the compiled artifact at " + kept + ": " + st.error().message);
  }
  return {};
}

}  // namespace

std::string KeptArtifactPath(const std::string& store_url, const cache::EntryRef& entry,
                             const std::string& artifact_name) {
  return cache::DefaultLocalCopyRoot(store_url) + "/" + entry.dir() + "/" + artifact_name + ".not-uploaded";
}

Result<EntryCompileResult> CompileEntry(cache::Store& store, Compiler& compiler, const cache::EntryRef& entry,
                                        const EntryCompileOptions& options) {
  const std::string artifact = compiler.ArtifactName();
  EntryCompileResult result;

  // Decides from the current state whether there is anything to do.
  auto settled = [&](EntryState state) -> std::optional<Outcome> {
    if (state == EntryState::kDone) return Outcome::kAlreadyDone;
    if (state == EntryState::kFailed && !options.retry_failed_compilation) return Outcome::kCachedFailure;
    return std::nullopt;
  };
  auto finish_settled = [&](Outcome outcome) -> Result<EntryCompileResult> {
    result.status = outcome;
    if (outcome == Outcome::kAlreadyDone && !store.LocalPath(entry.dir())) {
      // Another process completed the entry: an artifact this host kept from
      // a failed upload is not needed any more.
      std::error_code ec;
      fs::remove(KeptArtifactPath(store.url(), entry, artifact), ec);
    }
    if (outcome == Outcome::kCachedFailure) {
      auto log = store.Read(entry.file(cache::kLogFile));
      result.log = log ? *log : "";
    }
    return result;
  };

  // Digests are checked: a DONE entry whose artifact is damaged is compiled again.
  constexpr auto kCheck = cache::ArtifactCheck::kDigest;
  auto state = cache::GetEntryState(store, entry, artifact, kCheck);
  if (!state) return state.error();
  if (auto s = settled(*state)) return finish_settled(*s);

  // Take the lock, waiting for another compiler of this entry if asked to.
  // Holding npc's lock, another tool's held lock (libneuronxla's) still means
  // someone else is at work on the entry: let go and wait like for ours.
  std::unique_ptr<cache::EntryLock> lock;
  auto wait_start = std::chrono::steady_clock::now();
  for (;;) {
    if (InterruptSignal() != 0) {
      result.status = Outcome::kInterrupted;
      return result;
    }
    auto taken = store.TryLock(entry.dir());
    if (!taken) return taken.error();
    if (*taken) {
      // Re-check under the lock: another process may have finished it
      // meanwhile (DONE, or FAILED: reported as the cached failure).
      state = cache::GetEntryState(store, entry, artifact, kCheck, /*own_lock_held=*/true);
      if (!state) return state.error();
      if (*state != EntryState::kLocked) {
        lock = std::move(*taken);
        break;
      }
      taken->reset();
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
    if (!options.wait_for_lock || waited > options.lock_wait_seconds) {
      result.status = Outcome::kLocked;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(store.LocalPath("") ? 100 : 1000));
  }
  if (auto s = settled(*state)) return finish_settled(*s);
  auto done_exists = store.Exists(entry.file(cache::kDoneFile));
  if (!done_exists) return done_exists.error();
  Result<std::optional<std::string>> why = std::optional<std::string>();
  if (*done_exists) why = cache::CheckEntryArtifact(store, entry, artifact, kCheck);
  if (!why) return why.error();
  if (why->has_value()) {
    // Readers must not meet the damaged artifact with a done file meanwhile:
    // model.done goes first, then the artifact; the compile below commits anew
    // (or, failing, leaves a FAILED entry).
    result.damage = **why;
    log::Warning(log::kCache, "Damaged artifact in " + store.url() + "/" + entry.dir() + ": " + result.damage +
                                  "; compiling the entry again");
    if (auto st = store.Remove(entry.file(cache::kDoneFile)); !st) return st.error();
    if (auto st = store.Remove(entry.file(artifact)); !st) return st.error();
  }

  auto hlo_name = cache::FindHloFile(store, entry);
  if (!hlo_name) return hlo_name.error();
  if (!hlo_name->has_value()) {
    result.status = Outcome::kNoHlo;
    return result;
  }

  // Work directory; remove any left by a compile that was killed (we hold
  // the lock, so no live process uses them).
  std::optional<std::string> local_entry = store.LocalPath(entry.dir());
  if (local_entry) {
    auto names = store.List(entry.dir());
    if (names) {
      for (const auto& name : *names) {
        if (name.rfind(kWorkDirPrefix, 0) == 0) (void)store.RemoveTree(entry.file(name));
      }
    }
  }
  // Commit: artifact (fsynced, renamed, directory fsynced), then model.done
  // with its size and SHA-256 (npc/cache.h); an old failure log goes last. A
  // remote store uploads from the kept copy (KeptArtifactPath), which is
  // removed only once model.done is written: if an upload fails, or this
  // process dies in the middle, the next compile of the entry finds it.
  const std::string kept = local_entry ? "" : KeptArtifactPath(store.url(), entry, artifact);
  auto commit = [&](const std::string& artifact_file) -> Status {
    // The record is taken before the move (a local store consumes the file).
    auto digest = util::Sha256File(artifact_file);
    if (!digest) return digest.error();
    const cache::ArtifactRecord record{artifact, digest->size, digest->sha256};
    if (auto st = store.PutFileAtomic(entry.file(artifact), artifact_file); !st) return st;
    if (auto st = store.WriteAtomic(entry.file(cache::kDoneFile), cache::DoneFileText(record)); !st) return st;
    if (!kept.empty()) {
      std::error_code ec;
      fs::remove(kept, ec);
    }
    return {};
  };
  // An artifact compiled by an earlier run that could not upload it: upload it now.
  if (!kept.empty() && fs::exists(kept)) {
    if (auto st = commit(kept); !st) {
      return MakeError("compiled by an earlier run, still not uploaded: " + st.error().message +
                       "; the artifact stays at " + kept + " for the next compile of this entry");
    }
    if (auto st = store.Remove(entry.file(cache::kLogFile)); !st) return st.error();
    result.status = Outcome::kCompiled;
    result.uploaded_kept_artifact = true;
    return result;
  }

  WorkDir work;
  if (auto st = work.Create(local_entry ? *local_entry : fs::temp_directory_path().string()); !st) return st.error();

  CompileJob job;
  job.work_dir = work.path();
  job.artifact_path = work.path() + "/" + artifact;
  if (local_entry) {
    job.hlo_path = *store.LocalPath(entry.file(**hlo_name));
  } else {
    auto bytes = store.Read(entry.file(**hlo_name));
    if (!bytes) return bytes.error();
    job.hlo_path = work.path() + "/" + **hlo_name;
    cache::LocalStore scratch(work.path());
    if (auto st = scratch.WriteAtomic(**hlo_name, *bytes); !st) return st.error();
  }

  CompileOutcome outcome;
  auto flags_text = store.Read(entry.file(cache::kFlagsFile));
  std::optional<std::string> input_error;
  if (flags_text) {
    auto flags = cache::ParseCompileFlagsJson(*flags_text, store.url() + "/" + entry.file(cache::kFlagsFile));
    if (flags) job.flags = *flags;
    else input_error = flags.error().message;
  } else {
    auto exists = store.Exists(entry.file(cache::kFlagsFile));
    if (exists && *exists) return flags_text.error();  // an I/O error, not a missing file
  }

  if (input_error) {
    outcome.command = "(not run)";
    outcome.exit_status = 1;
    outcome.output = *input_error + "\n";
    result.attempts = 0;
  } else {
    for (int attempt = 0; attempt <= std::max(0, options.max_retries); ++attempt) {
      std::error_code ec;
      fs::remove(job.artifact_path, ec);
      outcome = compiler.Compile(job);
      ++result.attempts;
      result.compile_seconds += outcome.seconds;
      result.peak_rss_bytes = std::max(result.peak_rss_bytes, outcome.peak_rss_bytes);
      if (outcome.ok) break;
      if (InterruptSignal() != 0) {
        // Stopped by the signal (or never started): not a compile failure.
        result.status = Outcome::kInterrupted;
        return result;
      }
    }
  }

  if (outcome.ok) {
    if (kept.empty()) {
      if (auto st = commit(job.artifact_path); !st) return st.error();
    } else {
      if (auto st = KeepArtifact(job.artifact_path, kept); !st) return st.error();
      if (auto st = commit(kept); !st) {
        return MakeError("compiled, but not uploaded: " + st.error().message + "; the artifact is kept at " + kept +
                         " and the next compile of this entry uploads it");
      }
    }
    if (auto st = store.Remove(entry.file(cache::kLogFile)); !st) return st.error();
    result.status = Outcome::kCompiled;
    return result;
  }
  result.log = FailureLog(outcome, result.attempts);
  if (auto st = store.WriteAtomic(entry.file(cache::kLogFile), result.log); !st) return st.error();
  result.status = Outcome::kFailed;
  return result;
}

}  // namespace npc
