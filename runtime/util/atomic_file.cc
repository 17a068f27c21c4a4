// Atomic, durable file writes (see atomic_file.h).
#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace npc::util {
namespace fs = std::filesystem;

namespace {

std::string ErrnoText() { return std::strerror(errno); }

std::string ParentOf(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

Status MakeParent(const std::string& path) {
  std::error_code ec;
  fs::create_directories(ParentOf(path), ec);
  if (ec) return MakeError("cannot create directory " + ParentOf(path) + ": " + ec.message());
  return {};
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeError("cannot write " + path + ": " + ErrnoText());
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// Copies `source` into the new file `fd` (named `path` for messages).
Status CopyInto(const std::string& source, int fd, const std::string& path) {
  int in = open(source.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return MakeError("cannot open " + source + ": " + ErrnoText());
  std::string buffer(1 << 20, '\0');
  Status st;
  for (;;) {
    ssize_t n = read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = MakeError("cannot read " + source + ": " + ErrnoText());
      break;
    }
    if (n == 0) break;
    st = WriteAll(fd, std::string_view(buffer.data(), static_cast<size_t>(n)), path);
    if (!st) break;
  }
  close(in);
  return st;
}

// Creates TempPathFor(path), lets `fill` write it, fsyncs, closes, renames
// over `path` and fsyncs the directory. The temporary file never outlives a failure.
template <typename Fill>
Status WriteThroughTemp(const std::string& path, Fill fill) {
  if (auto st = MakeParent(path); !st) return st;
  const std::string tmp = TempPathFor(path);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return MakeError("cannot create " + tmp + ": " + ErrnoText());
  Status st = fill(fd, tmp);
  if (st && fsync(fd) != 0) st = MakeError("cannot sync " + tmp + ": " + ErrnoText());
  if (close(fd) != 0 && st) st = MakeError("cannot close " + tmp + ": " + ErrnoText());
  if (st) st = RenameDurably(tmp, path);
  if (!st) unlink(tmp.c_str());
  return st;
}

}  // namespace

std::string TempPathFor(const std::string& path) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32));
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(rng()));
  fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + suffix)).string();
}

Status SyncFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot open " + path + " to sync it: " + ErrnoText());
  Status st;
  if (fsync(fd) != 0) st = MakeError("cannot sync " + path + ": " + ErrnoText());
  close(fd);
  return st;
}

Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot open directory " + dir + " to sync it: " + ErrnoText());
  Status st;
  // Some file systems cannot sync a directory (EINVAL): their renames are as durable as they get.
  if (fsync(fd) != 0 && errno != EINVAL) st = MakeError("cannot sync directory " + dir + ": " + ErrnoText());
  close(fd);
  return st;
}

Status RenameDurably(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) return MakeError("cannot rename " + from + " to " + to + ": " + ErrnoText());
  return SyncDirectory(ParentOf(to));
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  return WriteThroughTemp(path, [&](int fd, const std::string& tmp) { return WriteAll(fd, data, tmp); });
}

Status PutFileAtomic(const std::string& source, const std::string& path, bool consume) {
  if (consume) {
    if (auto st = MakeParent(path); !st) return st;
    if (auto st = SyncFile(source); !st) return st;
    if (rename(source.c_str(), path.c_str()) == 0) return SyncDirectory(ParentOf(path));
    if (errno != EXDEV) return MakeError("cannot move " + source + " to " + path + ": " + ErrnoText());
  }
  Status st = WriteThroughTemp(path, [&](int fd, const std::string& tmp) { return CopyInto(source, fd, tmp); });
  if (st && consume) unlink(source.c_str());
  return st;
}

}  // namespace npc::util
