// SPDX-License-Identifier: MIT
#include "sched/kv_meter.h"

namespace servelab {

KVMemoryUsage measure_kv_memory(const Scheduler& scheduler, const KVCacheManager& kv, std::size_t bytes_per_token) {
  KVMemoryUsage u;
  const std::size_t block_bytes = bytes_per_token * static_cast<std::size_t>(kv.block_size());
  u.total = block_bytes * static_cast<std::size_t>(kv.block_pool().num_blocks());
  u.free = block_bytes * static_cast<std::size_t>(kv.block_pool().num_free_blocks());
  for (const Request* r : scheduler.running()) {
    const BlockTable& table = kv.block_table(r->request_id);
    const std::size_t held = static_cast<std::size_t>(table.capacity()) * bytes_per_token;
    const std::size_t real = static_cast<std::size_t>(r->num_computed_tokens) * bytes_per_token;
    u.real += real;
    // One block long enough for everything the request may ever hold is a reservation.
    const bool reservation = table.num_blocks() == 1 && table.capacity() >= r->max_num_tokens();
    (reservation ? u.reserved_unused : u.last_block_slack) += held - real;
    ++u.num_running;
  }
  u.num_waiting = static_cast<int>(scheduler.waiting().size());
  if (!scheduler.waiting().empty())
    u.next_fits =
        kv.num_blocks_for(scheduler.waiting().front()->num_uncomputed_tokens()) <= kv.block_pool().num_free_blocks();
  return u;
}

}  // namespace servelab
