// SPDX-License-Identifier: MIT
#include "workload/workload.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/random.h"
#include "workload/synthetic_prompt.h"
#include "workload/workload_file.h"

namespace servelab {

std::uint64_t request_seed(std::uint64_t seed, std::uint64_t index, std::uint64_t purpose) {
  // Two rounds of the mix: request streams of neighbouring seeds and indices share no structure.
  return mix64(mix64(seed + kSplitMixGamma * (index + 1)) ^ (0xd1b54a32d192ed03ull * (purpose + 1)));
}

std::string WorkloadSpec::describe() const {
  std::ostringstream os;
  if (file.empty())
    os << num_requests << " requests, prompt " << prompt_len.describe() << ", output " << output_len.describe();
  else
    os << (num_requests > 0 ? "first " + std::to_string(num_requests) : std::string("all")) << " requests of " << file;
  os << ", arrivals " << arrivals.describe() << ", seed " << seed;
  return os.str();
}

std::vector<WorkloadRequest> make_workload(const WorkloadSpec& spec, int vocab_size) {
  check(vocab_size >= 1, "workload: vocab_size must be >= 1, got ", vocab_size);
  std::vector<WorkloadFileEntry> entries;
  int n = spec.num_requests;
  if (!spec.file.empty()) {
    entries = read_workload_file(spec.file, vocab_size);
    check(n >= 0, "workload: num_requests must be >= 0 with a file (0 = every line), got ", n);
    if (n == 0) n = static_cast<int>(entries.size());
    check(n <= static_cast<int>(entries.size()), spec.file, ": has ", entries.size(), " requests, fewer than the ", n,
          " asked for");
  } else {
    check(n >= 1 && n <= kMaxWorkloadRequests, "workload: num_requests must be in [1, ", kMaxWorkloadRequests,
          "], got ", n);
    for (const LengthDist* d : {&spec.prompt_len, &spec.output_len})
      check(d->problem().empty(), "workload: length distribution ", d->describe(), ": ", d->problem());
  }

  std::vector<double> arrival(n, 0.0);
  const bool file_times = !entries.empty() && entries.front().arrival_s >= 0;
  if (file_times) {
    check(spec.arrivals.kind == Arrivals::Kind::all, spec.file, ": has its own arrival times, which arrivals ",
          spec.arrivals.describe(), " would replace (use all, or drop the times from the file)");
    for (int i = 0; i < n; ++i) arrival[i] = entries[i].arrival_s;
  } else if (spec.arrivals.kind == Arrivals::Kind::poisson) {
    const double rate = spec.arrivals.rate;
    check(std::isfinite(rate) && rate > 0, "workload: poisson rate must be a positive finite number, got ", rate);
    // A Poisson process: independent exponential gaps. Request 0 opens the run at t = 0.
    SplitMix64 gaps(request_seed(spec.seed, 0, 3));
    for (int i = 1; i < n; ++i) arrival[i] = arrival[i - 1] + gaps.exponential(rate);
  } else if (spec.arrivals.kind == Arrivals::Kind::trace) {
    const auto times = read_arrival_trace(spec.arrivals.trace_path);
    check(static_cast<int>(times.size()) >= n, spec.arrivals.trace_path, ": has ", times.size(),
          " arrival times, fewer than the ", n, " requests");
    std::copy_n(times.begin(), n, arrival.begin());
  }

  std::vector<WorkloadRequest> requests;
  requests.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    WorkloadRequest r;
    r.arrival_s = arrival[i];
    int prompt_len = 0;
    if (!entries.empty()) {
      prompt_len = entries[i].prompt_len;
      r.max_tokens = entries[i].output_len;
      r.prompt_ids = std::move(entries[i].prompt_ids);
    } else {
      SplitMix64 prompt_rng(request_seed(spec.seed, index, 1)), output_rng(request_seed(spec.seed, index, 2));
      prompt_len = spec.prompt_len.sample(prompt_rng);
      r.max_tokens = spec.output_len.sample(output_rng);
    }
    if (r.prompt_ids.empty()) r.prompt_ids = synthetic_prompt(prompt_len, vocab_size, request_seed(spec.seed, index));
    requests.push_back(std::move(r));
  }
  std::stable_sort(requests.begin(), requests.end(),
                   [](const WorkloadRequest& a, const WorkloadRequest& b) { return a.arrival_s < b.arrival_s; });
  return requests;
}

int clamp_to_context(std::vector<WorkloadRequest>& requests, int max_model_len) {
  check(max_model_len >= 2, "clamp_to_context: max_model_len must be >= 2 (one prompt and one output token), got ",
        max_model_len);
  int changed = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& r = requests[i];
    check(!r.prompt_ids.empty(), "clamp_to_context: request ", i, " has an empty prompt");
    const auto before = std::make_pair(r.prompt_ids.size(), r.max_tokens);
    // vLLM's rule: prompt + output <= max_model_len, and we keep room for at least one output token.
    if (static_cast<int>(r.prompt_ids.size()) > max_model_len - 1) r.prompt_ids.resize(max_model_len - 1);
    r.max_tokens = std::clamp(r.max_tokens, 1, max_model_len - static_cast<int>(r.prompt_ids.size()));
    changed += before != std::make_pair(r.prompt_ids.size(), r.max_tokens);
  }
  return changed;
}

}  // namespace servelab
