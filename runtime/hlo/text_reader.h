// XLA's HLO text format -> HloModuleProto. Internal to npc.
#pragma once

#include <string>
#include <string_view>

#include "npc/hlo.pb.h"
#include "npc/result.h"

namespace npc::hlo {

// Parses HLO text. Errors: "<source_name>:<line>:<column>: <message>".
Result<xla::HloModuleProto> ParseHloText(std::string_view text, const std::string& source_name);

}  // namespace npc::hlo
