// A local read-through copy of store objects: programs that need a real file
// (dlopen of a host-backend artifact, a NEFF handed to the Neuron runtime)
// get one for any store.
//
// Usage (e.g. the runtime loading an artifact of a DONE entry):
//   auto path = cache::LocalCopy(store, entry.file(artifact_name), cache::DefaultLocalCopyRoot(store.url()));
//   if (!path) return path.error();
//   ... open *path ...
#pragma once

#include <string>

#include "npc/cache.h"
#include "npc/result.h"

namespace npc::cache {

// A local file holding the store object `path`:
//  - the store's own file when it has one (Store::LocalPath: a local store);
//  - else `local_root/<path>`, downloaded once (to a temporary name in the
//    same directory, then renamed: readers never see a partial file) and
//    reused while its size equals the object's size. Each call costs one
//    size request to the store; a download streams to disk.
// Concurrent callers (threads or processes) may both download; the last
// rename wins and both results are complete files.
// Errors: the object is missing or cannot be read, the local file cannot be
// written; messages name the store URL and the local path.
Result<std::string> LocalCopy(Store& store, const std::string& path, const std::string& local_root);
// The same when the caller knows the object's size (e.g. from model.done's
// record): no size request; a local file of that size is reused (the caller
// checks its digest), else the object is downloaded.
Result<std::string> LocalCopy(Store& store, const std::string& path, const std::string& local_root,
                              int64_t known_size);

// The default local root for the store at `store_url`: $NPC_LOCAL_CACHE_DIR
// when set, else $XDG_CACHE_HOME/npc/<sanitized url> (XDG_CACHE_HOME defaults
// to ~/.cache), where <sanitized url> keeps [A-Za-z0-9._-] of the URL, turns
// every other byte into '_', and ends with 8 hex digits of the URL's SHA-256
// ("s3://bkt/pfx" -> "s3___bkt_pfx-1a2b3c4d").
std::string DefaultLocalCopyRoot(const std::string& store_url);

}  // namespace npc::cache
