// LocalStore: the cache in a local directory (see npc/cache.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "npc/cache.h"
#include "util/atomic_file.h"

namespace npc::cache {
namespace fs = std::filesystem;

namespace {

std::string ErrnoText() { return std::strerror(errno); }

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return MakeError("cannot create directory " + dir + ": " + ec.message());
  return {};
}

class LocalEntryLock : public EntryLock {
 public:
  LocalEntryLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~LocalEntryLock() override {
    // Unlink before unlocking: a waiter that opened this file re-checks the
    // path after taking the lock and retries on a new file.
    unlink(path_.c_str());
    close(fd_);
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

LocalStore::LocalStore(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string LocalStore::Abs(const std::string& path) const {
  if (path.empty()) return root_;
  return root_ + "/" + path;
}

std::optional<std::string> LocalStore::LocalPath(const std::string& path) const { return Abs(path); }

Result<bool> LocalStore::Exists(const std::string& path) {
  struct stat st;
  if (stat(Abs(path).c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return MakeError("cannot stat " + Abs(path) + ": " + ErrnoText());
}

Result<std::string> LocalStore::Read(const std::string& path) {
  std::string abs = Abs(path);
  int fd = open(abs.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot open " + abs + ": " + ErrnoText());
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = "cannot read " + abs + ": " + ErrnoText();
      close(fd);
      return MakeError(err);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

Result<int64_t> LocalStore::Size(const std::string& path) {
  struct stat st;
  if (stat(Abs(path).c_str(), &st) != 0) return MakeError("cannot stat " + Abs(path) + ": " + ErrnoText());
  return static_cast<int64_t>(st.st_size);
}

Status LocalStore::WriteAtomic(const std::string& path, std::string_view data) {
  return util::WriteFileAtomic(Abs(path), data);
}

Status LocalStore::PutFileAtomic(const std::string& path, const std::string& local_path) {
  return util::PutFileAtomic(local_path, Abs(path), /*consume=*/true);
}

Result<std::vector<std::string>> LocalStore::List(const std::string& path) {
  std::string abs = Abs(path);
  DIR* dir = opendir(abs.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return std::vector<std::string>{};
    return MakeError("cannot list " + abs + ": " + ErrnoText());
  }
  std::vector<std::string> names;
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

Status LocalStore::Remove(const std::string& path) {
  std::string abs = Abs(path);
  if (unlink(abs.c_str()) != 0 && errno != ENOENT) return MakeError("cannot remove " + abs + ": " + ErrnoText());
  return {};
}

Status LocalStore::RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(Abs(path), ec);
  if (ec) return MakeError("cannot remove " + Abs(path) + ": " + ec.message());
  return {};
}

Result<std::unique_ptr<EntryLock>> LocalStore::TryLock(const std::string& entry_dir) {
  std::string dir = Abs(entry_dir);
  if (auto st = MakeDirs(dir); !st) return st.error();
  std::string path = dir + "/" + std::string(kLockFile);
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return MakeError("cannot create lock file " + path + ": " + ErrnoText());
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) return std::unique_ptr<EntryLock>();
      errno = err;
      return MakeError("cannot lock " + path + ": " + ErrnoText());
    }
    // The holder we waited on may have removed the file on release: make sure
    // the file we hold is still the one at `path`.
    struct stat held, current;
    if (fstat(fd, &held) == 0 && stat(path.c_str(), &current) == 0 && held.st_ino == current.st_ino &&
        held.st_dev == current.st_dev) {
      std::string owner = "pid " + std::to_string(getpid()) + "\n";
      if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, owner.data(), owner.size(), 0);
      return std::unique_ptr<EntryLock>(new LocalEntryLock(fd, path));
    }
    close(fd);
  }
  return MakeError("cannot lock " + path + ": the lock file keeps being replaced");
}

Result<bool> LocalStore::IsLocked(const std::string& entry_dir) {
  std::string path = Abs(entry_dir) + "/" + std::string(kLockFile);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return MakeError("cannot open lock file " + path + ": " + ErrnoText());
  }
  bool locked = false;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
    locked = errno == EWOULDBLOCK;
  } else {
    flock(fd, LOCK_UN);
  }
  close(fd);
  return locked;
}

Result<bool> LocalStore::IsForeignLocked(const std::string& entry_dir) {
  auto names = List(entry_dir);
  if (!names) return names.error();
  for (const auto& name : *names) {
    if (name == kLockFile || name.size() <= 5 || name.compare(name.size() - 5, 5, ".lock") != 0) continue;
    auto held = IsFileLockHeld(Abs(entry_dir + "/" + name));
    if (!held) return held.error();
    if (*held) return true;
  }
  return false;
}

Result<bool> IsFileLockHeld(const std::string& path) {
  int mode = LOCK_EX;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    mode = LOCK_SH;  // cannot open it for writing: a shared probe on a read-only descriptor
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  }
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return MakeError("cannot open lock file " + path + " to probe it: " + ErrnoText());
  }
  bool held = false;
  if (flock(fd, mode | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
  } else if (errno == EWOULDBLOCK) {
    held = true;
  } else {
    std::string err = "cannot probe lock file " + path + " with flock: " + ErrnoText();
    close(fd);
    return MakeError(err);
  }
  close(fd);
  return held;
}

}  // namespace npc::cache
