// SPDX-License-Identifier: MIT
#include "sched/dry_run.h"

#include <algorithm>
#include <memory>

#include "core/error.h"

namespace servelab {

DryRunResult dry_run(const std::vector<RequestShape>& requests, const SchedulerConfig& config, int num_blocks,
                     int block_size, std::size_t bytes_per_token) {
  KVCacheManager kv(num_blocks, block_size);
  Scheduler scheduler(config, kv);
  std::vector<std::unique_ptr<Request>> owned;
  for (const RequestShape& shape : requests) {
    check(shape.prompt_len >= 1 && shape.max_tokens >= 1, "dry run: a request needs a prompt and an output token");
    check(kv.num_blocks_for(static_cast<long>(shape.prompt_len) + shape.max_tokens) <= num_blocks,
          "dry run: a request of ", shape.prompt_len + shape.max_tokens, " tokens cannot fit ", num_blocks,
          " blocks of ", block_size);
    const std::vector<std::int32_t> prompt(static_cast<std::size_t>(shape.prompt_len), 0);
    owned.push_back(std::make_unique<Request>(static_cast<int>(owned.size()), prompt, SamplingParams{},
                                              shape.max_tokens, std::vector<std::int32_t>{}, 0.0));
    scheduler.add_request(owned.back().get());
  }
  DryRunResult result;
  double now = 0;
  // Not serve/replay.h: sched/ sits below serve/, and a dry run steps a bare Scheduler, not an Engine.
  while (scheduler.has_unfinished_requests()) {
    const SchedulerOutput out = scheduler.schedule();
    check(!out.empty(), "dry run: the scheduler could run nothing with requests waiting");
    std::vector<std::int32_t> tokens;  // one (dummy) token for each request that caught up
    for (const ScheduledRequest& s : out.scheduled)
      if (s.request->num_computed_tokens + s.num_new_tokens == s.request->num_tokens()) tokens.push_back(1);
    result.max_running = std::max(result.max_running, static_cast<int>(scheduler.running().size()));
    scheduler.update_from_output(out, tokens, now += 1.0);
    result.steps.push_back(measure_kv_memory(scheduler, kv, bytes_per_token));
    result.scheduled_tokens.push_back(out.total_num_scheduled_tokens);
    result.output_tokens += static_cast<long>(tokens.size());
  }
  result.num_preemptions = scheduler.num_preemptions();
  return result;
}

}  // namespace servelab
