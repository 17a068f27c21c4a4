// libFuzzer target: ParseHloModule on arbitrary bytes (HloModuleProto,
// HloProto, gzip, text), then the canonical key and the shape printer over
// what it accepts, which walk the module recursively.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "npc/hlo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto module = npc::hlo::ParseHloModule(bytes, "fuzz.pb");
  if (module) {
    (void)npc::hlo::CanonicalGraphKey(*module);
    for (const auto& c : module->computations()) {
      for (const auto& inst : c.instructions()) (void)npc::hlo::ShapeToString(inst.shape());
    }
  }
  return 0;
}
