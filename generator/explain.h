// `npc explain`: why a graph is, or is not, found in the cache ("why did it
// recompile?", DESIGN.md section 3).
//
// For an HLO module (a file, or a cache entry directory with its
// compile_flags.json) it computes what the runtime would look up: the
// canonical graph key, the flags hash of the compiler flags (NEURON_CC_FLAGS,
// or the entry's own compile_flags.json), and the compiler directory of the
// selected backend. Then it says, in this order:
//  - whether that entry exists, and its state (DONE is a cache hit);
//  - entries of the same graph with other flags, and which flags differ;
//  - entries of the same graph and flags under other compiler directories
//    (another backend, compiler or code generator version);
//  - otherwise the nearest graph in the compiler directory (most instructions
//    equal at the same canonical position) and the instructions that differ,
//    field by field (opcode, shape, literal, attribute, operands).
#pragma once

#include <string>
#include <vector>

#include "generator/cli.h"
#include "npc/hlo.h"

namespace npc::tool {

// The differences between two canonical forms (hlo::CanonicalForm),
// computation by computation in canonical order, instruction by instruction
// at the same canonical position.
struct ModuleComparison {
  int equal = 0;                      // instructions equal at the same position
  int total = 0;                      // positions compared: the larger count, summed over computations
  std::vector<std::string> details;   // one line per difference, at most `max_details`
  int more = 0;                       // differences not listed in `details`
};
ModuleComparison CompareCanonicalForms(const hlo::CanonicalModule& wanted, const hlo::CanonicalModule& cached,
                                       size_t max_details);

// Flags of the wanted entry against a cached entry's. `reordered`: the same
// flags in another order (which changes the flags hash too).
struct FlagsComparison {
  std::vector<std::string> only_wanted;
  std::vector<std::string> only_cached;
  bool reordered = false;
};
FlagsComparison CompareFlags(const std::vector<std::string>& wanted, const std::vector<std::string>& cached);

// `npc explain [options] <HLO file or entry directory>...`: prints the
// explanation of each. Exit status: 0 when every graph is a cache hit (DONE),
// 1 when some is not (explained), 2 on an error (a file that does not read,
// naming it).
int RunExplain(const ToolOptions& options, const std::vector<std::string>& paths);

}  // namespace npc::tool
