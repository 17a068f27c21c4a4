#include "generator/explain.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "generator/commands.h"
#include "npc/cache.h"
#include "npc/log.h"

namespace npc::tool {
namespace {

constexpr size_t kMaxDetails = 12;
constexpr size_t kMaxDetailChars = 400;

std::string Clip(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n') c = ';';
  }
  if (s.size() > kMaxDetailChars) s = s.substr(0, kMaxDetailChars) + " ...";
  return s;
}

std::string JoinNumbers(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

// "add f32[4,8]": what an instruction is, without its place.
std::string Signature(const hlo::CanonicalInstruction& inst) {
  return inst.normalized.opcode() + " " + hlo::ShapeToString(inst.normalized.shape());
}

bool SameInstruction(const hlo::CanonicalInstruction& a, const hlo::CanonicalInstruction& b) {
  return a.operands == b.operands && a.control_predecessors == b.control_predecessors &&
         a.called_computations == b.called_computations &&
         google::protobuf::util::MessageDifferencer::Equals(a.normalized, b.normalized);
}

// The fields that differ between two messages, "cached -> wanted", in words.
std::string MessageDifference(const google::protobuf::Message& cached, const google::protobuf::Message& wanted) {
  std::string fields;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&fields);
  differencer.Compare(cached, wanted);
  return Clip(fields);
}

// What differs between two instructions at the same position, in words.
std::string DescribeInstructionDifference(const hlo::CanonicalInstruction& a, const hlo::CanonicalInstruction& b) {
  std::vector<std::string> parts;
  std::string fields;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&fields);
  differencer.Compare(b.normalized, a.normalized);  // "cached -> wanted"
  if (!fields.empty()) parts.push_back(Clip(fields));
  if (a.operands != b.operands) parts.push_back("operands " + JoinNumbers(b.operands) + " -> " + JoinNumbers(a.operands));
  if (a.control_predecessors != b.control_predecessors) {
    parts.push_back("control predecessors " + JoinNumbers(b.control_predecessors) + " -> " +
                    JoinNumbers(a.control_predecessors));
  }
  if (a.called_computations != b.called_computations) {
    parts.push_back("called computations " + JoinNumbers(b.called_computations) + " -> " +
                    JoinNumbers(a.called_computations));
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string ComputationLabel(size_t index, const hlo::CanonicalComputation& wanted) {
  return "computation " + std::to_string(index) + (index == 0 ? " (entry " : " (") + wanted.name + ")";
}

}  // namespace

ModuleComparison CompareCanonicalForms(const hlo::CanonicalModule& wanted, const hlo::CanonicalModule& cached,
                                       size_t max_details) {
  ModuleComparison out;
  auto note = [&](std::string line) {
    if (out.details.size() < max_details) out.details.push_back(std::move(line));
    else ++out.more;
  };
  const size_t n = std::max(wanted.computations.size(), cached.computations.size());
  for (size_t c = 0; c < n; ++c) {
    if (c >= wanted.computations.size()) {
      out.total += static_cast<int>(cached.computations[c].instructions.size());
      note("computation " + std::to_string(c) + " (" + cached.computations[c].name + ") is only in the cached graph");
      continue;
    }
    const auto& w = wanted.computations[c];
    if (c >= cached.computations.size()) {
      out.total += static_cast<int>(w.instructions.size());
      note(ComputationLabel(c, w) + " is only in this graph");
      continue;
    }
    const auto& k = cached.computations[c];
    out.total += static_cast<int>(std::max(w.instructions.size(), k.instructions.size()));
    const size_t common = std::min(w.instructions.size(), k.instructions.size());
    for (size_t i = 0; i < common; ++i) {
      if (SameInstruction(w.instructions[i], k.instructions[i])) ++out.equal;
    }
    if (w.instructions.size() != k.instructions.size()) {
      // Positions shift: list what each side has that the other lacks.
      std::map<std::string, int> count;
      for (const auto& inst : w.instructions) ++count[Signature(inst)];
      for (const auto& inst : k.instructions) --count[Signature(inst)];
      std::string only_here, only_cached;
      for (const auto& [sig, d] : count) {
        std::string item = sig + (std::abs(d) > 1 ? " x" + std::to_string(std::abs(d)) : "");
        if (d > 0) only_here += (only_here.empty() ? "" : ", ") + item;
        if (d < 0) only_cached += (only_cached.empty() ? "" : ", ") + item;
      }
      note(ComputationLabel(c, w) + ": " + std::to_string(w.instructions.size()) + " instructions, the cached graph's " +
           std::to_string(k.instructions.size()) + (only_here.empty() ? "" : "; only here: " + Clip(only_here)) +
           (only_cached.empty() ? "" : "; only in the cached graph: " + Clip(only_cached)));
      continue;
    }
    bool instructions_differ = false;
    for (size_t i = 0; i < common; ++i) {
      if (SameInstruction(w.instructions[i], k.instructions[i])) continue;
      instructions_differ = true;
      note(ComputationLabel(c, w) + ", instruction %" + w.instructions[i].name + " (cached %" + k.instructions[i].name +
           "): " + DescribeInstructionDifference(w.instructions[i], k.instructions[i]));
    }
    if (w.root != k.root) note(ComputationLabel(c, w) + ": root " + std::to_string(k.root) + " -> " + std::to_string(w.root));
    // Computation-level fields (the program shape follows the instructions:
    // only worth a line when they are the same).
    if (!instructions_differ && !google::protobuf::util::MessageDifferencer::Equals(w.normalized, k.normalized)) {
      note(ComputationLabel(c, w) + ": " + MessageDifference(k.normalized, w.normalized));
    }
    if (w.schedule != k.schedule) {
      note(ComputationLabel(c, w) + ": schedule " + JoinNumbers(k.schedule) + " -> " + JoinNumbers(w.schedule));
    }
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(wanted.module, cached.module)) {
    note("module-level fields differ: " + MessageDifference(cached.module, wanted.module));
  }
  if (wanted.has_schedule != cached.has_schedule) {
    note(wanted.has_schedule ? "this graph has a schedule, the cached graph none"
                             : "the cached graph has a schedule, this graph none");
  }
  return out;
}

FlagsComparison CompareFlags(const std::vector<std::string>& wanted, const std::vector<std::string>& cached) {
  FlagsComparison out;
  std::multiset<std::string> w(wanted.begin(), wanted.end()), k(cached.begin(), cached.end());
  std::set_difference(w.begin(), w.end(), k.begin(), k.end(), std::back_inserter(out.only_wanted));
  std::set_difference(k.begin(), k.end(), w.begin(), w.end(), std::back_inserter(out.only_cached));
  out.reordered = out.only_wanted.empty() && out.only_cached.empty() && wanted != cached;
  return out;
}

namespace {

struct Wanted {
  xla::HloModuleProto module;
  std::vector<std::string> flags;
  std::string flags_source;  // "NEURON_CC_FLAGS" or the entry's compile_flags.json
};

// A file: the module, flags from NEURON_CC_FLAGS. A directory: a cache entry
// (its HLO and its compile_flags.json).
Result<Wanted> ReadWanted(const std::string& path) {
  namespace fs = std::filesystem;
  Wanted w;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::string hlo = path + "/" + std::string(cache::kHloFile);
    if (!fs::exists(hlo, ec)) hlo = path + "/" + std::string(cache::kLegacyHloFile);
    if (!fs::exists(hlo, ec)) return MakeError(path + ": not a cache entry (no " + std::string(cache::kHloFile) + ")");
    auto module = hlo::ReadHloModuleFile(hlo);
    if (!module) return module.error();
    w.module = std::move(*module);
    const std::string flags_path = path + "/" + std::string(cache::kFlagsFile);
    cache::LocalStore dir(path);
    auto text = dir.Read(std::string(cache::kFlagsFile));
    if (!text) return MakeError(flags_path + ": " + text.error().message);
    auto flags = cache::ParseCompileFlagsJson(*text, flags_path);
    if (!flags) return flags.error();
    w.flags = std::move(*flags);
    w.flags_source = flags_path;
    return w;
  }
  auto module = hlo::ReadHloModuleFile(path);
  if (!module) return module.error();
  w.module = std::move(*module);
  const char* env = std::getenv("NEURON_CC_FLAGS");
  auto flags = cache::ParseNeuronCcFlags(env ? env : "");
  if (!flags) return MakeError("NEURON_CC_FLAGS: " + flags.error().message);
  w.flags = flags->compiler_flags;
  w.flags_source = "NEURON_CC_FLAGS";
  return w;
}

std::string FlagsText(const std::vector<std::string>& flags) { return cache::CompileFlagsJson(flags); }

// Explains one graph; true when it is a cache hit.
Result<bool> ExplainOne(ToolContext& ctx, const std::string& path) {
  auto wanted = ReadWanted(path);
  if (!wanted) return wanted.error();
  cache::Store& store = *ctx.store;
  const std::string artifact = ctx.compiler->ArtifactName();
  const std::string key = hlo::CanonicalGraphKey(wanted->module);
  const std::string flags_json = cache::CompileFlagsJson(wanted->flags);
  const cache::EntryRef ref{ctx.compiler_dir, key, cache::FlagsHash(flags_json)};

  std::cout << path << "\n";
  std::cout << "  graph key " << key << ", flags hash " << ref.flags_hash << " of " << flags_json << " (from "
            << wanted->flags_source << ")\n";
  auto state = cache::GetEntryState(store, ref, artifact, cache::ArtifactCheck::kDigest);
  if (!state) return state.error();
  std::cout << "  entry " << ctx.cache_url << "/" << ref.dir() << ": ";
  if (*state != cache::EntryState::kEmpty) {
    std::cout << cache::EntryStateName(*state);
    switch (*state) {
      case cache::EntryState::kDone: std::cout << " (a cache hit)\n"; break;
      case cache::EntryState::kFailed: std::cout << " (a cached failure: see model.log; --retry_failed_compilation)\n"; break;
      case cache::EntryState::kTodo: std::cout << " (collected, not compiled yet: run `npc compile`)\n"; break;
      case cache::EntryState::kLocked: std::cout << " (being compiled now)\n"; break;
      case cache::EntryState::kDamaged:
        std::cout << " (its artifact does not match model.done: compiled again by the next miss or `npc compile`)\n";
        break;
      default: std::cout << "\n";
    }
    return *state == cache::EntryState::kDone;
  }
  std::cout << "absent (a cache miss)\n";

  // The same graph with other flags.
  auto names = store.List(ctx.compiler_dir);
  if (!names) return names.error();
  bool explained = false;
  for (const auto& name : *names) {
    auto other = cache::ParseEntryDirName(ctx.compiler_dir, name);
    if (!other || other->graph_key != key) continue;
    auto text = store.Read(other->file(cache::kFlagsFile));
    if (!text) continue;
    auto cached_flags = cache::ParseCompileFlagsJson(*text, other->file(cache::kFlagsFile));
    if (!cached_flags) continue;
    auto st = cache::GetEntryState(store, *other, artifact);
    FlagsComparison f = CompareFlags(wanted->flags, *cached_flags);
    std::cout << "  same graph, other flags: " << other->dir() << " ("
              << (st ? std::string(cache::EntryStateName(*st)) : "unreadable") << "), flags "
              << FlagsText(*cached_flags) << "\n";
    if (f.reordered) std::cout << "    the same flags in another order (the order is part of the flags hash)\n";
    for (const auto& x : f.only_wanted) std::cout << "    only in this run:          " << x << "\n";
    for (const auto& x : f.only_cached) std::cout << "    only in the cached entry:  " << x << "\n";
    explained = true;
  }

  // The same graph and flags under another compiler directory.
  auto roots = store.List("");
  if (!roots) return roots.error();
  for (const auto& dir : *roots) {
    if (dir == ctx.compiler_dir) continue;
    cache::EntryRef moved{dir, ref.graph_key, ref.flags_hash};
    auto exists = store.Exists(moved.dir());
    if (!exists || !*exists) continue;
    std::cout << "  same graph and flags under another compiler directory: " << moved.dir()
              << " (this run uses " << ctx.compiler_dir << ": another backend, compiler or code generator version)\n";
    explained = true;
  }
  if (explained) return false;

  // The nearest graph by structure.
  const hlo::CanonicalModule form = hlo::CanonicalForm(wanted->module);
  std::optional<cache::EntryRef> best;
  ModuleComparison best_cmp;
  for (const auto& name : *names) {
    auto other = cache::ParseEntryDirName(ctx.compiler_dir, name);
    if (!other) continue;
    auto hlo_name = cache::FindHloFile(store, *other);
    if (!hlo_name || !hlo_name->has_value()) continue;
    auto bytes = store.Read(other->file(**hlo_name));
    if (!bytes) continue;
    auto module = hlo::ParseHloModule(*bytes, other->file(**hlo_name));
    if (!module) continue;
    ModuleComparison cmp = CompareCanonicalForms(form, hlo::CanonicalForm(*module), kMaxDetails);
    if (!best || cmp.equal > best_cmp.equal) {
      best = *other;
      best_cmp = std::move(cmp);
    }
  }
  if (!best || best_cmp.equal == 0) {
    std::cout << "  no graph in " << ctx.compiler_dir << " resembles it: a new graph\n";
    return false;
  }
  std::cout << "  nearest graph: " << best->dir() << ", " << best_cmp.equal << " of " << best_cmp.total
            << " instructions equal; what differs (cached -> this graph):\n";
  if (best->flags_hash != ref.flags_hash) std::cout << "    its flags hash is " << best->flags_hash << "\n";
  for (const auto& d : best_cmp.details) std::cout << "    " << d << "\n";
  if (best_cmp.more) std::cout << "    ... and " << best_cmp.more << " more\n";
  if (best_cmp.details.empty() && best->graph_key != key) {
    std::cout << "    nothing in the canonical form: its key " << best->graph_key
              << " was given by the framework that wrote it, not computed from the HLO\n";
  }
  return false;
}

}  // namespace

int RunExplain(const ToolOptions& options, const std::vector<std::string>& paths) {
  if (paths.empty()) {
    std::cerr << "npc explain: no HLO file or entry directory given (npc explain [options] <paths...>)\n";
    return 2;
  }
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 2;
  }
  int status = 0;
  for (const auto& path : paths) {
    auto hit = ExplainOne(*ctx, path);
    if (!hit) {
      log::Error(log::kParallelCompile, hit.error().message);
      return 2;
    }
    if (!*hit) status = 1;
  }
  return status;
}

}  // namespace npc::tool
