// S3Store: the Neuron Persistent Cache in an S3 bucket (`s3://bucket/prefix`),
// the same layout as a local cache directory under the key prefix, so that
// every host of a cluster shares compiled graphs. It also reads caches that
// libneuronxla or `aws s3 cp` wrote, and they read it.
//
//   store path "a/b/c"  ->  object key "<prefix>/a/b/c"
//   a "directory"       ->  every key under "<dir>/" (there are no directory objects)
//
// Writes: WriteAtomic is one PUT; PutFileAtomic is one PUT or, for files
// larger than S3Config::multipart_threshold_bytes, a multipart upload. Either
// way an object appears whole or not at all, so the commit order of an entry
// (artifact, then model.done) carries over unchanged.
//
// Entry locks are lease objects, `<entry>/model.lock`, holding JSON
//   {"npc_lease": 1, "owner": {"host", "pid", "id"}, "ttl_seconds", "renewed_unix", "expires_unix", "serial"}
// - taken with a conditional PUT (If-None-Match: *): exactly one of several
//   racing hosts gets it (S3 answers the others 412 Precondition Failed);
// - renewed by a background thread every lease_renew_seconds with a PUT
//   conditional on the lease's ETag (If-Match), so a lease taken over by
//   someone else is never silently overwritten;
// - expired when not renewed for ttl_seconds: the age is the server's own
//   Date minus the object's Last-Modified, so clocks of hosts need not agree;
// - taken over when expired with a PUT conditional on the ETag read (If-Match):
//   two hosts taking over the same expired lease cannot both win. Servers
//   without conditional overwrites (501) fall back to a DELETE conditional
//   on the ETag, then the create; where the server also ignores If-Match on
//   DELETE, a holder that renews between our read and our DELETE loses its
//   lease (window: one round trip after a lease expired);
// - released by a DELETE conditional on the ETag (a successor's lease stays).
// After a successful create or takeover the lease is read back and must name
// us (one GET): a defence for servers whose conditional PUT is not atomic
// (moto checks, then writes, without a lock); S3 itself does not need it.
// A holder that cannot renew for a whole TTL (frozen, partitioned) loses its
// lease and logs so; its compile may then be repeated by the next holder,
// which is harmless (both upload the same artifact, each PUT is atomic).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cache/s3_client.h"
#include "npc/cache.h"

namespace npc::cache {

class S3Store : public Store {
 public:
  explicit S3Store(s3::S3Config config);
  ~S3Store() override;

  // "s3://bucket/prefix"
  std::string url() const override;
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
  // Always nullopt: use LocalCopy (read_through.h) for a local file.
  std::optional<std::string> LocalPath(const std::string& path) const override;

  // Downloads `path` into the local file `local_file` (created or
  // truncated; the caller renames it into place). Streams: the object is
  // never held in memory whole. Returns the number of bytes written.
  Result<int64_t> Download(const std::string& path, const std::string& local_file);

  // Who holds the lease of `entry_dir`, for messages ("host h pid 12 (id ...),
  // renewed 3 s ago, expires in 57 s"); nullopt when there is none.
  Result<std::optional<std::string>> DescribeLock(const std::string& entry_dir);

  // The object key of a store path.
  std::string Key(const std::string& path) const;
  const s3::S3Config& config() const;
  s3::S3Stats stats() const;
  s3::S3Client& client() { return *client_; }

 private:
  struct Lease;
  Result<Lease> ReadLease(const std::string& key);
  struct Listing;
  Result<Listing> ListKeys(const std::string& key_prefix, bool delimited);
  Status MultipartUpload(const std::string& key, const std::string& local_path, int64_t size);
  Status DeleteKeys(const std::vector<std::string>& keys);

  std::shared_ptr<s3::S3Client> client_;
};

// An S3Store for `url` configured from the environment (s3_client.h,
// S3ConfigFromEnvironment). Errors: a bad URL or configuration.
Result<std::unique_ptr<S3Store>> OpenS3Store(const std::string& url);

}  // namespace npc::cache
