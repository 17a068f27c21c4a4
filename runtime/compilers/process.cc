#include "compilers/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <sstream>

extern char** environ;

namespace npc {

std::string ShellQuote(const std::string& s) {
  if (s.empty()) return "''";
  bool safe = true;
  for (char c : s) {
    if (!(isalnum(static_cast<unsigned char>(c)) || std::strchr("@%_-+=:,./", c))) {
      safe = false;
      break;
    }
  }
  if (safe) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += ShellQuote(a);
  }
  return out;
}

std::string FindInPath(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return access(program.c_str(), X_OK) == 0 ? program : "";
  }
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    // An empty PATH element means the current directory.
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

namespace {

std::vector<std::string> BuildEnvironment(const ProcessOptions& options) {
  std::set<std::string> drop(options.unset_env.begin(), options.unset_env.end());
  for (const auto& [k, v] : options.set_env) drop.insert(k);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (!drop.count(name)) env.push_back(entry);
  }
  for (const auto& [k, v] : options.set_env) env.push_back(k + "=" + v);
  return env;
}

// ---- interruption ------------------------------------------------------------

constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxChildren = 64;
// The children RunProcess is running, for the signal handler: -pgid for a
// process-group leader, pid for a foreground child, 0 for a free slot.
std::atomic<pid_t> g_children[kMaxChildren];
std::atomic<int> g_interrupt_signal{0};
std::atomic<bool> g_forwarding{false};
std::atomic<bool> g_defer{false};
// Which of kInterruptSignals OnInterrupt handles (not those ignored at start, e.g. SIGHUP under nohup).
std::atomic<bool> g_handled[std::size(kInterruptSignals)];

// Sends `sig` to the registered children: groups always, foreground children
// only when `from_process`. Returns whether any child is registered.
bool ForwardToChildren(int sig, bool from_process) {
  bool any = false;
  for (auto& slot : g_children) {
    pid_t target = slot.load();
    if (target == 0) continue;
    any = true;
    if (target < 0 || from_process) kill(target, sig);
  }
  return any;
}

void OnInterrupt(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  int none = 0;
  g_interrupt_signal.compare_exchange_strong(none, sig);
  // SI_USER, SI_QUEUE, SI_TKILL (<= 0): sent by a process; the terminal's
  // signals are SI_KERNEL and went to its whole foreground group already.
  const bool from_process = info != nullptr && info->si_code <= 0;
  if (!ForwardToChildren(sig, from_process) && !g_defer.load()) {
    signal(sig, SIG_DFL);
    raise(sig);  // delivered when this handler returns: the default action
  }
  errno = saved_errno;
}

// Blocks the interrupt signals in this thread for its lifetime (so that a
// child cannot run OnInterrupt between fork and exec, and registration is
// not raced); the child restores `saved()` before exec.
class InterruptBlock {
 public:
  InterruptBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kInterruptSignals) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &saved_);
  }
  ~InterruptBlock() { Unblock(); }
  void Unblock() {
    if (blocked_) pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    blocked_ = false;
  }
  const sigset_t& saved() const { return saved_; }

 private:
  sigset_t saved_;
  bool blocked_ = true;
};

// Registers a running child for OnInterrupt while alive. A signal that
// arrived before registration is forwarded here.
class ChildRegistration {
 public:
  explicit ChildRegistration(pid_t target) {
    for (auto& slot : g_children) {
      pid_t free_slot = 0;
      if (slot.compare_exchange_strong(free_slot, target)) {
        slot_ = &slot;
        break;
      }
    }
    if (int sig = g_interrupt_signal.load(); sig != 0 && target < 0) kill(target, sig);
  }
  ~ChildRegistration() { Release(); }
  void Release() {
    if (slot_ != nullptr) slot_->store(0);
    slot_ = nullptr;
  }

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

std::string SignalName(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
  }
  return "signal " + std::to_string(sig);
}

// Waits until the child has ended without reaping it (so its pid stays
// reserved while it is registered), killing it once `timeout_seconds` (> 0)
// have passed since `start`.
void AwaitExit(pid_t pid, const ProcessOptions& options, std::chrono::steady_clock::time_point start,
               ProcessResult& result) {
  const bool poll = options.timeout_seconds > 0 && !result.timed_out;
  for (;;) {
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    int r = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | (poll ? WNOHANG : 0));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || info.si_pid != 0 || !poll) return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_seconds && !result.timed_out) {
      kill(options.new_process_group ? -pid : pid, SIGKILL);
      result.timed_out = true;
    }
    usleep(20000);
  }
}

}  // namespace

void InstallInterruptForwarding(bool defer) {
  g_defer.store(defer);
  if (g_forwarding.exchange(true)) return;
  struct sigaction action {};
  action.sa_sigaction = OnInterrupt;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kInterruptSignals); ++i) {
    struct sigaction old {};
    sigaction(kInterruptSignals[i], nullptr, &old);
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;  // ignored (nohup): stays so
    sigaction(kInterruptSignals[i], &action, nullptr);
    g_handled[i].store(true);
  }
}

