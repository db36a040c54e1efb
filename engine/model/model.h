// SPDX-License-Identifier: MIT
/**
 * @file model.h
 * @brief The decoder-only transformer (Llama/Qwen2) and its one entry
 *        point, forward(), over a ragged batch and a KV cache.
 *
 * One layer, for the T token rows of a batch:
 * @verbatim
 *  x [T, hidden] ─ RMSNorm ─ q,k,v proj (+bias) ─ RoPE(q,k) ─ write k,v to cache
 *       │                                              └─ GQA attention over cache ─ o proj ─┐
 *       └──────────────────────────────── + ◄─────────────────────────────────────────────────┘
 *  x ─ RMSNorm ─ gate,up proj ─ silu(gate)*up ─ down proj ─ + x
 * @endverbatim
 * then a final RMSNorm and the LM head on the rows that need logits.
 *
 * A Model is not thread-safe: forward() reuses one set of activation buffers.
 */
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/context.h"
#include "config/model_config.h"
#include "kv/kv_cache.h"
#include "model/backend.h"
#include "model/batch.h"
#include "model/weights.h"
#include "perf/counter.h"

namespace servelab {

/// Where the model's ops run.
enum class Backend { CPU, CUDA };

/// Parses "cpu" or "cuda"; @throws Error naming @p what otherwise.
Backend parse_backend(const std::string& text, const std::string& what);

/// How the model runs (backend, threads, attention kernel, dtypes): the model level, beside the engine
/// level's EngineConfig; later labs add their model switches here so the ladder reads top to bottom.
struct ModelOptions {
  Backend backend = Backend::CPU;  ///< where ops run
  int num_threads = 0;             ///< CPU threads, 0 = all cores
  /// Dtype of the weight matrices and the embedding: f32 (exact parity), bf16 (half the bytes per token),
  /// or q8_0, q4_0, q4_1 (llama.cpp's blocks, core/quant.h: 1.06, 0.56, 0.63 bytes per weight).
  DType weight_dtype = DType::F32;
  /// A GGUF's matrices in the types the file stores (--dtype gguf): mapped, not copied, where the kernels read
  /// that type (f32, bf16, q8_0, q4_0, q4_1; f16 is widened to f32). weight_dtype applies to other checkpoints.
  bool gguf_types = false;
  /// Batch-invariant reductions (see KernelContext::deterministic); slower prefill.
  bool deterministic = false;
  /// With bf16 weights, bf16 arithmetic in prefill GEMMs (see KernelContext::bf16_activations).
  bool bf16_activations = false;
  /// With quantized weights, int8 arithmetic in the row kernels, as llama.cpp (see KernelContext::int8_activations).
  bool int8_activations = false;
  /// Attention kernels (lab 05): BLOCKED is the engine before lab 05, FLASH tiles with the online softmax
  /// and splits long decodes across threads (kernels/attention.h).
  AttentionKind attention = AttentionKind::BLOCKED;
  /// Copy the weights a CPU step reads into one region of 2 MiB transparent huge pages (core/huge_pages.h), in
  /// the order a step reads them; false leaves them where the load put them (file mappings or the heap).
  bool huge_pages = true;
};

/**
 * @brief Applies a --dtype flag to @p options: "f32" (exact), "bf16" (bf16
 *        weights widened to f32 for the arithmetic), "bf16-math" (bf16
 *        weights, and prefill GEMMs in bf16 arithmetic: activations rounded to
 *        bf16, f32 accumulation, as on the CUDA path and llama.cpp's BF16),
 *        "q8_0", "q4_0", "q4_1" (quantized weights, read as blocks by decode,
 *        f32 arithmetic) or "gguf" (a .gguf's own types; f32 for other
 *        checkpoints); "q8_0-math", "q4_0-math", "q4_1-math" and "gguf-math"
 *        multiply quantized weights in int8 arithmetic, as llama.cpp does
 *        (inputs rounded to 8 bits per block of 32, exact integer sums);
 *        "gguf-math" also multiplies a file's BF16 tensors as "bf16-math" does.
 * @throws Error naming @p what and the accepted values otherwise.
 */
void apply_dtype_flag(const std::string& text, const std::string& what, ModelOptions& options);

/// A model ready to run: config, weights and the threads to run them on.
class Model {
 public:
  /**
   * @brief Takes ownership of @p weights; with Backend::CUDA, also uploads
   *        them once to the GPU (a ModelBackend, engine/cuda/cuda_model.h, runs the steps there).
   * @throws Error when the options ask for the CUDA backend and this build or
   *         machine has no CUDA device (the message says which), or the
   *         upload fails.
   */
  Model(ModelConfig config, ModelWeights weights, const ModelOptions& options);
  ~Model();

