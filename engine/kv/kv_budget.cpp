// SPDX-License-Identifier: MIT
#include "kv/kv_budget.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace servelab {

namespace {

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return text;
}

}  // namespace

KVBudget default_kv_budget(std::size_t kv_bytes_per_token, int block_size, int max_num_seqs, int max_model_len,
                           int max_num_batched_tokens, std::size_t mem_available) {
  check(block_size >= 1 && max_num_seqs >= 1 && max_model_len >= 1 && max_num_batched_tokens >= 1,
        "default_kv_budget: sizes must be >= 1 (block ", block_size, ", seqs ", max_num_seqs, ", len ", max_model_len,
        ", batched ", max_num_batched_tokens, ")");
  KVBudget b;
  b.mem_available = mem_available;
  const long need_tokens = std::max(static_cast<long>(max_num_seqs) * std::min(max_model_len, max_num_batched_tokens),
                                    static_cast<long>(max_model_len));
  b.need_bytes = static_cast<std::size_t>(need_tokens) * kv_bytes_per_token;
  b.cap_bytes = mem_available > 0 ? std::min(kMaxDefaultKVBytes, mem_available / 4) : kMaxDefaultKVBytes;
  const std::size_t block_bytes = kv_bytes_per_token * static_cast<std::size_t>(block_size);
  const std::size_t blocks = std::max<std::size_t>(1, std::min(b.need_bytes, b.cap_bytes) / block_bytes);
  b.bytes = blocks * block_bytes;
  b.tokens = static_cast<long>(blocks) * block_size;
  return b;
}

std::string KVBudget::describe() const {
  std::ostringstream s;
  s << "KV cache " << gib(bytes) << " (" << tokens << " tokens): room for max-num-seqs prompts of "
    << "min(max-model-len, max-num-batched-tokens) tokens and one max-model-len request, " << gib(need_bytes)
    << ", capped at " << gib(cap_bytes) << " (4 GiB"
    << (mem_available > 0 ? ", or a quarter of MemAvailable " + gib(mem_available) : std::string()) << ")";
  return s.str();
}

std::size_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace servelab
