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
 * Every random draw is a SplitMix64 stream (core/random.h), seeded per request.
 *
 * @see labs/04_paged_attention/README.md
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"
#include "core/stats.h"

namespace servelab {

/**
 * @brief @p length token ids drawn uniformly from [0, vocab_size) by a seeded
 *        64-bit LCG: the same ids on every machine for the same seed.
 * @throws Error when @p length < 1 (message names --prompt-len) or vocab_size < 1.
 */
std::vector<std::int32_t> synthetic_prompt(int length, int vocab_size, std::uint64_t seed);

/// Longest prompt or output a workload may ask for, in tokens; checked before any allocation.
inline constexpr int kMaxWorkloadTokens = 1 << 20;
/// Most requests one workload may hold; checked before the request vector is reserved.
inline constexpr int kMaxWorkloadRequests = 1'000'000;
/// Largest workload or trace file read, in bytes; checked before the file is read.
inline constexpr std::int64_t kMaxWorkloadFileBytes = std::int64_t{256} << 20;
/// Deepest JSON nesting a workload line may have (a line is depth 1, its prompt_ids array depth 2).
inline constexpr int kMaxWorkloadJsonDepth = 4;

/**
 * @brief The seed of request @p index's own random stream (its lengths, its
 *        prompt ids): a SplitMix64 mix of the workload seed, the index and a
 *        purpose tag, so request 7 is the same whether 10 or 10,000 are drawn.
 * @param purpose tells apart the streams of one request (0 prompt ids, 1 prompt length,
 *        2 output length, 3 inter-arrival gap).
 */
std::uint64_t request_seed(std::uint64_t seed, std::uint64_t index, std::uint64_t purpose = 0);

/**
 * @brief A distribution of token counts (prompt or output lengths).
 *
 * Flag spellings, all lengths in tokens:
 * - `fixed:N`: always N.
 * - `uniform:LO:HI`: every integer in [LO, HI] equally likely.
 * - `lognormal:MEDIAN:SIGMA[:MIN:MAX]`: round(MEDIAN * e^(SIGMA * Z)), Z ~ N(0, 1),
 *   then clamped (not redrawn) to [MIN, MAX] (default [1, kMaxWorkloadTokens]).
 *   Its mean before clamping is \f$\mathrm{MEDIAN}\cdot e^{\sigma^2/2}\f$.
 * - `sharegpt`: the lognormal preset of sharegpt_prompt_lengths() or
 *   sharegpt_output_lengths(), by which length is being parsed.
 */
struct LengthDist {
  /// Which family.
  enum class Kind { fixed, uniform, lognormal };
  Kind kind = Kind::fixed;  ///< the family
  int min = 1;              ///< fixed: the value; uniform: LO; lognormal: clamp floor (tokens, >= 1)
  int max = 1;              ///< fixed: the value; uniform: HI; lognormal: clamp ceiling (tokens)
  double median = 0;        ///< lognormal only: e^mu, tokens (> 0)
  double sigma = 0;         ///< lognormal only: standard deviation of ln(length) (>= 0)

  /// `fixed:N` (checked: 1 <= N <= kMaxWorkloadTokens).
  static LengthDist fixed(int n);
  /// `uniform:LO:HI` (checked: 1 <= LO <= HI <= kMaxWorkloadTokens).
  static LengthDist uniform(int lo, int hi);
  /// `lognormal:MEDIAN:SIGMA:MIN:MAX` (checked: MEDIAN > 0, SIGMA >= 0, 1 <= MIN <= MAX <= kMaxWorkloadTokens).
  static LengthDist lognormal(double median, double sigma, int min = 1, int max = kMaxWorkloadTokens);

