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

#include "cache/s3_client.h"
#include "cache/s3_store.h"
#include "util/atomic_file.h"

namespace npc::cache {
namespace fs = std::filesystem;

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
  Status written;
  if (auto* s3 = dynamic_cast<S3Store*>(&store)) {
    // Streams to a temporary file (S3Store::Download fsyncs it), then renames.
    const std::string tmp = util::TempPathFor(dest);
    auto n = s3->Download(path, tmp);
    written = n ? util::RenameDurably(tmp, dest) : Status(n.error());
    if (!written) unlink(tmp.c_str());
  } else {
    auto data = store.Read(path);
    written = data ? util::WriteFileAtomic(dest, *data) : Status(data.error());
  }
  if (!written) return MakeError("cannot make a local copy of " + source + " at " + dest + ": " + written.error().message);
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
