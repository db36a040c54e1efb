// SPDX-License-Identifier: MIT
/**
 * @file claims.cpp
 * @brief Lab 03's claims, each decided on this run's tables, and the verdict (lab03.h).
 * @see labs/03_roofline/README.md
 */
#include <cmath>
#include <string>

#include "core/error.h"
#include "lab03.h"

namespace servelab::lab03 {

using namespace servelab::lab;

void check_claims(Report& report, const Table& article, const Hardware& a100, const Table& compute_use,
                  const Table& decode_bytes, const MeasuredSteps& steps, const MachineRoofs& roofs,
                  const std::vector<int>& prefill_lens, const std::vector<int>& decode_batches,
                  const QuantizationLesson& quantization, const std::string& busy) {
  const double fmaN = roofs.fmaN, readN = roofs.readN, ridge_here = fmaN / readN;
  const auto article_intensity = [&](long row) { return article.number(row, "intensity [FLOP/B]"); };
  const double expected[] = {410, 680, 1, 32};  // the prefill/decode article's table
  bool as_article = true;
  std::string quoted;
  for (long r = 0; r < 4; ++r) {
    as_article = as_article && std::abs(article_intensity(r) / expected[r] - 1) < 0.05;
    quoted += (r ? ", " : "") + fixed(article_intensity(r), 1);
  }
  report.claim({.id = "03.article_intensities",
                .source = "the prefill/decode article (arithmetic intensity table)",
                .statement = "a 4096 projection in fp16 runs at ~410 and ~680 FLOP/byte in prefill (512, 1024 "
                             "tokens) and ~1 and ~32 in decode (batch 1, 32)",
                .held = as_article,
                .evidence = quoted + " FLOP/byte by gemm_work()",
                .cause = as_article ? "" : "the byte model of perf/work.h counts the activations differently"});
  const bool a100_split =
      article_intensity(1) > a100.ridge() && article_intensity(0) > a100.ridge() && article_intensity(3) < a100.ridge();
  report.claim({.id = "03.a100_ridge",
                .source = "the prefill/decode article (ridge point)",
                .statement = "on an A100 (ridge ~153 FLOP/byte) prefill is compute-bound and decode, even at "
                             "batch 32, memory-bound",
                .held = a100_split,
                .evidence = "ridge " + fixed(a100.ridge(), 1) + "; prefill " + fixed(article_intensity(0), 0) +
                            " and " + fixed(article_intensity(1), 0) + ", decode batch 32 " +
                            fixed(article_intensity(3), 1) + " (" +
                            fixed(100 * article_intensity(3) / a100.ridge(), 0) + "% of the ridge)",
                .cause = a100_split ? "" : "the datasheet entry's ridge differs from the article's"});
  const auto use = [&](long row, const std::string& gpu_name) {
    return compute_use.number(row, gpu_name + " compute use [%]");
  };
  bool use_split = true;
  std::string use_evidence;
  for (const std::string g : {"A100 80GB SXM", "H100 SXM"}) {
    use_split = use_split && use(0, g) > 90 && use(1, g) > 90 && use(2, g) < 20 && use(3, g) < 20;
    use_evidence += (use_evidence.empty() ? "" : "; ") + g + ": prefill " + fixed(use(0, g), 0) + "%, decode " +
                    fixed(use(2, g), 1) + "% (batch 1) and " + fixed(use(3, g), 1) + "% (batch 32)";
  }
  report.claim({.id = "03.compute_use",
                .source = "the prefill/decode article (SM utilisation)",
                .statement = "compute use is above 90% in prefill and below 20% in decode",
                .held = use_split,
                .evidence = use_evidence + " (simulated, roofline, llama-3-8b)",
                .cause = use_split ? "" : "at these shapes the roofline's decode intensity passes 20% of the ridge"});
  const auto bytes_row = [&](long long batch, long long tokens) {
    for (long r = 0; r < static_cast<long>(decode_bytes.rows.size()); ++r)
      if (decode_bytes.number(r, "batch") == batch && decode_bytes.number(r, "context [tok]") == tokens) return r;
    fail("lab 03: no decode_bytes row for batch ", batch, ", context ", tokens);
  };
  const long small_step = bytes_row(1, 512), large_step = bytes_row(64, 32768);
  const auto share = [&](long row) { return decode_bytes.number(row, "KV share [%]"); };
  const bool both_reasons = share(small_step) < 50 && share(large_step) > 50;
  report.claim({.id = "03.decode_reads",
                .source = "the KV cache article, §3-1 (KV reads); the prefill/decode article (weight reads)",
                .statement = "decode is memory-bound because of weight reads at small batch and context, and "
                             "because of KV reads once batch × context is large",
                .held = both_reasons,
                .evidence = "KV is " + fixed(share(small_step), 1) + "% of the bytes at batch 1, context 512 and " +
                            fixed(share(large_step), 1) + "% at batch 64, context 32,768 (llama-3-8b, bf16)",
                .cause = both_reasons ? "" : "the preset's weight or KV size differs from the published model's"});
  report.claim({.id = "03.counted_equals_formula",
                .source = "this lab",
                .statement = "the engine's counted FLOPs and bytes equal the closed form",
                .held = steps.mismatch.empty(),
                .evidence = "all " + std::to_string(steps.calibration.size()) + " measured steps compared",
                .cause = steps.mismatch.empty() ? "" : "counter.h and work.h disagree at " + steps.mismatch});
  const auto intensity_of = [&](long row) { return steps.points.number(row, "intensity [FLOP/B]"); };
  const long longest_prefill = static_cast<long>(prefill_lens.size()) - 1, decode_1 = longest_prefill + 1;
  const double prefill_i = intensity_of(longest_prefill), decode_i = intensity_of(decode_1);
  const bool split_here = prefill_i > ridge_here && decode_i < ridge_here;
  std::string why_not;
  if (prefill_i <= ridge_here)
    why_not = steps.names[longest_prefill] + " reuses each weight byte too few times (" + fixed(prefill_i, 1) +
              " FLOP/byte) to pass this machine's ridge; a longer prompt (--prefill-lens) would";
  else if (decode_i >= ridge_here)
    why_not = "this machine's ridge (" + fixed(ridge_here, 1) + ") is below even a batch-" +
              std::to_string(decode_batches.front()) + " decode step's intensity";
  report.claim({.id = "03.bound_here",
                .source = "the KV cache article, §3-1; the prefill/decode article",
                .statement = "on this machine's measured roofs prefill is above the ridge point and decode below",
                .held = split_here,
                .evidence = "ridge " + fixed(ridge_here, 1) + " FLOP/byte (f32 FMA " + fixed(fmaN, 0) +
                            " GFLOP/s, read " + fixed(readN, 1) + " GB/s); " + steps.names[longest_prefill] + " at " +
                            fixed(prefill_i, 1) + ", " + steps.names[decode_1] + " at " + fixed(decode_i, 2),
                .cause = why_not + (why_not.empty() || busy.empty() ? "" : "; and " + busy)});
  const QuantizationLesson& q = quantization;
  const double q4_gbs = q.table.number(3, "decode GB/s"), q4_roof = q.table.number(3, "of the read roof [%]");
  const bool bytes_lever = q.decode_speedup >= 2 && q.prefill_speedup < q.decode_speedup;
  std::string lever_cause;
  if (q.decode_speedup < 2)
    lever_cause = "the Q4_1 step read its bytes at " + fixed(q4_gbs, 1) + " GB/s, " + fixed(q4_roof, 0) +
                  "% of the read roof: the arithmetic on the blocks, not the memory, bounds it on this CPU";
  else if (q.prefill_speedup >= q.decode_speedup)
    lever_cause = "the prefill gained as much: at this length it is still bound by reading the weights, not by FLOPs";
  report.claim({.id = "03.quant_decode_bytes",
                .source = "the KV cache article, §3-2 (quantization among the decode levers)",
                .statement = "fewer weight bytes make decode faster: Q4_1 (6.4x fewer bytes than f32) at least halves "
                             "a decode step, and speeds a prefill up less",
                .held = bytes_lever,
                .evidence = "decode " + fixed(q.decode_speedup, 2) + "x faster with " + fixed(q.bytes_ratio, 1) +
                            "x fewer bytes per step; prefill " + fixed(q.prefill_speedup, 2) + "x",
                .cause = lever_cause + (lever_cause.empty() || busy.empty() ? "" : "; and " + busy)});
  const double q8_agree = q.agreement.at(2);
  report.claim({.id = "03.quant_top1",
                .source = "this lab (llama.cpp's Q8_0 as the near-lossless format)",
                .statement = "Q8_0 weights keep the f32 model's greedy token at 95% of positions or more",
                .held = q8_agree >= 95,
                .evidence = fixed(q8_agree, 1) + "% of " + std::to_string(q.positions) +
                            " teacher-forced positions (Q4_1 " + fixed(q.agreement.at(3), 1) + "%)",
                .cause = q8_agree >= 95 ? ""
                         : q.real_text
                             ? "this model's greedy margins are narrower than the rounding of Q8_0 at those positions"
                             : "synthetic weights: random logits nearly tie, so rounding flips the greedy token far "
                               "more often than on a trained model (run with --model)"});
  report.verdict("prefill runs at " + fixed(prefill_i, 0) + " FLOP/byte (" +
                 bound_name(bound_of(prefill_i, ridge_here)) + "-bound against this machine's ridge of " +
                 fixed(ridge_here, 1) + "), decode at batch " + std::to_string(decode_batches.front()) + " at " +
                 fixed(decode_i, 1) + " (" + bound_name(bound_of(decode_i, ridge_here)) + "-bound), rising to " +
                 fixed(intensity_of(-1), 1) + " at batch " + std::to_string(decode_batches.back()) + ".");
}

}  // namespace servelab::lab03
