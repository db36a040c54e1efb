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
#include <optional>

#include "config/model_config.h"
#include "core/error.h"
#include "disagg/kv_transfer_plan.h"
#include "disagg/link.h"
#include "kernels/attention_traffic.h"
#include "kv/contiguous_allocator.h"
#include "perf/hardware.h"
#include "perf/work.h"
#include "sched/kv_cache_manager.h"
#include "sched/scheduler.h"
#include "serve/metrics.h"

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

/// What generating @p new_tokens from a @p prompt_len prompt costs, one request alone.
struct Generation {
  double rows = 0;  ///< token rows the model processes in all
  int steps = 0;    ///< model steps (forward calls)
};

/// Runs one request with or without a KV cache (without one, every step feeds the whole sequence again).
Generation generate(int prompt_len, int new_tokens, bool kv_cache) {
  Generation g;
  const SchedulerConfig config{.max_num_seqs = 1, .max_num_batched_tokens = 65536};
  g.steps = run_scheduler(
      config, kv_cache, [&](Scheduler& s, std::deque<Request>& r) { add_request(s, r, prompt_len, new_tokens); },
      [&](const SchedulerOutput& out) {
        g.rows += out.total_num_scheduled_tokens;
        return out.scheduled.front().request->is_finished();
      });
  return g;
}

/**
 * The chunks (tokens per step) in which a @p prompt_len prompt is computed under a @p budget, with
 * @p threshold as long_prefill_token_threshold (0 = none), beside @p decodes running decodes
 * (started in a step of their own before the prompt arrives, not counted).
 */
std::vector<int> prefill_chunks(int prompt_len, int budget, int decodes, int threshold = 0) {
  const SchedulerConfig config{.max_num_seqs = decodes + 1,
                               .max_num_batched_tokens = budget,
                               .enable_chunked_prefill = true,
                               .long_prefill_token_threshold = threshold};
  const Request* prompt = nullptr;
  std::vector<int> chunks;
  run_scheduler(
      config, true,
      [&](Scheduler& s, std::deque<Request>& r) {
        for (int i = 0; i < decodes; ++i) add_request(s, r, 1, 1 << 20);
        if (decodes > 0) {  // one step makes them decodes: each 1-token prompt is computed and samples
          const SchedulerOutput out = s.schedule();
          s.update_from_output(out, std::vector<std::int32_t>(out.scheduled.size(), 0), 0.0);
        }
        prompt = &add_request(s, r, prompt_len, 1);
      },
      [&](const SchedulerOutput& out) {
        for (const ScheduledRequest& s : out.scheduled)
          if (s.request == prompt) chunks.push_back(s.num_new_tokens);
        return prompt->num_computed_tokens >= prompt_len;
      });
  return chunks;
}

/**
 * The step (1-based) in which a third request C is first scheduled under @p policy, with room for two
 * requests: A and B (4-token prompts) generate @p a_tokens and @p b_tokens tokens, C waits behind them.
 */
