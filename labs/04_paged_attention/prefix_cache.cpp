// SPDX-License-Identifier: MIT
/**
 * @file prefix_cache.cpp
 * @brief Lab 04's prefix-caching section (lab04.h): requests that share a
 *        system prompt, served by lab 04's engine with automatic prefix
 *        caching off and on; what share of the prompt tokens the cache
 *        serves, what that does to TTFT, and whether the tokens stay the same.
 * @see labs/04_paged_attention/README.md
 */
#include <algorithm>
#include <string>

#include "lab04.h"
#include "workload/synthetic_prompt.h"

namespace servelab::lab04 {

using namespace servelab::lab;

namespace {

// The workload: one system prompt, then each request's own question (its length varies), a few output tokens.
// The first request arrives alone and the rest 1 ms later, together: whatever the machine's speed, they join
// after the first one's prompt step has ended, when its blocks can be found.
struct Shape {
  int requests, system_prompt_tokens, own_min, own_max, output_tokens;
};
constexpr Shape kFull{20, 256, 16, 48, 8};
constexpr Shape kQuick{10, 128, 8, 24, 4};  // --quick: the same story in about a tenth of the prompt tokens

std::vector<WorkloadRequest> shared_prompt_workload(const Shape& shape, int vocab_size, std::uint64_t seed) {
  const std::vector<std::int32_t> system = synthetic_prompt(shape.system_prompt_tokens, vocab_size, seed ^ 0x5157ull);
  const int spread = shape.own_max - shape.own_min + 1;
  std::vector<WorkloadRequest> workload;
  for (int i = 0; i < shape.requests; ++i) {
    WorkloadRequest r{.arrival_s = i == 0 ? 0.0 : 1e-3, .prompt_ids = system, .max_tokens = shape.output_tokens};
    const auto own =
        synthetic_prompt(shape.own_min + (i * 7) % spread, vocab_size, seed + 1000 + static_cast<std::uint64_t>(i));
    r.prompt_ids.insert(r.prompt_ids.end(), own.begin(), own.end());
    workload.push_back(std::move(r));
  }
  return workload;
}

struct Run {
  ServingMetrics metrics{};
  ServedRun served{};
  long queries = 0, hits = 0, computed = 0;  // prompt tokens looked up, found cached, computed by the model
};

Run serve_shared(Model& model, LabConfig config, bool caching, const std::vector<WorkloadRequest>& workload) {
  config.engine.enable_prefix_caching = caching;
  // Lengths for this workload, and the engine's default room: max_num_seqs of its longest requests.
  config.engine.max_model_len = 0;
  for (const auto& r : workload)
    config.engine.max_model_len =
        std::max(config.engine.max_model_len, static_cast<int>(r.prompt_ids.size()) + r.max_tokens);
  config.engine.kv_cache_memory = 0;
  config.engine.log = [](const std::string&) {};  // preemption lines: the serving table reports its own
  use_config(model, config);
  Engine engine(model, config.engine);
  Run out;
  out.served = serve_workload(engine, workload, [&](Engine&, const StepStats& s, std::span<const RequestOutput>) {
    out.computed += s.num_prefill_tokens;
  });
  out.metrics = summarize_requests(out.served.requests);
  out.queries = engine.kv_cache_manager().prefix_cache_queries();
  out.hits = engine.kv_cache_manager().prefix_cache_hits();
  return out;
}

}  // namespace

void prefix_cache_section(Report& report, Model& model, const LabConfig& lab4, bool quick) {
  const Shape& shape = quick ? kQuick : kFull;
  const std::vector<WorkloadRequest> workload = shared_prompt_workload(shape, model.config().vocab_size, 0);
  long prompt_tokens = 0;
  for (const auto& r : workload) prompt_tokens += static_cast<long>(r.prompt_ids.size());
  Table table{
      .name = "prefix_cache",
      .title = std::to_string(shape.requests) + " requests sharing a " + std::to_string(shape.system_prompt_tokens) +
               "-token system prompt, prefix caching off and on",
      .columns = {"prefix caching", "prompt tokens", "hit tokens", Column{"hit rate [%]", 1}, "prompt tokens computed",
                  Column{"TTFT p50 [ms]", 1}, Column{"TTFT p99 [ms]", 1}, Column{"wall [s]", 3}, "tokens hash"}};
  const Run off = serve_shared(model, lab4, false, workload);
  const Run on = serve_shared(model, lab4, true, workload);
  for (const auto& [name, r] : {std::pair{"off", &off}, std::pair{"on", &on}})
    table.add_row({std::string(name), static_cast<long long>(prompt_tokens), static_cast<long long>(r->hits),
                   r->queries > 0 ? 100.0 * static_cast<double>(r->hits) / static_cast<double>(r->queries) : 0.0,
                   static_cast<long long>(r->computed), 1e3 * r->metrics.ttft.median, 1e3 * r->metrics.ttft.p99,
                   r->metrics.duration, r->served.tokens_hash()});
  table.note =
      "The first request arrives alone, the others 1 ms later, together; hit rate = hit tokens / queried "
      "tokens (vLLM's prefix_cache_hits / prefix_cache_queries).";
  report.add_table(table);

  const bool same = off.served.tokens == on.served.tokens;
  const double ttft_off = 1e3 * off.metrics.ttft.median, ttft_on = 1e3 * on.metrics.ttft.median;
  const double hit_rate = on.queries > 0 ? 100.0 * static_cast<double>(on.hits) / static_cast<double>(on.queries) : 0;
  const std::string evidence = "hit rate " + fixed(hit_rate, 1) + "% (" + std::to_string(on.hits) + " of " +
                               std::to_string(on.queries) + " prompt tokens); prompt tokens computed " +
                               std::to_string(on.computed) + " vs " + std::to_string(off.computed) + "; TTFT p50 " +
                               fixed(ttft_on, 1) + " ms vs " + fixed(ttft_off, 1) + " ms off; " +
                               (same ? "same tokens" : "tokens differ");
  std::string cause;
  if (!same)
    cause = "the tokens differ (hash " + on.served.tokens_hash() + " vs " + off.served.tokens_hash() +
            "): the cached blocks' K/V were computed in another batch than the recomputed ones";
  else if (on.hits == 0)
    cause = "no block was found cached: the system prompt's blocks were evicted before the later requests came";
  else if (ttft_on >= ttft_off)
    cause = "the model computed " + std::to_string(off.computed - on.computed) +
            " fewer prompt tokens, but the median TTFT did not drop: prompt tokens are not what the first "
            "tokens wait for on this run (wall " +
            fixed(on.metrics.duration, 3) + " s vs " + fixed(off.metrics.duration, 3) + " s)";
  report.claim({.id = "04.prefix_cache",
                .source = "vLLM's automatic prefix caching (the KV cache article's reuse of computed K/V, across "
                          "requests)",
                .statement = "with a shared system prompt, prefix caching serves most prompt tokens from cached "
                             "blocks and lowers the median TTFT, with the same tokens",
                .held = same && hit_rate > 50 && ttft_on < ttft_off,
                .evidence = evidence,
                .cause = cause.empty() && hit_rate <= 50
                             ? "only " + fixed(hit_rate, 1) +
                                   "% of the prompt tokens hit: " + std::to_string(on.queries - on.hits) + " of " +
                                   std::to_string(on.queries) + " were computed"
                             : cause});
}

}  // namespace servelab::lab04
