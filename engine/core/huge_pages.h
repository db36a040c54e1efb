// SPDX-License-Identifier: MIT
/**
 * @file huge_pages.h
 * @brief Memory for data that is streamed end to end every step (the
 *        weights), in 2 MiB transparent huge pages where the kernel gives them.
 *
 * A decode step reads every weight once, hundreds of megabytes, so each
 * 4 KiB page costs a TLB miss and a page walk, and the hardware prefetcher
 * stops at each page's edge. Backed by 2 MiB pages, the same bytes need 512
 * times fewer translations. On a 2-core Zen 3 VM, one pass of SmolLM2-135M's
 * f32 GEMVs (538 MB, 2 threads) took 17.4-17.7 ms from huge pages against
 * 20.4-23.9 ms from 4 KiB ones (30.9 against 22.5-26.3 GB/s).
 *
 * Most distributions (Debian, Ubuntu) set
 * `/sys/kernel/mm/transparent_hugepage/enabled` to `madvise`: a process gets
 * huge pages only for the ranges it asks for with `madvise(MADV_HUGEPAGE)`,
 * which is what this does (as PyTorch's CPU allocator does for blocks of
 * 2 MiB and more with `C10_THP_MEM_ALLOC_ENABLE=1`, `THP_MEM_ALLOC_ENABLE`
 * in earlier releases). With `never`, or when the kernel finds no free
 * 2 MiB frame, the memory is ordinary pages and works the same, only slower.
 */
#pragma once

#include <cstddef>
#include <memory>

namespace servelab {

/// Size of an x86-64 transparent huge page.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/**
 * @brief Zero-filled anonymous memory of @p bytes, starting on a 2 MiB
 *        boundary and, from one huge page up, advised for transparent huge pages.
 *
 * Pages are taken on first touch, so a caller that fills the memory front to
 * back holds only what it has filled so far. The memory is released
 * (`munmap`) when the last copy of the returned pointer goes.
 * @param bytes size, > 0; rounded up to whole huge pages.
 * @throws Error naming the size when the mapping fails.
 */
std::shared_ptr<std::byte> allocate_huge_pages(std::size_t bytes);

/**
 * @brief Bytes of the mapping that holds @p p that the kernel backs with huge
 *        pages now (`AnonHugePages` in `/proc/self/smaps`).
 * @return 0 when no mapping holds @p p or the file cannot be read.
 */
std::size_t huge_page_bytes(const void* p);

}  // namespace servelab
