// Atomic, durable file writes: the one way npc writes a file that someone
// else may read (cache entries, local copies, build.ninja, result records,
// manifests, stamps).
//
// Every write goes to a temporary file in the target's directory
// (".<name>.tmp.<pid>.<random>", created with O_EXCL, so concurrent writers
// never share one), which is fsynced, renamed over the target, and then the
// directory is fsynced. A reader sees the old file or the whole new one, never
// a partial one, and after a crash or power loss a file that was renamed into
// place has all its bytes. Missing parent directories are created. On error
// the temporary file is removed and the message names the file and the
// failing step (create, write, sync, rename).
#pragma once

#include <string>
#include <string_view>

#include "npc/result.h"

namespace npc::util {

// A fresh, unused temporary name for a file that will be renamed to `path`:
// "<dir of path>/.<name of path>.tmp.<pid>.<16 random hex digits>".
std::string TempPathFor(const std::string& path);

// Writes `data` to `path` atomically and durably (see above).
Status WriteFileAtomic(const std::string& path, std::string_view data);

// Puts the existing local file `source` at `path` atomically and durably.
// With `consume`, `source` is renamed when it is on the same file system
// (cheap) and removed after a copy otherwise; without, it is copied and left
// in place. The bytes are fsynced before the rename, the directory after.
Status PutFileAtomic(const std::string& source, const std::string& path, bool consume);

// Renames `from` (a complete, already fsynced file) to `to` and fsyncs the
// directory of `to`. Errors name both paths.
Status RenameDurably(const std::string& from, const std::string& to);

// fsyncs a file's data (opened read-only) or a directory's entries.
Status SyncFile(const std::string& path);
Status SyncDirectory(const std::string& dir);

}  // namespace npc::util