  /// Loads config.json and the safetensors weights of a Hugging Face model folder, or a .gguf file (model/gguf.h).
  static std::unique_ptr<Model> from_pretrained(const std::filesystem::path& dir, const ModelOptions& options);
  /// Builds a named preset with synthetic weights from @p seed (no download).
  static std::unique_ptr<Model> from_preset(const std::string& name, std::uint64_t seed, const ModelOptions& options);

  /// Shape and hyper-parameters.
  const ModelConfig& config() const { return config_; }
  /**
   * @brief Host parameters, on the CPU backend. Empty on CUDA: the host copy
   *        is released once uploaded, and the device holds the only one.
   */
  const ModelWeights& weights() const { return weights_; }

  /// Where the weights a CPU step reads lie (ModelOptions::huge_pages).
  struct WeightPlacement {
    std::size_t bytes = 0;            ///< size of the region they were copied into; 0 when not copied
    std::size_t huge_page_bytes = 0;  ///< bytes of it the kernel backs with 2 MiB pages now (at most `bytes`)
  };
  /// The region's size and how much of it is in huge pages, read from /proc/self/smaps at the call.
  WeightPlacement weight_placement() const;
  /// Options it runs with.
  const ModelOptions& options() const { return options_; }
  /// Threads its kernels run on (the caller's included).
  int num_threads() const { return pool_->num_threads(); }
  /// Those threads, for work beside the model's between two forward() calls (the engine samples its rows on them).
  ThreadPool& pool() const { return *pool_; }
  /// FLOPs and bytes of every op of every forward() call while counting is enabled (off by default).
  WorkCounter& work_counter() { return counter_; }

  /// Chooses the attention kernels of later forward() calls (CPU backend; lab 05).
  void set_attention(AttentionKind kind) { options_.attention = kind; }
  /**
   * @brief Calls @p hook(layer) in later forward() calls as soon as layer
   *        @p layer's new K/V rows are in the cache, before its attention:
   *        from then on the step never touches that layer's KV again, so a
   *        prefill worker can start sending it while later layers compute
   *        (lab 07's layer-wise streaming). Called on the calling thread, in
   *        layer order; on CUDA, for every layer after the step (no overlap).
   *        An empty function turns it off.
   */
  void set_layer_hook(std::function<void(int layer)> hook) { layer_hook_ = std::move(hook); }

  /**
   * @brief Runs one step over a ragged batch.
   *
   * Writes the new tokens' K/V into @p cache at positions
   * num_computed_tokens .. num_computed_tokens + num_new_tokens - 1 of each
   * sequence (through its block table), and attends over everything the
   * sequence has up to each token. In each layer, new token j of a sequence
   * writes its K row (kv_heads · head_dim floats, RoPE applied) to
   * KVView::key(num_computed_tokens + j) and its V row to value(...), before
   * attention reads them: the token attends to itself (lab 02).
   *
   * Where the new tokens sit (lab 02): the sequences' new tokens are
   * consecutive rows of batch.token_ids in batch.seqs order, so sequence i's
   * first row is the sum of the earlier sequences' num_new_tokens; its new
   * token j has RoPE position num_computed_tokens + j; and attention is told,
   * per sequence, AttentionSeq{first row, num_new_tokens, num_computed_tokens
   * (the cached tokens before the new ones), its KVCache::view()}.
   * @return [batch.logits_indices.size(), vocab_size] logits, row-major.
   * @throws Error when a token id is outside the vocabulary, a position
   *         reaches max_position_embeddings, or a block table is too short
   *         or names a block outside the cache.
   */
  std::vector<float> forward(const Batch& batch, KVCache& cache);

