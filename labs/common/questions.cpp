// SPDX-License-Identifier: MIT
/**
 * @file questions.cpp
 * @brief The answer key: each question's number from the engine function
 *        that the chapter's formula describes.
 */
#include "questions.h"

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>

#include "config/model_config.h"
#include "core/error.h"
#include "disagg/link.h"
#include "kernels/attention_traffic.h"
#include "perf/hardware.h"
#include "perf/work.h"
#include "sched/kv_cache_manager.h"
#include "sched/scheduler.h"

namespace servelab::lab {
namespace {

constexpr double kGB = 1e9, kMB = 1e6;

/**
 * Runs the scheduler with no model until @p until says stop (checked after
 * each step), every request sampling token 0; @p add queues the requests
 * once the scheduler exists. Returns the steps run. The pool is large
 * enough for every question here: blocks never run out.
 */
int run_scheduler(const SchedulerConfig& config, bool keep_kv,
                  const std::function<void(Scheduler&, std::deque<Request>&)>& add,
                  const std::function<bool(const SchedulerOutput&)>& until) {
  constexpr int kBlockSize = 16, kBlocks = 4096;  // 65,536 tokens
  KVCacheManager kv(kBlocks, kBlockSize);
  Scheduler scheduler(config, kv);
  std::deque<Request> requests;  // a deque: the scheduler holds their addresses
  add(scheduler, requests);
  for (int steps = 1; scheduler.has_unfinished_requests(); ++steps) {
    const SchedulerOutput out = scheduler.schedule();
    check(!out.empty(), "answer key: the scheduler stalled at step ", steps);
    std::vector<std::int32_t> sampled;
    for (const ScheduledRequest& s : out.scheduled)
      if (s.request->num_computed_tokens + s.num_new_tokens == s.request->num_tokens()) sampled.push_back(0);
    scheduler.update_from_output(out, sampled, 0.0, keep_kv);
    if (until(out)) return steps;
  }
  fail("answer key: the requests finished before the question's condition held");
}

/// Queues a request of @p prompt_len tokens that emits @p max_tokens tokens.
Request& add_request(Scheduler& scheduler, std::deque<Request>& requests, int prompt_len, int max_tokens) {
  const std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_len), 1);
  requests.emplace_back(static_cast<int>(requests.size()), prompt, SamplingParams{}, max_tokens,
                        std::vector<std::int32_t>{}, 0.0);
  scheduler.add_request(&requests.back());
  return requests.back();
}

/// Token rows the model processes to generate @p new_tokens from a @p prompt_len prompt, with or without a cache.
double rows_processed(int prompt_len, int new_tokens, bool kv_cache) {
  double rows = 0;
  const SchedulerConfig config{.max_num_seqs = 1, .max_num_batched_tokens = 65536};
  run_scheduler(
      config, kv_cache, [&](Scheduler& s, std::deque<Request>& r) { add_request(s, r, prompt_len, new_tokens); },
      [&](const SchedulerOutput& out) {
        rows += out.total_num_scheduled_tokens;
        return out.scheduled.front().request->is_finished();
      });
  return rows;
}

/// Steps that compute a @p prompt_len prompt in chunks of a @p budget beside @p decodes running decodes
/// (started in a step of their own before the prompt arrives, not counted).
double prefill_steps(int prompt_len, int budget, int decodes) {
  const SchedulerConfig config{
      .max_num_seqs = decodes + 1, .max_num_batched_tokens = budget, .enable_chunked_prefill = true};
  const Request* prompt = nullptr;
  return run_scheduler(
      config, true,
      [&](Scheduler& s, std::deque<Request>& r) {
        for (int i = 0; i < decodes; ++i) add_request(s, r, 1, 1 << 20);
        if (decodes > 0) {  // one step makes them decodes: each 1-token prompt is computed and samples
          const SchedulerOutput out = s.schedule();
          s.update_from_output(out, std::vector<std::int32_t>(out.scheduled.size(), 0), 0.0);
        }
        prompt = &add_request(s, r, prompt_len, 1);
      },
      [&](const SchedulerOutput&) { return prompt->num_computed_tokens >= prompt_len; });
}

