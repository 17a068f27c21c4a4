// S3Store against a real S3-compatible server: moto, started by the test on
// a free loopback port (with SigV4 verification for most tests), and the
// `aws` CLI for interoperability. Skips, saying why, when moto is missing.
// Retries on 5xx are checked against a scripted HTTP server in this file.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "cache/read_through.h"
#include "cache/s3_client.h"
#include "cache/s3_store.h"
#include "npc/cache.h"
#include "npc/compiler.h"
#include "support/moto_server.h"
#include "support/test_support.h"

namespace npc {
namespace {

using cache::S3Store;
using cache::s3::S3Client;
using cache::s3::S3Config;
using cache::s3::S3Request;
using npc::testing::FreePort;
using npc::testing::MotoPython;
using npc::testing::MotoServer;
using npc::testing::MotoUnavailable;
using npc::testing::PortAnswers;
using npc::testing::RunCommand;
using npc::testing::TempDir;
using Clock = std::chrono::steady_clock;

S3Request Req(const std::string& method, const std::string& key,
              std::vector<std::pair<std::string, std::string>> query = {}) {
  S3Request r;
  r.method = method;
  r.key = key;
  r.query = std::move(query);
  return r;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

S3Config ConfigFor(const MotoServer& server, const std::string& bucket, const std::string& prefix) {
  S3Config c;
  c.bucket = bucket;
  c.prefix = prefix;
  c.endpoint = server.endpoint();
  c.region = "us-east-1";
  c.credentials = {server.access_key, server.secret_key, "", "the test"};
  c.max_retries = 3;
  c.retry_base_seconds = 0.05;
  c.retry_max_delay_seconds = 0.2;
  c.retry_max_total_seconds = 10;
  c.connect_timeout_seconds = 2;
  c.stall_timeout_seconds = 5;
  return c;
}

// PUT /<bucket>.
void CreateBucket(const S3Config& config) {
  S3Client client(config);
  S3Request req;
  req.method = "PUT";
  auto r = client.Send(req);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->status, 200) << r->body;
}

std::string UniqueBucket() {
  static std::atomic<int> n{0};
  return "npc-test-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

// Servers shared by the tests of one process (ctest runs each test in its
// own process): one verifying SigV4, one without verification for the `aws`
// CLI (moto refuses the CLI's own signatures for keys with '+' and for
// listings with a prefix, so the CLI cannot be checked against the first).
MotoServer* shared_servers[2] = {nullptr, nullptr};

MotoServer& SharedServer(bool auth) {
  MotoServer*& server = shared_servers[auth ? 1 : 0];
  if (server == nullptr) {
    server = new MotoServer;
    if (!server->Start(auth)) ADD_FAILURE() << server->error();
  }
  return *server;
}

void StopSharedServer(bool auth) {
  delete shared_servers[auth ? 1 : 0];  // stops it
  shared_servers[auth ? 1 : 0] = nullptr;
}

class MotoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MotoUnavailable().empty()) GTEST_SKIP() << MotoUnavailable();
  }
};

// Tests against the SigV4-verifying server, each with a fresh bucket.
class S3StoreTest : public MotoTest {
 protected:
  static MotoServer& AuthServer() { return SharedServer(true); }
  static void TearDownTestSuite() { StopSharedServer(true); }

  void SetUp() override {
    MotoTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(AuthServer().error().empty()) << AuthServer().error();
    bucket_ = UniqueBucket();
    config_ = ConfigFor(AuthServer(), bucket_, "cache/root");
    CreateBucket(config_);
  }

  std::string bucket_;
  S3Config config_;
};

class S3InteropTest : public MotoTest {
 protected:
  static void TearDownTestSuite() { StopSharedServer(false); }
};

// Tests that stop, pause and restart their own server.
class S3FaultTest : public MotoTest {};

const cache::EntryRef kEntry{"fake-1.0", "1234567890", "e30acd3a"};

TEST_F(S3StoreTest, WritesReadsListsAndRemoves) {
  S3Store store(config_);
  EXPECT_EQ(store.url(), "s3://" + bucket_ + "/cache/root");
  EXPECT_FALSE(store.LocalPath("x").has_value());

  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.hlo_module.pb"), "hlo bytes\n"));
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("compile_flags.json"), R"(["--target=trn1"])"));
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.done"), ""));
  ASSERT_TRUE(store.WriteAtomic("fake-1.0/MODULE_9+00000000/model.hlo.pb", "legacy"));

  auto data = store.Read(kEntry.file("model.hlo_module.pb"));
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "hlo bytes\n");
  auto size = store.Size(kEntry.file("compile_flags.json"));
  ASSERT_TRUE(size) << size.error().message;
  EXPECT_EQ(*size, 17);
  auto empty_size = store.Size(kEntry.file("model.done"));
  ASSERT_TRUE(empty_size) << empty_size.error().message;
  EXPECT_EQ(*empty_size, 0);

  for (const std::string& path : {kEntry.file("model.done"), kEntry.dir(), std::string("fake-1.0"), std::string("")}) {
    auto exists = store.Exists(path);
    ASSERT_TRUE(exists) << exists.error().message;
    EXPECT_TRUE(*exists) << path;
  }
  for (const std::string& path : {kEntry.file("model.neff"), std::string("fake-1"), std::string("fake-1.0/MODULE_9"),
                                 kEntry.file("model.hlo_module")}) {
    auto exists = store.Exists(path);
    ASSERT_TRUE(exists) << exists.error().message;
    EXPECT_FALSE(*exists) << path;
  }

  auto root = store.List("");
  ASSERT_TRUE(root) << root.error().message;
  EXPECT_EQ(*root, std::vector<std::string>{"fake-1.0"});
  auto entries = store.List("fake-1.0");
  ASSERT_TRUE(entries) << entries.error().message;
  EXPECT_EQ(*entries, (std::vector<std::string>{"MODULE_1234567890+e30acd3a", "MODULE_9+00000000"}));
  auto files = store.List(kEntry.dir());
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_EQ(*files, (std::vector<std::string>{"compile_flags.json", "model.done", "model.hlo_module.pb"}));
  auto absent = store.List("nothing/here");
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_TRUE(absent->empty());

  auto state = cache::GetEntryState(store, kEntry, "model.bin");
  ASSERT_TRUE(state) << state.error().message;
  EXPECT_EQ(*state, cache::EntryState::kTodo);
  auto hlo = cache::FindHloFile(store, cache::EntryRef{"fake-1.0", "9", "00000000"});
  ASSERT_TRUE(hlo) << hlo.error().message;
  EXPECT_EQ(hlo->value_or(""), "model.hlo.pb");

  auto missing = store.Read(kEntry.file("model.neff"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("s3://" + bucket_ + "/cache/root/" + kEntry.file("model.neff")),
            std::string::npos)
      << missing.error().message;
  EXPECT_NE(missing.error().message.find("no such object"), std::string::npos) << missing.error().message;

  ASSERT_TRUE(store.Remove(kEntry.file("model.done")));
  ASSERT_TRUE(store.Remove(kEntry.file("model.done")));  // absent is fine
  files = store.List(kEntry.dir());
  ASSERT_TRUE(files);
  EXPECT_EQ(files->size(), 2u);

  ASSERT_TRUE(store.RemoveTree("fake-1.0"));
  root = store.List("");
  ASSERT_TRUE(root);
  EXPECT_TRUE(root->empty());
  ASSERT_TRUE(store.RemoveTree("fake-1.0"));  // absent is fine
}