  /**
   * @brief The same step as forward(), returning the greedy choice of each
   *        logits row (servelab::argmax: lowest index on ties, NaN never
   *        wins) instead of the logits: what a step needs when every request
   *        it samples for is greedy. On CUDA the argmax runs on the device and
   *        4 bytes per row come back instead of a row of vocab_size floats.
   * @return [batch.logits_indices.size()] token ids.
   * @throws Error as forward().
   */
  std::vector<std::int32_t> forward_greedy(const Batch& batch, KVCache& cache);

  /**
   * @brief One step with no KV cache at all (lab 01; transformers'
   *        use_cache=False): every sequence of @p batch starts at position 0
   *        (num_computed_tokens must be 0), attention reads the K and V rows
   *        this step computed, and nothing outlives the call. The block
   *        tables are not read. On CUDA, whose kernels read K and V from a
   *        cache only, a scratch cache of one block per sequence serves the
   *        step.
   * @return [batch.logits_indices.size(), vocab_size] logits, row-major.
   * @throws Error as forward(), and when a sequence has cached tokens.
   */
  std::vector<float> forward(const Batch& batch);

  /// forward(@p batch) without a cache, returning the greedy choice of each logits row (as forward_greedy()).
  std::vector<std::int32_t> forward_greedy(const Batch& batch);

  /**
   * @brief KV storage of @p num_blocks blocks of @p block_size tokens in the
   *        memory this model's backend reads: a HostKVCache on the CPU, a
   *        CudaKVCache (device memory) on CUDA. forward() accepts only a cache
   *        of its own kind. The contiguous cache of labs 01-03 is
   *        make_kv_cache(num_sequences, longest_sequence).
   * @throws Error when a size is not positive.
   */
  std::unique_ptr<KVCache> make_kv_cache(int num_blocks, int block_size) const;

  /**
   * @brief Tells the backend the largest steps to expect (the scheduler's
   *        max_num_batched_tokens and max_num_seqs) so it can size its buffers
   *        once: on CUDA no step within them allocates. Nothing on the CPU.
   */
  void reserve(int max_tokens, int max_seqs) {
    if (device_) device_->reserve(max_tokens, max_seqs);
  }

  /**
   * @brief Bytes of KV storage the backend can give: on CUDA, @p
   *        gpu_memory_utilization of the device's memory minus what is in use
   *        now (the weights), as vLLM's --gpu-memory-utilization.
   * @throws Error on the CPU backend (whose budget is --kv-cache-memory) or
   *         when @p gpu_memory_utilization is outside (0, 1].
   */
  std::size_t device_kv_memory(double gpu_memory_utilization) const;

