// SHA-256 digests (see digest.h).
#include "util/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace npc::util {
namespace {

std::string Hex(const unsigned char* bytes, unsigned int n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

using Context = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
  return Hex(digest, n);
}

Result<FileDigest> Sha256File(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot open " + path + ": " + std::strerror(errno));
  Context ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    close(fd);
    return MakeError("cannot digest " + path + ": OpenSSL has no SHA-256");
  }
  FileDigest out;
  std::unique_ptr<char[]> buffer(new char[1 << 20]);
  for (;;) {
    ssize_t n = read(fd, buffer.get(), 1 << 20);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string err = "cannot read " + path + ": " + std::strerror(errno);
      close(fd);
      return MakeError(err);
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.get(), static_cast<size_t>(n));
    out.size += n;
  }
  close(fd);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  out.sha256 = Hex(digest, len);
  return out;
}

}  // namespace npc::util
