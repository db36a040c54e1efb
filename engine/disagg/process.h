// SPDX-License-Identifier: MIT
/**
 * @file process.h
 * @brief Starting, signalling and reaping the router and worker processes
 *        (the lab and the tests run real, separate processes).
 */
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace servelab::disagg {

/// A child process that is killed and reaped when this object goes, so nothing outlives a failed test.
class ChildProcess {
 public:
  /**
   * @brief Runs @p argv (argv[0] is the executable's path) with @p env added
   *        to this process's environment; the child's stdout goes to stderr,
   *        so that only the caller's tables reach stdout.
   * @throws Error when fork fails; an exec failure shows as exit status 127.
   */
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The process id.
  pid_t pid() const { return pid_; }
  /// Sends @p signal (nothing once reaped).
  void signal(int signal);
  /**
   * @brief Waits up to @p seconds for the child to end.
   * @return its exit status, or 128 + the signal that ended it; nothing when it still runs.
   */
  std::optional<int> wait_for(double seconds);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/**
 * @brief The first word of file @p path once it exists and is not empty (the router's endpoint file).
 * @throws Error naming the file when nothing is there after @p timeout seconds.
 */
std::string wait_for_endpoint_file(const std::string& path, double timeout);

}  // namespace servelab::disagg
