#include "generator/import.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "generator/commands.h"
#include "npc/hlo.h"
#include "npc/log.h"

namespace npc::tool {

namespace {

// Serialized with deterministic map ordering, so the same module always gives
// the same bytes (and the same HLO digest in a manifest).
std::string SerializeDeterministic(const xla::HloModuleProto& module) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    module.SerializeToCodedStream(&coded);
  }
  return out;
}

std::string StoreShownPath(cache::Store& store, const std::string& path) {
  auto local = store.LocalPath(path);
  return local ? *local : store.url() + "/" + path;
}

}  // namespace

Result<std::vector<ImportedEntry>> ImportHloFiles(cache::Store& store, const std::string& compiler_dir,
                                                  const std::vector<std::string>& files,
                                                  const std::vector<std::string>& flags,
                                                  std::vector<Error>* unreadable) {
  const std::string flags_json = cache::CompileFlagsJson(flags);
  const std::string flags_hash = cache::FlagsHash(flags_json);
  struct Parsed {
    ImportedEntry entry;
    std::string bytes;
  };
  std::vector<Parsed> parsed;
  parsed.reserve(files.size());
  // Parse everything first: a bad file imports nothing.
  for (const auto& file : files) {
    auto module = hlo::ReadHloModuleFile(file);
    if (!module) {
      if (!unreadable) return module.error();
      unreadable->push_back(module.error());
      continue;
    }
    Parsed p;
    p.entry.source = file;
    p.entry.ref = cache::EntryRef{compiler_dir, hlo::CanonicalGraphKey(*module), flags_hash};
    p.bytes = SerializeDeterministic(*module);
    parsed.push_back(std::move(p));
  }
  std::vector<ImportedEntry> out;
  out.reserve(parsed.size());
  for (auto& p : parsed) {
    auto existing = cache::FindHloFile(store, p.entry.ref);
    if (!existing) return existing.error();
    p.entry.created = !existing->has_value();
    if (p.entry.created) {
      if (auto st = cache::PutEntryInputs(store, p.entry.ref, p.bytes, flags_json); !st) return st.error();
    }
    out.push_back(std::move(p.entry));
  }
  return out;
}

namespace {

bool HasHloFileName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  std::string n = name;
  auto ends_with = [&](std::string_view suffix) {
    return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".gz")) n.resize(n.size() - 3);
  return ends_with(".hlo") || ends_with(".txt") || ends_with(".pb") || ends_with(".binpb");
}

}  // namespace

Result<std::vector<std::string>> ExpandHloPaths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& path : paths) {
    std::error_code ec;
    auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) return MakeError(path + ": no such file or directory");
    if (!fs::is_directory(status)) {
      out.push_back(path);
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
    if (ec) return MakeError(path + ": cannot list: " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) return MakeError(path + ": cannot list: " + ec.message());
      const std::string name = it->path().filename().string();
      if (it->is_directory(ec)) {
        if (!name.empty() && name[0] == '.') it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec) && HasHloFileName(name)) found.push_back(it->path().string());
    }
    if (found.empty()) return MakeError(path + ": no HLO files (*.hlo, *.txt, *.pb, *.binpb, optionally .gz) in this directory");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

Result<std::vector<std::string>> ImportCompilerFlags(const ToolOptions& options) {
  if (!options.import_flags) {
    const char* env = std::getenv("NEURON_CC_FLAGS");
    auto flags = cache::ParseNeuronCcFlags(env ? env : "");
    if (!flags) return MakeError("NEURON_CC_FLAGS: " + flags.error().message);
    return flags->compiler_flags;
  }
  auto flags = cache::ParseNeuronCcFlags(*options.import_flags);
  if (!flags) return MakeError("--flags: " + flags.error().message);
  // The words ParseNeuronCcFlags consumed are the cache layer's, not the compiler's.
  auto words = cache::ShellSplit(*options.import_flags);
  if (!words) return MakeError("--flags: " + words.error().message);
  for (const auto& word : *words) {
    if (std::find(flags->compiler_flags.begin(), flags->compiler_flags.end(), word) != flags->compiler_flags.end()) {
      continue;
    }
    if (word.rfind("--", 0) == 0) {
      return MakeError("--flags: " + word.substr(0, word.find('=')) +
                       " is an option of the cache, not a compiler flag (give the cache with --cache_dir)");
    }
  }
  return flags->compiler_flags;
}

int RunImport(const ToolOptions& options, const std::vector<std::string>& paths) {
  if (paths.empty()) {
    std::cerr << "npc import: no HLO files given (npc import [options] [--] <files or folders...>)\n";
    return 2;
  }
  auto files = ExpandHloPaths(paths);
  if (!files) {
    log::Error(log::kParallelCompile, files.error().message);
    return 1;
  }
  auto flags = ImportCompilerFlags(options);
  if (!flags) {
    log::Error(log::kParallelCompile, flags.error().message);
    return 2;
  }
  auto ctx = OpenToolContext(options);
  if (!ctx) {
    log::Error(log::kParallelCompile, ctx.error().message);
    return 1;
  }
  std::vector<Error> unreadable;
  auto imported =
      ImportHloFiles(*ctx->store, ctx->compiler_dir, *files, *flags, options.keep_going ? &unreadable : nullptr);
  if (!imported) {
    log::Error(log::kParallelCompile, imported.error().message);
    return 1;
  }
  int created = 0;
  for (const auto& e : *imported) {
    std::string where = StoreShownPath(*ctx->store, e.ref.dir());
    if (e.created) {
      ++created;
      std::cout << "imported " << e.source << " -> " << where << "\n";
    } else {
      std::cout << "already in the cache: " << e.source << " -> " << where << "\n";
    }
  }
  log::Info(log::kParallelCompile, "Imported " + std::to_string(created) + " new entries (" +
                                       std::to_string(imported->size() - created) + " already present) into " +
                                       ctx->compiler_dir_path + "; compile them with `npc compile`");
  for (const auto& e : unreadable) log::Error(log::kParallelCompile, "not imported: " + e.message);
  if (!unreadable.empty()) {
    log::Error(log::kParallelCompile, std::to_string(unreadable.size()) + " of " + std::to_string(files->size()) +
                                          " files were not imported");
    return 1;
  }
  return 0;
}

}  // namespace npc::tool
