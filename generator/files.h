// Writing the generator's own files (build.ninja, result records, manifests,
// result.json, stamps) so that a reader never sees a partial one: the
// project's one atomic-write helper, npc::util::WriteFileAtomic
// (runtime/util/atomic_file.h: temporary file in the same directory, fsync,
// rename, directory fsync).
#pragma once

#include "util/atomic_file.h"

namespace npc::tool {

using util::WriteFileAtomic;

}  // namespace npc::tool
