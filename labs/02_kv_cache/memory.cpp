// SPDX-License-Identifier: MIT
/**
 * @file memory.cpp
 * @brief Lab 02's memory tables: the KV memory formula for the published
 *        models and their MHA/GQA/MQA variants, and the formula checked
 *        against the bytes the engine's cache allocates (lab02.h).
 * @see labs/02_kv_cache/README.md
 */
#include <string>
#include <utility>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "lab02.h"
#include "perf/work.h"

namespace servelab::lab02 {

using namespace servelab::lab;

namespace {

// Preset with its published kv head count, or forced to MHA (kv = heads) or MQA (kv = 1).
ModelConfig variant(const std::string& name, const std::string& kind) {
  ModelConfig c = preset(name);
  if (kind == "MHA") c.num_key_value_heads = c.num_attention_heads;
  if (kind == "MQA") c.num_key_value_heads = 1;
  return c;
}

}  // namespace

// 3. KV memory: the formula for the published models and their MHA/GQA/MQA variants: what GQA saves, and the
//    prefill/decode article's 270 MB and 670 MB checked.
Table kv_memory_table() {
  Table memory{.name = "kv_memory",
               .title = "KV cache size: 2 × layers × kv_heads × head_dim × L × B × bytes",
               .columns = {{"model"},
                           {"attention"},
                           {"kv heads"},
                           {"per token (bf16)"},
                           {"L=2048 B=1 bf16"},
                           {"L=8192 B=16 bf16"},
                           {"L=2048 B=1 f32"}}};
  for (const char* name : {"qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b", "llama-3-70b"})
    for (const char* kind : {"MHA", "GQA", "MQA"}) {
      const ModelConfig v = variant(name, kind);
      memory.add_row(
          {std::string(name), std::string(v.attention_kind()), static_cast<long long>(v.num_key_value_heads),
           human_bytes(kv_cache_bytes(v, 1, 1, DType::BF16)), human_bytes(kv_cache_bytes(v, 2048, 1, DType::BF16)),
           human_bytes(kv_cache_bytes(v, 8192, 16, DType::BF16)), human_bytes(kv_cache_bytes(v, 2048, 1, DType::F32))});
    }
  memory.note =
      "The published models use GQA (Qwen2.5: 2 KV heads, Llama 3: 8). The prefill/decode article quotes "
      "Llama-3-8B at 2048 tokens ≈ 270 MB and 70B ≈ 670 MB: " +
      std::to_string(kv_cache_bytes(preset("llama-3-8b"), 2048, 1, DType::BF16)) + " and " +
      std::to_string(kv_cache_bytes(preset("llama-3-70b"), 2048, 1, DType::BF16)) + " bytes here.";
  return memory;
}

// 4. The formula against what the engine's cache really allocates (f32 cache, sizes this machine can hold):
//    the formula is the code. @p cases counts the cases checked.
Table kv_allocated_table(bool quick, int& cases) {
  Table measured{
      .name = "kv_allocated",
      .title = "Formula vs bytes the engine's contiguous KV cache allocated (f32)",
      .columns = {{"model"}, {"attention"}, {"L"}, {"B"}, {"formula [bytes]"}, {"allocated [bytes]"}, {"equal"}}};
  cases = 0;
  for (const char* name : {"tiny", "small", "qwen2.5-0.5b"})
    for (const char* kind : {"MHA", "GQA", "MQA"})
      for (auto [L, B] : {std::pair{128, 1}, {quick ? 256 : 1024, 4}}) {
        const ModelConfig v = variant(name, kind);
        const HostKVCache cache(v, B, L);  // contiguous: B sequences, one block of L tokens each
        const auto formula = kv_cache_bytes(v, L, B, DType::F32);
        check(formula == cache.bytes_allocated(), "lab 02: KV formula gives ", formula, " bytes for ", name, " ", kind,
              " but the cache allocated ", cache.bytes_allocated());
        measured.add_row({std::string(name), std::string(v.attention_kind()), static_cast<long long>(L),
                          static_cast<long long>(B), static_cast<long long>(formula),
                          static_cast<long long>(cache.bytes_allocated()), std::string("yes")});
        ++cases;
      }
  return measured;
}

}  // namespace servelab::lab02
