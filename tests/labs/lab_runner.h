// SPDX-License-Identifier: MIT
/**
 * @file lab_runner.h
 * @brief Runs a lab executable as a learner would and reads what it wrote.
 */
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/ladder.h"
#include "test_util.h"

namespace servelab::test {

/// Exit status, stdout and stderr of one command.
struct RunResult {
  int status = -1;
  std::string out, err;
};

/// Runs @p command through the shell, capturing stdout and stderr separately.
inline RunResult run_command(const std::string& command) {
  const auto err_file =
      std::filesystem::temp_directory_path() / ("servelab-lab-err-" + std::to_string(std::random_device{}()));
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

/// A successful `--quick` run of a lab: what it printed and the results it saved.
struct QuickRun {
  RunResult run;              ///< exit status, stdout, stderr
  std::filesystem::path dir;  ///< the lab's results folder
  nlohmann::json results;     ///< <dir>/<lab>.json
};

/**
 * @brief Runs `exe --quick <extra> --out <scratch>` and reads `<lab>.json`;
 *        fails the test (printing stderr) unless the lab exits 0.
 * @param scratch an empty folder owned by the caller.
 */
inline QuickRun run_lab_quick(const std::string& exe, const std::string& lab, const std::filesystem::path& scratch,
                              const std::string& extra = "") {
  QuickRun q;
  q.run = run_command(exe + " --quick " + extra + " --out '" + scratch.string() + "'");
  INFO(q.run.err);
  REQUIRE(q.run.status == 0);
  q.dir = scratch / lab;
  q.results = nlohmann::json::parse(std::ifstream(q.dir / (lab + ".json")));
  return q;
}

/// Checks that @p command fails with one error containing @p message and prints nothing on stdout.
inline void check_refused(const std::string& command, const std::string& message) {
  const RunResult r = run_command(command);
  INFO(command << "\nstderr: " << r.err);
  CHECK(r.status != 0);
  CHECK(r.err.find(message) != std::string::npos);
  CHECK(r.out.empty());
}

/// Runs `@p exe --quick ARGS --out /tmp` for each of @p args and checks each is refused naming its first word
/// (the flag), with nothing on stdout.
inline void check_flags_refused(const std::string& exe, std::initializer_list<std::string_view> args) {
  for (std::string_view a : args)
    check_refused(exe + " --quick " + std::string(a) + " --out /tmp", std::string(a.substr(0, a.find(' '))));
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

/**
 * @brief Checks the claims a lab's verdict recorded (results' "claims"): exactly @p ids, in that order,
 *        each with a source, a statement and evidence, and a cause when it did not hold; and that the
 *        claims in @p must_hold (those decided on bytes, FLOPs, tokens or simulated numbers, not on timing)
 *        held on this machine.
 */
inline void check_claims(const nlohmann::json& results, const std::vector<std::string>& ids,
                         const std::vector<std::string>& must_hold) {
  REQUIRE(results.contains("claims"));
  std::vector<std::string> recorded;
  for (const auto& c : results["claims"]) {
    const std::string id = c["id"];
    recorded.push_back(id);
    INFO("claim " << id << ": " << c.dump());
    CHECK_FALSE(c["source"].get<std::string>().empty());
    CHECK_FALSE(c["statement"].get<std::string>().empty());
    CHECK_FALSE(c["evidence"].get<std::string>().empty());
    if (!c["held"].get<bool>()) CHECK_FALSE(c["cause"].get<std::string>().empty());
    if (std::find(must_hold.begin(), must_hold.end(), id) != must_hold.end()) CHECK(c["held"].get<bool>());
  }
  CHECK(recorded == ids);
}

/// Configuration fields by name, as differences() lists them.
using Fields = std::vector<std::string>;

/**
 * @brief The configuration that run @p run of a lab recorded (results' "configurations"),
 *        after checking that it is lab @p lab's rung: configure(for_lab(lab), base) with
 *        the base the run recorded, field for field.
 */
inline LabConfig ran(const nlohmann::json& results, const std::string& run, int lab) {
  REQUIRE(results.contains("configurations"));
  for (const auto& c : results["configurations"]) {
    if (c["run"] != run) continue;
    CHECK(c["lab"] == lab);
    const LabConfig recorded = lab_config_from_json(c["ran"]);
    const std::vector<std::string> diff =
        differences(configure(Techniques::for_lab(lab), lab_config_from_json(c["base"])), recorded);
    std::string fields;
    for (const std::string& f : diff) fields += " " + f;
    INFO("run '" << run << "' differs from configure(for_lab(" << lab << "), its base) in:" << fields);
    CHECK(diff.empty());
    return recorded;
  }
  FAIL("results record no configuration for run " << run);
  throw;
}

/// A run a lab recorded: its name in the results and the lab whose rung it ran.
struct Rung {
  std::string run;
  int lab = 0;
};

/// The fields in which run @p after differs from run @p before, each first checked to be its lab's rung over
/// the base it recorded (ran()): a lab's two runs must differ in exactly its switch.
inline Fields rung_step(const nlohmann::json& results, const Rung& before, const Rung& after) {
  return differences(ran(results, before.run, before.lab), ran(results, after.run, after.lab));
}

/// A base as a lab builds one: the flags' defaults, and a max_model_len for the contiguous rungs.
inline LabConfig example_base() {
  LabConfig base;
  base.engine.max_model_len = 256;
  base.engine.kv_cache_memory = 1 << 20;
  base.model.deterministic = true;
  return base;
}

/// The fields in which lab @p lab's configuration differs from lab @p lab - 1's, over example_base().
inline std::vector<std::string> ladder_step(int lab) {
  return differences(configure(Techniques::for_lab(lab - 1), example_base()),
                     configure(Techniques::for_lab(lab), example_base()));
}

}  // namespace servelab::test
