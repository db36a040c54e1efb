// SPDX-License-Identifier: MIT
/**
 * @file ops.h
 * @brief The CUDA kernels of a decoder block, one function per op, with the
 *        same shapes as the CPU kernels in kernels/ops.h, kernels/embedding.h
 *        and kernels/attention.h (the specification each is tested against).
 *
 * Every pointer is a device address (see device_memory.h); shapes use T for
 * the number of token rows. Each function queues its kernel on the calling
 * thread's default stream (cudaStreamPerThread) and returns at once: results are ready for the next op, and for
 * the host after a copy_to_host() or synchronize(). Per-element math comes
 * from kernels/math/, the same code the CPU kernels run.
 *
 * One file per op under engine/cuda/, each opening with what its kernel does
 * and what it reads and writes. Plain C++: callable from g++-compiled code.
 * @throws Error when a launch is rejected (see check.h).
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"
#include "kv/kv_view.h"

namespace servelab::cuda {

/**
 * @brief out[t] = table[ids[t]], widened to f32 (embedding.cu).
 * @param out   [T, hidden] f32.
 * @param table [vocab, hidden] f32 or bf16, in device memory.
 * @param ids   [T] token ids, already checked to be inside the vocabulary.
 */
void embedding_lookup(float* out, const Tensor& table, const std::int32_t* ids, int T);

/**
 * @brief RMSNorm: out[t] = x[t] / rms(x[t]) * weight (rmsnorm.cu).
 * @param out [T, n]; may alias @p x.
 * @param x   [T, n]
 * @param weight [n]
 */
void rmsnorm(float* out, const float* x, const float* weight, int T, int n, float eps);

/**
 * @brief RoPE in place on @p num_heads heads of every row (rope.cu).
 * @param x          [T, row_stride]: each row holds num_heads heads of head_dim floats, from column 0.
 * @param row_stride floats between consecutive rows (>= num_heads * head_dim).
 * @param positions  [T] absolute position of each row's token.
 * @param inv_freq   [head_dim / 2] inverse frequencies.
 */
void rope(float* x, std::size_t row_stride, const int* positions, int T, int num_heads, int head_dim,
          const float* inv_freq);

/**
 * @brief SwiGLU's gating on stacked projections: out[t][i] = silu(gate_up[t][i]) * gate_up[t][F + i] (silu_mul.cu).
 * @param out     [T, F]
 * @param gate_up [T, 2F]
 */
void silu_mul(float* out, const float* gate_up, int T, int F);

/// Residual connection: x[i] += y[i] for i < n (residual_add.cu).
void add_inplace(float* x, const float* y, std::size_t n);

/// Adds @p bias [N] to every row of @p out [M, N] (residual_add.cu).
void add_bias(float* out, const float* bias, int M, int N);

/**
 * @brief out[r] = x[rows[r]]: picks the rows that get logits (copy.cu).
 * @param out  [R, n]
 * @param x    [*, n]
 * @param rows [R] row indices into @p x.
 */
void gather_rows(float* out, const float* x, const std::int32_t* rows, int R, int n);

/**
 * @brief Narrows f32 to bf16 or f16 with round-to-nearest-even: the GEMM
 *        inputs cuBLAS needs when the weights are 16-bit (copy.cu).
 * @param out [n] 16-bit values of @p dtype (BF16 or F16).
 * @param x   [n] f32.
 */
void narrow_to(void* out, DType dtype, const float* x, std::size_t n);

/// One query row of a ragged batch, as the attention and KV-write kernels see it.
struct AttentionRow {
  int seq = 0;  ///< index of its sequence in the KVView array
  int pos = 0;  ///< absolute position of its token (it attends to keys 0..pos)
};

/**
 * @brief Writes each row's new K and V into its sequence's cache rows (kv_write.cu).
 * @param kv_src     [T, src_stride]: row t holds K at column k_offset and V at v_offset, kv_dim floats each.
 * @param rows       [T] each row's sequence and position.
 * @param views      [num_seqs] this layer's K/V rows of each sequence (device pointers inside).
 */
void kv_cache_write(const float* kv_src, std::size_t src_stride, std::size_t k_offset, std::size_t v_offset,
                    const AttentionRow* rows, const KVView* views, int T, int kv_dim);

/// Head counts of a GQA attention layer (as servelab::AttentionShape).
struct AttentionHeads {
  int num_heads = 0;     ///< query heads
  int num_kv_heads = 0;  ///< K/V heads; divides num_heads
  int head_dim = 0;      ///< width of each head
};