TEST_F(S3StoreTest, LearnsTheUrlEncodingOfTheServerOnce) {
  // moto verifies signatures over the URL as it re-encodes it ('+' raw in
  // paths, '/' raw in query values), AWS over the strictly encoded one. The
  // first refused request is retried once in moto's style, which then sticks.
  S3Store store(config_);
  ASSERT_TRUE(store.WriteAtomic("plain/key", "1"));
  EXPECT_EQ(store.stats().requests, 1);
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.done"), ""));
  EXPECT_EQ(store.stats().requests, 3);
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.so"), "x"));
  auto names = store.List(kEntry.dir());
  ASSERT_TRUE(names) << names.error().message;
  EXPECT_EQ(names->size(), 2u);
  EXPECT_EQ(store.stats().requests, 5);
  EXPECT_EQ(store.stats().retries, 0);
}

TEST_F(S3StoreTest, ListPaginatesWithContinuationTokens) {
  config_.list_page_size = 3;
  S3Store store(config_);
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) {
    std::string name = "file" + std::to_string(i);
    ASSERT_TRUE(store.WriteAtomic("dir/" + name, name));
    expected.push_back(name);
  }
  for (int i = 0; i < 4; ++i) {
    std::string name = "sub" + std::to_string(i);
    ASSERT_TRUE(store.WriteAtomic("dir/" + name + "/a", "a"));
    ASSERT_TRUE(store.WriteAtomic("dir/" + name + "/b", "b"));
    expected.push_back(name);
  }
  std::sort(expected.begin(), expected.end());
  const auto before = store.stats().requests;
  auto names = store.List("dir");
  ASSERT_TRUE(names) << names.error().message;
  EXPECT_EQ(*names, expected);
  // 14 children (10 objects + 4 common prefixes) in pages of 3.
  EXPECT_GE(store.stats().requests - before, 5);

  // RemoveTree pages through all 18 keys too.
  ASSERT_TRUE(store.RemoveTree("dir"));
  names = store.List("dir");
  ASSERT_TRUE(names);
  EXPECT_TRUE(names->empty());
}

TEST_F(S3StoreTest, LargeFilesUseMultipartUpload) {
  config_.multipart_threshold_bytes = 1 << 20;
  config_.multipart_part_bytes = 5 << 20;  // S3's (and moto's) smallest part
  S3Store store(config_);
  TempDir dir;
  std::string big;
  big.reserve((11 << 20) + 3);
  uint32_t x = 12345;
  while (big.size() < (11u << 20) + 3) {
    x = x * 1103515245u + 12345u;
    big += static_cast<char>(x >> 24);
  }
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("model.neff"), big));
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.hlo_module.pb"), "hlo"));  // learns moto's URL encoding
  auto before = store.stats().requests;
  ASSERT_TRUE(store.PutFileAtomic(kEntry.file("model.neff"), dir.Sub("model.neff")));
  // create + 3 parts + complete
  EXPECT_EQ(store.stats().requests - before, 5);
  auto size = store.Size(kEntry.file("model.neff"));
  ASSERT_TRUE(size) << size.error().message;
  EXPECT_EQ(*size, static_cast<int64_t>(big.size()));
  auto back = store.Read(kEntry.file("model.neff"));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(*back == big);
  // No upload left dangling.
  S3Request uploads;
  uploads.query = {{"uploads", ""}};
  auto r = store.client().Send(uploads);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.find("<UploadId>"), std::string::npos) << r->body;

  // Below the threshold: one PUT.
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("small"), "small artifact"));
  before = store.stats().requests;
  ASSERT_TRUE(store.PutFileAtomic(kEntry.file("model.so"), dir.Sub("small")));
  EXPECT_EQ(store.stats().requests - before, 1);
  auto small = store.Read(kEntry.file("model.so"));
  ASSERT_TRUE(small);
  EXPECT_EQ(*small, "small artifact");
}