double step_c_starts(SchedulingPolicy policy, int a_tokens, int b_tokens) {
  const SchedulerConfig config{.policy = policy, .max_num_seqs = 2, .max_num_batched_tokens = 65536};
  const Request* c = nullptr;
  return run_scheduler(
      config, true,
      [&](Scheduler& s, std::deque<Request>& r) {
        add_request(s, r, 4, a_tokens);
        add_request(s, r, 4, b_tokens);
        c = &add_request(s, r, 4, 1);
      },
      [&](const SchedulerOutput& out) {
        for (const ScheduledRequest& s : out.scheduled)
          if (s.request == c) return true;
        return false;
      });
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

/// Lab 01: the rows and steps of the generation loop, and what a request's timestamps give.
void lab01(std::vector<Question>& key) {
  const Generation without = generate(29, 400, false), with = generate(29, 400, true);
  key.push_back({"01.rows_without_cache", 1,
                 "Without a KV cache, step k feeds the prompt and the k - 1 tokens generated so far. How many token "
                 "rows does the model process in all to generate N = 400 tokens from a P = 29-token prompt?",
                 without.rows, 0});
  key.push_back({"01.rows_saved_by_cache", 1,
                 "With a cache the prompt is processed once and each later step feeds one token. How many of the rows "
                 "of the previous question does the cache save (P = 29, N = 400)?",
                 without.rows - with.rows, 0});
  key.push_back({"01.steps_with_cache", 1,
                 "How many model steps (forward calls) does that generation take with a cache? The step that "
                 "processes the prompt samples the first token.",
                 static_cast<double>(with.steps), 0});
  const ModelConfig llama8b = preset("llama-3-8b");
  key.push_back({"01.attention_flops_last_over_first", 1,
                 "Without a cache, how many times the attention FLOPs of step 1 does step 400 do (P = 29)? Attention "
                 "over L tokens costs in proportion to 1 + 2 + ... + L (each query sees the keys up to its own).",
                 attention_flops(llama8b, 0, 29 + 399) / attention_flops(llama8b, 0, 29), 0.01});
  std::vector<double> token_times;
  for (int i = 0; i <= 100; ++i) token_times.push_back(0.2 + 0.02 * i);  // 101 tokens, 0.2 s to 2.2 s
  const RequestTimes times{
      .arrival = 0, .first_scheduled = 0, .token_times = token_times, .finished = token_times.back()};
  key.push_back({"01.tpot_ms", 1,
                 "A request arrives at 0 s, its first token is sampled at 0.2 s and its 101st and last at 2.2 s. What "
                 "is its TPOT, in ms (vLLM's definition: (E2E - TTFT) / (output tokens - 1))?",
                 RequestMetrics::from(times).tpot * 1e3, 0.01});
}

/// Lab 02: the KV formula, and what the cache saves.
void lab02(std::vector<Question>& key) {
  const ModelConfig llama8b = preset("llama-3-8b"), llama70b = preset("llama-3-70b");
  const double kv70b = static_cast<double>(kv_cache_bytes(llama70b, 8192, 1, DType::BF16));
  ModelConfig llama70b_mha = llama70b, llama70b_mqa = llama70b;
  llama70b_mha.num_key_value_heads = llama70b.num_attention_heads;
  llama70b_mqa.num_key_value_heads = 1;
  key.push_back({"02.kv_llama70b_8k_gb", 2,
                 "KV cache of one 8,192-token sequence of Llama-3-70B (80 layers, 8 KV heads of width 128) in bf16, "
                 "in GB (10^9 bytes).",
                 kv70b / kGB, 0.01});
  key.push_back({"02.kv_llama70b_mha_factor", 2,
                 "By what factor would that KV cache grow if Llama-3-70B used MHA (one KV head per query head)?",
                 static_cast<double>(kv_cache_bytes(llama70b_mha, 8192, 1, DType::BF16)) / kv70b, 0.01});
  key.push_back({"02.kv_llama70b_mqa_factor", 2,
                 "And by what factor would it shrink with MQA (one KV head shared by all query heads)?",
                 kv70b / static_cast<double>(kv_cache_bytes(llama70b_mqa, 8192, 1, DType::BF16)), 0.01});
  const double token_bytes = static_cast<double>(kv_cache_bytes(llama8b, 1, 1, DType::BF16));
  key.push_back({"02.kv_llama8b_token_kib", 2,
                 "KV bytes of one token of Llama-3-8B (32 layers, 8 KV heads of width 128) in bf16, in KiB (1,024 "
                 "bytes).",
                 token_bytes / 1024, 0.01});
  key.push_back({"02.llama8b_tokens_in_40gb", 2,
                 "How many whole tokens of Llama-3-8B bf16 KV fit in 40 GB (4 x 10^10 bytes)?",
                 std::floor(40 * kGB / token_bytes), 0});
  key.push_back({"02.kv_projection_factor_at_428", 2,
                 "At context L = 428, how many times the K and V projection FLOPs of a step with a cache (one new "
                 "token) does a step without a cache (all 428 tokens again) do?",
                 kv_projection_flops(llama8b, 428) / kv_projection_flops(llama8b, 1), 0.01});
}

/// Lab 03: intensity, the ridge, and the roofline's bounds.
void lab03(std::vector<Question>& key) {
  const ModelConfig llama8b = preset("llama-3-8b");
  const Hardware& h100 = gpu("H100 SXM");
  const Hardware& h200 = gpu("H200 SXM");
  const auto projection = [](std::int64_t m) { return gemm_work(m, 4096, 4096, DType::F16, DType::F16); };
  key.push_back({"03.intensity_gemm_256", 3,
                 "Arithmetic intensity, in FLOP/byte, of out[256, 4096] = x[256, 4096] W[4096, 4096]^T with "
                 "weights and activations in fp16 (W and x read once, out written once).",
                 projection(256).intensity(), 0.01});
  key.push_back({"03.decode_batch_at_h100_ridge", 3,
                 "The smallest batch M at which that fp16 4096 x 4096 projection reaches the H100 SXM's ridge point "
                 "(989 TFLOP/s over 3,350 GB/s).",
                 batch_at_ridge(4096, h100.ridge()), 0});
  key.push_back({"03.llama8b_h200_decode_tokens_per_s", 3,
                 "The roofline's upper bound on batch-1 decode tokens/s of Llama-3-8B with bf16 weights on an H200 "
                 "SXM (4,800 GB/s): every weight is read once per token.",
                 h200.bandwidth_gbs * kGB / static_cast<double>(decode_weight_bytes(llama8b, DType::BF16)), 0.02});
  key.push_back({"03.batch1_bound_on_h100", 3,
                 "At batch 1, is that projection memory-bound or compute-bound on the H100 SXM? Answer 1 for memory, "
                 "2 for compute.",
                 bound_of(projection(1).intensity(), h100.ridge()) == Bound::Memory ? 1.0 : 2.0, 0});
  key.push_back({"03.batch32_attainable_tflops", 3,
                 "The roofline's attainable TFLOP/s of that projection at batch 32 on the H100 SXM.",
                 attainable(projection(32).intensity(), h100.matrix_tflops * 1e12, h100.bandwidth_gbs * kGB) / 1e12,
                 0.01});
}

/// Lab 04: blocks, the article's fragmentation example, and when a waiting request starts.
void lab04(std::vector<Question>& key) {
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
  // The KV cache article's example: A, B and C in room for 6,200 tokens; B finishes; D arrives.
  ContiguousAllocator line(6200);
  line.allocate(100);
  const std::optional<long> b = line.allocate(1000);
  line.allocate(5000);
  check(b.has_value(), "answer key: the article's example has room for B");
  line.free(*b);
  key.push_back({"04.largest_run_after_b", 4,
                 "The KV cache article's example: requests A = 100, B = 1,000 and C = 5,000 tokens are placed one "
                 "after another, first fit, in room for 6,200 tokens, then B finishes. How many tokens long is the "
                 "longest free run?",
                 static_cast<double>(line.largest_free_run()), 0});
  key.push_back({"04.blocks_for_d_16", 4, "Then D needs 1,050 tokens. How many blocks does D take at block size 16?",
                 static_cast<double>(KVCacheManager(6200 / 16, 16).num_blocks_for(1050)), 0});
  key.push_back({"04.static_c_starts_at_step", 4,
                 "Room for two requests (max_num_seqs = 2): A and B, with 4-token prompts, generate 2 and 6 tokens; "
                 "C waits. The first step computes both prompts and samples each one's first token. In which step "
                 "is C first scheduled under static batching?",
                 step_c_starts(SchedulingPolicy::STATIC, 2, 6), 0});
  key.push_back({"04.continuous_c_starts_at_step", 4, "And under continuous batching?",
                 step_c_starts(SchedulingPolicy::CONTINUOUS, 2, 6), 0});
}

/// Lab 05: the bytes each attention version moves, counted and in the paper's orders.
void lab05(std::vector<Question>& key) {
  const AttentionProblem head = one_head_prefill(4096, 64);
  constexpr double kAnyFastMemory = 1 << 20;  // only v2's count depends on M
  const AttentionTraffic standard = attention_traffic(AttentionVersion::STANDARD, head, kAnyFastMemory),
                         flash = attention_traffic(AttentionVersion::FLASH, head, kAnyFastMemory);
  key.push_back({"05.standard_over_flash_bytes", 5,
                 "One head of width 64, a 4,096-token causal prefill in f32: how many times more bytes does v1 "
                 "(standard) move than v3 (flash, query tiles of 256)?",
                 standard.bytes / flash.bytes, 0.01});
  key.push_back({"05.flash_over_standard_flops", 5, "On that prefill, how many times v1's useful FLOPs does v3 do?",
                 flash.flops / standard.flops, 0.01});
  constexpr double kPaperSram = 100e3;  // the paper's M ~ 100 KB of SRAM per streaming multiprocessor
  key.push_back({"05.paper_standard_over_flash", 5,
                 "The FlashAttention paper's orders with constant 1: standard N d + N^2, flash N^2 d^2 / M (in "
                 "floats). Their ratio for N = 4,096, d = 64, M = 100 KB of f32 (25,000 floats)?",
                 paper_standard_bytes(head) / paper_flash_bytes(head, kPaperSram), 0.01});
  const AttentionProblem wide = one_head_prefill(4096, 128);
  constexpr double kSmallSram = 16 * 1024;  // 4,096 floats: less than d^2 = 16,384
  key.push_back({"05.fewer_bytes_d128_m16k", 5,
                 "In the paper's orders, at L = N = 4,096 with head width d = 128 and M = 16 KiB of fast memory "
                 "(4,096 floats), which moves fewer bytes? Answer 1 for standard, 3 for flash.",
                 paper_standard_bytes(wide) < paper_flash_bytes(wide, kSmallSram) ? 1.0 : 3.0, 0});
  const AttentionProblem decode{.shape = {.num_heads = 32, .num_kv_heads = 8, .head_dim = 128},
                                .num_new_tokens = 1,
                                .num_computed_tokens = 4095,
                                .num_splits = 8};
  key.push_back({"05.decode_flash_over_split_k_bytes", 5,
                 "Decode of one token after 4,095 cached ones in one Llama-3-8B layer (32 query heads, 8 KV heads of "
                 "width 128, f32): how many times more bytes does v3 (flash, each query head reads K and V) move than "
                 "v4 (split-K in 8 pieces, each KV head read once for its group)?",
                 attention_traffic(AttentionVersion::FLASH, decode, kAnyFastMemory).bytes /
                     attention_traffic(AttentionVersion::SPLIT_K, decode, kAnyFastMemory).bytes,
                 0.01});
}

/// Lab 06: chunks under a budget, with and without decodes and a threshold.
void lab06(std::vector<Question>& key) {
  key.push_back({"06.prefill_steps_alone", 6,
                 "With chunked prefill and a budget of 512 tokens (no threshold), in how many steps is a "
                 "3,000-token prompt computed when it runs alone?",
                 static_cast<double>(prefill_chunks(3000, 512, 0).size()), 0});
  key.push_back({"06.prefill_steps_beside_16", 6, "And beside 16 running decodes, which are scheduled first?",
                 static_cast<double>(prefill_chunks(3000, 512, 16).size()), 0});
  const std::vector<int> small_budget = prefill_chunks(1000, 256, 0);
  key.push_back({"06.chunks_1000_at_256", 6,
                 "With a budget of 256 tokens, into how many chunks is a 1,000-token prompt split when it runs alone?",
                 static_cast<double>(small_budget.size()), 0});
  key.push_back({"06.last_chunk_1000_at_256", 6, "How many tokens does its last chunk hold?",
                 static_cast<double>(small_budget.back()), 0});
  key.push_back({"06.prefill_steps_threshold_128", 6,
                 "With a budget of 512 and long_prefill_token_threshold = 128, in how many steps is the 3,000-token "
                 "prompt computed alone?",
                 static_cast<double>(prefill_chunks(3000, 512, 0, 128).size()), 0});
}

/// Lab 07: what a transfer moves, in how many descriptors, and what a link carries.
void lab07(std::vector<Question>& key) {
  const ModelConfig llama8b = preset("llama-3-8b");
  const double kv8b = static_cast<double>(kv_cache_bytes(llama8b, 2048, 1, DType::BF16));
  const disagg::Link& hdr = disagg::find_link("ib-hdr", "answer key");
  key.push_back({"07.kv_llama8b_2048_mb", 7,
                 "KV cache of a 2,048-token Llama-3-8B request in bf16, in MB (10^6 bytes).", kv8b / kMB, 0.01});
  key.push_back({"07.kv_llama8b_2048_ib_hdr_ms", 7,
                 "Time to send it over one InfiniBand HDR link (25 GB/s, no overhead), in ms.",
                 kv8b / hdr.bytes_per_second * 1e3, 0.02});
  key.push_back({"07.hdr_requests_per_s", 7,
                 "How many such requests per second can one HDR link carry from prefill to decode workers?",
                 hdr.bytes_per_second / kv8b, 0.02});
  const disagg::KVLayout layout{.num_layers = llama8b.num_hidden_layers,
                                .num_blocks = 16,
                                .block_size = 16,
                                .kv_dim = llama8b.kv_dim(),
                                .dtype_bytes = 2};
  const std::vector<std::int32_t> src{4, 5, 6, 9}, dst{0, 1, 2, 3};
  const disagg::TransferPlan plan = plan_transfer(layout, src, layout, dst, 60, 0, layout.num_layers);
  key.push_back({"07.descriptors_before_merging", 7,
                 "A 60-token Llama-3-8B request (32 layers) holds blocks [4, 5, 6, 9] of 16 tokens on the prefill "
                 "worker and gets blocks [0, 1, 2, 3] on the decode worker. How many transfer descriptors (one per "
                 "layer, K or V, and block) does the plan start from?",
                 static_cast<double>(plan.num_uncoalesced), 0});
  key.push_back({"07.descriptors_after_merging", 7,
                 "How many are left once runs of consecutive blocks on both sides are merged?",
                 static_cast<double>(plan.descriptors.size()), 0});
}

}  // namespace

std::vector<Question> answer_key() {
  std::vector<Question> key;
  for (const auto& lab : {lab01, lab02, lab03, lab04, lab05, lab06, lab07}) lab(key);
  return key;
}

}  // namespace servelab::lab
