// S3 requests for the S3 cache store (see s3_client.h).
#include "cache/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace npc::cache::s3 {
namespace {

using Clock = std::chrono::steady_clock;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool IsUnreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

// Encoding that a server which decodes the URL and re-quotes it the way
// werkzeug does (moto) signs over: in paths the sub-delimiters and ':' '@'
// stay raw; in query values '/' stays raw.
std::string CompatEncode(std::string_view s, std::string_view raw_extra) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (IsUnreserved(c) || raw_extra.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// ---- shared config files (~/.aws/credentials, ~/.aws/config) ---------------

// section -> key -> value. Sub-sections ("s3 =" followed by indented
// "addressing_style = path") are stored as "s3.addressing_style".
using Ini = std::map<std::string, std::map<std::string, std::string>>;

std::optional<Ini> ReadIni(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  Ini ini;
  std::string section, parent, line;
  while (std::getline(in, line)) {
    bool indented = !line.empty() && std::isspace(static_cast<unsigned char>(line[0]));
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(std::string_view(t).substr(1, t.size() - 2));
      parent.clear();
      ini[section];
      continue;
    }
    size_t eq = t.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    std::string key = Lower(Trim(std::string_view(t).substr(0, eq)));
    std::string value = Trim(std::string_view(t).substr(eq + 1));
    if (indented && !parent.empty()) {
      ini[section][parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : "";
    ini[section][key] = value;
  }
  return ini;
}

std::string HomeDir(const EnvLookup& env) {
  if (auto home = env("HOME")) return *home;
  return "/root";
}

std::string ExpandHome(const std::string& path, const EnvLookup& env) {
  if (path.rfind("~/", 0) == 0) return HomeDir(env) + path.substr(1);
  return path;
}

Result<double> ParseSeconds(const std::string& name, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || std::isinf(v)) {
    return MakeError(name + "=" + text + ": expected a number of seconds >= 0");
  }
  return v;
}

Result<int64_t> ParseCount(const std::string& name, const std::string& text) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0) return MakeError(name + "=" + text + ": expected an integer >= 0");
  return static_cast<int64_t>(v);
}

Result<AddressingStyle> ParseAddressing(const std::string& name, const std::string& text) {
  std::string v = Lower(text);
  if (v == "path") return AddressingStyle::kPath;
  if (v == "virtual") return AddressingStyle::kVirtual;
  if (v == "auto") return AddressingStyle::kAuto;
  return MakeError(name + "=" + text + ": expected path, virtual or auto");
}

// ---- curl callbacks --------------------------------------------------------

struct Transfer {
  const S3Request* request = nullptr;
  CURL* curl = nullptr;
  S3Response* response = nullptr;
  int64_t received = 0;
  bool stopped_early = false;  // max_body_bytes reached: not an error
  bool sink_refused = false;   // the sink returned false
};

size_t WriteCallback(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  std::string_view piece(data, len);
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  const S3Request& req = *t->request;
  if (req.max_body_bytes > 0 && status >= 200 && status < 300 && t->received + static_cast<int64_t>(len) > req.max_body_bytes) {
    size_t keep = static_cast<size_t>(std::max<int64_t>(0, req.max_body_bytes - t->received));
    t->response->body.append(piece.substr(0, keep));
    t->received += static_cast<int64_t>(keep);
    t->stopped_early = true;
    return 0;  // abort the transfer
  }
  t->received += static_cast<int64_t>(len);
  if (req.sink && status >= 200 && status < 300) {
    if (!req.sink(piece)) {
      t->sink_refused = true;
      return 0;
    }
    return len;
  }
  t->response->body.append(piece);
  return len;
}

size_t HeaderCallback(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  std::string_view line(data, len);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();  // a new response (after 100 Continue or a redirect)
    return len;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    t->response->headers[Lower(std::string(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
  }
  return len;
}

bool RetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
      return true;
    default:
      return false;
  }
}

