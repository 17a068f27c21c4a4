#include "generator/files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace npc::tool {

namespace fs = std::filesystem;

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) return MakeError("cannot create " + target.parent_path().string() + ": " + ec.message());
  }
  const std::string tmp =
      (target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(getpid()))).string();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return MakeError("cannot write " + tmp);
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    return MakeError("cannot rename " + tmp + " to " + path + ": " + why);
  }
  return {};
}

}  // namespace npc::tool
