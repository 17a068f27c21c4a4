// Local read-through copies of store objects (see read_through.h).
#include "cache/read_through.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "cache/s3_client.h"
#include "cache/s3_store.h"

namespace npc::cache {
namespace fs = std::filesystem;

namespace {

std::string TempNameFor(const std::string& dest) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, ".tmp.%d.%08llx", getpid(),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  fs::path p(dest);
  return (p.parent_path() / ("." + p.filename().string() + suffix)).string();
}

Status WriteFileData(const std::string& file, std::string_view data) {
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError("cannot create " + file + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string err = "cannot write " + file + ": " + std::strerror(errno);
      close(fd);
      return MakeError(err);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    std::string err = "cannot sync " + file + ": " + std::strerror(errno);
    close(fd);
    return MakeError(err);
  }
  close(fd);
  return {};
}

}  // namespace

Result<std::string> LocalCopy(Store& store, const std::string& path, const std::string& local_root) {
  if (std::optional<std::string> local = store.LocalPath(path)) return *local;
  const std::string dest = local_root + "/" + path;
  const std::string source = store.url() + "/" + path;

  auto remote_size = store.Size(path);
  if (!remote_size) return remote_size.error();
  struct stat st;
  if (stat(dest.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<int64_t>(st.st_size) == *remote_size) {
    return dest;
  }

  std::error_code ec;
  fs::create_directories(fs::path(dest).parent_path(), ec);
  if (ec) return MakeError("cannot create the local copy of " + source + ": " + fs::path(dest).parent_path().string() +
                           ": " + ec.message());
  const std::string tmp = TempNameFor(dest);
  Status written;
  if (auto* s3 = dynamic_cast<S3Store*>(&store)) {
    auto n = s3->Download(path, tmp);
    if (!n) written = n.error();
  } else {
    auto data = store.Read(path);
    written = data ? WriteFileData(tmp, *data) : Status(data.error());
  }
  if (!written) {
    unlink(tmp.c_str());
    return MakeError("cannot make a local copy of " + source + " at " + dest + ": " + written.error().message);
  }
  if (rename(tmp.c_str(), dest.c_str()) != 0) {
    std::string err = "cannot rename " + tmp + " to " + dest + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return MakeError("cannot make a local copy of " + source + ": " + err);
  }
  return dest;
}

std::string DefaultLocalCopyRoot(const std::string& store_url) {
  if (const char* dir = std::getenv("NPC_LOCAL_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  std::string base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    base = xdg;
  } else {
    const char* home = std::getenv("HOME");
    base = std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.cache";
  }
  std::string name;
  for (unsigned char c : store_url) {
    name += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? static_cast<char>(c) : '_';
  }
  return base + "/npc/" + name + "-" + s3::Sha256Hex(store_url).substr(0, 8);
}

}  // namespace npc::cache
