// libFuzzer target: the host backend's code generation (HLO -> C++ source,
// without running the C++ compiler) of whatever ParseHloModule accepts, and
// the support check npc analyze runs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "host/host_backend.h"
#include "npc/hlo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto module = npc::hlo::ParseHloModule(bytes, "fuzz.hlo");
  if (!module) return 0;
  (void)npc::host::GenerateCpp(*module);
  (void)npc::host::UnsupportedOpcodes(*module);
  return 0;
}