/// Index (1-based) of the first of @p request_tokens refused by a pool of @p num_blocks blocks, FCFS; 0 = none.
double first_refused(const std::vector<int>& request_tokens, int num_blocks, int block_size) {
  KVCacheManager kv(num_blocks, block_size);
  std::deque<Request> requests;
  for (std::size_t i = 0; i < request_tokens.size(); ++i) {
    const std::vector<std::int32_t> prompt(static_cast<std::size_t>(request_tokens[i]), 1);
    requests.emplace_back(static_cast<int>(i), prompt, SamplingParams{}, 1, std::vector<std::int32_t>{}, 0.0);
    if (!kv.allocate_slots(requests.back(), request_tokens[i])) return static_cast<double>(i + 1);
  }
  return 0;
}

/// The smallest batch M at which out[M, n] = x[M, n]·W[n, n]ᵀ in fp16 reaches @p ridge FLOP/byte.
double batch_at_ridge(int n, double ridge) {
  for (std::int64_t m = 1; m <= 1 << 20; ++m)
    if (gemm_work(m, n, n, DType::F16, DType::F16).intensity() >= ridge) return static_cast<double>(m);
  fail("answer key: no batch reaches the ridge ", ridge);
}

/// One head of width @p head_dim, a prefill of @p tokens tokens, contiguous KV.
AttentionProblem one_head_prefill(int tokens, int head_dim) {
  return {.shape = {.num_heads = 1, .num_kv_heads = 1, .head_dim = head_dim}, .num_new_tokens = tokens};
}

}  // namespace

