// compile_flags.json, the flags hash, NEURON_CC_FLAGS and the cache URL.
#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "npc/cache.h"

namespace npc::cache {
namespace {

void AppendEscapedCodePoint(std::string& out, uint32_t cp) {
  char buf[8];
  auto put16 = [&](uint32_t u) {
    std::snprintf(buf, sizeof buf, "\\u%04x", u);
    out += buf;
  };
  if (cp >= 0x10000) {
    cp -= 0x10000;
    put16(0xD800 + (cp >> 10));
    put16(0xDC00 + (cp & 0x3FF));
  } else {
    put16(cp);
  }
}

// Appends `s` as Python's json.dumps(str) with ensure_ascii=True writes it.
void AppendPythonJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) AppendEscapedCodePoint(out, c);
          else out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // Decode one UTF-8 sequence; an invalid byte is escaped as itself.
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    uint32_t cp = len == 4 ? (c & 0x07) : len == 3 ? (c & 0x0F) : (c & 0x1F);
    bool valid = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; valid && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      valid = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!valid) {
      AppendEscapedCodePoint(out, c);
      ++i;
      continue;
    }
    AppendEscapedCodePoint(out, cp);
    i += static_cast<size_t>(len);
  }
  out += '"';
}

}  // namespace

std::string CompileFlagsJson(const std::vector<std::string>& flags) {
  std::string out = "[";
  for (size_t i = 0; i < flags.size(); ++i) {
    if (i) out += ", ";
    AppendPythonJsonString(out, flags[i]);
  }
  return out + "]";
}

Result<std::vector<std::string>> ParseCompileFlagsJson(std::string_view text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return MakeError(source + ": not valid JSON (expected a list of compiler flags)");
  if (!j.is_array()) return MakeError(source + ": expected a JSON list of compiler flags");
  std::vector<std::string> flags;
  for (const auto& item : j) {
    if (!item.is_string()) return MakeError(source + ": every compiler flag must be a string, got " + item.dump());
    flags.push_back(item.get<std::string>());
  }
  return flags;
}

std::string FlagsHash(std::string_view compile_flags_json_text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(compile_flags_json_text.data(), compile_flags_json_text.size(), digest, &len, EVP_md5(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 4; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xF];
  }
  return out;
}

Result<std::vector<std::string>> ShellSplit(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos) return MakeError("NEURON_CC_FLAGS: unterminated single quote");
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && std::string_view("\"\\$`").find(text[j + 1]) != std::string_view::npos) ++j;
        word += text[j];
      }
      if (j >= text.size()) return MakeError("NEURON_CC_FLAGS: unterminated double quote");
      i = j;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<CacheFlags> ParseNeuronCcFlags(std::string_view neuron_cc_flags) {
  auto words = ShellSplit(neuron_cc_flags);
  if (!words) return words.error();
  CacheFlags flags;
  struct Valued {
    std::string_view name;
    std::optional<std::string> CacheFlags::*field;
  };
  const Valued valued[] = {
      {"--cache_dir", &CacheFlags::cache_dir},     {"--log_level", &CacheFlags::log_level},
      {"--dump", &CacheFlags::dump},               {"--compile_workdir", &CacheFlags::compile_workdir},
      {"--cache_size", &CacheFlags::cache_size},   {"--cache_ttl", &CacheFlags::cache_ttl},
  };
  const auto& w = *words;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& word = w[i];
    if (word == "--no_cache") {
      flags.no_cache = true;
      continue;
    }
    if (word == "--retry_failed_compilation") {
      flags.retry_failed_compilation = true;
      continue;
    }
    bool consumed = false;
    for (const auto& v : valued) {
      if (word == v.name) {
        if (i + 1 >= w.size()) return MakeError("NEURON_CC_FLAGS: " + word + " needs a value");
        flags.*(v.field) = w[++i];
        consumed = true;
      } else if (word.size() > v.name.size() && word.compare(0, v.name.size(), v.name) == 0 &&
                 word[v.name.size()] == '=') {
        flags.*(v.field) = word.substr(v.name.size() + 1);
        consumed = true;
      }
      if (consumed) break;
    }
    if (!consumed) flags.compiler_flags.push_back(word);
  }
  return flags;
}

std::string ResolveCacheUrl(const CacheFlags& flags, const char* neuron_compile_cache_url) {
  if (flags.cache_dir && !flags.cache_dir->empty()) return *flags.cache_dir;
  if (neuron_compile_cache_url && *neuron_compile_cache_url) return neuron_compile_cache_url;
  return std::string(kDefaultCacheUrl);
}

}  // namespace npc::cache
