// S3Store: the cache in an S3 bucket (see s3_store.h).
#include "cache/s3_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "npc/log.h"

namespace npc::cache {
namespace {

using s3::S3Client;
using s3::S3Request;
using s3::S3Response;

double NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string RandomId() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string Base64Md5(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  unsigned char out[64];
  int n = EVP_EncodeBlock(out, md, static_cast<int>(len));
  return std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n));
}

std::string ErrnoText() { return std::strerror(errno); }

bool Is2xx(const S3Response& r) { return r.status >= 200 && r.status < 300; }

// A conditional request the server does not implement.
bool NotImplemented(const S3Response& r) {
  return r.status == 501 || r.error_code() == "NotImplemented";
}

struct LeaseOwner {
  std::string host;
  int64_t pid = 0;
  std::string id;
  std::string Describe() const {
    return "host " + (host.empty() ? std::string("?") : host) + " pid " + std::to_string(pid) + " (id " +
           (id.empty() ? std::string("?") : id) + ")";
  }
};

std::string LeaseBody(const LeaseOwner& owner, double ttl, int64_t serial) {
  double now = NowUnix();
  nlohmann::json j = {
      {"npc_lease", 1},
      {"owner", {{"host", owner.host}, {"pid", owner.pid}, {"id", owner.id}}},
      {"ttl_seconds", ttl},
      {"renewed_unix", now},
      {"expires_unix", now + ttl},
      {"serial", serial},
  };
  return j.dump() + "\n";
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", s);
  return buf;
}

}  // namespace

// The lease object of an entry as read from the store.
struct S3Store::Lease {
  bool exists = false;
  std::string etag;
  LeaseOwner owner;
  double ttl = 0;
  double age = 0;  // seconds since it was last written (server clock when available)
  bool expired = false;
};

struct S3Store::Listing {
  std::vector<std::string> keys;      // Contents/Key
  std::vector<std::string> prefixes;  // CommonPrefixes/Prefix
};

namespace {

// A held lease; renews it in a background thread until destroyed.
class S3EntryLock : public EntryLock {
 public:
  S3EntryLock(std::shared_ptr<S3Client> client, std::string key, LeaseOwner owner, std::string etag, double ttl,
              double renew_every)
      : client_(std::move(client)), key_(std::move(key)), owner_(std::move(owner)), etag_(std::move(etag)),
        ttl_(ttl), renew_every_(renew_every) {
    thread_ = std::thread([this] { RenewLoop(); });
  }

  ~S3EntryLock() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (lost_) return;
    S3Request del;
    del.method = "DELETE";
    del.key = key_;
    del.headers = {{"If-Match", etag_}};
    auto r = client_->Send(del);
    if (r && NotImplemented(*r)) {
      del.headers.clear();
      r = client_->Send(del);
    }
    if (!r) {
      log::Warning(log::kCache, "cannot release the lock " + client_->S3Url(key_) + ": " + r.error().message +
                                    " (it expires by itself in " + Seconds(ttl_) + ")");
    } else if (!Is2xx(*r) && r->status != 404 && r->status != 412) {
      log::Warning(log::kCache, "cannot release the lock " + client_->S3Url(key_) + ": " + client_->Describe(del, *r) + " (it expires by itself in " +
                                    Seconds(ttl_) + ")");
    }
  }