TEST_F(S3StoreTest, LocksAreExclusiveAndReleased) {
  S3Store a(config_);
  S3Store b(config_);  // another host
  ASSERT_TRUE(a.WriteAtomic(kEntry.file("model.hlo_module.pb"), "hlo"));
  auto locked = a.IsLocked(kEntry.dir());
  ASSERT_TRUE(locked) << locked.error().message;
  EXPECT_FALSE(*locked);

  auto lock = a.TryLock(kEntry.dir());
  ASSERT_TRUE(lock) << lock.error().message;
  ASSERT_NE(*lock, nullptr);
  auto other = b.TryLock(kEntry.dir());
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(*other, nullptr);
  auto again = a.TryLock(kEntry.dir());  // not reentrant either
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, nullptr);
  locked = b.IsLocked(kEntry.dir());
  ASSERT_TRUE(locked);
  EXPECT_TRUE(*locked);
  auto state = cache::GetEntryState(b, kEntry, "model.bin");
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, cache::EntryState::kLocked);
  auto who = b.DescribeLock(kEntry.dir());
  ASSERT_TRUE(who);
  ASSERT_TRUE(who->has_value());
  EXPECT_NE((*who)->find("pid " + std::to_string(getpid())), std::string::npos) << **who;

  lock->reset();  // release
  locked = b.IsLocked(kEntry.dir());
  ASSERT_TRUE(locked);
  EXPECT_FALSE(*locked);
  auto files = b.List(kEntry.dir());
  ASSERT_TRUE(files);
  EXPECT_EQ(*files, std::vector<std::string>{"model.hlo_module.pb"});
  state = cache::GetEntryState(b, kEntry, "model.bin");
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, cache::EntryState::kTodo);
  other = b.TryLock(kEntry.dir());
  ASSERT_TRUE(other);
  EXPECT_NE(*other, nullptr);
}

TEST_F(S3StoreTest, RacingTryLocksHaveOneWinner) {
  constexpr int kRacers = 8;
  std::vector<std::unique_ptr<S3Store>> stores;
  for (int i = 0; i < kRacers; ++i) stores.push_back(std::make_unique<S3Store>(config_));
  for (auto& store : stores) ASSERT_TRUE(store->WriteAtomic("warm/up", ""));  // URL style learnt
  for (int round = 0; round < 5; ++round) {
    const std::string entry = "fake-1.0/MODULE_" + std::to_string(round) + "+00000000";
    std::vector<std::unique_ptr<cache::EntryLock>> locks(kRacers);
    std::vector<std::string> errors(kRacers);
    std::atomic<int> ready{0};
    std::vector<std::thread> racers;
    for (int i = 0; i < kRacers; ++i) {
      racers.emplace_back([&, i] {
        ++ready;
        while (ready.load() < kRacers) std::this_thread::yield();
        auto lock = stores[i]->TryLock(entry);
        if (lock) locks[i] = std::move(*lock);
        else errors[i] = lock.error().message;
      });
    }
    for (auto& t : racers) t.join();
    int winners = 0;
    for (int i = 0; i < kRacers; ++i) {
      EXPECT_EQ(errors[i], "");
      winners += locks[i] != nullptr;
    }
    EXPECT_EQ(winners, 1) << "round " << round;
  }
}

