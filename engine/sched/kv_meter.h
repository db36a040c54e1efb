// SPDX-License-Identifier: MIT
/**
 * @file kv_meter.h
 * @brief Where the KV memory goes at one moment: bytes holding real tokens,
 *        bytes reserved for tokens not generated yet, the unused tail of each
 *        request's last block, and free bytes — for any policy and block size.
 *
 * The same meter reads a contiguous layout (one block per request, as long
 * as the request may get: a reservation) and a paged one (blocks of 16
 * tokens taken as the request grows), so lab 04 can put them side by side.
 * @verbatim
 *  contiguous, block = max length:  [AAAAAA..............][BBB.................]
 *                                     real   reserved, unused
 *  paged, block 4:                  [AAAA][AA..][BBB.][free][free][free]...
 *                                            slack  slack
 * @endverbatim
 */
#pragma once

#include <cstddef>

#include "sched/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace servelab {

/// A snapshot of KV memory, bytes; real + reserved_unused + last_block_slack + free = total.
struct KVMemoryUsage {
  std::size_t total = 0;             ///< every block
  std::size_t real = 0;              ///< K/V of tokens computed so far
  std::size_t reserved_unused = 0;   ///< held in a block that covers the request's whole possible length, not yet used
  std::size_t last_block_slack = 0;  ///< the unused tail of a growing request's last block (paged)
  std::size_t free = 0;              ///< blocks in the free queue
  int num_running = 0;               ///< requests holding blocks
  int num_waiting = 0;               ///< requests waiting for room (fresh or preempted)
  bool next_fits = true;  ///< the first waiting request's uncomputed tokens fit the free blocks (true when none waits)

  /// @p part as a share of total, 0..1.
  double share(std::size_t part) const { return total == 0 ? 0.0 : static_cast<double>(part) / total; }
};

/**
 * @brief Reads the KV memory of the requests @p scheduler is running, from the
 *        blocks @p kv holds for them.
 * @param bytes_per_token KV bytes of one token over all layers (kv_bytes_per_token(), config/model_config.h).
 */
KVMemoryUsage measure_kv_memory(const Scheduler& scheduler, const KVCacheManager& kv, std::size_t bytes_per_token);

}  // namespace servelab
