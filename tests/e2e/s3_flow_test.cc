// End-to-end against an S3 cache: the real CLI programs, the real ninja, the
// real C++ compiler and a real S3-compatible server (moto) that each test
// starts on a free loopback port.
//   - the sample's flow: neuron_parallel_compile mlp_train (trial run + compile
//     into s3://), then the real run hits every graph;
//   - the runtime's compile on a miss writes into the bucket;
//   - the other verbs: import, generate + ninja by hand, scan, manifest,
//     compile --manifest, verify, clear-locks, clean;
//   - the server killed in the middle of a compile run: the run says what was
//     not uploaded and keeps it; after the server is back a rerun completes;
//   - two compile runs at once on one bucket compile each entry once;
//   - a wrong secret key: one clear error, at once.
// Skips, saying why, when moto or the sample program is missing.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cache/s3_client.h"
#include "cache/s3_store.h"
#include "npc/cache.h"
#include "npc/compiler.h"
#include "npc/hlo_builder.h"
#include "npc/runtime.h"
#include "support/moto_server.h"
#include "support/test_support.h"

namespace npc {
namespace {

namespace fs = std::filesystem;
using cache::EntryState;
using cache::S3Store;
using cache::s3::S3Client;
using cache::s3::S3Config;
using cache::s3::S3Request;
using testing::CommandResult;
using testing::FileExists;
using testing::MotoServer;
using testing::ReadFile;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteFile;
using Env = std::map<std::string, std::string>;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double Number(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) {
    ADD_FAILURE() << "no match for /" << pattern << "/ in:\n" << text;
    return -1;
  }
  return std::stod(m[1].str());
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
  return n;
}

// Files under `dir` (recursively) whose name ends with `suffix`.
std::vector<std::string> FilesEndingWith(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(it->path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t CountFiles(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir, ec), fs::directory_iterator()));
}

