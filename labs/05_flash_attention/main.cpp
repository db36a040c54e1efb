// SPDX-License-Identifier: MIT
/**
 * @file main.cpp
 * @brief Lab 05 — FlashAttention: the same attention output from five
 *        versions, and the bytes each one moves through main memory.
 *
 * v0 (the specification) is plain loops; v1 writes S and P out in full, on
 * the whole matrix or (the equal-work baseline) on flash's causal tiles; v2
 * scores a block of queries at a time; v3 is flash attention (tiles and the
 * online softmax); v4 splits a long decode's keys across threads; v5 runs v3
 * and v4 through lab 04's block table. Every version is checked against v0
 * before it is timed. Then lab 04's serving run is repeated with flash on
 * and must give the same greedy tokens in deterministic mode, and the
 * verdict lists the chapter's claims as checks on this run (claims.cpp).
 * @see labs/05_flash_attention/README.md
 */
#include <algorithm>
#include <iostream>
#include <map>

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

using namespace servelab::lab05;

namespace {

// 5. Lab 04's serving run with flash on: the same greedy tokens in deterministic mode, so flash changed
//    what attention costs and nothing it computes.
ServingResult serving_check(Report& report, const LabOptions& o, const std::string& serving_preset, int num_requests) {
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
  Table serving{.name = "serving",
                .title = "Lab 04's serving run (continuous batching, paged KV, deterministic) with each attention, " +
                         std::to_string(workload.size()) + " requests on " + mc.name,
                .columns = {"attention", Column{"output tok/s", 1}, Column{"TTFT p50 [ms]", 1},
                            Column{"TPOT p50 [ms]", 2}, "tokens hash"}};
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
  serving.note = hashes[0] == hashes[1] ? "Same tokens hash: flash attention changed no greedy token."
                                        : "The tokens hashes differ: flash attention changed a greedy token.";
  return {.table = serving, .blocked_hash = hashes[0], .flash_hash = hashes[1]};
}

/// A log-y line plot of every column of @p table after its first, against the first.
PlotSpec log_plot(const Table& table, std::string title, std::string xlabel, std::string ylabel) {
  return {.name = table.name,
          .data = columns_of(table),
          .labels = {std::move(title), std::move(xlabel), std::move(ylabel)},
          .logy = true};
}

/// The lab's own flags, beside the common ones; a vector left empty is chosen after parsing (see main).
struct Flags {
  std::vector<int> lengths = {256, 512, 1024, 2048, 4096, 8192};
  std::vector<int> contexts = {1024, 2048, 4096, 8192, 16384, 32768};
  std::vector<int> crossover_lengths;  // empty: L*/4, L*/2, L*, 2·L* from this machine's L2 (none in --quick)
  int shapes_len = 2048, max_v0_len = 2048, num_requests = 16;
  std::string serving_preset = "small";
};

/// Registers the common flags into @p o and the lab's into @p f; returns the lab's by name so --quick can tell
/// which were given.
std::map<std::string, CLI::Option*> add_flags(CLI::App& app, LabOptions& o, Flags& f) {
  add_serving_options(app, o, "qwen2.5-0.5b");
  return {
      {"lengths", app.add_option("--lengths", f.lengths, "prefill lengths L of the main table")->capture_default_str()},
      {"contexts", app.add_option("--contexts", f.contexts, "decode contexts")->capture_default_str()},
      {"crossover",
       app.add_option("--crossover-lengths", f.crossover_lengths,
                      "L of the blocked-against-flash table on one head (default: L*/4 .. 2·L* from this CPU's L2; "
                      "none in --quick)")},
      {"shapes", app.add_option("--shapes-length", f.shapes_len, "L of the head-shape table")->capture_default_str()},
      {"v0", app.add_option("--max-v0-length", f.max_v0_len,
                            "longest L at which v0 (scalar loops) is timed; beyond it v0 checks the last 256 rows "
                            "only")
                 ->capture_default_str()},
      {"requests",
       app.add_option("--num-requests", f.num_requests, "requests of the serving check")->capture_default_str()},
      {"preset",
       app.add_option("--serving-preset", f.serving_preset, "model of the serving check")->capture_default_str()}};
}

}  // namespace

