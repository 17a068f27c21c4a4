// A real S3-compatible server for tests: moto (`python3 -m moto.server`),
// started on a loopback port by the test itself, optionally verifying SigV4
// signatures against an IAM user it creates. Tests skip, saying why, when
// MotoUnavailable() is not empty.
#pragma once

#include <sys/types.h>

#include <string>

#include "support/test_support.h"

namespace npc::testing {

// A free TCP port on 127.0.0.1 (0 when none could be found).
int FreePort();
// true when something accepts connections on 127.0.0.1:<port>.
bool PortAnswers(int port);
// The Python interpreter with moto: $MOTO_PYTHON, else python3.
std::string MotoPython();
// Empty when moto (and boto3, for the IAM user of the SigV4 server) can be
// imported; else why not.
const std::string& MotoUnavailable();

// A moto server on 127.0.0.1:<port>, a child of this process: killed by
// Stop() or the destructor, and by the kernel if this process dies
// (PR_SET_PDEATHSIG), so it never outlives the test.
class MotoServer {
 public:
  MotoServer() = default;
  ~MotoServer() { Stop(); }
  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  // Starts moto on `port` (0: a free one) and waits until it answers.
  // auth: verify SigV4, with an IAM user whose keys land in access_key/secret_key.
  // false (and error()) when it cannot start.
  bool Start(bool auth, int port = 0);

  // Kills moto (SIGKILL) and waits for it; its in-memory buckets are lost.
  void Stop();
  // SIGSTOP / SIGCONT: a server that accepts connections and never answers.
  void Pause();
  void Resume();

  // Call before Start(): moto appends every request it receives to `file`
  // (its recorder, MOTO_ENABLE_RECORDING). A server started later with the
  // same file, on the same port, gets the state the first one had when it
  // was killed with ReplayRecording(): the stand-in for a persistent server
  // (moto keeps buckets in memory only). Needs auth = false (the recorded
  // signatures name keys of the first server's IAM user).
  void RecordRequestsTo(std::string file) { recording_file_ = std::move(file); }
  // Replays the recorded requests into this server. false (and error()) on failure.
  bool ReplayRecording();

  // moto's log of this start (one line per request it answered).
  const std::string& log_path() const { return log_path_; }

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& error() const { return error_; }

  std::string access_key;
  std::string secret_key;

 private:
  bool Fail(std::string why) {
    error_ = std::move(why);
    Stop();
    return false;
  }
  TempDir log_dir_{"npc-moto"};
  bool auth_ = false;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string error_;
  std::string recording_file_;
  std::string log_path_;
};

}  // namespace npc::testing
