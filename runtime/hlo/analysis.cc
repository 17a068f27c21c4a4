// Op analysis of HLO modules (see npc/hlo_analysis.h).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "hlo/text_reader.h"  // kElidedConstantAttribute
#include "npc/hlo.h"
#include "npc/hlo_analysis.h"

namespace npc::hlo {
namespace {

// Ids of the computations reachable from the entry (breadth-first over
// called_computation_ids).
std::set<int64_t> ReachableComputations(const xla::HloModuleProto& module) {
  std::set<int64_t> reachable;
  const xla::HloComputationProto* entry = EntryComputation(module);
  if (entry == nullptr) return reachable;
  std::map<int64_t, const xla::HloComputationProto*> by_id;
  for (const auto& c : module.computations()) by_id.emplace(c.id(), &c);
  std::vector<const xla::HloComputationProto*> work = {entry};
  reachable.insert(entry->id());
  while (!work.empty()) {
    const xla::HloComputationProto* c = work.back();
    work.pop_back();
    for (const auto& inst : c->instructions()) {
      for (int64_t callee : inst.called_computation_ids()) {
        auto it = by_id.find(callee);
        if (it == by_id.end() || !reachable.insert(callee).second) continue;
        work.push_back(it->second);
      }
    }
  }
  return reachable;
}

void CollectElementTypes(const xla::ShapeProto& shape, std::set<std::string>* out) {
  if (shape.element_type() == xla::TUPLE) {
    for (const auto& s : shape.tuple_shapes()) CollectElementTypes(s, out);
    return;
  }
  if (shape.element_type() == xla::PRIMITIVE_TYPE_INVALID) return;
  out->insert(ElementTypeName(shape.element_type()));
}

void CollectLeaves(const xla::ShapeProto& shape, std::vector<std::string>* out) {
  if (shape.element_type() == xla::TUPLE) {
    for (const auto& s : shape.tuple_shapes()) CollectLeaves(s, out);
    return;
  }
  out->push_back(ShapeToString(shape));
}

const xla::HloInstructionProto* FindInstruction(const xla::HloComputationProto& c, int64_t id) {
  for (const auto& inst : c.instructions()) {
    if (inst.id() == id) return &inst;
  }
  return nullptr;
}

}  // namespace

std::string OpKey(const xla::HloInstructionProto& instruction) {
  if (instruction.opcode() == "custom-call") return "custom-call:" + instruction.custom_call_target();
  return instruction.opcode();
}

std::string ElementTypeName(xla::PrimitiveType type) {
  if (type == xla::OPAQUE_TYPE) return "opaque";
  std::string name = xla::PrimitiveType_Name(type);
  if (name.empty()) return "type" + std::to_string(static_cast<int>(type));
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

ModuleAnalysis AnalyzeModule(const xla::HloModuleProto& module) {
  ModuleAnalysis a;
  a.name = module.name();
  const std::set<int64_t> reachable = ReachableComputations(module);
  std::set<std::string> types;
  for (const auto& c : module.computations()) {
    const bool is_reachable = reachable.count(c.id()) > 0;
    ++a.computations;
    if (is_reachable) ++a.computations_reachable;
    for (const auto& inst : c.instructions()) {
      const std::string key = OpKey(inst);
      ++a.instructions;
      ++a.opcodes[inst.opcode()];
      ++a.op_keys[key];
      if (inst.opcode() == "custom-call") ++a.custom_call_targets[inst.custom_call_target()];
      if (is_reachable) {
        ++a.instructions_reachable;
        ++a.opcodes_reachable[inst.opcode()];
        ++a.op_keys_reachable[key];
      }
      CollectElementTypes(inst.shape(), &types);
      if (inst.opcode() == "constant" && inst.has_frontend_attributes() &&
          inst.frontend_attributes().map().count(kElidedConstantAttribute)) {
        a.elided_constants = true;
      }
    }
  }
  a.element_types.assign(types.begin(), types.end());

  if (const xla::HloComputationProto* entry = EntryComputation(module)) {
    a.entry_computation = entry->name();
    for (const auto& inst : entry->instructions()) {
      if (inst.opcode() != "parameter") continue;
      a.parameters.push_back(ParameterInfo{inst.parameter_number(), inst.name(), ShapeToString(inst.shape())});
    }
    std::stable_sort(a.parameters.begin(), a.parameters.end(),
                     [](const ParameterInfo& x, const ParameterInfo& y) { return x.number < y.number; });
    if (const xla::HloInstructionProto* root = FindInstruction(*entry, entry->root_id())) {
      a.result_shape = ShapeToString(root->shape());
      CollectLeaves(root->shape(), &a.outputs);
    }
  }
  a.input_output_aliases = module.input_output_alias().entries_size();
  return a;
}

std::vector<InstructionInfo> InstructionsWithOpKey(const xla::HloModuleProto& module, const std::string& op_key) {
  const std::set<int64_t> reachable = ReachableComputations(module);
  std::vector<InstructionInfo> out;
  for (const auto& c : module.computations()) {
    std::map<int64_t, const xla::HloInstructionProto*> by_id;
    for (const auto& inst : c.instructions()) by_id.emplace(inst.id(), &inst);
    for (const auto& inst : c.instructions()) {
      if (OpKey(inst) != op_key) continue;
      InstructionInfo info;
      info.computation = c.name();
      info.reachable = reachable.count(c.id()) > 0;
      info.name = inst.name();
      info.op_key = op_key;
      info.shape = ShapeToString(inst.shape());
      for (int64_t id : inst.operand_ids()) {
        auto it = by_id.find(id);
        info.operand_shapes.push_back(it == by_id.end() ? std::string("?") : ShapeToString(it->second->shape()));
      }
      if (inst.has_metadata()) {
        info.op_type = inst.metadata().op_type();
        info.op_name = inst.metadata().op_name();
        info.source_file = inst.metadata().source_file();
        info.source_line = inst.metadata().source_line();
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

}  // namespace npc::hlo