TEST_F(S3StoreTest, HeldLeaseIsRenewedPastItsTtl) {
  config_.lease_ttl_seconds = 2;
  config_.lease_renew_seconds = 0.4;
  S3Store a(config_);
  S3Store b(config_);
  auto lock = a.TryLock(kEntry.dir());
  ASSERT_TRUE(lock) << lock.error().message;
  ASSERT_NE(*lock, nullptr);
  auto start = Clock::now();
  while (SecondsSince(start) < 4.5) {
    auto other = b.TryLock(kEntry.dir());
    ASSERT_TRUE(other) << other.error().message;
    EXPECT_EQ(*other, nullptr) << "taken over after " << SecondsSince(start) << " s although renewed";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

TEST_F(S3StoreTest, ExpiredLeaseIsTakenOver) {
  config_.lease_ttl_seconds = 1;
  S3Store store(config_);
  // A lease left by a process that died on another host.
  const std::string lease = kEntry.file("model.lock");
  ASSERT_TRUE(store.WriteAtomic(lease,
                                R"({"npc_lease": 1, "owner": {"host": "gone", "pid": 1, "id": "dead"}, "ttl_seconds": 1})"));
  auto locked = store.IsLocked(kEntry.dir());
  ASSERT_TRUE(locked);
  EXPECT_TRUE(*locked);
  auto lock = store.TryLock(kEntry.dir());
  ASSERT_TRUE(lock);
  EXPECT_EQ(*lock, nullptr) << "a fresh lease was taken over";

  std::this_thread::sleep_for(std::chrono::milliseconds(2600));  // Last-Modified has 1 s resolution
  locked = store.IsLocked(kEntry.dir());
  ASSERT_TRUE(locked);
  EXPECT_FALSE(*locked);
  auto state = cache::GetEntryState(store, kEntry, "model.bin");
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, cache::EntryState::kEmpty);  // no HLO: the stale lock does not count
  lock = store.TryLock(kEntry.dir());
  ASSERT_TRUE(lock) << lock.error().message;
  ASSERT_NE(*lock, nullptr);
  auto who = store.DescribeLock(kEntry.dir());
  ASSERT_TRUE(who);
  ASSERT_TRUE(who->has_value());
  EXPECT_NE((*who)->find("pid " + std::to_string(getpid())), std::string::npos) << **who;
}

TEST_F(S3StoreTest, ReleaseOfALostLeaseKeepsTheSuccessorsLease) {
  // A holder that stops renewing (a stalled process) loses its lease; when it
  // finally releases, the new holder's lease must survive.
  S3Config stalled = config_;
  stalled.lease_ttl_seconds = 1;
  stalled.lease_renew_seconds = 3600;
  S3Store a(stalled);
  S3Config quick = config_;
  quick.lease_ttl_seconds = 30;
  S3Store b(quick);
  auto first = a.TryLock(kEntry.dir());
  ASSERT_TRUE(first);
  ASSERT_NE(*first, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  auto second = b.TryLock(kEntry.dir());
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_NE(*second, nullptr);
  first->reset();
  auto locked = b.IsLocked(kEntry.dir());
  ASSERT_TRUE(locked);
  EXPECT_TRUE(*locked);
  auto who = b.DescribeLock(kEntry.dir());
  ASSERT_TRUE(who && who->has_value());
}

TEST_F(S3StoreTest, SessionCredentialsSendTheirToken) {
  // Temporary credentials of an assumed role: signed requests must carry
  // x-amz-security-token (signed too), which moto checks.
  const char* script = R"(import sys, json, boto3
kw = dict(endpoint_url=sys.argv[1], region_name='us-east-1')
iam = boto3.client('iam', **kw)
trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
role = iam.create_role(RoleName='npc-cache', AssumeRolePolicyDocument=json.dumps(trust))['Role']
iam.put_role_policy(RoleName='npc-cache', PolicyName='s3', PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}')
c = boto3.client('sts', **kw).assume_role(RoleArn=role['Arn'], RoleSessionName='npc')['Credentials']
print(c['AccessKeyId'], c['SecretAccessKey'], c['SessionToken']))";
  auto r = RunCommand({MotoPython(), "-c", script, AuthServer().endpoint()},
                      {{"AWS_ACCESS_KEY_ID", AuthServer().access_key},
                       {"AWS_SECRET_ACCESS_KEY", AuthServer().secret_key},
                       {"AWS_CONFIG_FILE", "/dev/null"},
                       {"AWS_SHARED_CREDENTIALS_FILE", "/dev/null"}});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::istringstream words(r.output);
  cache::s3::Credentials temporary;
  words >> temporary.access_key_id >> temporary.secret_access_key >> temporary.session_token;
  temporary.source = "the assumed role";
  ASSERT_FALSE(temporary.session_token.empty()) << r.output;

  config_.credentials = temporary;
  S3Store store(config_);
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.done"), "with token"));
  auto data = store.Read(kEntry.file("model.done"));
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "with token");

  config_.credentials.session_token = "not-the-token";
  S3Store wrong(config_);
  auto refused = wrong.Read(kEntry.file("model.done"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("session token"), std::string::npos) << refused.error().message;
  EXPECT_EQ(wrong.stats().retries, 0);
}

TEST_F(S3StoreTest, WrongSecretIsOneClearErrorWithoutRetries) {
  config_.credentials.secret_access_key = "not-the-secret";
  config_.max_retries = 6;
  S3Store store(config_);
  auto start = Clock::now();
  auto r = store.Read(kEntry.file("model.hlo_module.pb"));
  ASSERT_FALSE(r);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("SignatureDoesNotMatch"), std::string::npos) << m;
  EXPECT_NE(m.find("bucket '" + bucket_ + "'"), std::string::npos) << m;
  EXPECT_NE(m.find("secret access key"), std::string::npos) << m;
  EXPECT_NE(m.find("s3://" + bucket_ + "/cache/root/"), std::string::npos) << m;
  EXPECT_LE(store.stats().requests, 2);  // the first, and one with the other URL encoding
  EXPECT_EQ(store.stats().retries, 0);

  auto list = store.List(kEntry.dir());
  ASSERT_FALSE(list);
  EXPECT_NE(list.error().message.find("SignatureDoesNotMatch"), std::string::npos) << list.error().message;
  EXPECT_LE(store.stats().requests, 4);
  EXPECT_LT(SecondsSince(start), 3.0);

  config_.credentials.access_key_id = "AKIAUNKNOWNUNKNOWN00";
  S3Store unknown(config_);
  auto w = unknown.WriteAtomic("x", "y");
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("InvalidAccessKeyId"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("AKIAUNKNOWNUNKNOWN00"), std::string::npos) << w.error().message;
  EXPECT_EQ(unknown.stats().requests, 1);
}

TEST_F(S3StoreTest, MissingBucketIsOneClearError) {
  config_.bucket = "npc-no-such-bucket";
  S3Store store(config_);
  auto start = Clock::now();
  auto list = store.List("");
  ASSERT_FALSE(list);
  EXPECT_NE(list.error().message.find("bucket 'npc-no-such-bucket' does not exist"), std::string::npos)
      << list.error().message;
  EXPECT_NE(list.error().message.find(config_.endpoint), std::string::npos) << list.error().message;
  auto exists = store.Exists(kEntry.file("model.done"));
  ASSERT_FALSE(exists);
  EXPECT_NE(exists.error().message.find("does not exist"), std::string::npos) << exists.error().message;
  auto read = store.Read(kEntry.file("model.done"));
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("does not exist"), std::string::npos) << read.error().message;
  auto size = store.Size(kEntry.file("model.done"));
  ASSERT_FALSE(size);
  EXPECT_NE(size.error().message.find("does not exist"), std::string::npos) << size.error().message;
  auto lock = store.TryLock(kEntry.dir());
  ASSERT_FALSE(lock);
  EXPECT_NE(lock.error().message.find("does not exist"), std::string::npos) << lock.error().message;
  // One request per operation, plus at most one to learn moto's URL encoding.
  EXPECT_LE(store.stats().requests, 6);
  EXPECT_EQ(store.stats().retries, 0);
  EXPECT_LT(SecondsSince(start), 3.0);
}

TEST_F(S3StoreTest, VirtualHostedAddressing) {
  config_.endpoint = "http://localhost:" + std::to_string(AuthServer().port());  // <bucket>.localhost is loopback
  config_.addressing = cache::s3::AddressingStyle::kVirtual;
  S3Store store(config_);
  EXPECT_EQ(store.client().HttpUrl(Req("GET", "cache/root/a")),
            "http://" + bucket_ + ".localhost:" + std::to_string(AuthServer().port()) + "/cache/root/a");
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.done"), "v"));
  auto data = store.Read(kEntry.file("model.done"));
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "v");
  auto names = store.List(kEntry.dir());
  ASSERT_TRUE(names) << names.error().message;
  EXPECT_EQ(*names, std::vector<std::string>{"model.done"});
}

