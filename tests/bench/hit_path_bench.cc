// hit_path_bench: what a cache hit costs, part by part (issue 10, "The hit
// path stays cheap"). Built by CMake, not a ctest test; run by
// scripts/bench-hit-path.sh.
//
//   hit_path_bench [--module <HLO file>] [--runs N]
//
// Compiles one module with the host backend into a fresh cache (once), then
// prints:
//   whole-process hit   a new process: create the runtime, key the module,
//                       look up, check the digest, load the artifact, exit
//   runtime creation    Runtime::Create with the compiler identity memoized,
//                       and with it probed (an empty memo: runs the compiler)
//   digest check        SHA-256 of a 64 MiB file, per MiB
//   lookup              entry state + model.done + digest of the artifact
//   hit in process      GetExecutable with the caller's key (no key computation)
//   key                 CanonicalGraphKey of the module (another helper's part)
//   validate+serialize  what every hit paid before (now only misses do)
// --module: an HLO file (text or proto) used for the key and validation
// figures (default: the benchmark's own module, which is also the one hit).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cache/read_through.h"
#include "npc/cache.h"
#include "npc/hlo.h"
#include "npc/hlo_builder.h"
#include "npc/runtime.h"
#include "util/digest.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Mean milliseconds of `runs` calls of `f` (after one warm-up call).
double MeanMs(int runs, const std::function<void()>& f) {
  f();
  auto start = Clock::now();
  for (int i = 0; i < runs; ++i) f();
  return Ms(Clock::now() - start) / runs;
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "hit_path_bench: %s\n", message.c_str());
  std::exit(1);
}

// A small MLP step-like module: dot, add, tanh, reduce.
npc::xla::HloModuleProto BenchModule() {
  namespace xla = npc::xla;
  npc::hlo::HloBuilder b("hit_path_bench");
  auto x = b.Parameter(0, xla::F32, {32, 64}, "x");
  auto w = b.Parameter(1, xla::F32, {64, 16}, "w");
  auto y = b.Dot(x, w, {1}, {0});
  auto t = b.Unary("tanh", b.Add(y, y));
  return b.Build(b.Tuple({t}));
}

npc::RuntimeOptions Options(const std::string& cache) {
  npc::RuntimeOptions options;
  options.cache_url = cache;
  options.compiler = npc::CompilerOptionsFromEnvironment();
  return options;
}

// Child mode: one whole-process hit (or, with `create_only`, the runtime's
// creation time printed in ms).
int Child(const std::string& cache, const std::string& module_file, bool create_only) {
  auto start = Clock::now();
  auto rt = npc::Runtime::Create(Options(cache));
  if (!rt) Die(rt.error().message);
  if (create_only) {
    std::printf("%.3f\n", Ms(Clock::now() - start));
    return 0;
  }
  auto module = npc::hlo::ReadHloModuleFile(module_file);
  if (!module) Die(module.error().message);
  auto exe = (*rt)->GetExecutable(*module);
  if (!exe) Die(exe.error().message);
  return (*rt)->counters().hits == 1 ? 0 : 2;
}

