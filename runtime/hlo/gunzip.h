// gzip decoding with an output cap (internal to npc; ParseHloModule uses it
// with kMaxHloModuleBytes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "npc/result.h"

namespace npc::hlo {

// Inflates one gzip stream. Errors name `source_name`: a corrupt or truncated
// stream, or output longer than `max_bytes` (the decoder stops there: a gzip
// bomb costs at most `max_bytes` of memory).
Result<std::string> Gunzip(std::string_view bytes, const std::string& source_name, size_t max_bytes);

}  // namespace npc::hlo