/**
 * @brief Fused attention prologue: bias + RoPE + KV write in one pass over
 *        each new token's q, k and v (fused.cu).
 *
 * Replaces add_bias(), rope() and kv_cache_write() in the model's step: those
 * read and write the qkv rows three times; this reads them once, writes the
 * rotated q back in place for attention and k and v straight into the cache.
 * The per-element math is theirs (a bias add, then rope_rotate_pair()), so the
 * results are the same bits.
 * @param qkv  [T, H·D + 2·KVH·D]: q heads, then k heads, then v heads. q is
 *             rotated in place; the k and v columns are left as they came.
 * @param bias [H·D + 2·KVH·D] f32, or nullptr for no bias.
 * @param rows [T] each row's sequence and position (the RoPE position too).
 * @param views [num_seqs] this layer's K/V rows of each sequence.
 * @param inv_freq [head_dim / 2] RoPE inverse frequencies.
 */
void qkv_bias_rope_kv_write(float* qkv, const float* bias, const AttentionRow* rows, const KVView* views, int T,
                            const AttentionHeads& heads, const float* inv_freq);

/**
 * @brief Fused residual add + RMSNorm, emitting the next GEMM's input type (fused.cu):
 *        x[t] += y[t]; out[t] = rmsnorm(x[t]) * weight, stored as @p out_dtype.
 *
 * One read of x and y and one write of x and out per row, instead of the
 * separate add (read x, y; write x), norm (read x; write xn) and narrowing to
 * 16 bits (read xn; write xn16) of the unfused step.
 * @param x   [T, n] residual stream, updated in place.
 * @param y   [T, n] sublayer output, or nullptr: then x is only normalised.
 * @param out [T, n] of @p out_dtype (F32, BF16 or F16); must not alias x.
 */
void add_rmsnorm(float* x, const float* y, const float* weight, void* out, DType out_dtype, int T, int n, float eps);

/**
 * @brief silu_mul() emitting the down projection's input type (fused.cu).
 * @param out [T, F] of @p out_dtype (F32, BF16 or F16).
 * @param gate_up [T, 2F]
 */
void silu_mul_to(void* out, DType out_dtype, const float* gate_up, int T, int F);

/**
 * @brief Floats of score scratch attention_naive() needs to handle @p T rows in one launch.
 * @param max_keys the most keys any row attends to (its position + 1).
 */
std::size_t attention_scores_floats(int T, int num_heads, int max_keys);

/**
 * @brief Naive causal GQA attention over KV caches (attention_naive.cu).
 *
 * Row t, head h attends to keys 0..rows[t].pos of its sequence, KV head
 * h / (num_heads / num_kv_heads); the scores are written to @p scores and
 * read back (what lab 05's flash attention removes).
 * @param out      [T, num_heads * head_dim]
 * @param q        [T, q_stride] queries (RoPE applied), heads from column 0.
 * @param rows     [T] each row's sequence and position.
 * @param views    [num_seqs] K/V rows of each sequence for this layer, the new tokens already written.
 * @param max_keys the most keys any row attends to.
 * @param scores   scratch of @p scores_floats floats; rows are processed in
 *                 launches of as many rows as fit (at least one must fit:
 *                 num_heads * max_keys floats).
 */
void attention_naive(float* out, const float* q, std::size_t q_stride, const AttentionRow* rows, const KVView* views,
                     int T, int max_keys, const AttentionHeads& heads, float* scores, std::size_t scores_floats);

/**
 * @brief Greedy choice per row: out[r] = index of the largest of x[r], lowest on ties (argmax.cu).
 * @param out [R] int32.
 * @param x   [R, n]
 */
void argmax_rows(std::int32_t* out, const float* x, int R, int n);

/**
 * @brief out = x · Wᵀ for quantized weights (gemv_blocks.cu): the decode GEMV
 *        on Q8_0, Q4_0 or Q4_1 blocks, each weight widened in registers by
 *        core/quant.h's dequantize() and multiplied in f32 (for the small M
 *        of decode; a long prefill would rather widen tiles for cuBLAS).
 * @param out [M, N] f32, overwritten.
 * @param x   [M, K] f32 rows in device memory.
 * @param w   [N, K] blocks in device memory (K a multiple of 32).
 * @throws Error for another dtype or shape.
 */
void matmul_blocks(float* out, const float* x, const Tensor& w, int M);

}  // namespace servelab::cuda
