#include "support/moto_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace npc::testing {

namespace {
using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

bool PortAnswers(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

std::string MotoPython() { return npc::testing::GetEnv("MOTO_PYTHON", "python3"); }

// Empty when moto (and boto3, for the IAM user of the SigV4 server) can be
// imported; else why not.
const std::string& MotoUnavailable() {
  static const std::string why = [] {
    auto r = RunCommand({MotoPython(), "-c", "import moto.server, boto3"});
    if (r.exit_status == 0) return std::string();
    return "moto is not installed for " + MotoPython() + " (pip install 'moto[server]' boto3; MOTO_PYTHON picks the interpreter): " +
           r.output.substr(0, 300);
  }();
  return why;
}

bool MotoServer::Start(bool auth, int port) {
  auth_ = auth;
  port_ = port != 0 ? port : FreePort();
  if (port_ == 0) return Fail("no free port");
  static int starts = 0;
  log_path_ = log_dir_.Sub("moto-" + std::to_string(port_) + "-" + std::to_string(++starts) + ".log");
  const std::string& log = log_path_;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view v(*e);
    if (v.rfind("INITIAL_NO_AUTH_ACTION_COUNT=", 0) == 0) continue;
    env_strings.emplace_back(v);
  }
  // The IAM user is made with the first three (unauthenticated) actions.
  if (auth) env_strings.push_back("INITIAL_NO_AUTH_ACTION_COUNT=3");
  if (!recording_file_.empty()) {
    env_strings.push_back("MOTO_ENABLE_RECORDING=True");
    env_strings.push_back("MOTO_RECORDER_FILEPATH=" + recording_file_);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string python = MotoPython();
  std::string port_text = std::to_string(port_);
  std::vector<std::string> args = {python, "-m", "moto.server", "-H", "127.0.0.1", "-p", port_text};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return Fail("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    FILE* out = std::fopen(log.c_str(), "w");
    if (out != nullptr) {
      dup2(fileno(out), 1);
      dup2(fileno(out), 2);
    }
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  auto start = Clock::now();
  while (!PortAnswers(port_)) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Fail("moto exited at start: " + npc::testing::ReadFile(log));
    }
    if (SecondsSince(start) > 60) return Fail("moto did not answer within 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (auth) {
    const char* script = R"(import sys, boto3
iam = boto3.client('iam', endpoint_url='http://127.0.0.1:' + sys.argv[1], region_name='us-east-1')
iam.create_user(UserName='ci')
iam.put_user_policy(UserName='ci', PolicyName='s3', PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*","iam:*","sts:*"],"Resource":"*"}]}')
k = iam.create_access_key(UserName='ci')['AccessKey']
print(k['AccessKeyId'], k['SecretAccessKey']))";
    auto r = RunCommand({python, "-c", script, port_text},
                        {{"AWS_ACCESS_KEY_ID", "boot"}, {"AWS_SECRET_ACCESS_KEY", "boot"},
                         {"AWS_CONFIG_FILE", "/dev/null"}, {"AWS_SHARED_CREDENTIALS_FILE", "/dev/null"}});
    size_t space = r.output.find(' ');
    if (r.exit_status != 0 || space == std::string::npos) return Fail("cannot create the IAM user: " + r.output);
    access_key = r.output.substr(0, space);
    secret_key = r.output.substr(space + 1);
    while (!secret_key.empty() && std::isspace(static_cast<unsigned char>(secret_key.back()))) secret_key.pop_back();
  } else {
    access_key = "AKIDNOAUTH";
    secret_key = "no-auth-secret";
  }
  return true;
}


void MotoServer::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

bool MotoServer::ReplayRecording() {
  if (recording_file_.empty()) return Fail("ReplayRecording: no recording (call RecordRequestsTo before Start)");
  const char* script = R"(import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1] + '/moto-api/recorder/replay-recording', method='POST'), timeout=120).read())";
  auto r = RunCommand({MotoPython(), "-c", script, endpoint()});
  if (r.exit_status != 0) return Fail("cannot replay the recording " + recording_file_ + ": " + r.output);
  return true;
}

void MotoServer::Pause() { kill(pid_, SIGSTOP); }
void MotoServer::Resume() { kill(pid_, SIGCONT); }

}  // namespace npc::testing
