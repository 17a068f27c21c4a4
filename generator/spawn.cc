#include "generator/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "compilers/process.h"

extern char** environ;

namespace npc::tool {

Result<int> RunInteractive(const std::vector<std::string>& argv, const std::map<std::string, std::string>& set_env) {
  if (argv.empty()) return MakeError("no command to run");
  std::string program = FindInPath(argv[0]);
  if (program.empty()) return MakeError("cannot find `" + argv[0] + "` (not in PATH, or not executable)");

  // Everything the child needs, prepared before fork.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    if (!set_env.count(entry.substr(0, entry.find('=')))) env.push_back(std::move(entry));
  }
  for (const auto& [k, v] : set_env) env.push_back(k + "=" + v);
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const auto& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    return MakeError(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, nullptr);
    sigaction(SIGQUIT, &dfl, nullptr);
    close(exec_pipe[0]);
    execve(program.c_str(), c_argv.data(), c_env.data());
    int err = errno;
    (void)!write(exec_pipe[1], &err, sizeof err);
    _exit(127);
  }
  close(exec_pipe[1]);
  Result<int> out = MakeError("");
  if (pid < 0) {
    out = MakeError(std::string("fork: ") + std::strerror(errno));
  } else {
    int exec_errno = 0;
    ssize_t n;
    do n = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
    while (n < 0 && errno == EINTR);
    int status = 0;
    pid_t w;
    do w = waitpid(pid, &status, 0);
    while (w < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof exec_errno)) {
      out = MakeError("cannot execute " + program + ": " + std::strerror(exec_errno));
    } else if (WIFEXITED(status)) {
      out = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      out = 128 + WTERMSIG(status);
    } else {
      out = 1;
    }
  }
  close(exec_pipe[0]);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  return out;
}

}  // namespace npc::tool
