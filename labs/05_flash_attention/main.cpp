// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 05 — FlashAttention: the same attention output from five
 *        versions, and the bytes each one moves through main memory.
 *
 * v0 (the specification) is plain loops; v1 writes S and P out in full; v2
 * scores a block of queries at a time; v3 is flash attention (tiles and the
 * online softmax); v4 splits a long decode's keys across threads; v5 runs v3
 * and v4 through lab 04's block table. Every version is checked against v0
 * before it is timed. Then lab 04's serving run is repeated with flash on
 * and must give the same greedy tokens in deterministic mode.
 * @see labs/05_flash_attention/README.md
 */
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_traffic.h"
#include "lab.h"
#include "lab05.h"
#include "serve/engine.h"
#include "serve/ladder.h"
#include "serve/metrics.h"
#include "workload/workload.h"
#include "serving.h"

using namespace servelab;
using namespace servelab::lab;
using namespace servelab::lab05;

namespace {

// 4. Lab 04's serving run with flash on: the same greedy tokens in deterministic mode, so flash changed
//    what attention costs and nothing it computes.
Table serving_check(Report& report, const LabOptions& o, const std::string& serving_preset, int num_requests) {
  LabOptions so = o;
  so.preset = serving_preset;
  LabConfig base;
  base.model = model_options(so, /*deterministic=*/true);
  auto model = load_model(so, base.model);
  const ModelConfig& mc = model->config();
  WorkloadSpec spec;
  spec.num_requests = num_requests;
  spec.prompt_len = parse_length_dist(o.quick ? "uniform:8:32" : "uniform:64:512", LengthRole::prompt, "prompt");
  spec.output_len = parse_length_dist(o.quick ? "uniform:8:16" : "uniform:16:64", LengthRole::output, "output");
  spec.seed = o.seed;
  const auto workload = make_workload(spec, mc.vocab_size);
  Table serving{
      .name = "serving",
      .title = "Lab 04's serving run (continuous batching, paged KV, deterministic) with each attention, " +
               std::to_string(workload.size()) + " requests on " + mc.name,
      .columns = {{"attention"}, {"output tok/s", 1}, {"TTFT p50 [ms]", 1}, {"TPOT p50 [ms]", 2}, {"tokens hash"}}};
  base.engine.scheduler.max_num_seqs = 16;
  base.engine.scheduler.max_num_batched_tokens = 4096;
  base.engine.kv_cache_memory = static_cast<std::size_t>(16) * 600 * kv_cache_bytes_for(mc, 1, 1);
  // Lab 04's configuration, then lab 05's: the same base with flash attention on.
  const auto [lab4, lab5] = compare_rungs(report, 5, base, "serving, lab 04", "serving, flash");
  std::vector<std::string> hashes;
  for (const LabConfig* config : {&lab4, &lab5}) {
    use_config(*model, *config);
    Engine engine(*model, config->engine);
    const ServedRun run = serve_workload(engine, workload);  // every request there at once
    const ServingMetrics m = summarize_requests(run.requests);
    hashes.push_back(run.tokens_hash());
    const bool flash = config->model.attention == AttentionKind::FLASH;
    serving.add_row({std::string(flash ? "flash (lab 05)" : "blocked (lab 04; naive in deterministic mode)"),
                     m.output_tokens_per_second, 1e3 * m.ttft.median, 1e3 * m.tpot.median, hashes.back()});
  }
  check(hashes[0] == hashes[1], "lab 05: flash attention changed the greedy tokens of lab 04's serving run (",
        hashes[0], " vs ", hashes[1], ")");
  serving.note = "Same tokens hash: flash attention changed no greedy token.";
  return serving;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lab 05: FlashAttention, naive to flash to split-K decode", "lab_05_flash_attention"};
  LabOptions o;
  add_common_options(app, o, "qwen2.5-0.5b");
  std::vector<int> lengths = {256, 512, 1024, 2048, 4096, 8192}, contexts = {1024, 2048, 4096, 8192, 16384, 32768};
  int shapes_len = 2048, max_v0_len = 2048, num_requests = 16;
  std::string serving_preset = "small";
  auto* l_opt = app.add_option("--lengths", lengths, "prefill lengths L of the main table")->capture_default_str();
  auto* c_opt = app.add_option("--contexts", contexts, "decode contexts")->capture_default_str();
  auto* s_opt = app.add_option("--shapes-length", shapes_len, "L of the head-shape table")->capture_default_str();
  app.add_option("--max-v0-length", max_v0_len,
                 "longest L at which v0 (scalar loops) is timed; beyond it v0 checks the last 256 rows only")
      ->capture_default_str();
  auto* n_opt = app.add_option("--num-requests", num_requests, "requests of the serving check")->capture_default_str();
  app.add_option("--serving-preset", serving_preset, "model of the serving check")->capture_default_str();

  return run_lab(app, argc, argv, [&] {
    if (o.quick) {
      if (l_opt->count() == 0) lengths = {256, 1024};
      if (c_opt->count() == 0) contexts = {1024, 4096};
      if (s_opt->count() == 0) shapes_len = 256;
      if (n_opt->count() == 0) num_requests = 4;
      o.repeats = std::min(o.repeats, 1);
    }
    for (int L : lengths) check(L >= 1, "--lengths must be >= 1, got ", L);
    for (int c : contexts) check(c >= 1, "--contexts must be >= 1, got ", c);
    check(shapes_len >= 1, "--shapes-length must be >= 1, got ", shapes_len);
    check(num_requests >= 1, "--num-requests must be >= 1, got ", num_requests);
    check(o.repeats >= 1, "--repeats must be >= 1, got ", o.repeats);
    check(o.threads >= 0, "--threads must be >= 0 (0 = all cores), got ", o.threads);
    parse_attention_kind(o.attention,
                         "--attention");  // the serving check runs both kinds; refuse a typo before printing
    const ModelConfig c = preset(o.preset);
    const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
    ThreadPool pool(o.threads), one(1);
    const double M = cpu_fast_memory_bytes();

    Report report("05_flash_attention", o.out);
    report.setting("head shape",
                   c.name + ": " + std::to_string(shape.num_heads) + " query heads, " +
                       std::to_string(shape.num_kv_heads) + " KV heads of " + std::to_string(shape.head_dim) +
                       " (one layer's attention, f32, random inputs in [-1, 1], seed " + std::to_string(o.seed) + ")");
    const auto machine = Report::machine_metadata();
    report.setting(
        "device", "cpu, " + machine["cpu"].get<std::string>() + ", " + std::to_string(pool.num_threads()) + " threads");
    report.setting("fast memory",
                   "M = " + human_bytes(M) + " (L2 per core), the M of the byte counts and the paper's forms");
    report.setting("tiles", "v2 query block 64; v3 query tile " + std::to_string(kFlashQueryTile) + " × key tile " +
                                std::to_string(kFlashKeyTile) + "; v5 KV blocks of 16 tokens, shuffled");
    report.setting("validation",
                   "every version against v0 before timing, |v - v0| <= 1e-4 + 1e-4·|v0|; v0 itself timed up to L = " +
                       std::to_string(max_v0_len));
    report.setting("timing", std::to_string(o.warmup) + " warm-up + " + std::to_string(o.repeats) +
                                 " timed runs per point (decode: 10× as many), median shown");
    report.print_settings("Lab 05 — FlashAttention");

    const Bench bench{.options = o,
                      .shape = shape,
                      .model_name = c.name,
                      .fast = {&pool, false},
                      .alone = {&one, false},
                      .fast_memory = M};
    std::vector<std::string> failed;  // versions that failed validation, left out of the tables
    const Prefill pre = prefill_tables(bench, lengths, max_v0_len, failed);
    report.add_table(pre.table);
    report.add_table(pre.time, false);
    report.add_table(pre.bytes, false);
    report.add_plot({.name = "prefill_time",
                     .table = "prefill_time",
                     .x = "L",
                     .y = pre.time.headers(1),
                     .title = "Lab 05: causal prefill time against L",
                     .xlabel = "L [tokens]",
                     .ylabel = "time [ms]",
                     .logy = true});
    report.add_plot({.name = "prefill_bytes",
                     .table = "prefill_bytes",
                     .x = "L",
                     .y = pre.bytes.headers(1),
                     .title = "Lab 05: bytes through main memory against L (counted)",
                     .xlabel = "L [tokens]",
                     .ylabel = "bytes [MiB]",
                     .logy = true});

    report.add_table(head_shapes(bench, shapes_len));
    const Decode dec = decode_tables(bench, contexts, failed);
    report.add_table(dec.table);
    report.add_table(dec.time, false);
    report.add_plot({.name = "decode_time",
                     .table = "decode_time",
                     .x = "context",
                     .y = dec.time.headers(1),
                     .title = "Lab 05: decode attention time against the context",
                     .xlabel = "context [tokens]",
                     .ylabel = "time [us]",
                     .logy = true});

    report.add_table(serving_check(report, o, serving_preset, num_requests));

    if (!failed.empty())
      std::cerr << "lab_05: " << failed.size()
                << " versions failed validation and were left out, first: " << failed.front() << "\n";
    std::ostringstream v;
    v << std::fixed << std::setprecision(2);
    if (pre.v3_4096_ms > 0 && pre.v1_4096_ms > 0)
      v << "at L = 4,096 flash (v3) takes " << pre.v3_4096_ms / pre.v1_4096_ms
        << "x the time of standard attention (v1) and " << pre.v3_4096_ms / pre.v2_4096_ms << "x blocked (v2), moving "
        << std::setprecision(1) << pre.bytes_ratio_4096 << "x fewer counted bytes than v1; ";
    v << std::setprecision(2) << "split-K decode at " << contexts.back() << " tokens runs " << dec.split_gain_longest
      << "x one pass on one thread; "
      << (failed.empty() ? "every version matched v0" : std::to_string(failed.size()) + " versions failed validation")
      << " and lab 04's tokens are unchanged with flash on.";
    report.verdict(v.str());
    report.save();
  });
}