 private:
  /// Refuses a malformed @p batch; with a @p cache (null: forward() without one), also a block table that misses it.
  void check_batch(const Batch& batch, const KVCache* cache) const;
  /// The CPU step of forward(), with or without a @p cache (null: attention reads this step's own K and V).
  std::vector<float> forward_cpu(const Batch& batch, KVCache* cache);
  /// For forward(@p batch) on CUDA: a scratch cache of one block per sequence, and @p batch's tables pointing at it.
  std::pair<std::unique_ptr<KVCache>, Batch> scratch_cache(const Batch& batch) const;
  /// After a step on CUDA: the layer hook hears of every layer (no overlap there).
  void device_step_done() const;
  /**
   * @brief While counting, adds every op of @p batch's step to the counter
   *        from its shapes alone, before the backend dispatch: the CPU and
   *        CUDA count alike. Its totals must equal step_work() (perf/work.h).
   *
   * T = token rows, R = logits rows, H = hidden, Q = q_dim, KV = kv_dim,
   * F = intermediate, f = 4 bytes (activations, KV, norm weights and biases
   * are f32). One add() per op, with the op names below; GEMMs use
   * gemm_work(M, N, K, weight dtype, F32):
   * - "embedding": weight_bytes T·H·(embedding dtype size), act_written T·H·f;
   * - per layer: "rmsnorm" (flops 4·T·H, weight_bytes H·f, act_read and act_written T·H·f);
   *   "qkv_proj" gemm(T, Q + 2KV, H); "bias" only with attention_bias (flops, act_read and
   *   act_written T·(Q + 2KV)[·f], weight_bytes (Q + 2KV)·f); "qkv_split" (read and write T·(Q + 2KV)·f);
   *   "rope" (flops 3·T·(Q + KV), read and write T·(Q + KV)·f); "kv_write" (act_read and
   *   kv_written 2·T·KV·f); "attention" once per sequence of n new tokens after c cached
   *   (flops 4·Q·(n·c + n(n+1)/2), act_read and act_written n·Q·f, kv_read (c + n)·2·KV·f);
   *   "o_proj" gemm(T, H, Q); "residual" (flops T·H, act_read 2·T·H·f, act_written T·H·f);
   *   "rmsnorm" again; "gate_up_proj" gemm(T, 2F, H); "silu_mul" (flops 5·T·F, act_read
   *   2·T·F·f, act_written T·F·f); "down_proj" gemm(T, H, F); "residual" again;
   * - "final_norm" as rmsnorm over R rows; "lm_head" gemm(R, vocab, H) in the embedding dtype.
   */
  void count_step(const Batch& batch);

  /// Per-layer weights stacked for fewer, larger GEMMs; LayerWeights' projections are views into these.
  struct FusedLayer {
    Tensor qkv_proj;      ///< [q_dim + 2 kv_dim, hidden]: q_proj, k_proj, v_proj stacked
    Tensor qkv_bias;      ///< [q_dim + 2 kv_dim] f32; empty without attention_bias
    Tensor gate_up_proj;  ///< [2 intermediate, hidden]: gate_proj, up_proj stacked
  };
  /// Makes @p w's q/k/v and gate/up projections (and q/k/v biases) views of their rows in @p f's stacks.
  static void view_into_stacks(LayerWeights& w, const FusedLayer& f);
  /// Copies every weight the forward reads into one huge-page region (ModelOptions::huge_pages).
  void place_weights_in_huge_pages();
  /// Activation buffers reused across steps; each grows to the largest batch seen.
  struct Workspace {
    enum Buffer { X, XN, QKV, Q, K, V, ATTN, GATE_UP, ACT, PROJ, COUNT };
    std::vector<float> buffers[COUNT];
    /// Buffer @p which with room for at least @p floats floats.
    float* get(Buffer which, std::size_t floats);
  };

  ModelConfig config_;
  ModelWeights weights_;             // empty on CUDA once uploaded
  DType embed_dtype_ = DType::F32;   // embedding and LM head (kept for counting after weights_ is released)
  DType matrix_dtype_ = DType::F32;  // layer matrices
  ModelOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  KernelContext ctx_;
  std::vector<float> inv_freq_;  // [head_dim / 2] RoPE inverse frequencies
  std::vector<FusedLayer> fused_;
  std::size_t placed_bytes_ = 0;  // size of the huge-page region the weights were copied into
  Workspace ws_;
  WorkCounter counter_;
  std::unique_ptr<ModelBackend> device_;  // set when the backend is CUDA: forward() runs there
  std::function<void(int)> layer_hook_;   // set_layer_hook
};

}  // namespace servelab