int RunSelf(const std::vector<std::string>& args, std::string* output = nullptr) {
  std::string command;
  for (const auto& a : args) command += "'" + a + "' ";
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) Die("cannot run " + command);
  char buf[256];
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && (args[0] == "--child-hit" || args[0] == "--child-create")) {
    return Child(args[1], args[2], args[0] == "--child-create");
  }
  std::string module_file;
  int runs = 20;
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--module") module_file = args[i + 1];
    else if (args[i] == "--runs") runs = std::max(1, std::atoi(args[i + 1].c_str()));
    else Die("unknown option " + args[i] + " (usage: hit_path_bench [--module <HLO file>] [--runs N])");
  }
  const std::string self = fs::canonical("/proc/self/exe").string();
  std::string tmpl = (fs::temp_directory_path() / "npc-hit-bench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) Die("cannot create a temporary directory");
  const std::string dir = tmpl, cache = dir + "/cache", bench_module = dir + "/module.pb";

  // The cached entry: compiled once (a miss), then every run below is a hit.
  const auto module = BenchModule();
  { std::ofstream(bench_module, std::ios::binary) << module.SerializeAsString(); }
  auto rt = npc::Runtime::Create(Options(cache));
  if (!rt) Die(rt.error().message);
  if (auto exe = (*rt)->GetExecutable(module); !exe) Die(exe.error().message);
  const std::string key = npc::hlo::CanonicalGraphKey(module);

  std::printf("hit path (%d runs each; %s)\n", runs, (*rt)->compiler_cache_path().c_str());
  double whole = MeanMs(runs, [&] {
    if (RunSelf({self, "--child-hit", cache, bench_module}) != 0) Die("the whole-process hit failed");
  });
  std::printf("  whole-process hit:          %8.3f ms\n", whole);

  // In new processes (this one has its answers in memory already): with the
  // memo file of compiler identities, and with an empty one (the compiler runs).
  auto child_create_ms = [&](const char* xdg_cache_home) {
    if (xdg_cache_home) setenv("XDG_CACHE_HOME", xdg_cache_home, 1);
    std::string out;
    if (RunSelf({self, "--child-create", cache, bench_module}, &out) != 0) Die("runtime creation failed");
    if (xdg_cache_home) unsetenv("XDG_CACHE_HOME");
    return std::atof(out.c_str());
  };
  double create = 0;
  for (int i = 0; i < runs; ++i) create += child_create_ms(nullptr) / runs;
  const std::string empty_memo = dir + "/empty-memo";
  double probed = 0;
  for (int i = 0; i < std::max(1, runs / 5); ++i) {
    std::error_code ec;
    fs::remove_all(empty_memo, ec);
    probed += child_create_ms(empty_memo.c_str()) / std::max(1, runs / 5);
  }
  std::printf("  runtime creation:           %8.3f ms (compiler identity memoized; probed: %.3f ms)\n", create, probed);

  {
    const std::string big = dir + "/64MiB";
    std::ofstream(big, std::ios::binary) << std::string(64 << 20, 'x');
    double ms = MeanMs(std::max(1, runs / 5), [&] {
      if (!npc::util::Sha256File(big)) Die("digest failed");
    });
    std::printf("  digest check:               %8.3f ms per MiB (SHA-256, file in the page cache)\n", ms / 64);
  }

  npc::cache::LocalStore store(cache);
  npc::cache::EntryRef entry{(*rt)->compiler_cache_path().substr(cache.size() + 1), key,
                             npc::cache::FlagsHash(npc::cache::CompileFlagsJson({}))};
  const std::string artifact_path = cache + "/" + entry.file("model.so");
  double lookup = MeanMs(runs, [&] {
    auto state = npc::cache::GetEntryState(store, entry, "model.so");
    if (!state || *state != npc::cache::EntryState::kDone) Die("not a hit");
    auto record = npc::cache::ReadDoneFile(store, entry);
    if (!record) Die(record.error().message);
    auto why = npc::cache::CheckArtifactFile(artifact_path, *record, npc::cache::ArtifactCheck::kDigest);
    if (!why || why->has_value()) Die("damaged");
  });
  std::printf("  lookup:                     %8.3f ms (state, model.done, SHA-256 of the %lld-byte artifact)\n", lookup,
              static_cast<long long>(fs::file_size(artifact_path)));

  double hit = MeanMs(runs, [&] {
    if (!(*rt)->GetExecutable(module, key)) Die("hit failed");
  });
  std::printf("  hit in process:             %8.3f ms (GetExecutable with the caller's key: lookup + load)\n", hit);

  npc::xla::HloModuleProto measured = module;
  std::string source = "the benchmark's module";
  if (!module_file.empty()) {
    auto m = npc::hlo::ReadHloModuleFile(module_file);
    if (!m) Die(m.error().message);
    measured = std::move(*m);
    source = module_file;
  }
  const double mb = measured.ByteSizeLong() / 1e6;
  double key_ms = MeanMs(runs, [&] { (void)npc::hlo::CanonicalGraphKey(measured); });
  std::printf("  key:                        %8.3f ms (%.3f MB module: %s)\n", key_ms, mb, source.c_str());
  double validate = MeanMs(runs, [&] {
    if (!npc::hlo::ValidateModule(measured, "module")) Die("invalid module");
    std::string bytes;
    measured.SerializeToString(&bytes);
  });
  std::printf("  validate+serialize:         %8.3f ms (paid by every hit before; now by misses only)\n", validate);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
