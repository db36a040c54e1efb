// SPDX-License-Identifier: MIT
/**
 * @file arrivals.h
 * @brief When a workload's requests arrive: all at once, as a seeded Poisson
 *        process, or at the times of a trace file.
 * @verbatim
 *  all           t = 0, 0, 0, 0, ...
 *  poisson:2     t = 0, then gaps ~ Exp(rate 2): mean 0.5 s
 *  trace:PATH    t = line 1, line 2, ... of PATH (seconds)
 * @endverbatim
 */
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace servelab {

/**
 * @brief When requests arrive.
 * - `all`: every request at t = 0 (an offline batch; vLLM's request rate "inf").
 * - `poisson:RATE`: a Poisson process of RATE requests/s: the first request at
 *   t = 0, then exponential gaps of mean 1 / RATE seconds, seeded.
 * - `trace:PATH`: the times in a text file, one number of seconds per line
 *   (blank lines skipped); request i gets line i's time.
 */
struct Arrivals {
  /// Which process.
  enum class Kind { all, poisson, trace };
  Kind kind = Kind::all;   ///< the process
  double rate = 0;         ///< poisson: requests per second (> 0, finite)
  std::string trace_path;  ///< trace: the file of arrival times

  /// The flag spelling (`all`, `poisson:2.5`, `trace:PATH`).
  std::string describe() const;
};

/**
 * @brief Reads an arrival process from its flag spelling (see Arrivals).
 * @param flag the flag's name for error messages, e.g. `--arrivals`.
 * @throws Error naming @p flag when the text is malformed or the rate is not a positive finite number.
 *         The trace file itself is read by read_arrival_trace().
 */
Arrivals parse_arrivals(std::string_view text, std::string_view flag);

/**
 * @brief The times of a trace file: one arrival time (seconds >= 0) per non-blank line.
 * @throws Error naming `path:line` for a line that is not a time >= 0, and the errors of
 *         read_limited() and content_lines() (workload/text.h).
 */
std::vector<double> read_arrival_trace(const std::string& path);

}  // namespace servelab