TEST_F(S3StoreTest, OpenStoreReadsTheEnvironment) {
  TempDir home;
  ASSERT_TRUE(npc::testing::WriteFile(home.Sub("credentials"), "[other]\naws_access_key_id = " +
                                                                    AuthServer().access_key +
                                                                    "\naws_secret_access_key = " +
                                                                    AuthServer().secret_key + "\n"));
  struct Var {
    const char* name;
    std::string value;
  };
  std::vector<Var> vars = {{"AWS_ENDPOINT_URL_S3", AuthServer().endpoint()},
                           {"AWS_PROFILE", "other"},
                           {"AWS_SHARED_CREDENTIALS_FILE", home.Sub("credentials")},
                           {"AWS_CONFIG_FILE", home.Sub("absent")},
                           {"AWS_REGION", "us-east-1"},
                           {"AWS_ACCESS_KEY_ID", ""},
                           {"AWS_SECRET_ACCESS_KEY", ""}};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (auto& v : vars) {
    const char* old = std::getenv(v.name);
    saved.emplace_back(v.name, old ? std::optional<std::string>(old) : std::nullopt);
    if (v.value.empty()) unsetenv(v.name);
    else setenv(v.name, v.value.c_str(), 1);
  }
  auto store = cache::OpenStore("s3://" + bucket_ + "/from/env/");
  for (auto& [name, value] : saved) {
    if (value) setenv(name.c_str(), value->c_str(), 1);
    else unsetenv(name.c_str());
  }
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ((*store)->url(), "s3://" + bucket_ + "/from/env");
  EXPECT_FALSE((*store)->LocalPath("a").has_value());
  ASSERT_TRUE((*store)->WriteAtomic("a/b", "via env"));
  auto data = (*store)->Read("a/b");
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "via env");
}

TEST_F(S3StoreTest, LocalCopyDownloadsOnceAndReusesIt) {
  S3Store store(config_);
  TempDir local;
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.so"), "artifact v1"));
  auto path = cache::LocalCopy(store, kEntry.file("model.so"), local.path());
  ASSERT_TRUE(path) << path.error().message;
  EXPECT_EQ(*path, local.Sub(kEntry.file("model.so")));
  EXPECT_EQ(npc::testing::ReadFile(*path), "artifact v1");

  auto before = store.stats().requests;
  auto again = cache::LocalCopy(store, kEntry.file("model.so"), local.path());
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *path);
  EXPECT_EQ(store.stats().requests - before, 1);  // the size check only

  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.so"), "artifact v2, longer"));
  again = cache::LocalCopy(store, kEntry.file("model.so"), local.path());
  ASSERT_TRUE(again);
  EXPECT_EQ(npc::testing::ReadFile(*again), "artifact v2, longer");
  auto names = store.List(kEntry.dir());
  ASSERT_TRUE(names);

  auto missing = cache::LocalCopy(store, kEntry.file("model.neff"), local.path());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("s3://" + bucket_), std::string::npos) << missing.error().message;
  EXPECT_FALSE(npc::testing::FileExists(local.Sub(kEntry.file("model.neff"))));

  // A local store needs no copy.
  cache::LocalStore local_store(local.path());
  auto direct = cache::LocalCopy(local_store, kEntry.file("model.so"), "/nonexistent");
  ASSERT_TRUE(direct);
  EXPECT_EQ(*direct, local.Sub(kEntry.file("model.so")));
}

TEST(S3LocalCopyRoot, FromEnvironmentOrHome) {
  const char* old = std::getenv("NPC_LOCAL_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("NPC_LOCAL_CACHE_DIR", "/tmp/npc-local", 1);
  EXPECT_EQ(cache::DefaultLocalCopyRoot("s3://bkt/pfx"), "/tmp/npc-local");
  unsetenv("NPC_LOCAL_CACHE_DIR");
  std::string root = cache::DefaultLocalCopyRoot("s3://bkt/pfx");
  EXPECT_NE(root.find("/npc/s3___bkt_pfx-"), std::string::npos) << root;
  EXPECT_NE(root, cache::DefaultLocalCopyRoot("s3://bkt/pfx2"));
  if (old) setenv("NPC_LOCAL_CACHE_DIR", saved.c_str(), 1);
}

// ---- interoperability with the aws CLI -------------------------------------------

TEST_F(S3InteropTest, AwsCliSeesNpcObjectsAndNpcSeesAwsCliEntries) {
  if (RunCommand({"aws", "--version"}).exit_status != 0) GTEST_SKIP() << "the aws CLI is not installed";
  MotoServer& server = SharedServer(false);
  ASSERT_TRUE(server.error().empty()) << server.error();
  S3Config config = ConfigFor(server, UniqueBucket(), "shared/cache");
  CreateBucket(config);
  S3Store store(config);
  TempDir dir;
  const std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", "x"},
                                                  {"AWS_SECRET_ACCESS_KEY", "x"},
                                                  {"AWS_DEFAULT_REGION", "us-east-1"},
                                                  {"AWS_CONFIG_FILE", "/dev/null"},
                                                  {"AWS_SHARED_CREDENTIALS_FILE", "/dev/null"},
                                                  {"AWS_PROFILE", "<unset>"}};
  auto aws = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"aws", "--endpoint-url", server.endpoint()});
    return RunCommand(args, env);
  };
  const std::string root = "s3://" + config.bucket + "/shared/cache/";

  // npc -> aws: an entry written by npc (multipart artifact included).
  config.multipart_threshold_bytes = 1 << 20;
  config.multipart_part_bytes = 5 << 20;
  S3Store big_store(config);
  std::string artifact(6 << 20, 'n');
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("artifact"), artifact));
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.hlo_module.pb"), "hlo"));
  ASSERT_TRUE(big_store.PutFileAtomic(kEntry.file("model.bin"), dir.Sub("artifact")));
  ASSERT_TRUE(store.WriteAtomic(kEntry.file("model.done"), ""));
  auto ls = aws({"s3", "ls", "--recursive", root});
  ASSERT_EQ(ls.exit_status, 0) << ls.output;
  EXPECT_NE(ls.output.find("shared/cache/fake-1.0/MODULE_1234567890+e30acd3a/model.hlo_module.pb"), std::string::npos)
      << ls.output;
  EXPECT_NE(ls.output.find(std::to_string(artifact.size()) + " shared/cache/fake-1.0/MODULE_1234567890+e30acd3a/model.bin"),
            std::string::npos)
      << ls.output;
  auto ls_dir = aws({"s3", "ls", root + kEntry.dir() + "/"});
  ASSERT_EQ(ls_dir.exit_status, 0) << ls_dir.output;
  EXPECT_NE(ls_dir.output.find("model.done"), std::string::npos) << ls_dir.output;
  auto cp = aws({"s3", "cp", root + kEntry.file("model.bin"), dir.Sub("fetched")});
  ASSERT_EQ(cp.exit_status, 0) << cp.output;
  EXPECT_TRUE(npc::testing::ReadFile(dir.Sub("fetched")) == artifact);

  // aws -> npc: an entry uploaded with `aws s3 cp --recursive` is DONE.
  const cache::EntryRef theirs{"fake-1.0", "777", "d41d8cd9"};
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("up/model.hlo_module.pb"), "their hlo"));
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("up/compile_flags.json"), ""));
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("up/model.bin"), "their artifact"));
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("up/model.done"), ""));
  auto up = aws({"s3", "cp", "--recursive", dir.Sub("up"), root + theirs.dir() + "/"});
  ASSERT_EQ(up.exit_status, 0) << up.output;
  auto state = cache::GetEntryState(store, theirs, "model.bin");
  ASSERT_TRUE(state) << state.error().message;
  EXPECT_EQ(*state, cache::EntryState::kDone);
  auto entries = store.List("fake-1.0");
  ASSERT_TRUE(entries);
  EXPECT_EQ(*entries, (std::vector<std::string>{"MODULE_1234567890+e30acd3a", "MODULE_777+d41d8cd9"}));
  auto data = store.Read(theirs.file("model.bin"));
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "their artifact");
}

