// SPDX-License-Identifier: MIT
/**
 * @file workload.h
 * @brief The requests a serving lab replays: how many, how long their prompts
 *        and outputs are, and when each one arrives. Shared by labs 04, 06, 07
 *        and the benchmark client so that every table is measured on the same,
 *        seeded traffic.
 *
 * A workload is described by one WorkloadSpec (flag strings in, a plain struct
 * out) and turned into requests by make_workload():
 * @verbatim
 *  WorkloadSpec{num_requests, prompt_len, output_len, arrivals, seed, file}
 *      |  per request i: lengths from stream (seed, i), prompt ids from
 *      |  synthetic_prompt(len, vocab, request_seed(seed, i)), arrival time
 *      v
 *  [ {arrival_s 0.00, prompt_ids[98],  max_tokens 205},
 *    {arrival_s 0.41, prompt_ids[310], max_tokens 77}, ... ]   sorted by arrival
 * @endverbatim
 *
 * The parts, one file each: length distributions (workload/length_dist.h),
 * arrival processes (workload/arrivals.h), JSONL workload files
 * (workload/workload_file.h), synthetic prompts (workload/synthetic_prompt.h),
 * and what a lab prints about the result (workload/summary.h). Every random
 * draw is a SplitMix64 stream (core/random.h), seeded per request.
 *
 * @see labs/04_paged_attention/README.md
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workload/arrivals.h"
#include "workload/length_dist.h"

namespace servelab {

/**
 * @brief The seed of request @p index's own random stream (its lengths, its
 *        prompt ids): a SplitMix64 mix of the workload seed, the index and a
 *        purpose tag, so request 7 is the same whether 10 or 10,000 are drawn.
 * @param purpose tells apart the streams of one request (0 prompt ids, 1 prompt length,
 *        2 output length, 3 inter-arrival gap).
 */
std::uint64_t request_seed(std::uint64_t seed, std::uint64_t index, std::uint64_t purpose = 0);

/**
 * @brief Everything that decides a workload. The same spec gives the same
 *        requests on every machine.
 *
 * With @p file empty, num_requests requests are drawn from the distributions.
 * With @p file set, its lines are the requests (see read_workload_file()) and
 * the two length distributions are not used; num_requests = 0 takes every
 * line, a positive value the first num_requests lines.
 */
struct WorkloadSpec {
  int num_requests = 16;                           ///< requests to make (0 with a file: all of its lines)
  LengthDist prompt_len = LengthDist::fixed(128);  ///< prompt lengths, tokens
  LengthDist output_len = LengthDist::fixed(128);  ///< output lengths (max_tokens), tokens
  Arrivals arrivals;                               ///< arrival process (`all` when the file has arrivals)
  std::uint64_t seed = 0;                          ///< seeds lengths, prompt ids and gaps
  std::string file;                                ///< optional JSONL workload file

  /// One line for a lab's settings block, e.g. `16 requests, prompt fixed:128, output sharegpt..., arrivals all, seed 0`.
  std::string describe() const;
};

/// One request of a workload, ready for Engine::add_request.
struct WorkloadRequest {
  double arrival_s = 0;                  ///< seconds after the workload starts
  std::vector<std::int32_t> prompt_ids;  ///< [prompt_len] token ids in [0, vocab_size)
  int max_tokens = 1;                    ///< tokens to generate (>= 1)
};

/**
 * @brief The requests of @p spec, sorted by arrival time (ties keep their index order).
 *
 * Request i's lengths come from its own streams (request_seed(seed, i, 1|2)), its
 * prompt from synthetic_prompt(prompt_len, vocab_size, request_seed(seed, i)), and
 * its arrival from @p spec.arrivals, or from the file's arrival fields when it has them.
 * Lengths are not clamped to a model: see clamp_to_context().
 * @param vocab_size the model's vocabulary, > 0.
 * @throws Error for a bad spec (num_requests outside [1, kMaxWorkloadRequests] without a file,
 *         more requests than the file or trace has, a trace line that is not a time >= 0,
 *         poisson arrivals with a file that has its own) and for every error of
 *         read_workload_file().
 */
std::vector<WorkloadRequest> make_workload(const WorkloadSpec& spec, int vocab_size);

/**
 * @brief Fits every request into a model context of @p max_model_len tokens,
 *        with vLLM's rule prompt_len + max_tokens <= max_model_len.
 *
 * A prompt of max_model_len tokens or more keeps its first max_model_len - 1
 * tokens (so one token can still be generated); then max_tokens is cut to
 * what is left. Lengths stay >= 1.
 * @param max_model_len context length in tokens, >= 2.
 * @return how many requests were changed (a lab prints it, so a cut is never silent).
 * @throws Error when @p max_model_len < 2.
 */
int clamp_to_context(std::vector<WorkloadRequest>& requests, int max_model_len);

}  // namespace servelab