bool RetryableResponse(const S3Response& response) {
  long s = response.status;
  if (s == 500 || s == 502 || s == 503 || s == 504 || s == 429) return true;
  if (s == 400) {
    return response.error_code() == "RequestTimeout";
  }
  return false;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string EnvName(const Credentials& c) { return c.source.empty() ? "no source" : c.source; }

}  // namespace

// ---- configuration ---------------------------------------------------------

std::string S3Config::url() const { return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix); }

Result<std::pair<std::string, std::string>> ParseS3Url(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) return MakeError("not an s3:// URL: " + url);
  std::string rest = url.substr(5);
  size_t slash = rest.find('/');
  std::string bucket = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (bucket.empty()) return MakeError("cache URL " + url + ": no bucket name");
  for (char c : bucket) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) {
      return MakeError("cache URL " + url + ": invalid bucket name '" + bucket + "'");
    }
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  while (!prefix.empty() && prefix.front() == '/') prefix.erase(0, 1);
  if (prefix.find("//") != std::string::npos) return MakeError("cache URL " + url + ": empty path segment in the prefix");
  return std::make_pair(bucket, prefix);
}

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

Result<S3Config> S3ConfigFromEnvironment(const std::string& url, const EnvLookup& env) {
  S3Config config;
  auto parsed = ParseS3Url(url);
  if (!parsed) return parsed.error();
  config.bucket = parsed->first;
  config.prefix = parsed->second;

  std::optional<std::string> named_profile = env("AWS_PROFILE");
  if (!named_profile) named_profile = env("AWS_DEFAULT_PROFILE");
  const std::string profile = named_profile.value_or("default");
  const std::string credentials_file =
      ExpandHome(env("AWS_SHARED_CREDENTIALS_FILE").value_or("~/.aws/credentials"), env);
  const std::string config_file = ExpandHome(env("AWS_CONFIG_FILE").value_or("~/.aws/config"), env);
  std::optional<Ini> credentials_ini = ReadIni(credentials_file);
  std::optional<Ini> config_ini = ReadIni(config_file);
  const std::map<std::string, std::string>* cred_section = nullptr;
  const std::map<std::string, std::string>* config_section = nullptr;
  if (credentials_ini) {
    auto it = credentials_ini->find(profile);
    if (it != credentials_ini->end()) cred_section = &it->second;
  }
  if (config_ini) {
    auto it = config_ini->find(profile == "default" ? "default" : "profile " + profile);
    if (it == config_ini->end()) it = config_ini->find(profile);
    if (it != config_ini->end()) config_section = &it->second;
  }
  if (named_profile && cred_section == nullptr && config_section == nullptr) {
    return MakeError("cache URL " + url + ": AWS profile '" + profile + "' is in neither " + credentials_file +
                     " nor " + config_file);
  }
  auto from_files = [&](const std::string& key) -> std::optional<std::string> {
    for (auto* section : {cred_section, config_section}) {
      if (section == nullptr) continue;
      auto it = section->find(key);
      if (it != section->end() && !it->second.empty()) return it->second;
    }
    return std::nullopt;
  };

  // Endpoint and region.
  if (auto e = env("AWS_ENDPOINT_URL_S3")) config.endpoint = *e;
  else if (auto e2 = env("AWS_ENDPOINT_URL")) config.endpoint = *e2;
  else if (auto e3 = from_files("s3.endpoint_url")) config.endpoint = *e3;
  else if (auto e4 = from_files("endpoint_url")) config.endpoint = *e4;
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  if (!config.endpoint.empty() && config.endpoint.find("://") == std::string::npos) {
    config.endpoint = "https://" + config.endpoint;
  }
  if (auto r = env("AWS_REGION")) config.region = *r;
  else if (auto r2 = env("AWS_DEFAULT_REGION")) config.region = *r2;
  else if (auto r3 = from_files("region")) config.region = *r3;

  if (auto ca = env("AWS_CA_BUNDLE")) config.ca_bundle = ExpandHome(*ca, env);
  else if (auto ca2 = from_files("ca_bundle")) config.ca_bundle = ExpandHome(*ca2, env);

  // Credentials.
  auto id = env("AWS_ACCESS_KEY_ID");
  auto secret = env("AWS_SECRET_ACCESS_KEY");
  if (id.has_value() != secret.has_value()) {
    return MakeError("cache URL " + url + ": " + (id ? "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"
                                                     : "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"));
  }
  if (id && secret) {
    config.credentials = {*id, *secret, env("AWS_SESSION_TOKEN").value_or(""), "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment"};
  } else {
    for (auto [section, file] : {std::pair{cred_section, credentials_file}, std::pair{config_section, config_file}}) {
      if (section == nullptr) continue;
      auto kid = section->find("aws_access_key_id");
      auto ksecret = section->find("aws_secret_access_key");
      if (kid == section->end() || ksecret == section->end()) continue;
      auto token = section->find("aws_session_token");
      config.credentials = {kid->second, ksecret->second, token == section->end() ? "" : token->second,
                            "profile '" + profile + "' in " + file};
      break;
    }
  }

  // Addressing and tuning.
  if (auto a = env("NPC_S3_ADDRESSING_STYLE")) {
    auto style = ParseAddressing("NPC_S3_ADDRESSING_STYLE", *a);
    if (!style) return style.error();
    config.addressing = *style;
  } else if (auto a2 = env("AWS_S3_ADDRESSING_STYLE")) {
    auto style = ParseAddressing("AWS_S3_ADDRESSING_STYLE", *a2);
    if (!style) return style.error();
    config.addressing = *style;
  } else if (auto a3 = from_files("s3.addressing_style")) {
    auto style = ParseAddressing("addressing_style in " + config_file, *a3);
    if (!style) return style.error();
    config.addressing = *style;
  }
  struct CountVar { const char* name; int64_t* out; };
  int64_t max_retries = config.max_retries;
  for (CountVar v : {CountVar{"NPC_S3_MAX_RETRIES", &max_retries},
                     CountVar{"NPC_S3_MULTIPART_THRESHOLD", &config.multipart_threshold_bytes},
                     CountVar{"NPC_S3_MULTIPART_PART_SIZE", &config.multipart_part_bytes}}) {
    if (auto text = env(v.name)) {
      auto n = ParseCount(v.name, *text);
      if (!n) return n.error();
      *v.out = *n;
    }
  }
  config.max_retries = static_cast<int>(std::min<int64_t>(max_retries, 100));
  if (config.multipart_part_bytes < 1) return MakeError("NPC_S3_MULTIPART_PART_SIZE must be at least 1 byte");
  struct SecondsVar { const char* name; double* out; };
  for (SecondsVar v : {SecondsVar{"NPC_S3_RETRY_MAX_SECONDS", &config.retry_max_total_seconds},
                       SecondsVar{"NPC_S3_CONNECT_TIMEOUT", &config.connect_timeout_seconds},
                       SecondsVar{"NPC_S3_STALL_TIMEOUT", &config.stall_timeout_seconds},
                       SecondsVar{"NPC_S3_LOCK_TTL", &config.lease_ttl_seconds}}) {
    if (auto text = env(v.name)) {
      auto s = ParseSeconds(v.name, *text);
      if (!s) return s.error();
      *v.out = *s;
    }
  }
  return config;
}