  /// One draw, in [min, max]. Consumes a fixed number of numbers from @p rng (fixed none,
  /// uniform one, lognormal two), so a stream's later draws never depend on earlier values.
  int sample(SplitMix64& rng) const;
  /// The flag spelling, e.g. `lognormal:98:1:4:1024` (parse(describe()) gives the same distribution).
  std::string describe() const;
};

/// Which length a flag describes; it picks the `sharegpt` preset.
enum class LengthRole { prompt, output };

/**
 * @brief ShareGPT-like prompt lengths: `lognormal:98:1:4:1024`.
 *
 * Where the numbers come from: Kwon et al., "Efficient Memory Management for
 * Large Language Model Serving with PagedAttention" (vLLM, SOSP 2023), §6.1
 * and Fig. 11, report a mean of 161 input and 338 output tokens on their
 * ShareGPT workload (8.4x and 5.8x Alpaca's). The paper shows histograms,
 * not a fitted law; the shape is our assumption: a lognormal with SIGMA = 1
 * (a long right tail: pasted code and documents), and MEDIAN = mean / e^(1/2)
 * so that the unclamped mean equals the published one (98 * 1.649 = 162).
 * MIN 4 and MAX 1024 follow the filter vLLM's benchmarks apply to ShareGPT
 * (benchmarks/benchmark_serving.py: pairs with a prompt or output under 4
 * tokens, a prompt over 1024, or both over 2048 together are dropped);
 * clamping each length to 1024 keeps every pair within 2048. The clamp pulls
 * the sampled mean down to about 157.
 */
LengthDist sharegpt_prompt_lengths();

/**
 * @brief ShareGPT-like output lengths: `lognormal:205:1:4:1024` (mean 338 before the
 *        clamp, about 301 after it). Sources and reasoning as sharegpt_prompt_lengths().
 */
LengthDist sharegpt_output_lengths();

/**
 * @brief Reads a length distribution from its flag spelling (see LengthDist).
 * @param text e.g. `fixed:128`, `uniform:16:512`, `lognormal:100:0.8:1:2048`, `sharegpt`.
 * @param role which preset `sharegpt` means.
 * @param flag the flag's name for error messages, e.g. `--prompt-len-dist`.
 * @throws Error naming @p flag, the text and the expected spelling when a number is
 *         malformed, out of range, or the kind is unknown.
 */
LengthDist parse_length_dist(std::string_view text, LengthRole role, std::string_view flag);

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
 *         The trace file itself is read by make_workload().
 */
Arrivals parse_arrivals(std::string_view text, std::string_view flag);

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
  int num_requests = 16;                             ///< requests to make (0 with a file: all of its lines)
  LengthDist prompt_len = LengthDist::fixed(128);    ///< prompt lengths, tokens
  LengthDist output_len = LengthDist::fixed(128);    ///< output lengths (max_tokens), tokens
  Arrivals arrivals;                                 ///< arrival process (`all` when the file has arrivals)
  std::uint64_t seed = 0;                            ///< seeds lengths, prompt ids and gaps
  std::string file;                                  ///< optional JSONL workload file

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

/// What a lab prints about its workload: counts, length statistics, the arrival span.
struct WorkloadSummary {
  int count = 0;                    ///< requests
  std::int64_t prompt_tokens = 0;   ///< sum of prompt lengths
  std::int64_t output_tokens = 0;   ///< sum of max_tokens
  Summary prompt_len;               ///< prompt lengths, tokens (zeros when count == 0)
  Summary output_len;               ///< max_tokens, tokens (zeros when count == 0)
  double first_arrival_s = 0;       ///< earliest arrival, seconds
  double last_arrival_s = 0;        ///< latest arrival, seconds

  /// last - first arrival, seconds (0 for `all`).
  double span_s() const { return last_arrival_s - first_arrival_s; }
  /// One line: `64 requests | prompt mean 157 p50 98 p99 1024 | output ... | arrivals over 31.2 s (2.05 req/s)`.
  std::string describe() const;
};

/// Summarises @p requests (any order; an empty list gives count 0 and zeros).
WorkloadSummary summarize_workload(const std::vector<WorkloadRequest>& requests);

}  // namespace servelab
