#include "serve/workload.h"

#include "core/error.h"

namespace servelab {

std::vector<std::int32_t> synthetic_prompt(int length, int vocab_size, std::uint64_t seed) {
  check(length >= 1, "--prompt-len must be >= 1, got ", length);
  check(vocab_size >= 1, "synthetic prompt: vocab_size must be >= 1, got ", vocab_size);
  std::vector<std::int32_t> ids(length);
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    id = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab_size));
  }
  return ids;
}

}  // namespace servelab
