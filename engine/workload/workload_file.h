// SPDX-License-Identifier: MIT
/**
 * @file workload_file.h
 * @brief A workload read from a JSONL file: one request per line, with its
 *        lengths or its own prompt ids, and optionally its arrival time.
 * @verbatim
 *  {"prompt_len": 120, "output_len": 300, "arrival": 0.5}
 *  {"prompt_ids": [9707, 11, 1879], "output_len": 16, "arrival": 0.9}
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workload/limits.h"

namespace servelab {

/**
 * @brief One line of a JSONL workload file, before prompts are made.
 *
 * A line is one JSON object, e.g.
 * `{"prompt_len": 120, "output_len": 300, "arrival": 0.5}` or
 * `{"prompt_ids": [9707, 11, 1879], "output_len": 16}`: exactly one of
 * prompt_len / prompt_ids, output_len required, arrival (seconds, >= 0)
 * optional but then on every line or none. Other keys are ignored. Blank lines
 * are skipped.
 */
struct WorkloadFileEntry {
  int line = 0;                          ///< 1-based line number, for messages
  int prompt_len = 0;                    ///< tokens (== prompt_ids.size() when ids are given)
  std::vector<std::int32_t> prompt_ids;  ///< [prompt_len] given ids, or empty for a synthetic prompt
  int output_len = 0;                    ///< tokens
  double arrival_s = -1;                 ///< seconds, or -1 when the line has none
};

/**
 * @brief Reads and checks a JSONL workload file.
 * @param vocab_size ids in prompt_ids must be in [0, vocab_size).
 * @throws Error naming `path:line` and the field for: a missing or unreadable file,
 *         one over kMaxWorkloadFileBytes, a line that is not JSON or not an object,
 *         nesting deeper than kMaxWorkloadJsonDepth, a missing field, both or neither
 *         of prompt_len / prompt_ids, a non-integer, negative, zero or too large
 *         length (limit kMaxWorkloadTokens), an id outside the vocabulary, a negative
 *         arrival, arrival on some lines only, more than kMaxWorkloadRequests lines,
 *         and a file with no requests.
 */
std::vector<WorkloadFileEntry> read_workload_file(const std::string& path, int vocab_size);

}  // namespace servelab
