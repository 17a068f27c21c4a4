// Seed helper of scripts/fuzz.sh: reads an HLO module in any format npc reads
// and writes it as a serialized HloModuleProto (argv[2]) and HloProto
// (argv[3]), seeds for the binary reader's fuzzer.
#include <fstream>
#include <iostream>

#include "npc/hlo.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: npc_fuzz_to_proto <hlo file> <HloModuleProto out> <HloProto out>\n";
    return 2;
  }
  auto module = npc::hlo::ReadHloModuleFile(argv[1]);
  if (!module) {
    std::cerr << module.error().message << "\n";
    return 1;
  }
  npc::xla::HloProto wrapper;
  *wrapper.mutable_hlo_module() = *module;
  std::ofstream(argv[2], std::ios::binary) << module->SerializeAsString();
  std::ofstream(argv[3], std::ios::binary) << wrapper.SerializeAsString();
  return 0;
}
