// S3 requests for the S3 cache store: configuration (URL, endpoint, region,
// credentials), SigV4-signed HTTP through libcurl, retries, and error texts.
//
// Sources of the wire format: Amazon S3 API reference (GetObject, PutObject,
// DeleteObject(s), ListObjectsV2, multipart upload, conditional writes) and
// the AWS SDKs' shared configuration reference (environment variables,
// ~/.aws/credentials and ~/.aws/config).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "npc/result.h"

namespace npc::cache::s3 {

// How the bucket is put into request URLs.
enum class AddressingStyle {
  kAuto,     // virtual-hosted on AWS (path-style for bucket names with dots), path-style on a custom endpoint
  kPath,     // <endpoint>/<bucket>/<key>
  kVirtual,  // <scheme>://<bucket>.<endpoint host>/<key>
};

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // temporary credentials only
  std::string source;         // for messages: "environment", "profile 'x' in /root/.aws/credentials"
  bool empty() const { return access_key_id.empty(); }
};

// Everything an S3 store needs; S3ConfigFromEnvironment fills it the way the
// AWS CLI would, tests fill it directly.
struct S3Config {
  std::string bucket;
  std::string prefix;    // key prefix under the bucket, no leading or trailing '/'; may be empty
  std::string endpoint;  // "http://127.0.0.1:9000"; empty: AWS (https://s3.<region>.amazonaws.com)
  std::string region = "us-east-1";
  AddressingStyle addressing = AddressingStyle::kAuto;
  Credentials credentials;  // empty: requests are sent unsigned (public buckets)
  std::string ca_bundle;    // CA certificates file for https endpoints (AWS_CA_BUNDLE); empty: the system's

  // Files larger than this are uploaded with a multipart upload, in parts of
  // multipart_part_bytes (S3: parts of 5 MiB at least, except the last).
  // Environment: NPC_S3_MULTIPART_THRESHOLD, NPC_S3_MULTIPART_PART_SIZE (bytes).
  int64_t multipart_threshold_bytes = int64_t{8} << 20;
  int64_t multipart_part_bytes = int64_t{8} << 20;
  // max-keys of one ListObjectsV2 page (S3 caps it at 1000).
  int list_page_size = 1000;

  // Retries of a request that failed with a connection error, a timeout, a
  // 5xx (503 SlowDown included), 429 or a 400 RequestTimeout: at most
  // max_retries more attempts, sleeping a random time in
  // [0, min(retry_max_delay, retry_base * 2^n)] ("full jitter") before the
  // n-th retry, and none started after retry_max_total_seconds from the
  // first attempt. Environment: NPC_S3_MAX_RETRIES, NPC_S3_RETRY_MAX_SECONDS.
  int max_retries = 6;
  double retry_base_seconds = 0.25;
  double retry_max_delay_seconds = 8;
  double retry_max_total_seconds = 60;

  // A connection not made within this time fails (and is retried).
  // Environment: NPC_S3_CONNECT_TIMEOUT (seconds).
  double connect_timeout_seconds = 10;
  // A transfer that moves no byte for this long fails (and is retried).
  // Environment: NPC_S3_STALL_TIMEOUT (seconds).
  double stall_timeout_seconds = 60;

  // Entry locks (leases): a lease not renewed for lease_ttl_seconds is
  // expired and may be taken over; a holder renews it every
  // lease_renew_seconds (0: a third of the TTL).
  // Environment: NPC_S3_LOCK_TTL (seconds).
  double lease_ttl_seconds = 60;
  double lease_renew_seconds = 0;

  // "s3://bucket/prefix" (no trailing '/').
  std::string url() const;
};

// Splits "s3://bucket/some/prefix/" into bucket and prefix ("some/prefix").
// Errors: not an s3:// URL, an empty or invalid bucket name.
Result<std::pair<std::string, std::string>> ParseS3Url(const std::string& url);

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment (empty values count as unset).
EnvLookup ProcessEnvironment();

// S3Config for `url` from the environment, as the AWS CLI resolves it:
//  - endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS.
//  - region: AWS_REGION, else AWS_DEFAULT_REGION, else `region` of the
//    profile in the config file (AWS_CONFIG_FILE, default ~/.aws/config),
//    else us-east-1.
//  - credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
//    else the profile (AWS_PROFILE, else AWS_DEFAULT_PROFILE, else "default")
//    in the credentials file (AWS_SHARED_CREDENTIALS_FILE, default
//    ~/.aws/credentials), else the config file; else none (unsigned requests).
//  - CA bundle: AWS_CA_BUNDLE.
//  - addressing: NPC_S3_ADDRESSING_STYLE, else AWS_S3_ADDRESSING_STYLE
//    ("path", "virtual", "auto").
//  - the NPC_S3_* tuning variables documented on S3Config's fields.
// Errors: a bad URL, a malformed variable, only one of AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY set, a named profile (AWS_PROFILE) that exists in
// neither file. Not supported: credential_process, SSO, web identity, and
// the EC2/ECS metadata services (instance roles).
Result<S3Config> S3ConfigFromEnvironment(const std::string& url, const EnvLookup& env = ProcessEnvironment());