class S3FlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::MotoUnavailable().empty()) GTEST_SKIP() << testing::MotoUnavailable();
    if (!FileExists(NPC_MLP_TRAIN)) GTEST_SKIP() << "the sample " << NPC_MLP_TRAIN << " is not built";
    compiler_dir_ = testing::HostCompilerDir();
    ASSERT_FALSE(compiler_dir_.empty());
    local_ = tmp_.Sub("local");
  }

  void StartServer(bool auth) {
    ASSERT_TRUE(server_.Start(auth)) << server_.error();
    S3Client client(Config());
    S3Request create;
    create.method = "PUT";
    auto r = client.Send(create);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->status, 200) << r->body;
  }

  std::string Url() const { return "s3://" + bucket_ + "/" + prefix_; }

  S3Config Config() const {
    S3Config c;
    c.bucket = bucket_;
    c.prefix = prefix_;
    c.endpoint = server_.endpoint();
    c.credentials = {server_.access_key, server_.secret_key, "", "the test"};
    c.max_retries = 2;
    c.retry_base_seconds = 0.05;
    c.connect_timeout_seconds = 2;
    return c;
  }

  // The environment of the programs: the server, its keys, the local
  // read-through directory inside the test's directory, nothing inherited
  // that would change the cache or the credentials.
  Env ProgramEnv(Env extra = {}) const {
    Env env = {{"AWS_ACCESS_KEY_ID", server_.access_key},
               {"AWS_SECRET_ACCESS_KEY", server_.secret_key},
               {"AWS_ENDPOINT_URL_S3", server_.endpoint()},
               {"AWS_REGION", "us-east-1"},
               {"AWS_CONFIG_FILE", "/dev/null"},
               {"AWS_SHARED_CREDENTIALS_FILE", "/dev/null"},
               {"NPC_LOCAL_CACHE_DIR", local_}};
    for (auto& [k, v] : extra) env[k] = v;
    for (const char* name : {"NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL", "NEURON_EXTRACT_GRAPHS_ONLY",
                             "NEURON_PARALLEL_COMPILE", "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE",
                             "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL",
                             "AWS_DEFAULT_REGION", "NPC_S3_ADDRESSING_STYLE", "AWS_S3_ADDRESSING_STYLE"}) {
      env.emplace(name, "<unset>");
    }
    return env;
  }

  // Every object key under the prefix (relative to it).
  std::set<std::string> Keys() {
    std::set<std::string> keys;
    S3Client client(Config());
    std::string token;
    for (;;) {
      S3Request list;
      list.query = {{"list-type", "2"}, {"prefix", prefix_ + "/"}};
      if (!token.empty()) list.query.emplace_back("continuation-token", token);
      auto r = client.Send(list);
      if (!r || r->status != 200) {
        ADD_FAILURE() << "cannot list the bucket: " << (r ? r->body : r.error().message);
        return keys;
      }
      for (auto& key : cache::s3::XmlTexts(r->body, "Key")) keys.insert(key.substr(prefix_.size() + 1));
      auto next = cache::s3::XmlTexts(r->body, "NextContinuationToken");
      if (next.empty() || next.front().empty()) break;
      token = next.front();
    }
    return keys;
  }

  // Entry directory -> state, for the host compiler's directory.
  std::map<std::string, EntryState> States() {
    std::map<std::string, EntryState> out;
    S3Store store(Config());
    auto names = store.List(compiler_dir_);
    if (!names) {
      ADD_FAILURE() << names.error().message;
      return out;
    }
    for (const auto& name : *names) {
      auto ref = cache::ParseEntryDirName(compiler_dir_, name);
      if (!ref) continue;
      auto state = cache::GetEntryState(store, *ref, "model.so");
      if (!state) {
        ADD_FAILURE() << state.error().message;
        continue;
      }
      out[ref->dir()] = *state;
    }
    return out;
  }

  // No entry shows model.done without its artifact (the commit order holds).
  void ExpectNoDoneWithoutArtifact() {
    auto keys = Keys();
    for (const auto& key : keys) {
      if (key.size() > 11 && key.compare(key.size() - 11, 11, "/model.done") == 0) {
        std::string dir = key.substr(0, key.size() - 11);
        EXPECT_TRUE(keys.count(dir + "/model.so")) << key << " without " << dir << "/model.so";
      }
    }
  }

  // A C++ compiler that marks each compile in `marks` (one file each) and
  // takes `delay` seconds longer; version questions go straight through, so
  // the compiler directory is the real compiler's.
  std::string SlowCompiler(const std::string& marks) {
    const std::string path = tmp_.Sub("slow-c++");
    WriteFile(path,
              "#!/bin/sh\n"
              "case \" $* \" in *\" -shared \"*)\n"
              "  mktemp \"" + marks + "/compile.XXXXXX\" >/dev/null\n"
              "  sleep \"${NPC_TEST_COMPILE_DELAY:-0}\";;\n"
              "esac\n"
              "exec c++ \"$@\"\n");
    chmod(path.c_str(), 0755);
    fs::create_directories(marks);
    return path;
  }

  // `npc collect` of the sample's trial run into the bucket; the entries it made.
  std::vector<std::string> Collect(Env env = {}) {
    auto collect = RunCommand({NPC_TOOL, "collect", "--cache", Url(), "--", NPC_MLP_TRAIN, "--steps", "3"},
                              ProgramEnv(env));
    EXPECT_EQ(collect.exit_status, 0) << collect.output;
    std::vector<std::string> entries;
    for (const auto& [entry, state] : States()) {
      EXPECT_EQ(state, EntryState::kTodo) << entry;
      entries.push_back(entry);
    }
    EXPECT_GE(entries.size(), 2u) << collect.output;
    return entries;
  }

  TempDir tmp_{"npc-s3-e2e"};
  MotoServer server_;
  std::string bucket_ = "npc-e2e";
  std::string prefix_ = "team/neuron-cache";
  std::string compiler_dir_;
  std::string local_;
};

// (a) The README's flow with the cache in a bucket: the trial run writes the
// graphs to S3, ninja compiles them, and the real run finds every one.
TEST_F(S3FlowTest, SampleFlowTrialRunCompileThenRealRunHitsEveryGraph) {
  StartServer(/*auth=*/true);
  auto precompile =
      RunCommand({NPC_CLI, NPC_MLP_TRAIN, "--steps", "10"}, ProgramEnv({{"NEURON_COMPILE_CACHE_URL", Url()}}));
  ASSERT_EQ(precompile.exit_status, 0) << precompile.output;
  EXPECT_NE(precompile.output.find("Compile cache path: " + Url()), std::string::npos) << precompile.output;
  EXPECT_NE(precompile.output.find("Total failed compilations: 0"), std::string::npos) << precompile.output;
  const int graphs = static_cast<int>(Number(precompile.output, "Total graphs: (\\d+)"));
  EXPECT_GE(graphs, 2);
  EXPECT_EQ(Number(precompile.output, "Total successful compilations: (\\d+)"), graphs);

  auto states = States();
  ASSERT_EQ(static_cast<int>(states.size()), graphs);
  for (const auto& [entry, state] : states) EXPECT_EQ(state, EntryState::kDone) << entry;
  auto keys = Keys();
  for (const auto& [entry, state] : states) {
    for (const char* file : {"model.hlo_module.pb", "compile_flags.json", "model.so", "model.done"}) {
      EXPECT_TRUE(keys.count(entry + "/" + file)) << entry << "/" << file;
    }
    EXPECT_FALSE(keys.count(entry + "/model.lock")) << "a lock left behind in " << entry;
  }
  ExpectNoDoneWithoutArtifact();
  // The build directory of an S3 cache is local: <local root>/.npc-build/<compiler dir>.
  const std::string build_dir = local_ + "/.npc-build/" + compiler_dir_;
  EXPECT_TRUE(FileExists(build_dir + "/build.ninja"));
  EXPECT_EQ(CountFiles(build_dir + "/stamps/" + compiler_dir_), static_cast<size_t>(graphs));

  // The real run, with the cache named by --cache_dir in NEURON_CC_FLAGS.
  auto real = RunCommand({NPC_MLP_TRAIN, "--steps", "300"},
                         ProgramEnv({{"NEURON_CC_FLAGS", "--cache_dir=" + Url()}}));
  ASSERT_EQ(real.exit_status, 0) << real.output;
  EXPECT_EQ(Number(real.output, "npc cache: hits=(\\d+)"), graphs) << real.output;
  EXPECT_EQ(Number(real.output, "npc cache: hits=\\d+ misses=(\\d+)"), 0) << real.output;
  EXPECT_EQ(Number(real.output, "compiles=(\\d+)"), 0) << real.output;
  const double initial = Number(real.output, "initial: loss ([-+0-9.eE]+)");
  const double final_loss = Number(real.output, "final: loss ([-+0-9.eE]+)");
  EXPECT_LT(final_loss, 0.5 * initial) << real.output;
  // The artifacts were loaded from read-through copies, one per graph.
  EXPECT_EQ(FilesEndingWith(local_ + "/" + compiler_dir_, "model.so").size(), static_cast<size_t>(graphs));
}