// ---- helpers ---------------------------------------------------------------

std::string UriEncode(std::string_view s, bool keep_slash) {
  return CompatEncode(s, keep_slash ? "/" : "");
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string XmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      out += s.substr(i);
      break;
    }
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      uint32_t cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')
                        ? static_cast<uint32_t>(std::strtoul(std::string(ent.substr(2)).c_str(), nullptr, 16))
                        : static_cast<uint32_t>(std::strtoul(std::string(ent.substr(1)).c_str(), nullptr, 10));
      AppendUtf8(out, cp);
    } else {
      out += s.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

}  // namespace

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    size_t after = pos + open.size();
    if (after >= xml.size()) break;
    char next = xml[after];
    if (next != '>' && next != ' ' && next != '/' && next != '\t' && next != '\n' && next != '\r') {
      pos = after;  // a longer tag name (<Prefix> vs <PrefixFoo>)
      continue;
    }
    size_t gt = xml.find('>', after);
    if (gt == std::string_view::npos) break;
    if (xml[gt - 1] == '/') {  // <Tag/>
      out.push_back(xml.substr(gt, 0));
      pos = gt + 1;
      continue;
    }
    size_t end = xml.find(close, gt + 1);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(gt + 1, end - gt - 1));
    pos = end + close.size();
  }
  return out;
}

