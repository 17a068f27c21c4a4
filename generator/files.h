// Writing the generator's own files (build.ninja, result records, manifests,
// result.json, stamps) so that a reader never sees a partial one.
#pragma once

#include <string>
#include <string_view>

#include "npc/result.h"

namespace npc::tool {

// Writes `data` to `path`: creates the parent directories, writes a hidden
// temporary file beside it (".<name>.tmp.<pid>"), then renames it over
// `path`. A reader sees the old file or the whole new one. Errors name the
// file that could not be written or renamed; the temporary file is removed.
Status WriteFileAtomic(const std::string& path, std::string_view data);

}  // namespace npc::tool