std::vector<Question> answer_key() {
  std::vector<Question> key;
  const ModelConfig llama8b = preset("llama-3-8b"), llama70b = preset("llama-3-70b");

  // Lab 01: the rows a step feeds without a cache.
  const double rows_no_cache = rows_processed(29, 400, false), rows_cache = rows_processed(29, 400, true);
  key.push_back({"01.rows_without_cache", 1,
                 "Without a KV cache, step k feeds the prompt and the k - 1 tokens generated so far. How many token "
                 "rows does the model process in all to generate N = 400 tokens from a P = 29-token prompt?",
                 rows_no_cache, 0});
  key.push_back({"01.rows_saved_by_cache", 1,
                 "With a cache the prompt is processed once and each later step feeds one token. How many of the rows "
                 "of the previous question does the cache save (P = 29, N = 400)?",
                 rows_no_cache - rows_cache, 0});

  // Lab 02: the KV formula.
  const double kv70b = static_cast<double>(kv_cache_bytes(llama70b, 8192, 1, DType::BF16));
  ModelConfig llama70b_mha = llama70b;
  llama70b_mha.num_key_value_heads = llama70b.num_attention_heads;
  key.push_back({"02.kv_llama70b_8k_gb", 2,
                 "KV cache of one 8,192-token sequence of Llama-3-70B (80 layers, 8 KV heads of width 128) in bf16, "
                 "in GB (10^9 bytes).",
                 kv70b / kGB, 0.01});
  key.push_back({"02.kv_llama70b_mha_factor", 2,
                 "By what factor would that KV cache grow if Llama-3-70B used MHA (one KV head per query head)?",
                 static_cast<double>(kv_cache_bytes(llama70b_mha, 8192, 1, DType::BF16)) / kv70b, 0.01});

  // Lab 03: intensity, ridge, and the bandwidth bound of decode.
  const Hardware& h100 = gpu("H100 SXM");
  const Hardware& h200 = gpu("H200 SXM");
  key.push_back({"03.intensity_gemm_256", 3,
                 "Arithmetic intensity, in FLOP/byte, of out[256, 4096] = x[256, 4096] W[4096, 4096]^T with "
                 "weights and activations in fp16 (W and x read once, out written once).",
                 gemm_work(256, 4096, 4096, DType::F16, DType::F16).intensity(), 0.01});
  key.push_back({"03.decode_batch_at_h100_ridge", 3,
                 "The smallest batch M at which that fp16 4096 x 4096 projection reaches the H100 SXM's ridge point "
                 "(989 TFLOP/s over 3,350 GB/s).",
                 batch_at_ridge(4096, h100.ridge()), 0});
  key.push_back({"03.llama8b_h200_decode_tokens_per_s", 3,
                 "The roofline's upper bound on batch-1 decode tokens/s of Llama-3-8B with bf16 weights on an H200 "
                 "SXM (4,800 GB/s): every weight is read once per token.",
                 h200.bandwidth_gbs * kGB / static_cast<double>(decode_weight_bytes(llama8b, DType::BF16)), 0.02});

  // Lab 04: blocks.
  {
    KVCacheManager kv(4, 4);
    key.push_back({"04.blocks_for_5_2_7", 4,
                   "With blocks of 4 tokens, how many blocks do three requests of 5, 2 and 7 tokens hold in all?",
                   static_cast<double>(kv.num_blocks_for(5) + kv.num_blocks_for(2) + kv.num_blocks_for(7)), 0});
  }
  key.push_back({"04.first_refused_of_5_2_7", 4,
                 "Those three requests arrive in that order at a pool of 4 blocks of 4 tokens. Which one (1, 2 or 3) "
                 "is the first that allocate_slots refuses?",
                 first_refused({5, 2, 7}, 4, 4), 0});

  // Lab 05: bytes moved.
  const AttentionProblem head = one_head_prefill(4096, 64);
  constexpr double kAnyFastMemory = 1 << 20;  // only v2's count depends on M
  key.push_back({"05.standard_over_flash_bytes", 5,
                 "One head of width 64, a 4,096-token causal prefill in f32: how many times more bytes does v1 "
                 "(standard) move than v3 (flash, query tiles of 256)?",
                 attention_traffic(AttentionVersion::STANDARD, head, kAnyFastMemory).bytes /
                     attention_traffic(AttentionVersion::FLASH, head, kAnyFastMemory).bytes,
                 0.01});
  const AttentionProblem paper = one_head_prefill(4096, 64);
  constexpr double kPaperSram = 100e3;  // the paper's M ~ 100 KB of SRAM per streaming multiprocessor
  key.push_back({"05.paper_standard_over_flash", 5,
                 "The FlashAttention paper's orders with constant 1: standard N d + N^2, flash N^2 d^2 / M (in "
                 "floats). Their ratio for N = 4,096, d = 64, M = 100 KB of f32 (25,000 floats)?",
                 paper_standard_bytes(paper) / paper_flash_bytes(paper, kPaperSram), 0.01});

  // Lab 06: chunks under a budget.
  key.push_back({"06.prefill_steps_alone", 6,
                 "With chunked prefill and a budget of 512 tokens (no threshold), in how many steps is a "
                 "3,000-token prompt computed when it runs alone?",
                 prefill_steps(3000, 512, 0), 0});
  key.push_back({"06.prefill_steps_beside_16", 6, "And beside 16 running decodes, which are scheduled first?",
                 prefill_steps(3000, 512, 16), 0});

  // Lab 07: what a transfer moves.
  const double kv8b = static_cast<double>(kv_cache_bytes(llama8b, 2048, 1, DType::BF16));
  key.push_back({"07.kv_llama8b_2048_mb", 7,
                 "KV cache of a 2,048-token Llama-3-8B request in bf16, in MB (10^6 bytes).", kv8b / kMB, 0.01});
  key.push_back({"07.kv_llama8b_2048_ib_hdr_ms", 7,
                 "Time to send it over one InfiniBand HDR link (25 GB/s, no overhead), in ms.",
                 kv8b / disagg::find_link("ib-hdr", "answer key").bytes_per_second * 1e3, 0.02});
  return key;
}

}  // namespace servelab::lab