std::vector<std::string> XmlTexts(std::string_view xml, std::string_view tag) {
  std::vector<std::string> out;
  for (std::string_view inner : XmlElements(xml, tag)) out.push_back(XmlUnescape(inner));
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::optional<int64_t> ParseHttpDate(const std::string& text) {
  // "Sun, 06 Nov 1994 08:49:37 GMT"
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char month[4] = {0};
  int day, year, hh, mm, ss;
  size_t comma = text.find(',');
  if (comma == std::string::npos) return std::nullopt;
  if (std::sscanf(text.c_str() + comma + 1, " %d %3s %d %d:%d:%d", &day, month, &year, &hh, &mm, &ss) != 6) {
    return std::nullopt;
  }
  int mon = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::string_view(month) == kMonths[i]) mon = i;
  }
  if (mon < 0) return std::nullopt;
  struct tm tm = {};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon;
  tm.tm_mday = day;
  tm.tm_hour = hh;
  tm.tm_min = mm;
  tm.tm_sec = ss;
  return static_cast<int64_t>(timegm(&tm));
}

std::string S3Response::header(const std::string& lowercase_name) const {
  auto it = headers.find(lowercase_name);
  return it == headers.end() ? "" : it->second;
}

std::string S3Response::error_code() const {
  auto codes = XmlTexts(body, "Code");
  return codes.empty() ? "" : codes.front();
}

std::string S3Response::error_message() const {
  auto messages = XmlTexts(body, "Message");
  return messages.empty() ? "" : messages.front();
}

// ---- the client --------------------------------------------------------------

S3Client::S3Client(S3Config config) : config_(std::move(config)) { InitCurlOnce(); }

S3Client::~S3Client() {
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

S3Stats S3Client::stats() const { return S3Stats{requests_.load(), retries_.load(), gave_up_.load()}; }

void* S3Client::AcquireHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_handles_.empty()) {
      void* h = idle_handles_.back();
      idle_handles_.pop_back();
      curl_easy_reset(static_cast<CURL*>(h));
      return h;
    }
  }
  return curl_easy_init();
}