 private:
  void RenewLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait_for(lock, std::chrono::duration<double>(renew_every_), [this] { return stop_; });
      if (stop_) return;
      lock.unlock();
      Renew();
      lock.lock();
      if (lost_) return;
    }
  }

  void Renew() {
    std::string body = LeaseBody(owner_, ttl_, ++serial_);
    S3Request put;
    put.method = "PUT";
    put.key = key_;
    put.body = body;
    put.headers = {{"Content-Type", "application/json"}, {"If-Match", etag_}};
    auto r = client_->Send(put);
    if (r && NotImplemented(*r)) {
      put.headers = {{"Content-Type", "application/json"}};
      r = client_->Send(put);
    }
    if (!r) {
      log::Warning(log::kCache, "cannot renew the lock " + client_->S3Url(key_) + ": " + r.error().message);
      return;
    }
    if (Is2xx(*r)) {
      std::string etag = r->header("etag");
      std::lock_guard<std::mutex> g(mu_);
      if (!etag.empty()) etag_ = etag;
      return;
    }
    if (r->status == 412 || r->status == 404 || r->status == 409) {
      std::lock_guard<std::mutex> g(mu_);
      lost_ = true;
      log::Warning(log::kCache, "lost the lock " + client_->S3Url(key_) +
                                    ": it was taken over or removed while held (not renewed within " + Seconds(ttl_) +
                                    "?)");
      return;
    }
    log::Warning(log::kCache, "cannot renew the lock " + client_->S3Url(key_) + ": " + client_->Describe(put, *r));
  }

  std::shared_ptr<S3Client> client_;
  std::string key_;
  LeaseOwner owner_;
  std::string etag_;
  double ttl_;
  double renew_every_;
  int64_t serial_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool lost_ = false;
  std::thread thread_;
};

}  // namespace

S3Store::S3Store(s3::S3Config config) : client_(std::make_shared<S3Client>(std::move(config))) {}
S3Store::~S3Store() = default;

const s3::S3Config& S3Store::config() const { return client_->config(); }
s3::S3Stats S3Store::stats() const { return client_->stats(); }
std::string S3Store::url() const { return config().url(); }
std::optional<std::string> S3Store::LocalPath(const std::string&) const { return std::nullopt; }

std::string S3Store::Key(const std::string& path) const {
  const std::string& prefix = config().prefix;
  if (path.empty()) return prefix;
  return prefix.empty() ? path : prefix + "/" + path;
}

Result<S3Store::Listing> S3Store::ListKeys(const std::string& key_prefix, bool delimited) {
  Listing listing;
  std::string token;
  for (;;) {
    S3Request req;
    req.key = "";
    req.query = {{"list-type", "2"}, {"max-keys", std::to_string(std::clamp(config().list_page_size, 1, 1000))}};
    if (!key_prefix.empty()) req.query.emplace_back("prefix", key_prefix);
    if (delimited) req.query.emplace_back("delimiter", "/");
    if (!token.empty()) req.query.emplace_back("continuation-token", token);
    auto r = client_->Send(req);
    if (!r) return r.error();
    if (r->status != 200) {
      std::string message = client_->Describe(req, *r);
      return MakeError("cannot list " + client_->S3Url(key_prefix) + ": " + message);
    }
    for (std::string_view contents : s3::XmlElements(r->body, "Contents")) {
      for (auto& key : s3::XmlTexts(contents, "Key")) listing.keys.push_back(std::move(key));
    }
    for (std::string_view common : s3::XmlElements(r->body, "CommonPrefixes")) {
      for (auto& p : s3::XmlTexts(common, "Prefix")) listing.prefixes.push_back(std::move(p));
    }
    auto truncated = s3::XmlTexts(r->body, "IsTruncated");
    auto next = s3::XmlTexts(r->body, "NextContinuationToken");
    if (truncated.empty() || truncated.front() != "true") break;
    if (next.empty() || next.front().empty() || next.front() == token) {
      return MakeError("cannot list " + client_->S3Url(key_prefix) +
                       ": the server said the listing is truncated but gave no continuation token");
    }
    token = next.front();
  }
  return listing;
}