// The runtime without a precompile: each graph is a miss, compiled into the
// bucket (artifact, then model.done); the next run hits them all.
TEST_F(S3FlowTest, RuntimeCompilesMissesIntoTheBucket) {
  StartServer(/*auth=*/true);
  auto first = RunCommand({NPC_MLP_TRAIN, "--steps", "20"}, ProgramEnv({{"NEURON_COMPILE_CACHE_URL", Url()}}));
  ASSERT_EQ(first.exit_status, 0) << first.output;
  const double misses = Number(first.output, "npc cache: hits=\\d+ misses=(\\d+)");
  EXPECT_GE(misses, 2) << first.output;
  EXPECT_EQ(Number(first.output, "compiles=(\\d+)"), misses) << first.output;
  auto states = States();
  EXPECT_EQ(static_cast<double>(states.size()), misses);
  for (const auto& [entry, state] : states) EXPECT_EQ(state, EntryState::kDone) << entry;
  ExpectNoDoneWithoutArtifact();

  auto second = RunCommand({NPC_MLP_TRAIN, "--steps", "20"}, ProgramEnv({{"NEURON_COMPILE_CACHE_URL", Url()}}));
  ASSERT_EQ(second.exit_status, 0) << second.output;
  EXPECT_EQ(Number(second.output, "npc cache: hits=\\d+ misses=(\\d+)"), 0) << second.output;
  EXPECT_EQ(Number(second.output, "npc cache: hits=(\\d+)"), misses) << second.output;
}

// Damaged artifacts are never loaded: a read-through copy whose bytes differ
// from model.done's record is fetched again (still a hit); an object in the
// bucket that differs (cut to half) is compiled again and replaced.
TEST_F(S3FlowTest, DamagedArtifactsAreFetchedOrCompiledAgain) {
  StartServer(/*auth=*/true);
  const Env env = ProgramEnv({{"NEURON_COMPILE_CACHE_URL", Url()}});
  auto first = RunCommand({NPC_MLP_TRAIN, "--steps", "5"}, env);
  ASSERT_EQ(first.exit_status, 0) << first.output;
  const double graphs = Number(first.output, "compiles=(\\d+)");
  auto copies = FilesEndingWith(local_ + "/" + compiler_dir_, "model.so");
  ASSERT_EQ(static_cast<double>(copies.size()), graphs);

  // 64 bytes flipped in every local copy (same size, so only the digest tells).
  for (const auto& path : copies) {
    std::string bytes = ReadFile(path);
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64 && i < bytes.size(); ++i) bytes[i] = static_cast<char>(~bytes[i]);
    WriteFile(path, bytes);
  }
  auto second = RunCommand({NPC_MLP_TRAIN, "--steps", "5"}, env);
  ASSERT_EQ(second.exit_status, 0) << second.output;
  EXPECT_EQ(Number(second.output, "npc cache: hits=(\\d+)"), graphs) << second.output;
  EXPECT_EQ(Number(second.output, "compiles=(\\d+)"), 0) << second.output;
  S3Store store(Config());
  for (const auto& path : copies) {  // fetched again: the bucket's bytes
    auto object = store.Read(path.substr(local_.size() + 1));
    ASSERT_TRUE(object.ok()) << object.error().message;
    EXPECT_TRUE(ReadFile(path) == *object) << path << " was not fetched again";
  }

  // Every object in the bucket cut to half its size.
  for (const auto& [entry, state] : States()) {
    auto bytes = store.Read(entry + "/model.so");
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    ASSERT_TRUE(store.WriteAtomic(entry + "/model.so", bytes->substr(0, bytes->size() / 2)).ok());
  }
  for (const auto& [entry, state] : States()) EXPECT_EQ(state, EntryState::kDamaged) << entry;
  auto third = RunCommand({NPC_MLP_TRAIN, "--steps", "5"}, env);
  ASSERT_EQ(third.exit_status, 0) << third.output;
  EXPECT_EQ(Number(third.output, "compiles=(\\d+)"), graphs) << third.output;
  EXPECT_NE(third.output.find("Damaged artifact in " + Url() + "/"), std::string::npos) << third.output;
  for (const auto& [entry, state] : States()) {
    EXPECT_EQ(state, EntryState::kDone) << entry;
    auto ref = cache::ParseEntryDirName(compiler_dir_, entry.substr(entry.rfind('/') + 1));
    ASSERT_TRUE(ref.has_value());
    auto damage = cache::CheckEntryArtifact(store, *ref, "model.so", cache::ArtifactCheck::kDigest);
    ASSERT_TRUE(damage.ok()) << damage.error().message;
    EXPECT_FALSE(damage->has_value()) << **damage;
  }
  ExpectNoDoneWithoutArtifact();
}

