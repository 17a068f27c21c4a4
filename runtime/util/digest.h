// SHA-256 digests of memory and of files (OpenSSL), as lowercase hex.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "npc/result.h"

namespace npc::util {

// 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

struct FileDigest {
  int64_t size = 0;    // bytes read
  std::string sha256;  // 64 lowercase hex digits
};

// Reads `path` in 1 MiB pieces and digests it. Errors (cannot open or read)
// name the file.
Result<FileDigest> Sha256File(const std::string& path);

}  // namespace npc::util