// ---- requests -----------------------------------------------------------------

struct S3Request {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string key;             // full object key (prefix included); empty: the bucket itself
  // Query parameters in any order; the client sorts and encodes them. A
  // parameter without a value is sent as "name=" (e.g. {"uploads", ""}).
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers ("If-None-Match", "*")
  std::string_view body;       // PUT/POST body (must outlive the call)
  // GET: called with each piece of the body instead of collecting it in
  // S3Response::body; `reset` is called before each attempt (a retry starts
  // over). Return false to abort the transfer (an error, not retried).
  std::function<bool(std::string_view piece)> sink;
  std::function<void()> reset_sink;
  // Stop reading the body after this many bytes (0: no limit); the response
  // still counts as received. For probes that only need headers.
  int64_t max_body_bytes = 0;
};

struct S3Response {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lowercased; last value wins
  std::string header(const std::string& lowercase_name) const;
  // <Code> and <Message> of an S3 error body (empty when none).
  std::string error_code() const;
  std::string error_message() const;
};

// Request counters, for tests and diagnostics.
struct S3Stats {
  int64_t requests = 0;  // HTTP requests sent (attempts, retries included)
  int64_t retries = 0;   // attempts after a retryable failure
  int64_t gave_up = 0;   // requests still failing (transport error, 5xx, throttling) when the retries were spent
};

// Sends S3 requests for one bucket. Thread-safe; keeps connections alive
// across requests (a small pool of curl handles).
class S3Client {
 public:
  explicit S3Client(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const { return config_; }

  // Sends `request`, retrying retryable failures (see S3Config). Returns the
  // response of every final HTTP status (2xx, 3xx, 4xx other than 429 and
  // RequestTimeout); callers decide what a 404 or a 412 means and turn other
  // statuses into errors with Describe().
  // Errors: transport failures and retryable statuses still failing when
  // the retries are spent, naming the URL, the attempts and the last cause.
  Result<S3Response> Send(const S3Request& request);

  // One clear message for an unexpected response: the cause, with what to
  // check for the common ones (bad credentials, missing bucket, wrong region,
  // clock skew, expired token), then "[METHOD <http url> -> HTTP <status>:
  // <S3's message>]". Callers put the s3:// URL of the object in front.
  std::string Describe(const S3Request& request, const S3Response& response) const;

  // "s3://bucket/key" for messages.
  std::string S3Url(const std::string& key) const;
  // The HTTP URL `request` goes to (current encoding style), for messages.
  std::string HttpUrl(const S3Request& request) const;

  S3Stats stats() const;

 private:
  void* AcquireHandle();
  void ReleaseHandle(void* handle);
  std::string BuildUrl(const S3Request& request, bool compat) const;
  Result<S3Response> Perform(const S3Request& request, bool compat, std::string* transport_error, bool* retryable);

  S3Config config_;
  std::mutex mu_;
  std::vector<void*> idle_handles_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> gave_up_{0};
  // Set once a request signed with strict SigV4 URI encoding was refused
  // and the same request with werkzeug-style encoding ('/' and '+' etc. left
  // raw) was accepted: a server that verifies signatures over its decoded
  // URL (moto). From then on every URL is built that way.
  std::atomic<bool> compat_encoding_{false};
};

// S3's URI encoding (SigV4): unreserved characters (A-Z a-z 0-9 - _ . ~) as
// they are, every other byte as %XX; '/' kept when `keep_slash`.
std::string UriEncode(std::string_view s, bool keep_slash);

// XML helpers for S3's simple response documents: the text of every
// <tag>...</tag> directly or indirectly inside `xml` (entities decoded), and
// the inner XML of every <tag>...</tag> element.
std::vector<std::string> XmlTexts(std::string_view xml, std::string_view tag);
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);
std::string XmlEscape(std::string_view text);

// Hex SHA-256 of `data` (the x-amz-content-sha256 header).
std::string Sha256Hex(std::string_view data);

// Parses an HTTP date (RFC 1123, "Sun, 06 Nov 1994 08:49:37 GMT") into Unix
// seconds; nullopt when malformed.
std::optional<int64_t> ParseHttpDate(const std::string& text);

}  // namespace npc::cache::s3