// import, generate + ninja by hand, scan, manifest, compile --manifest,
// verify, clear-locks and clean on a bucket.
TEST_F(S3FlowTest, CliVerbsWorkOnABucket) {
  StartServer(/*auth=*/true);
  const Env env = ProgramEnv();
  auto tool = [&](std::vector<std::string> args) {
    args.insert(args.begin(), NPC_TOOL);
    return RunCommand(args, env);
  };
  WriteFile(tmp_.Sub("hlo/a.hlo_module.pb"), testing::SmallTestModule(8).SerializeAsString());
  WriteFile(tmp_.Sub("hlo/b.hlo_module.pb"), testing::SmallTestModule(16).SerializeAsString());
  auto import = tool({"import", "--cache", Url(), tmp_.Sub("hlo")});
  ASSERT_EQ(import.exit_status, 0) << import.output;
  auto states = States();
  ASSERT_EQ(states.size(), 2u) << import.output;
  for (const auto& [entry, state] : states) EXPECT_EQ(state, EntryState::kTodo) << entry;

  // generate writes a build.ninja with local outputs only; ninja by hand compiles.
  const std::string build = tmp_.Sub("build");
  auto generate = tool({"generate", "--cache", Url(), "--build_dir", build});
  ASSERT_EQ(generate.exit_status, 0) << generate.output;
  const std::string ninja_text = ReadFile(build + "/build.ninja");
  EXPECT_EQ(ninja_text.find("build s3"), std::string::npos) << ninja_text;
  EXPECT_NE(ninja_text.find("--stamp"), std::string::npos) << ninja_text;
  auto ninja = RunCommand({"ninja", "-C", build}, env);
  ASSERT_EQ(ninja.exit_status, 0) << ninja.output;
  for (const auto& [entry, state] : States()) EXPECT_EQ(state, EntryState::kDone) << entry;
  auto again = RunCommand({"ninja", "-C", build}, env);
  EXPECT_NE(again.output.find("no work to do"), std::string::npos) << again.output;

  auto scan = tool({"scan", "--cache", Url(), "--json"});
  ASSERT_EQ(scan.exit_status, 0) << scan.output;
  auto scan_json = nlohmann::json::parse(scan.output.substr(scan.output.find('{')), nullptr, false);
  ASSERT_TRUE(scan_json.contains("entries")) << scan.output;
  EXPECT_EQ(scan_json["cache"], Url());
  ASSERT_EQ(scan_json["entries"].size(), 2u);
  for (const auto& e : scan_json["entries"]) EXPECT_EQ(e["state"], "DONE") << e.dump();

  // A manifest of the bucket's entries, and a build of exactly those.
  const std::string lock_file = tmp_.Sub("npc.lock.json");
  auto manifest = tool({"manifest", "--cache", Url(), "-o", lock_file});
  ASSERT_EQ(manifest.exit_status, 0) << manifest.output;
  auto lock_json = nlohmann::json::parse(ReadFile(lock_file), nullptr, false);
  ASSERT_FALSE(lock_json.is_discarded());
  EXPECT_NE(ReadFile(lock_file).find("artifact_sha256"), std::string::npos) << ReadFile(lock_file);
  auto from_manifest = tool({"compile", "--cache", Url(), "--manifest", lock_file, "--build_dir", tmp_.Sub("mbuild")});
  ASSERT_EQ(from_manifest.exit_status, 0) << from_manifest.output;
  EXPECT_NE(from_manifest.output.find("Total failed compilations: 0"), std::string::npos) << from_manifest.output;
  auto verify = tool({"verify", "--cache", Url(), "--manifest", lock_file, "--scratch_dir", tmp_.Sub("verify")});
  ASSERT_EQ(verify.exit_status, 0) << verify.output;
  EXPECT_NE(verify.output.find("2 entries: 2 reproduced"), std::string::npos) << verify.output;
  auto offline = tool({"compile", "--cache", Url(), "--manifest", lock_file, "--offline"});
  EXPECT_NE(offline.exit_status, 0);
  EXPECT_NE(offline.output.find(Url()), std::string::npos) << offline.output;

  // clear-locks: an expired lease (its holder is gone) is removed, a live one is left.
  const std::string stale_entry = states.begin()->first;
  const std::string live_entry = std::next(states.begin())->first;
  S3Store store(Config());
  ASSERT_TRUE(store.WriteAtomic(stale_entry + "/model.lock",
                                R"({"npc_lease": 1, "owner": {"host": "gone", "pid": 1, "id": "0"}, )"
                                R"("ttl_seconds": 1, "renewed_unix": 0, "expires_unix": 1, "serial": 0})"));
  auto live = store.TryLock(live_entry);
  ASSERT_TRUE(live && *live) << (live ? "held by someone else" : live.error().message);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the stale lease's TTL passes
  auto clear = tool({"clear-locks", "--cache", Url()});
  ASSERT_EQ(clear.exit_status, 0) << clear.output;
  EXPECT_NE(clear.output.find("Cleared 1 stale lock"), std::string::npos) << clear.output;
  EXPECT_NE(clear.output.find("Held by a live process, left: " + Url() + "/" + live_entry + "/model.lock"),
            std::string::npos)
      << clear.output;
  auto keys = Keys();
  EXPECT_FALSE(keys.count(stale_entry + "/model.lock"));
  EXPECT_TRUE(keys.count(live_entry + "/model.lock"));

  // clean leaves the entry a live process holds, removes the other.
  auto clean = tool({"clean", "--cache", Url()});
  ASSERT_EQ(clean.exit_status, 0) << clean.output;
  keys = Keys();
  for (const auto& key : keys) EXPECT_EQ(key.rfind(live_entry + "/", 0), 0u) << key << " survived clean";
  live->reset();
  clean = tool({"clean", "--cache", Url()});
  ASSERT_EQ(clean.exit_status, 0) << clean.output;
  EXPECT_TRUE(Keys().empty());

  // The same graphs again: the stamps of the first build must not hide them.
  import = tool({"import", "--cache", Url(), tmp_.Sub("hlo")});
  ASSERT_EQ(import.exit_status, 0) << import.output;
  generate = tool({"generate", "--cache", Url(), "--build_dir", build});
  ASSERT_EQ(generate.exit_status, 0) << generate.output;
  ninja = RunCommand({"ninja", "-C", build}, env);
  ASSERT_EQ(ninja.exit_status, 0) << ninja.output;
  states = States();
  EXPECT_EQ(states.size(), 2u);
  for (const auto& [entry, state] : states) EXPECT_EQ(state, EntryState::kDone) << entry;
}

