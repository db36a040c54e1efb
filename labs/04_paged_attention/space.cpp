// SPDX-License-Identifier: MIT
/**
 * @file space.cpp
 * @brief Lab 04's space tables: the KV cache article's fragmentation example,
 *        and a workload's KV placement under each layout (lab04.h).
 * @see labs/04_paged_attention/README.md
 */
#include <algorithm>

#include "kv/contiguous_allocator.h"
#include "lab04.h"
#include "sched/dry_run.h"
#include "workload/workload.h"

namespace servelab::lab04 {

using namespace servelab::lab;

Table fragmentation_example(int block_size) {
  const long capacity = 6200, a = 100, b = 1000, c = 5000, d = 1050;
  Table t{.name = "fragmentation_example",
          .title =
              "The KV cache article's A = 100, B = 1,000, C = 5,000 tokens, in this lab's room for 6,200; B "
              "finishes; this lab's D needs 1,050",
          .columns = {"layout", "free after B [tokens]", "largest free run [tokens]", "D needs [tokens]", "D fits"}};
  ContiguousAllocator line(capacity);
  line.allocate(a);
  const long b_at = *line.allocate(b);
  line.allocate(c);
  line.free(b_at);
  t.add_row({std::string("contiguous, first fit"), line.free_tokens(), line.largest_free_run(), d,
             std::string(line.largest_free_run() >= d ? "yes" : "no")});
  // Paged: blocks need not be adjacent, so any free blocks hold D.
  const auto blocks = [&](long tokens) { return (tokens + block_size - 1) / block_size; };
  const long total_blocks = capacity / block_size, free_blocks = total_blocks - blocks(a) - blocks(c);
  t.add_row({"paged, block " + std::to_string(block_size), free_blocks * block_size, free_blocks * block_size,
             blocks(d) * block_size, std::string(blocks(d) <= free_blocks ? "yes" : "no")});
  t.note = "Contiguous: D needs one run of 1,050 free positions and the largest is B's old 1,000, though " +
           std::to_string(line.free_tokens()) + " are free. Paged: D takes " + std::to_string(blocks(d)) +
           " blocks wherever they are (its last block's unused tail is the only waste).";
  return t;
}

KVMemory kv_memory(int memory_requests, int memory_max_model_len, int memory_seqs, std::uint64_t seed, int vocab_size,
                   std::size_t token_bytes) {
  KVMemory out;
  Table& memory = out.table;
  memory = {.name = "kv_memory",
            .title = "Where the KV memory goes: " + std::to_string(memory_requests) +
                     " ShareGPT-like requests, all at once, room for " + std::to_string(memory_seqs) + " requests of " +
                     std::to_string(memory_max_model_len) + " tokens (dry run)",
            .columns = {"layout", "block [tokens]", Column{"real of held [%]", 1}, Column{"real [%]", 1},
                        Column{"reserved, unused [%]", 1}, Column{"last-block slack [%]", 1}, Column{"free [%]", 1},
                        Column{"mean running", 1}, "most running", "preemptions", "steps"}};
  WorkloadSpec sharegpt;
  sharegpt.num_requests = memory_requests;
  sharegpt.prompt_len = sharegpt_prompt_lengths();
  sharegpt.output_len = sharegpt_output_lengths();
  sharegpt.seed = seed;
  std::vector<RequestShape> shapes;
  for (const auto& r : make_workload(sharegpt, vocab_size))
    shapes.push_back({static_cast<int>(r.prompt_ids.size()),
                      std::min(r.max_tokens, memory_max_model_len - static_cast<int>(r.prompt_ids.size()))});
  const long budget_tokens = static_cast<long>(memory_seqs) * memory_max_model_len;
  Table& memory_timeline = out.timeline;
  memory_timeline = {.name = "kv_memory_timeline",
                     .title = "Real KV share of the budget through the dry run",
                     .columns = {"progress [%]"}};
  std::vector<std::vector<double>> timelines;
  const SchedulerConfig roomy{SchedulingPolicy::CONTINUOUS, 1 << 20, 1 << 20};  // memory is the only limit here
  for (int bs : {memory_max_model_len, 256, 16, 1}) {
    const bool contiguous = bs == memory_max_model_len;
    const DryRunResult dry = dry_run(shapes, roomy, static_cast<int>(budget_tokens / bs), bs, token_bytes);
    // Averaged over the steps where requests wait for room: the memory is the limit there.
    double real = 0, reserved = 0, slack = 0, free = 0, held_share = 0, running = 0, n = 0;
    const bool any_wait =
        std::any_of(dry.steps.begin(), dry.steps.end(), [](const KVMemoryUsage& u) { return u.num_waiting > 0; });
    for (const KVMemoryUsage& u : dry.steps) {
      if (any_wait && u.num_waiting == 0) continue;
      ++n;
      real += u.share(u.real);
      reserved += u.share(u.reserved_unused);
      slack += u.share(u.last_block_slack);
      free += u.share(u.free);
      const std::size_t held = u.total - u.free;
      held_share += held ? static_cast<double>(u.real) / held : 0.0;
      running += u.num_running;
    }
    memory.add_row({std::string(contiguous ? "contiguous (reserve max_model_len)" : "paged"),
                    static_cast<long long>(bs), 100 * held_share / n, 100 * real / n, 100 * reserved / n,
                    100 * slack / n, 100 * free / n, running / n, static_cast<long long>(dry.max_running),
                    static_cast<long long>(dry.num_preemptions), static_cast<long long>(dry.steps.size())});
    memory_timeline.columns.push_back({contiguous ? "contiguous" : "paged " + std::to_string(bs), 1});
    std::vector<double> line;
    for (int p = 0; p <= 100; ++p) {
      const KVMemoryUsage& u = dry.steps[static_cast<std::size_t>(p / 100.0 * (dry.steps.size() - 1))];
      line.push_back(100 * u.share(u.real));
    }
    timelines.push_back(std::move(line));
  }
  for (int p = 0; p <= 100; ++p) {
    std::vector<Cell> row = {static_cast<long long>(p)};
    for (const auto& line : timelines) row.push_back(line[static_cast<std::size_t>(p)]);
    memory_timeline.add_row(row);
  }
  memory.note =
      "Shares of the whole budget, averaged over the steps where requests wait for room. Contiguous holds one "
      "max_model_len region per "
      "request from admission; paged takes a block whenever a request crosses a block edge. 'Real of "
      "held' is the share of allocated KV holding tokens (the PagedAttention paper's 20-38% for "
      "pre-paging systems vs about 96% for vLLM).";
  return out;
}

}  // namespace servelab::lab04
