// SPDX-License-Identifier: MIT
#include "workload/synthetic_prompt.h"

#include "core/error.h"
#include "core/random.h"

namespace servelab {

std::vector<std::int32_t> synthetic_prompt(int length, int vocab_size, std::uint64_t seed) {
  check(length >= 1, "--prompt-len must be >= 1, got ", length);
  check(vocab_size >= 1, "synthetic prompt: vocab_size must be >= 1, got ", vocab_size);
  std::vector<std::int32_t> ids(length);
  // Knuth's MMIX LCG, not SplitMix64 (core/random.h): every synthetic prompt id, and so every
  // lab's token hash, comes from this stream, and a different generator would change them all.
  std::uint64_t state = seed * kSplitMixGamma + 1;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    id = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab_size));
  }
  return ids;
}

}  // namespace servelab
