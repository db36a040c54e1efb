// SPDX-License-Identifier: MIT
/**
 * @file dry_run.h
 * @brief The scheduler and the KV blocks without a model: every request
 *        emits exactly max_tokens tokens, so the steps, the admissions, the
 *        preemptions and the memory are exactly those of a real run with the
 *        same lengths, in milliseconds instead of minutes. Lab 04 measures KV
 *        placement with it at sizes no CPU could run.
 */
#pragma once

#include <vector>

#include "sched/kv_meter.h"
#include "sched/scheduler.h"

namespace servelab {

/// The lengths of one request: all a dry run needs.
struct RequestShape {
  int prompt_len = 1;  ///< prompt tokens
  int max_tokens = 1;  ///< output tokens it will emit
};

/// What a dry run saw, step by step.
struct DryRunResult {
  std::vector<KVMemoryUsage> steps;   ///< the KV memory after each step
  std::vector<int> scheduled_tokens;  ///< tokens computed in each step
  int max_running = 0;                ///< most requests running at once
  int num_preemptions = 0;            ///< preemptions over the run
  long output_tokens = 0;             ///< tokens emitted (sum of max_tokens)
};

/**
 * @brief Runs @p requests, all arriving at once, through a Scheduler with
 *        @p config over @p num_blocks blocks of @p block_size tokens.
 * @param bytes_per_token KV bytes per token, for the meter.
 * @throws Error when a request could never fit the cache or the budget (it would never run).
 */
DryRunResult dry_run(const std::vector<RequestShape>& requests, const SchedulerConfig& config, int num_blocks,
                     int block_size, std::size_t bytes_per_token);

}  // namespace servelab