Result<std::vector<std::string>> S3Store::List(const std::string& path) {
  std::string dir = Key(path);
  if (!dir.empty()) dir += "/";
  auto listing = ListKeys(dir, true);
  if (!listing) return listing.error();
  std::set<std::string> names;
  for (const auto& key : listing->keys) {
    if (key.size() > dir.size() && key.compare(0, dir.size(), dir) == 0) names.insert(key.substr(dir.size()));
  }
  for (const auto& p : listing->prefixes) {
    if (p.size() > dir.size() + 1 && p.compare(0, dir.size(), dir) == 0 && p.back() == '/') {
      names.insert(p.substr(dir.size(), p.size() - dir.size() - 1));
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<bool> S3Store::Exists(const std::string& path) {
  const std::string key = Key(path);
  // One delimited listing with the key itself as prefix answers both "is
  // there an object" and "is there anything under key/".
  auto listing = ListKeys(key, true);
  if (!listing) return listing.error();
  if (key.empty()) return true;  // the bucket root (the listing proved the bucket exists)
  for (const auto& k : listing->keys) {
    if (k == key) return true;
  }
  for (const auto& p : listing->prefixes) {
    if (p == key + "/") return true;
  }
  return false;
}

Result<std::string> S3Store::Read(const std::string& path) {
  S3Request req;
  req.key = Key(path);
  auto r = client_->Send(req);
  if (!r) return r.error();
  if (r->status == 200) return std::move(r->body);
  if (r->status == 404 && r->error_code() != "NoSuchBucket") {
    return MakeError("cannot read " + client_->S3Url(req.key) + ": no such object");
  }
  return MakeError("cannot read " + client_->S3Url(req.key) + ": " + client_->Describe(req, *r));
}

Result<int64_t> S3Store::Size(const std::string& path) {
  // A one-byte ranged GET rather than a HEAD: error responses then carry a
  // body that says why (NoSuchKey vs NoSuchBucket, which key was refused).
  S3Request req;
  req.key = Key(path);
  req.headers = {{"Range", "bytes=0-0"}};
  req.max_body_bytes = 1;
  auto r = client_->Send(req);
  if (!r) return r.error();
  if (r->status == 206) {
    std::string range = r->header("content-range");  // "bytes 0-0/1234"
    size_t slash = range.rfind('/');
    if (slash != std::string::npos && range.substr(slash + 1) != "*") return std::stoll(range.substr(slash + 1));
    return std::stoll("0" + r->header("content-length"));
  }
  if (r->status == 200) return std::stoll("0" + r->header("content-length"));
  if (r->status == 416) {  // an empty object has no byte 0
    auto actual = s3::XmlTexts(r->body, "ActualObjectSize");
    return actual.empty() ? 0 : std::stoll("0" + actual.front());
  }
  if (r->status == 404 && r->error_code() != "NoSuchBucket") {
    return MakeError("cannot get the size of " + client_->S3Url(req.key) + ": no such object");
  }
  return MakeError("cannot get the size of " + client_->S3Url(req.key) + ": " + client_->Describe(req, *r));
}

Result<int64_t> S3Store::Download(const std::string& path, const std::string& local_file) {
  int fd = open(local_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError("cannot create " + local_file + ": " + ErrnoText());
  int64_t written = 0;
  std::string write_error;
  S3Request req;
  req.key = Key(path);
  req.reset_sink = [&] {
    written = 0;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) write_error = ErrnoText();
  };
  req.sink = [&](std::string_view piece) {
    while (!piece.empty()) {
      ssize_t n = write(fd, piece.data(), piece.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        write_error = ErrnoText();
        return false;
      }
      piece.remove_prefix(static_cast<size_t>(n));
      written += n;
    }
    return true;
  };
  auto r = client_->Send(req);
  bool synced = fsync(fd) == 0;
  close(fd);
  if (!write_error.empty()) return MakeError("cannot write " + local_file + ": " + write_error);
  if (!r) return r.error();
  if (r->status == 200) {
    if (!synced) return MakeError("cannot sync " + local_file + ": " + ErrnoText());
    return written;
  }
  if (r->status == 404 && r->error_code() != "NoSuchBucket") {
    return MakeError("cannot download " + client_->S3Url(req.key) + ": no such object");
  }
  return MakeError("cannot download " + client_->S3Url(req.key) + ": " + client_->Describe(req, *r));
}

Status S3Store::WriteAtomic(const std::string& path, std::string_view data) {
  S3Request req;
  req.method = "PUT";
  req.key = Key(path);
  req.body = data;
  auto r = client_->Send(req);
  if (!r) return r.error();
  if (!Is2xx(*r)) return MakeError("cannot write " + client_->S3Url(req.key) + ": " + client_->Describe(req, *r));
  return {};
}

Status S3Store::PutFileAtomic(const std::string& path, const std::string& local_path) {
  struct stat st;
  if (stat(local_path.c_str(), &st) != 0) return MakeError("cannot stat " + local_path + ": " + ErrnoText());
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (size > config().multipart_threshold_bytes) return MultipartUpload(Key(path), local_path, size);
  std::string data;
  data.resize(static_cast<size_t>(size));
  int fd = open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot open " + local_path + ": " + ErrnoText());
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return MakeError("cannot read " + local_path + ": " + (n == 0 ? std::string("file shrank") : ErrnoText()));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return WriteAtomic(path, data);
}

Status S3Store::MultipartUpload(const std::string& key, const std::string& local_path, int64_t size) {
  // S3 allows 10000 parts: grow the part size for huge files.
  int64_t part_size = std::max<int64_t>(config().multipart_part_bytes, (size + 9999) / 10000);
  S3Request create;
  create.method = "POST";
  create.key = key;
  create.query = {{"uploads", ""}};
  auto created = client_->Send(create);
  if (!created) return created.error();
  auto ids = s3::XmlTexts(created->body, "UploadId");
  if (created->status != 200 || ids.empty() || ids.front().empty()) {
    return MakeError("cannot start the multipart upload of " + client_->S3Url(key) + ": " + client_->Describe(create, *created));
  }
  const std::string upload_id = ids.front();

  auto abort = [&](Error error) -> Status {
    S3Request req;
    req.method = "DELETE";
    req.key = key;
    req.query = {{"uploadId", upload_id}};
    auto r = client_->Send(req);
    if (!r || (!Is2xx(*r) && r->status != 404)) {
      error.message += " (and aborting the multipart upload " + upload_id + " failed: " +
                       (r ? client_->Describe(req, *r) : r.error().message) + ")";
    }
    return error;
  };

  int fd = open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return abort(MakeError("cannot open " + local_path + ": " + ErrnoText()));
  std::string complete = "<CompleteMultipartUpload>";
  std::string part;
  int part_number = 0;
  for (int64_t offset = 0; offset < size; offset += part_size) {
    ++part_number;
    part.resize(static_cast<size_t>(std::min(part_size, size - offset)));
    size_t done = 0;
    while (done < part.size()) {
      ssize_t n = pread(fd, part.data() + done, part.size() - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string why = n == 0 ? "file shrank" : ErrnoText();
        close(fd);
        return abort(MakeError("cannot read " + local_path + ": " + why));
      }
      done += static_cast<size_t>(n);
    }
    S3Request put;
    put.method = "PUT";
    put.key = key;
    put.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
    put.body = part;
    auto r = client_->Send(put);
    if (!r) {
      close(fd);
      return abort(r.error());
    }
    std::string etag = r->header("etag");
    if (r->status != 200 || etag.empty()) {
      close(fd);
      return abort(MakeError("cannot upload part " + std::to_string(part_number) + " of " + client_->S3Url(key) + ": " + client_->Describe(put, *r)));
    }
    complete += "<Part><PartNumber>" + std::to_string(part_number) + "</PartNumber><ETag>" + s3::XmlEscape(etag) +
                "</ETag></Part>";
  }
  close(fd);
  complete += "</CompleteMultipartUpload>";
  S3Request finish;
  finish.method = "POST";
  finish.key = key;
  finish.query = {{"uploadId", upload_id}};
  finish.body = complete;
  auto r = client_->Send(finish);
  if (!r) return abort(r.error());
  // S3 may answer 200 and still report an error in the body.
  if (r->status != 200 || r->body.find("<Error>") != std::string::npos) {
    return abort(MakeError("cannot complete the multipart upload of " + client_->S3Url(key) + ": " + client_->Describe(finish, *r)));
  }
  return {};
}

Status S3Store::Remove(const std::string& path) {
  S3Request req;
  req.method = "DELETE";
  req.key = Key(path);
  auto r = client_->Send(req);
  if (!r) return r.error();
  if (Is2xx(*r) || (r->status == 404 && r->error_code() != "NoSuchBucket")) return {};
  return MakeError("cannot remove " + client_->S3Url(req.key) + ": " + client_->Describe(req, *r));
}

Status S3Store::DeleteKeys(const std::vector<std::string>& keys) {
  for (size_t start = 0; start < keys.size(); start += 1000) {
    std::string body = "<Delete><Quiet>true</Quiet>";
    for (size_t i = start; i < std::min(keys.size(), start + 1000); ++i) {
      body += "<Object><Key>" + s3::XmlEscape(keys[i]) + "</Key></Object>";
    }
    body += "</Delete>";
    S3Request req;
    req.method = "POST";
    req.key = "";
    req.query = {{"delete", ""}};
    req.headers = {{"Content-MD5", Base64Md5(body)}};
    req.body = body;
    auto r = client_->Send(req);
    if (!r) return r.error();
    if (r->status != 200) return MakeError("cannot delete objects in " + client_->S3Url(config().prefix) + ": " + client_->Describe(req, *r));
    for (std::string_view error : s3::XmlElements(r->body, "Error")) {
      auto key = s3::XmlTexts(error, "Key");
      auto code = s3::XmlTexts(error, "Code");
      return MakeError("cannot delete " + client_->S3Url(key.empty() ? "?" : key.front()) + ": " +
                       (code.empty() ? "error" : code.front()));
    }
  }
  return {};
}

Status S3Store::RemoveTree(const std::string& path) {
  const std::string key = Key(path);
  auto listing = ListKeys(key.empty() ? key : key + "/", false);
  if (!listing) return listing.error();
  std::vector<std::string> keys = std::move(listing->keys);
  if (!key.empty()) keys.push_back(key);
  return DeleteKeys(keys);
}

// ---- locks ---------------------------------------------------------------------

Result<S3Store::Lease> S3Store::ReadLease(const std::string& key) {
  Lease lease;
  S3Request req;
  req.key = key;
  auto r = client_->Send(req);
  if (!r) return r.error();
  if (r->status == 404 && r->error_code() != "NoSuchBucket") return lease;
  if (r->status != 200) return MakeError("cannot read the lock " + client_->S3Url(key) + ": " + client_->Describe(req, *r));
  lease.exists = true;
  lease.etag = r->header("etag");
  lease.ttl = config().lease_ttl_seconds;
  double renewed_unix = -1;
  auto j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (j.contains("ttl_seconds") && j["ttl_seconds"].is_number()) lease.ttl = j["ttl_seconds"].get<double>();
    if (j.contains("renewed_unix") && j["renewed_unix"].is_number()) renewed_unix = j["renewed_unix"].get<double>();
    if (j.contains("owner") && j["owner"].is_object()) {
      const auto& o = j["owner"];
      if (o.contains("host") && o["host"].is_string()) lease.owner.host = o["host"].get<std::string>();
      if (o.contains("pid") && o["pid"].is_number_integer()) lease.owner.pid = o["pid"].get<int64_t>();
      if (o.contains("id") && o["id"].is_string()) lease.owner.id = o["id"].get<std::string>();
    }
  }
  // Age on the server's clock when it says both times; else ours.
  auto server_now = s3::ParseHttpDate(r->header("date"));
  auto modified = s3::ParseHttpDate(r->header("last-modified"));
  if (server_now && modified) {
    lease.age = static_cast<double>(*server_now - *modified);
  } else if (renewed_unix >= 0) {
    lease.age = NowUnix() - renewed_unix;
  } else {
    lease.age = 0;  // nothing tells its age: treat it as fresh
  }
  lease.expired = lease.age > lease.ttl;
  return lease;
}

Result<std::unique_ptr<EntryLock>> S3Store::TryLock(const std::string& entry_dir) {
  const std::string key = Key(entry_dir + "/" + std::string(kLockFile));
  const double ttl = config().lease_ttl_seconds;
  const double renew = config().lease_renew_seconds > 0 ? config().lease_renew_seconds : ttl / 3;
  LeaseOwner owner{HostName(), static_cast<int64_t>(getpid()), RandomId()};
  const std::string body = LeaseBody(owner, ttl, 0);

  auto put = [&](std::vector<std::pair<std::string, std::string>> conditions) -> Result<S3Response> {
    S3Request req;
    req.method = "PUT";
    req.key = key;
    req.body = body;
    req.headers = {{"Content-Type", "application/json"}};
    for (auto& c : conditions) req.headers.push_back(std::move(c));
    auto r = client_->Send(req);
    if (!r) return r.error();
    bool gone = r->status == 404 && r->error_code() != "NoSuchBucket";  // If-Match on a vanished lease
    if (!Is2xx(*r) && r->status != 412 && r->status != 409 && !gone && !NotImplemented(*r)) {
      return MakeError("cannot write the lock " + client_->S3Url(key) + ": " + client_->Describe(req, *r));
    }
    return r;
  };
  // Holds when the lease now names us (the read-back of a create or takeover).
  auto confirm = [&]() -> Result<std::unique_ptr<EntryLock>> {
    auto lease = ReadLease(key);
    if (!lease) return lease.error();
    if (!lease->exists || lease->owner.id != owner.id) return std::unique_ptr<EntryLock>();
    return std::unique_ptr<EntryLock>(new S3EntryLock(client_, key, owner, lease->etag, ttl, renew));
  };

  for (int attempt = 0; attempt < 5; ++attempt) {
    auto created = put({{"If-None-Match", "*"}});
    if (!created) return created.error();
    if (Is2xx(*created)) return confirm();
    if (NotImplemented(*created)) {
      return MakeError("cannot lock " + client_->S3Url(key) +
                       ": the server does not support conditional writes (PUT If-None-Match), which S3 locks need");
    }
    // 412/409: a lease exists (or a racing write).
    auto lease = ReadLease(key);
    if (!lease) return lease.error();
    if (!lease->exists) continue;  // released meanwhile: try again
    if (lease->owner.id == owner.id) {
      // Our own create took effect but its answer was lost (and retried).
      return std::unique_ptr<EntryLock>(new S3EntryLock(client_, key, owner, lease->etag, ttl, renew));
    }
    if (!lease->expired) return std::unique_ptr<EntryLock>();
    log::Info(log::kCache, "Taking over the expired lock " + client_->S3Url(key) + " of " + lease->owner.Describe() +
                               " (not renewed for " + Seconds(lease->age) + ", TTL " + Seconds(lease->ttl) + ")");
    auto taken = put({{"If-Match", lease->etag}});
    if (!taken) return taken.error();
    if (Is2xx(*taken)) return confirm();
    if (NotImplemented(*taken)) {
      // No conditional overwrite: delete what we read (conditionally where
      // the server can), then create.
      S3Request del;
      del.method = "DELETE";
      del.key = key;
      del.headers = {{"If-Match", lease->etag}};
      auto r = client_->Send(del);
      if (r && NotImplemented(*r)) {
        del.headers.clear();
        r = client_->Send(del);
      }
      if (!r) return r.error();
      if (!Is2xx(*r) && r->status != 404 && r->status != 412) {
        return MakeError("cannot remove the expired lock " + client_->S3Url(key) + ": " + client_->Describe(del, *r));
      }
    }
    // 412/409/404: someone else renewed, took over or released it: look again.
  }
  return std::unique_ptr<EntryLock>();  // heavy contention: report it as held
}

Result<bool> S3Store::IsLocked(const std::string& entry_dir) {
  auto lease = ReadLease(Key(entry_dir + "/" + std::string(kLockFile)));
  if (!lease) return lease.error();
  return lease->exists && !lease->expired;
}

Result<std::optional<std::string>> S3Store::DescribeLock(const std::string& entry_dir) {
  auto lease = ReadLease(Key(entry_dir + "/" + std::string(kLockFile)));
  if (!lease) return lease.error();
  if (!lease->exists) return std::optional<std::string>();
  std::string text = lease->owner.Describe() + ", written " + Seconds(lease->age) + " ago, ";
  text += lease->expired ? "expired (TTL " + Seconds(lease->ttl) + ")"
                         : "expires in " + Seconds(lease->ttl - lease->age);
  return std::optional<std::string>(text);
}

Result<std::unique_ptr<S3Store>> OpenS3Store(const std::string& url) {
  auto config = s3::S3ConfigFromEnvironment(url);
  if (!config) return config.error();
  return std::make_unique<S3Store>(std::move(*config));
}

}  // namespace npc::cache
