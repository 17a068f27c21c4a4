// Compiling generated C++ into a shared object (see host_backend.h).
#include <filesystem>
#include <sstream>

#include "compilers/process.h"
#include "host/host_backend.h"

namespace npc::host {

std::string DefaultCxx() {
#ifdef NPC_DEFAULT_CXX
  return NPC_DEFAULT_CXX;
#else
  return "c++";
#endif
}

Status CompileSharedObject(const std::string& cxx, const std::string& source_path, const std::string& output_path,
                           std::string* log) {
  namespace fs = std::filesystem;
  std::vector<std::string> argv;
  {
    std::istringstream words(cxx);
    std::string word;
    while (words >> word) argv.push_back(word);
  }
  if (argv.empty()) return MakeError("host backend: no C++ compiler given");
  std::error_code ec;
  const fs::path source = fs::absolute(source_path, ec);
  if (ec) return MakeError("host backend: " + source_path + ": " + ec.message());
  const fs::path output = fs::absolute(output_path, ec);
  if (ec) return MakeError("host backend: " + output_path + ": " + ec.message());
  const std::string dir = source.parent_path().string();
  // Compile in the source's directory with a relative source name, and map the
  // directory to ".", so that no temporary path ends up in the .so.
  for (const std::string& flag : {std::string("-std=c++17"), std::string("-O2"), std::string("-shared"),
                                  std::string("-fPIC"), "-ffile-prefix-map=" + dir + "=.",
                                  std::string("-frandom-seed=npc"), std::string("-o"), output.string(),
                                  source.filename().string()}) {
    argv.push_back(flag);
  }
  ProcessOptions options;
  options.cwd = dir;
  const std::string command = "cd " + ShellQuote(dir) + " && " + ShellJoin(argv);
  if (log) *log = command + "\n";
  fs::remove(output, ec);  // so that a stale file is never mistaken for this compile's output
  auto result = RunProcess(argv, options);
  if (!result) {
    if (log) *log += result.error().message + "\n";
    return MakeError("host backend: cannot run the C++ compiler '" + cxx + "': " + result.error().message);
  }
  if (log) *log += result->output;
  if (result->exit_status != 0) {
    std::string tail = result->output;
    if (tail.size() > 4000) tail = "..." + tail.substr(tail.size() - 4000);
    return MakeError("host backend: the C++ compiler failed (exit status " + std::to_string(result->exit_status) +
                     ") compiling " + source.string() + ":\n" + tail);
  }
  if (!fs::is_regular_file(output, ec)) {
    return MakeError("host backend: the C++ compiler exited 0 but wrote no " + output.string());
  }
  return {};
}

}  // namespace npc::host
