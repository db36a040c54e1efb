// SPDX-License-Identifier: MIT
/**
 * @file work.h
 * @brief Closed-form counts of the work a model step does: FLOPs of the K/V
 *        projections and of attention, and the bytes a KV cache holds.
 *
 * A multiply-add counts as 2 FLOPs. For one layer, a step that feeds n new
 * tokens at positions c .. c+n-1 (c = tokens already cached) does
 * - K and V projections: \f$ 2 \cdot n \cdot hidden \cdot 2\,kv\_dim \f$,
 * - attention scores and weighted sum: \f$ \sum_{p=c}^{c+n-1} 2 \cdot 2 (p+1) \cdot q\_dim \f$
 *   (QKᵀ and PV, each (p+1)·head_dim multiply-adds per query head).
 * Without a cache every step is a prefill of the whole sequence (c = 0,
 * n = L): O(L²·D) attention work per step instead of O(L·D).
 *
 * Lab 03 adds counters measured inside the kernels and tests them against these formulas.
 * @see labs/02_kv_cache/README.md
 */
#pragma once

#include <cstdint>

#include <vector>

#include "core/dtype.h"
#include "config/model_config.h"
#include "perf/counter.h"

namespace servelab {

/// FLOPs of the K and V projections (all layers) for @p new_tokens tokens.
double kv_projection_flops(const ModelConfig& config, std::int64_t new_tokens);

/**
 * @brief FLOPs of attention (QKᵀ and PV, all layers, all heads) for
 *        @p new_tokens queries following @p cached_tokens cached ones.
 */
double attention_flops(const ModelConfig& config, std::int64_t cached_tokens, std::int64_t new_tokens);

/**
 * @brief Bytes of K and V for @p batch sequences of @p context_len tokens:
 *        \f$ 2 \cdot layers \cdot kv\_heads \cdot head\_dim \cdot L \cdot B \cdot bytes \f$.
 *
 * The 2 counts K and V; kv_heads (not query heads) is what makes GQA and MQA
 * smaller than MHA; bytes is dtype_size(@p dtype). 0 when L or B is 0.
 * Computed in 64-bit integers: Llama-3-70B's 8k context is 2.7 GB.
 *
 * Lab 02's exercise, so it spells the formula out instead of calling
 * kv_bytes_per_token() (config/model_config.h), which the engine's KV cache
 * allocates by: the lab's check that this formula gives the bytes the cache
 * allocated then compares two independent computations, and the starter tree's
 * stub of this function leaves the engine's own allocation working.
 */
std::uint64_t kv_cache_bytes(const ModelConfig& config, std::int64_t context_len, std::int64_t batch, DType dtype);

/**
 * @brief Bytes of weights a decode step must read: every matrix of every
 *        layer and the LM head in @p weight_dtype, plus the f32 norm weights
 *        and biases (the embedding row is one row, and not counted).
 *
 * Decode at batch 1 is limited by streaming these bytes from memory:
 * tokens/s <= bandwidth / decode_weight_bytes().
 */
std::uint64_t decode_weight_bytes(const ModelConfig& config, DType weight_dtype);

/// Element sizes a step moves: weights, activations, KV cache.
struct StepDtypes {
  DType weights = DType::F32;      ///< weight matrices and embedding
  DType activations = DType::F32;  ///< hidden states between ops
  DType kv = DType::F32;           ///< the KV cache
};

/// One sequence's part of a step: tokens already in the cache, and new tokens fed now.
struct SeqShape {
  std::int64_t cached = 0;  ///< num_computed_tokens before the step
  std::int64_t fresh = 0;   ///< new tokens in the step (prefill chunk or 1 decode token)
};

/**
 * @brief Work of one GEMM out = x·Wᵀ, x [M, K], W [N, K]:
 *        2·M·N·K FLOPs; W read once, x read, out written.
 *
 * Fills flops = 2·M·N·K, weight_bytes = N·K in @p weights, act_read = M·K
 * and act_written = M·N in @p activations; the KV fields stay 0. A zero
 * dimension gives zero FLOPs.
 *
 * With M = 512, N = K = 4096 and everything in fp16 this is the prefill/decode article's
 * prefill row: intensity M·K / (K + 2M) ≈ 410 FLOP/byte.
 */
Work gemm_work(std::int64_t M, std::int64_t N, std::int64_t K, DType weights, DType activations);

/**
 * @brief Closed-form work of one whole model step (the engine's forward pass
 *        over a ragged batch), with the byte model of counter.h.
 * @param seqs the sequences of the batch.
 * @param logits_rows rows that go through the final norm and LM head.
 *
 * The engine's WorkCounter, which counts op by op from the shapes of the
 * calls, must give the same totals; the lab 03 tests check it.
 */
Work step_work(const ModelConfig& config, const StepDtypes& dtypes, const std::vector<SeqShape>& seqs,
               std::int64_t logits_rows);

}  // namespace servelab
