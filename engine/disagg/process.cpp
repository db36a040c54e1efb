// SPDX-License-Identifier: MIT
#include "disagg/process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/timer.h"

namespace servelab::disagg {

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::pair<std::string, std::string>>& env) {
  check(!argv.empty(), "ChildProcess: no program");
  // Built before fork: the child may only call async-signal-safe functions plus exec.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  check(pid_ >= 0, "cannot start ", argv[0], ": fork failed");
  if (pid_ == 0) {
    for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (status_ || pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

void ChildProcess::signal(int signal) {
  if (!status_) ::kill(pid_, signal);
}

std::optional<int> ChildProcess::wait_for(double seconds) {
  const double deadline = now_seconds() + seconds;
  while (!status_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (now_seconds() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

std::string wait_for_endpoint_file(const std::string& path, double timeout) {
  const double deadline = now_seconds() + timeout;
  while (true) {
    std::ifstream in(path);
    std::string word;
    if (in >> word) return word;
    check(now_seconds() < deadline, path, ": no router endpoint after ", timeout, " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace servelab::disagg