void S3Client::ReleaseHandle(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_handles_.size() < 8) {
    idle_handles_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

std::string S3Client::S3Url(const std::string& key) const {
  return "s3://" + config_.bucket + (key.empty() ? "" : "/" + key);
}

std::string S3Client::BuildUrl(const S3Request& request, bool compat) const {
  bool virtual_host = false;
  switch (config_.addressing) {
    case AddressingStyle::kPath: virtual_host = false; break;
    case AddressingStyle::kVirtual: virtual_host = true; break;
    case AddressingStyle::kAuto:
      virtual_host = config_.endpoint.empty() && config_.bucket.find('.') == std::string::npos;
      break;
  }
  std::string endpoint = config_.endpoint;
  if (endpoint.empty()) {
    std::string domain = config_.region.rfind("cn-", 0) == 0 ? "amazonaws.com.cn" : "amazonaws.com";
    endpoint = "https://s3." + config_.region + "." + domain;
  }
  std::string url;
  if (virtual_host) {
    size_t host_start = endpoint.find("://");
    host_start = host_start == std::string::npos ? 0 : host_start + 3;
    url = endpoint.substr(0, host_start) + config_.bucket + "." + endpoint.substr(host_start) + "/";
  } else {
    url = endpoint + "/" + config_.bucket;
    if (!request.key.empty()) url += "/";
  }
  url += compat ? CompatEncode(request.key, "/!$&'()*+,:;=@") : UriEncode(request.key, true);
  if (!request.query.empty()) {
    std::vector<std::pair<std::string, std::string>> q;
    for (const auto& [name, value] : request.query) {
      q.emplace_back(UriEncode(name, false), compat ? CompatEncode(value, "/") : UriEncode(value, false));
    }
    std::sort(q.begin(), q.end());
    char sep = '?';
    for (const auto& [name, value] : q) {
      url += sep;
      url += name + "=" + value;
      sep = '&';
    }
  }
  return url;
}

std::string S3Client::HttpUrl(const S3Request& request) const { return BuildUrl(request, compat_encoding_.load()); }

Result<S3Response> S3Client::Perform(const S3Request& request, bool compat, std::string* transport_error,
                                     bool* retryable) {
  *retryable = false;
  CURL* curl = static_cast<CURL*>(AcquireHandle());
  if (curl == nullptr) return MakeError("cannot initialize libcurl");
  S3Response response;
  Transfer transfer{&request, curl, &response};
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string url = BuildUrl(request, compat);

  struct curl_slist* headers = nullptr;
  auto add_header = [&](const std::string& h) { headers = curl_slist_append(headers, h.c_str()); };
  add_header("x-amz-content-sha256: " + Sha256Hex(request.body));
  if (!config_.credentials.session_token.empty()) {
    add_header("x-amz-security-token: " + config_.credentials.session_token);
  }
  // No "Expect:" header to suppress 100-continue: curl 7.88 would sign the
  // empty header it then does not send.
  bool has_content_type = false;
  for (const auto& [name, value] : request.headers) {
    add_header(name + ": " + value);
    if (Lower(name) == "content-type") has_content_type = true;
  }

  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, HeaderCallback);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config_.connect_timeout_seconds * 1000));
  if (config_.stall_timeout_seconds > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(config_.stall_timeout_seconds)));
  }
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "npc-s3/1");
  if (!config_.ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_bundle.c_str());
  const std::string sigv4 = "aws:amz:" + config_.region + ":s3";
  if (!config_.credentials.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, config_.credentials.access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, config_.credentials.secret_access_key.c_str());
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    if (!has_content_type) {
      add_header(request.method == "POST" ? "Content-Type: application/xml" : "Content-Type: application/octet-stream");
    }
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.empty() ? "" : request.body.data());
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  if (request.reset_sink) request.reset_sink();
  ++requests_;
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  ReleaseHandle(curl);

  if (rc == CURLE_WRITE_ERROR && transfer.stopped_early) rc = CURLE_OK;
  if (rc == CURLE_WRITE_ERROR && transfer.sink_refused) {
    return MakeError(S3Url(request.key) + ": " + request.method + " " + url + ": the download could not be stored");
  }
  if (rc != CURLE_OK) {
    *transport_error = std::string(curl_easy_strerror(rc)) + (errbuf[0] ? std::string(" (") + errbuf + ")" : "");
    *retryable = RetryableCurlCode(rc);
    if (!*retryable) {
      return MakeError(S3Url(request.key) + ": " + request.method + " " + url + ": " + *transport_error);
    }
    return response;
  }
  *retryable = RetryableResponse(response);
  return response;
}

