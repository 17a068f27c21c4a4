// Text shown in messages: bytes that would break a log line or a terminal made visible.
#pragma once

#include <string>
#include <string_view>

namespace npc::util {

// `text` with backslashes, line breaks, other control characters and bytes
// that are not ASCII written as C escapes ("\\", "\n", "\r", "\x7f", "\xc3").
std::string Printable(std::string_view text);

}  // namespace npc::util