// ---- faults ------------------------------------------------------------------------

TEST_F(S3FaultTest, ServerDownFailsAfterBoundedRetriesAndRecoversAfterRestart) {
  MotoServer server;
  ASSERT_TRUE(server.Start(/*auth=*/false)) << server.error();
  S3Config config = ConfigFor(server, "npc-restart", "p");
  config.max_retries = 3;
  CreateBucket(config);
  S3Store store(config);
  ASSERT_TRUE(store.WriteAtomic("a", "before"));

  server.Stop();
  auto start = Clock::now();
  const auto before = store.stats();
  auto r = store.Read("a");
  ASSERT_FALSE(r);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("s3://npc-restart/p/a"), std::string::npos) << m;
  EXPECT_NE(m.find(server.endpoint() + "/npc-restart/p/a"), std::string::npos) << m;
  EXPECT_NE(m.find("failed after 4 attempts"), std::string::npos) << m;
  EXPECT_NE(m.find("connect"), std::string::npos) << m;
  EXPECT_EQ(store.stats().requests - before.requests, 4);
  EXPECT_EQ(store.stats().retries - before.retries, 3);
  EXPECT_LT(SecondsSince(start), 5.0);

  // The retry time limit bounds the attempts too.
  S3Config slow = config;
  slow.max_retries = 100;
  slow.retry_base_seconds = 0.2;
  slow.retry_max_delay_seconds = 0.4;
  slow.retry_max_total_seconds = 1.5;
  S3Store limited(slow);
  start = Clock::now();
  r = limited.Read("a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("retry time limit"), std::string::npos) << r.error().message;
  EXPECT_LT(SecondsSince(start), 3.0);

  // Same port, fresh server (moto keeps nothing): the same store works again.
  ASSERT_TRUE(server.Start(/*auth=*/false, server.port())) << server.error();
  CreateBucket(config);
  ASSERT_TRUE(store.WriteAtomic("a", "after"));
  auto data = store.Read("a");
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "after");
}

TEST_F(S3FaultTest, StalledServerIsRetriedUntilItAnswers) {
  MotoServer server;
  ASSERT_TRUE(server.Start(/*auth=*/false)) << server.error();
  S3Config config = ConfigFor(server, "npc-stall", "");
  CreateBucket(config);
  config.stall_timeout_seconds = 1;
  config.max_retries = 20;
  config.retry_base_seconds = 0.1;
  config.retry_max_delay_seconds = 0.3;
  config.retry_max_total_seconds = 30;
  S3Store store(config);
  ASSERT_TRUE(store.WriteAtomic("k", "value"));
  server.Pause();
  std::thread resume([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    server.Resume();
  });
  auto data = store.Read("k");
  resume.join();
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "value");
  EXPECT_GE(store.stats().retries, 1);
}

// A scripted HTTP server: answers each request with the next canned response
// (the last one repeats) and counts requests.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> responses) : responses_(std::move(responses)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 16);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

  static std::string Response(int status, const std::string& reason, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nContent-Type: application/xml\r\nConnection: close\r\n\r\n" + body;
  }
  static std::string S3Error(int status, const std::string& reason, const std::string& code) {
    return Response(status, reason, "<?xml version=\"1.0\"?><Error><Code>" + code + "</Code><Message>" + code +
                                        " message</Message></Error>");
  }

 private:
  void Serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      int index = requests_++;
      const std::string& response = responses_[std::min<size_t>(index, responses_.size() - 1)];
      (void)!write(c, response.data(), response.size());
      close(c);
    }
  }
  std::vector<std::string> responses_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

