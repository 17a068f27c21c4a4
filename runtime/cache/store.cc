// OpenStore: the store for a cache URL (see npc/cache.h).
#include <filesystem>

#include "cache/s3_store.h"
#include "npc/cache.h"

namespace npc::cache {
namespace fs = std::filesystem;

Result<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  if (url.rfind("s3://", 0) == 0) {
    auto store = OpenS3Store(url);
    if (!store) return store.error();
    return std::unique_ptr<Store>(std::move(*store));
  }
  std::string path = url;
  if (path.rfind("file://", 0) == 0) path = path.substr(7);
  if (path.empty()) return MakeError("empty cache path");
  if (path.find("://") != std::string::npos) return MakeError("cache URL " + url + ": unsupported scheme");
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) return MakeError("cache path " + url + ": " + ec.message());
  return std::unique_ptr<Store>(new LocalStore(abs.lexically_normal().string()));
}

}  // namespace npc::cache
