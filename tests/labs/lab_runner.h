/**
 * @file lab_runner.h
 * @brief Runs a lab executable as a learner would and reads what it wrote.
 */
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace servelab::test {

/// Exit status, stdout and stderr of one command.
struct RunResult {
  int status = -1;
  std::string out, err;
};

/// Runs @p command through the shell, capturing stdout and stderr separately.
inline RunResult run_command(const std::string& command) {
  const auto err_file = std::filesystem::temp_directory_path() / ("servelab-lab-err-" + std::to_string(std::random_device{}()));
  RunResult r;
  if (FILE* p = ::popen((command + " 2>'" + err_file.string() + "'").c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int raw = ::pclose(p);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(err_file);
  return r;
}

/// The table named @p name in a lab's results JSON; fails the test when absent.
inline const nlohmann::json& table(const nlohmann::json& results, const std::string& name) {
  for (const auto& t : results["tables"])
    if (t["name"] == name) return t;
  FAIL("results have no table " << name);
  throw;  // unreachable: FAIL throws
}

/// Column index of @p column in @p table.
inline std::size_t column(const nlohmann::json& table, const std::string& column) {
  const auto& cols = table["columns"];
  for (std::size_t i = 0; i < cols.size(); ++i)
    if (cols[i] == column) return i;
  FAIL("table " << table["name"] << " has no column " << column);
  throw;
}

}  // namespace servelab::test