S3Config ScriptedConfig(const ScriptedServer& server) {
  S3Config c;
  c.bucket = "scripted";
  c.endpoint = server.endpoint();
  c.credentials = {"AKIDSCRIPTED", "secret", "", "the test"};
  c.max_retries = 4;
  c.retry_base_seconds = 0.01;
  c.retry_max_delay_seconds = 0.05;
  return c;
}

TEST(S3Retries, SlowDownAndServerErrorsAreRetried) {
  ScriptedServer server({ScriptedServer::S3Error(503, "Slow Down", "SlowDown"),
                         ScriptedServer::S3Error(500, "Internal Server Error", "InternalError"),
                         ScriptedServer::Response(200, "OK", "hello")});
  S3Store store(ScriptedConfig(server));
  auto data = store.Read("k");
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(*data, "hello");
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(store.stats().retries, 2);
}

TEST(S3Retries, PersistentSlowDownGivesUpWithTheCause) {
  ScriptedServer server({ScriptedServer::S3Error(503, "Slow Down", "SlowDown")});
  S3Store store(ScriptedConfig(server));
  auto r = store.WriteAtomic("k", "v");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("failed after 5 attempts"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("SlowDown"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("s3://scripted/k"), std::string::npos) << r.error().message;
  EXPECT_EQ(server.requests(), 5);
}

TEST(S3Retries, ClientErrorsAreNotRetried) {
  ScriptedServer server({ScriptedServer::S3Error(403, "Forbidden", "AccessDenied")});
  S3Store store(ScriptedConfig(server));
  auto r = store.Read("k");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("access to bucket 'scripted' denied"), std::string::npos) << r.error().message;
  EXPECT_EQ(server.requests(), 1);
}

TEST(S3Retries, WrongRegionNamesTheRightOne) {
  const std::string body = "<Error><Code>PermanentRedirect</Code><Message>elsewhere</Message></Error>";
  ScriptedServer server({"HTTP/1.1 301 Moved Permanently\r\nx-amz-bucket-region: eu-west-1\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body});
  S3Store store(ScriptedConfig(server));
  auto r = store.List("");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("eu-west-1"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("AWS_REGION"), std::string::npos) << r.error().message;
}

// ---- CompileEntry against S3 --------------------------------------------------------

class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(std::atomic<int>* compiles) : compiles_(compiles) {}
  std::string backend() const override { return "fake"; }
  Result<std::string> CacheDirectoryName() override { return std::string("fake-1.0"); }
  std::string ArtifactName() const override { return "model.bin"; }
  int64_t DefaultMemoryPerCompileBytes() const override { return 1 << 20; }
  CompileOutcome Compile(const CompileJob& job) override {
    ++*compiles_;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    CompileOutcome outcome;
    outcome.command = "fake-compile " + job.hlo_path;
    outcome.ok = npc::testing::WriteFile(job.artifact_path, "compiled(" + npc::testing::ReadFile(job.hlo_path) + ")");
    return outcome;
  }

 private:
  std::atomic<int>* compiles_;
};

TEST_F(S3StoreTest, CompileEntryCompilesOnceAcrossHosts) {
  {
    S3Store store(config_);
    ASSERT_TRUE(cache::PutEntryInputs(store, kEntry, "the hlo", R"(["--target=trn1"])"));
  }
  std::atomic<int> compiles{0};
  constexpr int kHosts = 3;
  std::vector<EntryCompileResult::Status> statuses(kHosts);
  std::vector<std::string> errors(kHosts);
  std::vector<std::thread> hosts;
  for (int i = 0; i < kHosts; ++i) {
    hosts.emplace_back([&, i] {
      S3Store store(config_);  // each "host" with its own store and connections
      FakeCompiler compiler(&compiles);
      EntryCompileOptions options;
      options.wait_for_lock = true;
      options.lock_wait_seconds = 60;
      auto result = CompileEntry(store, compiler, kEntry, options);
      if (!result) errors[i] = result.error().message;
      else statuses[i] = result->status;
    });
  }
  for (auto& t : hosts) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(compiles.load(), 1);
  std::multiset<EntryCompileResult::Status> got(statuses.begin(), statuses.end());
  EXPECT_EQ(got.count(EntryCompileResult::Status::kCompiled), 1u);
  EXPECT_EQ(got.count(EntryCompileResult::Status::kAlreadyDone), static_cast<size_t>(kHosts - 1));

  S3Store store(config_);
  auto state = cache::GetEntryState(store, kEntry, "model.bin");
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, cache::EntryState::kDone);
  auto artifact = store.Read(kEntry.file("model.bin"));
  ASSERT_TRUE(artifact) << artifact.error().message;
  EXPECT_EQ(*artifact, "compiled(the hlo)");
  auto files = store.List(kEntry.dir());
  ASSERT_TRUE(files);
  EXPECT_EQ(*files, (std::vector<std::string>{"compile_flags.json", "model.bin", "model.done", "model.hlo_module.pb"}));
}

// ---- configuration from the environment (no server) ----------------------------------

cache::s3::EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

TEST(S3Config, ParsesUrls) {
  auto p = cache::s3::ParseS3Url("s3://bkt/a/b/");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "bkt");
  EXPECT_EQ(p->second, "a/b");
  p = cache::s3::ParseS3Url("s3://bkt");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->second, "");
  EXPECT_FALSE(cache::s3::ParseS3Url("s3:///x"));
  EXPECT_FALSE(cache::s3::ParseS3Url("s3://b@d/x"));
  EXPECT_FALSE(cache::s3::ParseS3Url("/local/dir"));
}

