// The canonical graph key (see npc/hlo.h).
//
// Canonical form: computations are numbered in the order they are reached
// from the entry; instructions within a computation are numbered parameters
// first (by parameter number), then in post order from the root (operands in
// operand order, then control predecessors), then any unreachable ones in
// their listed order. Each instruction is written as a copy with names, ids,
// metadata and references cleared (references are written separately as
// canonical numbers), with default layouts, all-DEFAULT operand precisions and
// empty sub-messages removed so that producers that spell the same thing
// differently agree.
#include <openssl/sha.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>

#include "npc/hlo.h"

namespace npc::hlo {
namespace {

void NormalizeShape(xla::ShapeProto* shape) {
  for (auto& t : *shape->mutable_tuple_shapes()) NormalizeShape(&t);
  bool all_static = true;
  for (bool d : shape->is_dynamic_dimension()) all_static &= !d;
  if (all_static) shape->clear_is_dynamic_dimension();
  if (shape->has_layout()) {
    const auto& layout = shape->layout();
    bool is_default = layout.memory_space() == 0;
    int n = shape->dimensions_size();
    if (layout.minor_to_major_size() != 0) {
      is_default &= layout.minor_to_major_size() == n;
      for (int i = 0; is_default && i < n; ++i) is_default &= layout.minor_to_major(i) == n - 1 - i;
    }
    if (is_default) shape->clear_layout();
  }
}

void NormalizeLiteral(xla::LiteralProto* literal) {
  NormalizeShape(literal->mutable_shape());
  for (auto& t : *literal->mutable_tuple_literals()) NormalizeLiteral(&t);
}

class Canonicalizer {
 public:
  explicit Canonicalizer(const xla::HloModuleProto& module) : module_(module) {
    for (const auto& c : module.computations()) computations_[c.id()] = &c;
  }

  CanonicalModule Run() {
    CanonicalModule out;
    const xla::HloComputationProto* entry = EntryComputation(module_);
    if (entry == nullptr) return out;
    ComputationIndex(entry->id());
    while (!queue_.empty()) {
      int64_t id = queue_.front();
      queue_.pop_front();
      auto it = computations_.find(id);
      CanonicalComputation c;
      if (it != computations_.end()) c = Canonicalize(*it->second);
      else c.missing = true;
      out.computations.push_back(std::move(c));
    }
    out.input_output_alias = module_.input_output_alias();
    return out;
  }

 private:
  int64_t ComputationIndex(int64_t id) {
    auto [it, inserted] = computation_index_.emplace(id, static_cast<int64_t>(computation_index_.size()));
    if (inserted) queue_.push_back(id);
    return it->second;
  }

