// SPDX-License-Identifier: MIT
/**
 * @file claims.cpp
 * @brief Lab 02's claims, each decided on this run's tables, and the verdict (lab02.h).
 * @see labs/02_kv_cache/README.md
 */
#include <cmath>
#include <string>
#include <variant>

#include "kv/kv_cache.h"
#include "lab02.h"

namespace servelab::lab02 {

using namespace servelab::lab;

void check_claims(Report& report, const SpeedRuns& speed_runs, const Table& allocated, int cases,
                  const Table& gpu_memory, const std::vector<double>& steps_off, const std::vector<double>& steps_on,
                  std::size_t lengths, int n) {
  const Table& speed = speed_runs.table;
  const std::string& hash = speed_runs.hash;
  report.claim({.id = "02.same_tokens",
                .source = "this lab",
                .statement = "the KV cache changes no token",
                .held = true,  // the lab stopped above had any run differed
                .evidence = "every run of " + std::to_string(lengths) +
                            " lengths gave the same tokens on both paths (last hash " + hash + ")"});
  long unequal = 0;
  for (long r = 0; r < static_cast<long>(allocated.rows.size()); ++r)
    unequal += std::get<std::string>(allocated.cell(r, "equal")) != "yes";
  report.claim(
      {.id = "02.kv_bytes_formula",
       .source = "the KV cache article, §2-6",
       .statement = "KV bytes = 2 × layers × kv_heads × head_dim × L × B × bytes",
       .held = unequal == 0,
       .evidence = "the formula equals the bytes the engine's cache allocated in " + std::to_string(cases - unequal) +
                   " of " + std::to_string(cases) + " cases (MHA, GQA, MQA; tiny to qwen2.5-0.5b)",
       .cause = unequal == 0 ? "" : "the cache allocates by kv_bytes_per_token(), which differs from the formula"});
  const double kv8 = static_cast<double>(kv_cache_bytes(preset("llama-3-8b"), 2048, 1, DType::BF16)),
               kv70 = static_cast<double>(kv_cache_bytes(preset("llama-3-70b"), 2048, 1, DType::BF16));
  const bool near = std::abs(kv8 / 270e6 - 1) < 0.02 && std::abs(kv70 / 670e6 - 1) < 0.02;
  report.claim({.id = "02.llama_kv_sizes",
                .source = "the prefill/decode article (disaggregation)",
                .statement = "one 2,048-token request holds about 270 MB of KV on Llama-3-8B and 670 MB on 70B (bf16)",
                .held = near,
                .evidence = fixed(kv8 / 1e6, 1) + " MB and " + fixed(kv70 / 1e6, 1) + " MB by the formula",
                .cause = near ? "" : "the presets' shapes differ from the published models'"});
  const long r8 = gpu_memory.row_where("model", std::string("llama-3-8b")),
             r70 = gpu_memory.row_where("model", std::string("llama-3-70b"));
  const auto fits = [&](long row) { return gpu_memory.cell(row, "requests of 8,192"); };
  const bool budget = std::get<long long>(fits(r70)) == 0 && std::get<long long>(fits(r8)) > 0;
  report.claim({.id = "02.gpu_memory",
                .source = "the KV cache article, §2-6",
                .statement = "GPU memory holds weights + KV + activations + runtime, so the parameter count alone "
                             "does not say how many requests fit",
                .held = budget,
                .evidence = "on 80 GB, llama-3-8b's " + fixed(gpu_memory.number(r8, "weights [GB]"), 1) +
                            " GB of weights leave " + fixed(gpu_memory.number(r8, "left for KV [GB]"), 1) +
                            " GB for KV: " + std::to_string(std::get<long long>(fits(r8))) +
                            " requests of 8,192 tokens; llama-3-70b's " +
                            fixed(gpu_memory.number(r70, "weights [GB]"), 1) + " GB leave none",
                .cause = budget ? "" : "the presets' sizes differ from the published models'"});
  const double speedup = speed.number(-1, "speedup");
  // Decode steps only (step 1 is the prefill): how each path's step time moves as the context grows.
  const auto decode_ms = [](const std::vector<double>& seconds) {
    std::vector<double> ms;
    for (std::size_t s = 1; s < seconds.size(); ++s) ms.push_back(seconds[s] * 1e3);
    return step_growth(ms);
  };
  const StepGrowth off = decode_ms(steps_off), on = decode_ms(steps_on);
  const std::string noise = "neighbouring steps differ by a median " + fixed(100 * off.noise, 0) +
                            "% (recompute) and " + fixed(100 * on.noise, 0) +
                            "% (cache): this run's timing noise; rerun on a quiet machine";
  report.claim({.id = "02.cache_faster",
                .source = "the KV cache article, §2-5",
                .statement = "generation is faster with the KV cache",
                .held = speedup > 1,
                .evidence = fixed(speedup, 2) + "x for " + std::to_string(n) + " new tokens (" +
                            fixed(speed.number(-1, "no cache [s]"), 3) + " s vs " +
                            fixed(speed.number(-1, "KV cache [s]"), 3) + " s)",
                .cause = speedup > 1 ? "" : noise});
  const bool flatter = off.ratio() > 1 && on.ratio() < off.ratio();
  report.claim({.id = "02.cached_step_flat",
                .source = "the KV cache article, §2-4",
                .statement = "without the cache a decode step's time grows with the context; with it, it grows "
                             "less (about flat)",
                .held = flatter,
                .evidence = "from the first third of the decode steps to the last: cache " + fixed(on.ratio(), 2) +
                            "x (" + fixed(on.first, 2) + " to " + fixed(on.last, 2) + " ms), recompute " +
                            fixed(off.ratio(), 2) + "x (" + fixed(off.first, 2) + " to " + fixed(off.last, 2) + " ms)",
                .cause = flatter ? "" : noise});

  report.verdict("the KV cache gives the same tokens and is " + fixed(speedup, 1) + "x faster for " +
                 std::to_string(n) + " new tokens; the memory formula equals the allocated bytes in " +
                 std::to_string(cases - unequal) + " of " + std::to_string(cases) + " cases.");
}

}  // namespace servelab::lab02