// (b) The server dies while a compile run is under way. The run ends
// non-zero, says which compiled artifact was not uploaded and where it is
// kept; the bucket shows no half-committed entry. The server comes back with
// its state (moto keeps buckets in memory only, so it is restarted with the
// requests the first one received replayed: the state a persistent server
// would have), and a rerun completes: the kept artifact is uploaded, not
// recompiled, and the entries the dead server never saw are compiled.
TEST_F(S3FlowTest, ServerDiesMidRunLocalWorkIsKeptAndARerunCompletes) {
  server_.RecordRequestsTo(tmp_.Sub("moto-requests.jsonl"));
  StartServer(/*auth=*/false);
  const int port = server_.port();
  // Short retries and leases, so the dead server is given up on quickly and
  // the lease the killed run could not release expires soon.
  const Env tuning = {{"NPC_S3_MAX_RETRIES", "2"}, {"NPC_S3_RETRY_MAX_SECONDS", "2"},
                      {"NPC_S3_CONNECT_TIMEOUT", "2"}, {"NPC_S3_LOCK_TTL", "3"}};
  auto entries = Collect(tuning);
  ASSERT_GE(entries.size(), 3u);

  const std::string marks = tmp_.Sub("marks");
  Env env = ProgramEnv(tuning);
  env["NPC_COMPILER"] = SlowCompiler(marks);
  env["NPC_TEST_COMPILE_DELAY"] = "2";
  CommandResult run;
  std::atomic<bool> finished{false};
  std::thread compile([&] {
    run = RunCommand({NPC_TOOL, "compile", "--cache", Url(), "--num_parallel", "1"}, env);
    finished = true;
  });
  // One compile at a time: when the second starts, the first is committed.
  auto start = Clock::now();
  while (CountFiles(marks) < 2 && !finished && SecondsSince(start) < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(CountFiles(marks), 2u) << "the compile run did not get to its second compile";
  int done_before_kill = 0;
  for (const auto& [entry, state] : States()) done_before_kill += state == EntryState::kDone;
  EXPECT_EQ(done_before_kill, 1);
  server_.Stop();
  const auto killed = Clock::now();
  compile.join();
  const double after_kill = SecondsSince(killed);

  // The run's report.
  EXPECT_NE(run.exit_status, 0) << run.output;
  EXPECT_LT(after_kill, 90) << "giving up on the dead server took too long";
  EXPECT_EQ(CountFiles(marks), 2u) << "nothing compiles once the server is gone\n" << run.output;
  const std::vector<std::string> kept = FilesEndingWith(local_, ".not-uploaded");
  ASSERT_EQ(kept.size(), 1u) << run.output;
  const std::string kept_entry = fs::relative(fs::path(kept[0]).parent_path(), local_).string();
  // <local root>/<entry>/<artifact>.not-uploaded, beside the read-through copies.
  EXPECT_EQ(kept[0], local_ + "/" + kept_entry + "/model.so.not-uploaded");
  EXPECT_TRUE(std::count(entries.begin(), entries.end(), kept_entry)) << kept_entry;
  EXPECT_NE(run.output.find("compiled, but not uploaded"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Not uploaded to " + Url() + ": " + kept_entry + " (compiled; the artifact is kept at " +
                            kept[0] + ")"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("1 compiled artifact was not uploaded"), std::string::npos) << run.output;
  // The edge that gave up on the server told the ones after it, which did
  // not spend their own retries on it.
  size_t not_tried = 0;  // one line of each such edge
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    not_tried += line.rfind("npc compile-entry: ", 0) == 0 &&
                 line.find(": not tried: another build edge gave up on " + Url()) != std::string::npos;
  }
  EXPECT_EQ(not_tried, entries.size() - 2) << run.output;
  EXPECT_EQ(Number(run.output, "Total successful compilations: (\\d+)"), 1) << run.output;
  EXPECT_EQ(Number(run.output, "Total failed compilations: (\\d+)"), static_cast<double>(entries.size() - 1))
      << run.output;
  const std::string kept_bytes = ReadFile(kept[0]);
  EXPECT_GT(kept_bytes.size(), 1000u);

  // The server is back, with what it had received.
  ASSERT_TRUE(server_.Start(/*auth=*/false, port)) << server_.error();
  ASSERT_TRUE(server_.ReplayRecording()) << server_.error();
  auto states = States();
  ASSERT_EQ(states.size(), entries.size());
  EXPECT_NE(states[kept_entry], EntryState::kDone);
  ExpectNoDoneWithoutArtifact();

  env["NPC_TEST_COMPILE_DELAY"] = "0";
  auto rerun = RunCommand({NPC_TOOL, "compile", "--cache", Url()}, env);
  ASSERT_EQ(rerun.exit_status, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("Total failed compilations: 0"), std::string::npos) << rerun.output;
  EXPECT_NE(rerun.output.find("uploaded the artifact that an earlier run compiled"), std::string::npos)
      << rerun.output;
  // The entries not compiled before were compiled now; the kept one was not.
  EXPECT_EQ(CountFiles(marks), 2 + (entries.size() - 2)) << rerun.output;
  for (const auto& [entry, state] : States()) EXPECT_EQ(state, EntryState::kDone) << entry;
  ExpectNoDoneWithoutArtifact();
  EXPECT_FALSE(FileExists(kept[0]));
  S3Store store(Config());
  auto uploaded = store.Read(kept_entry + "/model.so");
  ASSERT_TRUE(uploaded) << uploaded.error().message;
  EXPECT_TRUE(*uploaded == kept_bytes) << "the uploaded artifact is not the kept one";

  // And the program runs on what the two runs compiled.
  auto real = RunCommand({NPC_MLP_TRAIN, "--steps", "3"}, ProgramEnv({{"NEURON_COMPILE_CACHE_URL", Url()}}));
  ASSERT_EQ(real.exit_status, 0) << real.output;
  EXPECT_EQ(Number(real.output, "npc cache: hits=\\d+ misses=(\\d+)"), 0) << real.output;
}

// (b') The same for the runtime's own compile of a miss: the server dies
// while the program compiles a graph. The program does not stop: it runs the
// artifact it compiled (kept locally, with a warning), with correct results.
// When the server is back, the next program that misses this graph uploads
// the kept artifact instead of compiling it again, and later ones hit.
TEST_F(S3FlowTest, RuntimeRunsAnArtifactItCouldNotUploadAndTheNextMissUploadsIt) {
  server_.RecordRequestsTo(tmp_.Sub("moto-requests.jsonl"));
  StartServer(/*auth=*/false);
  const int port = server_.port();
  const std::string marks = tmp_.Sub("marks");
  Env env = ProgramEnv({{"NPC_S3_MAX_RETRIES", "2"}, {"NPC_S3_RETRY_MAX_SECONDS", "2"},
                        {"NPC_S3_CONNECT_TIMEOUT", "2"}, {"NPC_S3_LOCK_TTL", "3"},
                        {"NPC_TEST_COMPILE_DELAY", "2"}});
  // The runtime runs in this process: its environment is this test's.
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& [name, value] : env) {
    const char* old = getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value == "<unset>") {
      unsetenv(name.c_str());
    } else {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  struct Restore {
    decltype(saved)& vars;
    ~Restore() {
      for (const auto& [name, value] : vars) value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
    }
  } restore{saved};

  // y = x * 3 + 1 on f32[4].
  hlo::HloBuilder b("affine");
  hlo::Op x = b.Parameter(0, xla::F32, {4}, "x");
  hlo::Op y = b.Add(b.Mul(x, b.Broadcast(b.ConstantF32(3), {4}, {})), b.Broadcast(b.ConstantF32(1), {4}, {}));
  const xla::HloModuleProto module = b.Build(y);
  Tensor input = ZeroTensor(xla::F32, {4});
  for (int i = 0; i < 4; ++i) input.data<float>()[i] = static_cast<float>(i) - 1.5f;
  auto check_run = [&](Executable& exe) {
    auto out = exe.Run({input});
    ASSERT_TRUE(out) << out.error().message;
    ASSERT_EQ(out->size(), 1u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ((*out)[0].data<float>()[i], (static_cast<float>(i) - 1.5f) * 3 + 1) << i;
  };
  auto make_runtime = [&](const std::string& cxx) {
    RuntimeOptions options;
    options.cache_url = Url();
    options.compiler.program = cxx;
    return Runtime::Create(options);
  };

  auto runtime = make_runtime(SlowCompiler(marks));
  ASSERT_TRUE(runtime) << runtime.error().message;
  Result<std::shared_ptr<Executable>> exe = MakeError("not run");
  ::testing::internal::CaptureStderr();  // npc's log lines
  std::thread program([&] { exe = (*runtime)->GetExecutable(module); });
  auto start = Clock::now();
  while (CountFiles(marks) < 1 && SecondsSince(start) < 60) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(CountFiles(marks), 1u) << "the runtime did not start compiling";
  server_.Stop();
  program.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(exe) << "the program stopped although its artifact was compiled: " << exe.error().message;
  EXPECT_NE(log.find("Running the artifact of " + Url() + "/"), std::string::npos) << log;
  EXPECT_NE(log.find("not uploaded"), std::string::npos) << log;
  check_run(**exe);
  EXPECT_EQ((*runtime)->counters().compiles, 1);
  const std::vector<std::string> kept = FilesEndingWith(local_, ".not-uploaded");
  ASSERT_EQ(kept.size(), 1u);
  const std::string kept_entry = fs::relative(fs::path(kept[0]).parent_path(), local_).string();
  const std::string kept_bytes = ReadFile(kept[0]);

  // The server is back with what it had received; the entry is not done.
  ASSERT_TRUE(server_.Start(/*auth=*/false, port)) << server_.error();
  ASSERT_TRUE(server_.ReplayRecording()) << server_.error();
  EXPECT_NE(States()[kept_entry], EntryState::kDone);
  ExpectNoDoneWithoutArtifact();

  // The next program's miss uploads the kept artifact, compiling nothing.
  auto next = make_runtime(SlowCompiler(marks));
  ASSERT_TRUE(next) << next.error().message;
  auto uploaded_exe = (*next)->GetExecutable(module);
  ASSERT_TRUE(uploaded_exe) << uploaded_exe.error().message;
  check_run(**uploaded_exe);
  EXPECT_EQ(CountFiles(marks), 1u) << "the kept artifact was compiled again";
  EXPECT_FALSE(FileExists(kept[0]));
  EXPECT_EQ(States()[kept_entry], EntryState::kDone);
  S3Store store(Config());
  auto uploaded = store.Read(kept_entry + "/model.so");
  ASSERT_TRUE(uploaded) << uploaded.error().message;
  EXPECT_TRUE(*uploaded == kept_bytes) << "the uploaded artifact is not the kept one";

  // And a third one hits.
  auto third = make_runtime("");
  ASSERT_TRUE(third) << third.error().message;
  auto hit = (*third)->GetExecutable(module);
  ASSERT_TRUE(hit) << hit.error().message;
  check_run(**hit);
  EXPECT_EQ((*third)->counters().hits, 1);
  EXPECT_EQ((*third)->counters().compiles, 0);
}

// (c) Two compile runs at once on one bucket: the leases let exactly one of
// them compile each entry; the other finds it done (or waits for it).
TEST_F(S3FlowTest, TwoConcurrentCompileRunsCompileEachEntryOnce) {
  StartServer(/*auth=*/true);
  auto entries = Collect();
  const std::string marks = tmp_.Sub("marks");
  Env env = ProgramEnv();
  env["NPC_COMPILER"] = SlowCompiler(marks);
  env["NPC_TEST_COMPILE_DELAY"] = "1";
  CommandResult runs[2];
  std::thread threads[2];
  for (int i = 0; i < 2; ++i) {
    threads[i] = std::thread([&, i] {
      runs[i] = RunCommand({NPC_TOOL, "compile", "--cache", Url(), "--build_dir", tmp_.Sub("build" + std::to_string(i)),
                            "--num_parallel", "2"},
                           env);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : runs) {
    EXPECT_EQ(r.exit_status, 0) << r.output;
    EXPECT_NE(r.output.find("Total failed compilations: 0"), std::string::npos) << r.output;
  }
  EXPECT_EQ(CountFiles(marks), entries.size()) << "compiler runs; " << runs[0].output << runs[1].output;
  // Each entry's result records: "compiled" in exactly one run.
  std::map<std::string, int> compiled;
  for (int i = 0; i < 2; ++i) {
    for (const auto& file : FilesEndingWith(tmp_.Sub("build" + std::to_string(i)) + "/results", ".json")) {
      auto record = nlohmann::json::parse(ReadFile(file), nullptr, false);
      ASSERT_FALSE(record.is_discarded()) << file;
      EXPECT_TRUE(record["ok"].get<bool>()) << record.dump();
      if (record["status"] == "compiled") compiled[record["entry"].get<std::string>()]++;
    }
  }
  EXPECT_EQ(compiled.size(), entries.size());
  for (const auto& [entry, n] : compiled) EXPECT_EQ(n, 1) << entry;
  for (const auto& [entry, state] : States()) EXPECT_EQ(state, EntryState::kDone) << entry;
  for (const auto& key : Keys()) EXPECT_EQ(key.find("model.lock"), std::string::npos) << key;
}

// (d) A wrong secret key: the server refuses the first request; the run
// stops there with one error that says what to check, without retrying.
TEST_F(S3FlowTest, WrongSecretKeyGivesOneClearErrorAtOnce) {
  StartServer(/*auth=*/true);
  const Env env = ProgramEnv({{"AWS_SECRET_ACCESS_KEY", "not-the-secret"}});
  auto start = Clock::now();
  auto compile = RunCommand({NPC_TOOL, "compile", "--cache", Url()}, env);
  const double seconds = SecondsSince(start);
  EXPECT_EQ(compile.exit_status, 1) << compile.output;
  EXPECT_LT(seconds, 10) << compile.output;
  EXPECT_NE(compile.output.find("SignatureDoesNotMatch"), std::string::npos) << compile.output;
  EXPECT_NE(compile.output.find(server_.access_key), std::string::npos) << compile.output;
  EXPECT_NE(compile.output.find("s3://" + bucket_), std::string::npos) << compile.output;
  EXPECT_EQ(Count(compile.output, "ERROR"), 1u) << compile.output;
  // The server saw one refused request, and one more in the other URL encoding
  // that the client tries once for servers that verify over the decoded URL.
  const std::string log = ReadFile(server_.log_path());
  EXPECT_GE(Count(log, "\" 403 "), 1u) << log;
  EXPECT_LE(Count(log, "\" 403 "), 2u) << log;

  // The trial run stops at its first graph with the same cause.
  start = Clock::now();
  auto all = RunCommand({NPC_CLI, NPC_MLP_TRAIN, "--steps", "3"}, ProgramEnv({{"AWS_SECRET_ACCESS_KEY", "wrong"},
                                                                              {"NEURON_COMPILE_CACHE_URL", Url()}}));
  EXPECT_NE(all.exit_status, 0) << all.output;
  EXPECT_LT(SecondsSince(start), 10) << all.output;
  EXPECT_NE(all.output.find("SignatureDoesNotMatch"), std::string::npos) << all.output;
  EXPECT_EQ(all.output.find("Total graphs"), std::string::npos) << all.output;
}

}  // namespace
}  // namespace npc