TEST(S3Config, EnvironmentWinsOverProfiles) {
  TempDir dir;
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("credentials"),
                                      "[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = defsecret\n"
                                      "# comment\n[ci]\naws_access_key_id=CIKEY\naws_secret_access_key=cisecret\n"
                                      "aws_session_token = citoken\n"));
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("config"), "[default]\nregion = eu-central-1\n"
                                                         "[profile ci]\nregion = ap-south-1\ns3 =\n"
                                                         "  addressing_style = path\n"));
  std::map<std::string, std::string> base = {{"AWS_SHARED_CREDENTIALS_FILE", dir.Sub("credentials")},
                                             {"AWS_CONFIG_FILE", dir.Sub("config")}};

  auto c = cache::s3::S3ConfigFromEnvironment("s3://bkt/pfx", MapEnv(base));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->bucket, "bkt");
  EXPECT_EQ(c->prefix, "pfx");
  EXPECT_EQ(c->region, "eu-central-1");
  EXPECT_EQ(c->credentials.access_key_id, "DEFKEY");
  EXPECT_EQ(c->credentials.secret_access_key, "defsecret");
  EXPECT_EQ(c->endpoint, "");
  EXPECT_EQ(c->addressing, cache::s3::AddressingStyle::kAuto);
  S3Client aws(*c);
  EXPECT_EQ(aws.HttpUrl(Req("GET", "pfx/MODULE_1+2/x y")),
            "https://bkt.s3.eu-central-1.amazonaws.com/pfx/MODULE_1%2B2/x%20y");

  auto profile = base;
  profile["AWS_PROFILE"] = "ci";
  c = cache::s3::S3ConfigFromEnvironment("s3://bkt", MapEnv(profile));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->credentials.access_key_id, "CIKEY");
  EXPECT_EQ(c->credentials.session_token, "citoken");
  EXPECT_NE(c->credentials.source.find("profile 'ci'"), std::string::npos);
  EXPECT_EQ(c->region, "ap-south-1");
  EXPECT_EQ(c->addressing, cache::s3::AddressingStyle::kPath);

  auto env = profile;
  env["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  env["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  env["AWS_SESSION_TOKEN"] = "envtoken";
  env["AWS_DEFAULT_REGION"] = "us-west-2";
  env["AWS_ENDPOINT_URL"] = "http://generic:1";
  env["AWS_ENDPOINT_URL_S3"] = "http://minio:9000/";
  env["NPC_S3_ADDRESSING_STYLE"] = "virtual";
  env["NPC_S3_MAX_RETRIES"] = "2";
  env["NPC_S3_MULTIPART_THRESHOLD"] = "1048576";
  env["NPC_S3_LOCK_TTL"] = "15";
  c = cache::s3::S3ConfigFromEnvironment("s3://bkt/p", MapEnv(env));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->credentials.access_key_id, "ENVKEY");
  EXPECT_EQ(c->credentials.session_token, "envtoken");
  EXPECT_EQ(c->region, "us-west-2");
  EXPECT_EQ(c->endpoint, "http://minio:9000");
  EXPECT_EQ(c->addressing, cache::s3::AddressingStyle::kVirtual);
  EXPECT_EQ(c->max_retries, 2);
  EXPECT_EQ(c->multipart_threshold_bytes, 1048576);
  EXPECT_EQ(c->lease_ttl_seconds, 15);
  S3Client minio(*c);
  EXPECT_EQ(minio.HttpUrl(Req("GET", "p/k", {{"list-type", "2"}, {"delimiter", "/"}})),
            "http://bkt.minio:9000/p/k?delimiter=%2F&list-type=2");

  env["AWS_REGION"] = "eu-north-1";
  env["NPC_S3_ADDRESSING_STYLE"] = "path";
  c = cache::s3::S3ConfigFromEnvironment("s3://bkt/p", MapEnv(env));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->region, "eu-north-1");
  EXPECT_EQ(S3Client(*c).HttpUrl(Req("GET", "")), "http://minio:9000/bkt");

  auto bad = base;
  bad["AWS_PROFILE"] = "nope";
  c = cache::s3::S3ConfigFromEnvironment("s3://bkt", MapEnv(bad));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("profile 'nope'"), std::string::npos) << c.error().message;
  bad = base;
  bad["AWS_ACCESS_KEY_ID"] = "ONLYKEY";
  c = cache::s3::S3ConfigFromEnvironment("s3://bkt", MapEnv(bad));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos) << c.error().message;
  bad = base;
  bad["NPC_S3_MAX_RETRIES"] = "many";
  EXPECT_FALSE(cache::s3::S3ConfigFromEnvironment("s3://bkt", MapEnv(bad)));
  bad = base;
  bad["NPC_S3_ADDRESSING_STYLE"] = "sideways";
  EXPECT_FALSE(cache::s3::S3ConfigFromEnvironment("s3://bkt", MapEnv(bad)));

  // Nothing anywhere: no credentials (unsigned requests), us-east-1.
  c = cache::s3::S3ConfigFromEnvironment("s3://bkt.with.dots/x", MapEnv({{"HOME", dir.Sub("nohome")}}));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->credentials.empty());
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(S3Client(*c).HttpUrl(Req("GET", "x/k")), "https://s3.us-east-1.amazonaws.com/bkt.with.dots/x/k");
}

TEST(S3Xml, ExtractsTextsAndEntities) {
  std::string xml =
      "<R><Contents><Key>a&amp;b&lt;c&#x41;&#66;</Key></Contents><Contents><Key>d</Key></Contents>"
      "<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes><Prefix/><PrefixX>no</PrefixX></R>";
  auto contents = cache::s3::XmlElements(xml, "Contents");
  ASSERT_EQ(contents.size(), 2u);
  EXPECT_EQ(cache::s3::XmlTexts(contents[0], "Key"), std::vector<std::string>{"a&b<cAB"});
  EXPECT_EQ(cache::s3::XmlTexts(xml, "Prefix"), (std::vector<std::string>{"p/", ""}));
  EXPECT_EQ(cache::s3::XmlEscape("a<&>\"'"), "a&lt;&amp;&gt;&quot;&apos;");
  EXPECT_EQ(cache::s3::ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT").value_or(0), 784111777);
  EXPECT_FALSE(cache::s3::ParseHttpDate("yesterday"));
}

}  // namespace
}  // namespace npc