  CanonicalComputation Canonicalize(const xla::HloComputationProto& c) {
    std::map<int64_t, const xla::HloInstructionProto*> by_id;
    for (const auto& inst : c.instructions()) by_id[inst.id()] = &inst;

    std::vector<const xla::HloInstructionProto*> order;
    std::set<int64_t> visited;
    // Parameters first, by number.
    std::vector<const xla::HloInstructionProto*> params;
    for (const auto& inst : c.instructions()) {
      if (inst.opcode() == "parameter") params.push_back(&inst);
    }
    std::stable_sort(params.begin(), params.end(),
                     [](auto* a, auto* b) { return a->parameter_number() < b->parameter_number(); });
    for (auto* p : params) {
      visited.insert(p->id());
      order.push_back(p);
    }
    // Post order from the root, iteratively (graphs can be deep).
    auto visit = [&](int64_t start) {
      if (visited.count(start) || !by_id.count(start)) return;
      std::vector<std::pair<int64_t, size_t>> stack{{start, 0}};
      visited.insert(start);
      while (!stack.empty()) {
        auto& [id, next] = stack.back();
        const auto* inst = by_id[id];
        size_t n_ops = static_cast<size_t>(inst->operand_ids_size());
        size_t n_all = n_ops + static_cast<size_t>(inst->control_predecessor_ids_size());
        if (next < n_all) {
          int64_t child = next < n_ops ? inst->operand_ids(static_cast<int>(next))
                                       : inst->control_predecessor_ids(static_cast<int>(next - n_ops));
          ++next;
          if (!visited.count(child) && by_id.count(child)) {
            visited.insert(child);
            stack.push_back({child, 0});
          }
        } else {
          order.push_back(inst);
          stack.pop_back();
        }
      }
    };
    visit(c.root_id());
    for (const auto& inst : c.instructions()) visit(inst.id());

    std::map<int64_t, int64_t> index;
    for (size_t i = 0; i < order.size(); ++i) index[order[i]->id()] = static_cast<int64_t>(i);
    auto number = [&](int64_t id) { return index.count(id) ? index[id] : int64_t{-1}; };

    CanonicalComputation out;
    out.name = c.name();
    out.root = number(c.root_id());
    for (const auto* inst : order) {
      CanonicalInstruction ci;
      ci.name = inst->name();
      xla::HloInstructionProto& copy = ci.normalized;
      copy = *inst;
      copy.DiscardUnknownFields();
      copy.clear_name();
      copy.clear_id();
      copy.clear_metadata();
      copy.clear_operand_ids();
      copy.clear_control_predecessor_ids();
      copy.clear_called_computation_ids();
      if (copy.has_frontend_attributes() && copy.frontend_attributes().map().empty()) copy.clear_frontend_attributes();
      if (copy.has_precision_config()) {
        // Producers write either no precision config or one DEFAULT per operand: the same thing.
        bool all_default = true;
        for (int p : copy.precision_config().operand_precision()) all_default &= p == xla::PrecisionConfig::DEFAULT;
        if (all_default) copy.clear_precision_config();
      }
      NormalizeShape(copy.mutable_shape());
      if (copy.has_literal()) NormalizeLiteral(copy.mutable_literal());
      for (int64_t op : inst->operand_ids()) ci.operands.push_back(number(op));
      for (int64_t op : inst->control_predecessor_ids()) ci.control_predecessors.push_back(number(op));
      for (int64_t cc : inst->called_computation_ids()) ci.called_computations.push_back(ComputationIndex(cc));
      out.instructions.push_back(std::move(ci));
    }
    return out;
  }

  const xla::HloModuleProto& module_;
  std::map<int64_t, const xla::HloComputationProto*> computations_;
  std::map<int64_t, int64_t> computation_index_;
  std::deque<int64_t> queue_;
};

// The byte string that CanonicalGraphKey hashes: length-prefixed tokens,
// integers as 8 little-endian bytes, messages in deterministic serialization.
class Serializer {
 public:
  std::string Run(const CanonicalModule& m) {
    if (m.computations.empty()) return "invalid";
    for (const auto& c : m.computations) {
      if (c.missing) {
        Put("missing-computation");
        continue;
      }
      Put("computation");
      PutInt(static_cast<int64_t>(c.instructions.size()));
      for (const auto& inst : c.instructions) {
        PutMessage(inst.normalized);
        Put("operands");
        for (int64_t op : inst.operands) PutInt(op);
        Put("control");
        for (int64_t op : inst.control_predecessors) PutInt(op);
        Put("calls");
        for (int64_t cc : inst.called_computations) PutInt(cc);
      }
      Put("root");
      PutInt(c.root);
    }
    Put("alias");
    PutMessage(m.input_output_alias);
    return out_;
  }

 private:
  void Put(std::string_view s) {
    PutInt(static_cast<int64_t>(s.size()));
    out_.append(s);
  }
  void PutInt(int64_t v) {
    char buf[8];
    for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    out_.append(buf, 8);
  }
  void PutMessage(const google::protobuf::Message& m) {
    std::string bytes;
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
    coded.Trim();
    Put(bytes);
  }

  std::string out_;
};

}  // namespace

CanonicalModule CanonicalForm(const xla::HloModuleProto& module) { return Canonicalizer(module).Run(); }

std::string CanonicalGraphKey(const xla::HloModuleProto& module) {
  std::string canonical = Serializer().Run(CanonicalForm(module));
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), digest);
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | digest[i];
  return std::to_string(key);
}

}  // namespace npc::hlo
