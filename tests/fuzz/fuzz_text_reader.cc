// libFuzzer target: the HLO text reader (and validation) on arbitrary bytes.
// Any input must give a module or an error, never a crash, a sanitizer report
// or an exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hlo/text_reader.h"
#include "npc/hlo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto module = npc::hlo::ParseHloText(text, "fuzz.hlo");
  if (module) {
    (void)npc::hlo::ValidateModule(*module, "fuzz.hlo");
  }
  return 0;
}