int main(int argc, char** argv) {
  LabOptions o;
  Flags f;
  CLI::App app{"Lab 05: FlashAttention, naive to flash to split-K decode", "lab_05_flash_attention"};
  const auto given = add_flags(app, o, f);

  return run_lab(app, argc, argv, [&] {
    const double M = cpu_fast_memory_bytes();
    const int L_star = blocked_crossover_length(M);
    if (o.quick) {
      if (given.at("lengths")->count() == 0) f.lengths = {256, 1024};
      if (given.at("contexts")->count() == 0) f.contexts = {1024, 4096};
      if (given.at("shapes")->count() == 0) f.shapes_len = 256;
      if (given.at("requests")->count() == 0) f.num_requests = 4;
      if (given.at("v0")->count() == 0) f.max_v0_len = 256;  // past it v0 checks the last 256 rows, untimed
      o.repeats = std::min(o.repeats, 1);
    } else if (given.at("crossover")->count() == 0) {
      f.crossover_lengths = {L_star / 4, L_star / 2, L_star, 2 * L_star};
    }
    for (int L : f.lengths) check(L >= 1, "--lengths must be >= 1, got ", L);
    for (int c : f.contexts) check(c >= 1, "--contexts must be >= 1, got ", c);
    for (int L : f.crossover_lengths) check(L >= 1, "--crossover-lengths must be >= 1, got ", L);
    check(f.shapes_len >= 1, "--shapes-length must be >= 1, got ", f.shapes_len);
    check(f.num_requests >= 1, "--num-requests must be >= 1, got ", f.num_requests);
    check(o.repeats >= 1, "--repeats must be >= 1, got ", o.repeats);
    check(o.threads >= 0, "--threads must be >= 0 (0 = all cores), got ", o.threads);
    parse_attention_kind(o.attention,
                         "--attention");  // the serving check runs both kinds; refuse a typo before printing
    const ModelConfig c = preset(o.preset);
    const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, c.head_dim};
    ThreadPool pool(o.threads), one(1);

    Report report("05_flash_attention", o.out);
    report.setting("head shape",
                   c.name + ": " + std::to_string(shape.num_heads) + " query heads, " +
                       std::to_string(shape.num_kv_heads) + " KV heads of " + std::to_string(shape.head_dim) +
                       " (one layer's attention, f32, random inputs in [-1, 1], seed " + std::to_string(o.seed) + ")");
    const auto machine = Report::machine_metadata();
    report.setting(
        "device", "cpu, " + machine["cpu"].get<std::string>() + ", " + std::to_string(pool.num_threads()) + " threads");
    report.setting("fast memory", "M = " + human_bytes(M) +
                                      " (L2 per core, from sysfs), the M of the byte counts and the paper's forms");
    report.setting("crossover", "L* = M / (64 × 4 B) = " + std::to_string(L_star) +
                                    ": from there blocked's 64 × L slab of S no longer fits in M");
    report.setting("tiles", "v1 causal and v3 query tile " + std::to_string(kFlashQueryTile) + "; v2 query block " +
                                std::to_string(kBlockedQueryBlock) + "; v3 key tile " + std::to_string(kFlashKeyTile) +
                                "; v5 KV blocks of 16 tokens, shuffled");
    report.setting("validation",
                   "every version against v0 before timing, |v - v0| <= 1e-4 + 1e-4·|v0|; v0 itself timed up to L = " +
                       std::to_string(f.max_v0_len));
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
    const Prefill pre = prefill_tables(bench, f.lengths, f.max_v0_len, failed);
    report.add_table(pre.table);
    report.add_table(pre.time, false);
    report.add_table(pre.bytes, false);
    report.add_plot(log_plot(pre.time, "Lab 05: causal prefill time against L", "L [tokens]", "time [ms]"));
    report.add_plot(
        log_plot(pre.bytes, "Lab 05: bytes through main memory against L (counted)", "L [tokens]", "bytes [MiB]"));

    const Crossover cross = crossover_table(bench, f.crossover_lengths, failed);
    if (!cross.points.empty()) report.add_table(cross.table);
    report.add_table(head_shapes(bench, f.shapes_len));
    const Decode dec = decode_tables(bench, f.contexts, failed);
    report.add_table(dec.table);
    report.add_table(dec.time, false);
    report.add_plot(
        log_plot(dec.time, "Lab 05: decode attention time against the context", "context [tokens]", "time [us]"));

    const ServingResult serving = serving_check(report, o, f.serving_preset, f.num_requests);
    report.add_table(serving.table);

    if (!failed.empty())
      std::cerr << "lab_05: " << failed.size()
                << " versions failed validation and were left out, first: " << failed.front() << "\n";
    std::cout << "\n### Claims\n\n";
    report.verdict(check_claims(report, bench, pre, cross, dec, serving, failed));
    report.save();
  });
}