int InterruptSignal() { return g_interrupt_signal.load(); }

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) return MakeError("RunProcess: empty command");
  std::string program = FindInPath(argv[0]);
  if (program.empty()) return MakeError("cannot run '" + argv[0] + "': not found or not executable");

  InterruptBlock block;
  if (int sig = InterruptSignal(); sig != 0) {
    return MakeError("not started (interrupted by " + SignalName(sig) + "): " + ShellJoin(argv));
  }
  int pipe_fds[2] = {-1, -1};
  if (options.capture_output && pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return MakeError(std::string("pipe: ") + std::strerror(errno));
  }

  std::vector<std::string> env = BuildEnvironment(options);
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const auto& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  // The child reports a failed chdir or exec through this close-on-exec pipe:
  // EOF means the program started.
  int exec_fds[2];
  if (pipe2(exec_fds, O_CLOEXEC) != 0) {
    if (pipe_fds[0] >= 0) { close(pipe_fds[0]); close(pipe_fds[1]); }
    return MakeError(std::string("pipe: ") + std::strerror(errno));
  }
  // A foreground child decides how to stop on Ctrl-C (SIGINT is handled by
  // OnInterrupt when forwarding is installed, else ignored here).
  const bool forwarding = g_forwarding.load();
  struct sigaction ignore {}, old_int {}, old_quit {};
  if (!options.new_process_group) {
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (!forwarding) sigaction(SIGINT, &ignore, &old_int);
    sigaction(SIGQUIT, &ignore, &old_quit);
  }
  auto restore_signals = [&] {
    if (options.new_process_group) return;
    if (!forwarding) sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
  };

  const pid_t parent = getpid();
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    if (pipe_fds[0] >= 0) { close(pipe_fds[0]); close(pipe_fds[1]); }
    close(exec_fds[0]);
    close(exec_fds[1]);
    restore_signals();
    return MakeError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // stage 1: chdir failed; stage 2: exec failed.
    auto report = [&](int stage) {
      int msg[2] = {stage, errno};
      (void)!write(exec_fds[1], msg, sizeof msg);
      _exit(127);
    };
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < std::size(kInterruptSignals); ++i) {
      if (g_handled[i].load()) sigaction(kInterruptSignals[i], &dfl, nullptr);
    }
    if (options.new_process_group) {
      setpgid(0, 0);  // own process group so a timeout can kill the whole tree
    } else {
      sigaction(SIGQUIT, &dfl, nullptr);
    }
    // Stopped when the parent dies; if it died already, stop now.
    const int death_signal = options.new_process_group ? SIGKILL : SIGTERM;
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(128 + death_signal);
    pthread_sigmask(SIG_SETMASK, &block.saved(), nullptr);
    if (options.capture_output) {
      dup2(pipe_fds[1], STDOUT_FILENO);
      dup2(pipe_fds[1], STDERR_FILENO);
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    }
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) report(1);
    execve(program.c_str(), c_argv.data(), c_env.data());
    report(2);
  }
  if (options.new_process_group) setpgid(pid, pid);
  ChildRegistration registration(options.new_process_group ? -pid : pid);
  block.Unblock();
  close(exec_fds[1]);
  int exec_msg[2] = {0, 0};
  ssize_t exec_n;
  do exec_n = read(exec_fds[0], exec_msg, sizeof exec_msg);
  while (exec_n < 0 && errno == EINTR);
  close(exec_fds[0]);
  if (exec_n == static_cast<ssize_t>(sizeof exec_msg)) {
    registration.Release();
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (pipe_fds[0] >= 0) { close(pipe_fds[0]); close(pipe_fds[1]); }
    restore_signals();
    if (exec_msg[0] == 1) return MakeError("cannot enter directory " + options.cwd + ": " + std::strerror(exec_msg[1]));
    return MakeError("cannot execute " + program + ": " + std::strerror(exec_msg[1]));
  }

  ProcessResult result;
  if (options.capture_output) {
    close(pipe_fds[1]);
    char buf[65536];
    for (;;) {
      int wait_ms = -1;
      if (options.timeout_seconds > 0) {
        double left = options.timeout_seconds -
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (left <= 0) {
          kill(options.new_process_group ? -pid : pid, SIGKILL);
          result.timed_out = true;
          break;
        }
        wait_ms = static_cast<int>(left * 1000) + 1;
      }
      struct pollfd pfd = {pipe_fds[0], POLLIN, 0};
      int r = poll(&pfd, 1, wait_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue;  // re-check the timeout
      ssize_t n = read(pipe_fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
    }
    close(pipe_fds[0]);
  }

  AwaitExit(pid, options, start, result);
  {
    // Unregister while the child is a zombie (its pid not reusable), then reap.
    InterruptBlock reap_block;
    registration.Release();
  }
  int status = 0;
  struct rusage usage;
  std::memset(&usage, 0, sizeof usage);
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_status = 128 + WTERMSIG(status);
  if (result.timed_out) result.exit_status = -1;
  restore_signals();
  return result;
}

}  // namespace npc
