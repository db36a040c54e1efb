// SPDX-License-Identifier: MIT
/**
 * @file synthetic_prompt.h
 * @brief Prompts made of seeded random token ids, for workloads whose
 *        lengths matter and whose text does not.
 */
#pragma once

#include <cstdint>
#include <vector>

namespace servelab {

/**
 * @brief @p length token ids drawn uniformly from [0, vocab_size) by a seeded
 *        64-bit LCG: the same ids on every machine for the same seed.
 * @throws Error when @p length < 1 (message names --prompt-len) or vocab_size < 1.
 */
std::vector<std::int32_t> synthetic_prompt(int length, int vocab_size, std::uint64_t seed);

}  // namespace servelab
