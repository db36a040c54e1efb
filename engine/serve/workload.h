/**
 * @file workload.h
 * @brief Stand-in prompts for models without a tokenizer (synthetic presets).
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