Result<S3Response> S3Client::Send(const S3Request& request) {
  const auto start = Clock::now();
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  bool tried_compat = false;
  std::string last_cause;
  int attempts = 0;
  for (;;) {
    bool compat = compat_encoding_.load();
    std::string transport_error;
    bool retryable = false;
    auto response = Perform(request, compat, &transport_error, &retryable);
    ++attempts;
    if (!response) return response.error();
    if (!retryable && response->status == 403 && !compat && !tried_compat &&
        response->error_code() == "SignatureDoesNotMatch" && BuildUrl(request, true) != BuildUrl(request, false)) {
      // A server that checks signatures over its decoded URL: try once
      // with the URL as it re-encodes it; keep that style if accepted.
      tried_compat = true;
      std::string compat_error;
      bool compat_retryable = false;
      auto second = Perform(request, true, &compat_error, &compat_retryable);
      if (second && compat_error.empty() && second->error_code() != "SignatureDoesNotMatch") {
        compat_encoding_ = true;
        response = std::move(second);
        transport_error = compat_error;
        retryable = compat_retryable;
      }
    }
    if (!retryable) return response;
    if (transport_error.empty()) {
      std::string code = response->error_code();
      last_cause = "HTTP " + std::to_string(response->status) + (code.empty() ? "" : " " + code);
      if (std::string message = response->error_message(); !message.empty()) last_cause += ": " + message;
    } else {
      last_cause = transport_error;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string where = S3Url(request.key) + ": " + request.method + " " + HttpUrl(request);
    if (attempts > config_.max_retries) {
      ++gave_up_;
      return MakeError(where + " failed after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") +
                       " in " + Seconds(elapsed) + ": " + last_cause);
    }
    double cap = std::min(config_.retry_max_delay_seconds,
                          config_.retry_base_seconds * std::pow(2.0, static_cast<double>(attempts - 1)));
    double delay = std::uniform_real_distribution<double>(0, std::max(cap, 0.0))(rng);
    if (elapsed + delay > config_.retry_max_total_seconds) {
      ++gave_up_;
      return MakeError(where + " failed after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") +
                       " in " + Seconds(elapsed) + " (retry time limit " + Seconds(config_.retry_max_total_seconds) +
                       "): " + last_cause);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    ++retries_;
  }
}

std::string S3Client::Describe(const S3Request& request, const S3Response& response) const {
  const std::string code = response.error_code();
  const std::string message = response.error_message();
  const std::string endpoint = config_.endpoint.empty() ? "AWS" : config_.endpoint;
  std::string cause;
  if (code == "NoSuchBucket" || (response.status == 404 && code.empty() && request.key.empty())) {
    cause = "bucket '" + config_.bucket + "' does not exist (endpoint " + endpoint + ")";
  } else if (code == "InvalidAccessKeyId") {
    cause = "bucket '" + config_.bucket + "' refused the credentials: access key id '" +
            config_.credentials.access_key_id + "' (from " + EnvName(config_.credentials) +
            ") is not known to the server (InvalidAccessKeyId)";
  } else if (code == "SignatureDoesNotMatch") {
    cause = "bucket '" + config_.bucket + "' refused the credentials: the secret access key (from " +
            EnvName(config_.credentials) + ") does not match access key id '" + config_.credentials.access_key_id +
            "' (SignatureDoesNotMatch)";
  } else if (code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired") {
    cause = "bucket '" + config_.bucket + "' refused the session token (from " + EnvName(config_.credentials) +
            "): " + code + "; refresh the temporary credentials";
  } else if (code == "RequestTimeTooSkewed") {
    cause = "the local clock differs too much from the server's (RequestTimeTooSkewed); fix the system time";
  } else if (code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" ||
             code == "IllegalLocationConstraintException" || response.status == 301) {
    std::string region = response.header("x-amz-bucket-region");
    cause = "bucket '" + config_.bucket + "' is not in region " + config_.region +
            (region.empty() ? "" : " but in " + region) + " (" + (code.empty() ? "redirect" : code) +
            "); set AWS_REGION";
  } else if (code == "AccessDenied" || response.status == 403) {
    cause = "access to bucket '" + config_.bucket + "' denied" +
            (config_.credentials.empty() ? std::string(" (no AWS credentials found: requests were sent unsigned)")
                                         : " for access key id '" + config_.credentials.access_key_id + "' (from " +
                                               EnvName(config_.credentials) + ")") +
            (code.empty() ? "" : " (" + code + ")");
  } else {
    cause = code.empty() ? "unexpected response" : code;
  }
  std::string text = cause + " [" + request.method + " " + HttpUrl(request) + " -> HTTP " +
                     std::to_string(response.status);
  if (!message.empty()) text += ": " + message;
  return text + "]";
}

}  // namespace npc::cache::s3
