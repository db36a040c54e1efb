// SPDX-License-Identifier: MIT
/**
 * @file claims.cpp
 * @brief Lab 04's claims, each decided on this run's tables (space and time), and the verdict (lab04.h).
 * @see labs/04_paged_attention/README.md
 */
#include <string>
#include <variant>

#include "lab04.h"

namespace servelab::lab04 {

using namespace servelab::lab;

void check_claims(Report& report, const Table& fragmentation, const KVMemory& memory, const Serving& serving,
                  std::size_t num_requests, int block_size, int max_num_seqs, int memory_requests) {
  const Table& f = fragmentation;
  const auto fits = [&](long row) { return std::get<std::string>(f.cell(row, "D fits")) == "yes"; };
  const bool fragmented =
      !fits(0) && f.number(0, "free after B [tokens]") >= f.number(0, "D needs [tokens]") && fits(1);
  report.claim({.id = "04.fragmentation",
                .source = "the KV cache article, §4-1 and §4-2 (A, B, C); D and the 6,200-token room are this lab's",
                .statement = "contiguous KV can refuse a request that fits in the free memory; blocks hold it",
                .held = fragmented,
                .evidence = plain_number(f.number(0, "free after B [tokens]")) + " tokens free, largest run " +
                            plain_number(f.number(0, "largest free run [tokens]")) + ", D needs " +
                            plain_number(f.number(0, "D needs [tokens]")) + ": contiguous " +
                            (fits(0) ? "fits" : "refuses") + " it, blocks of " + std::to_string(block_size) + " " +
                            (fits(1) ? "hold" : "refuse") + " it",
                .cause = fragmented ? "" : "with this --block-size the blocks' rounding leaves too few for D"});
  const Table& mem = memory.table;
  const long paged16 = mem.row_where("block [tokens]", 16LL),
             contiguous = mem.row_where("layout", "contiguous (reserve max_model_len)");
  const double real16 = mem.number(paged16, "real of held [%]"),
               real_contiguous = mem.number(contiguous, "real of held [%]");
  const bool as_paper = real16 > 90 && real_contiguous < 40;
  report.claim({.id = "04.real_of_held",
                .source = "Kwon et al., PagedAttention (SOSP 2023): 20.4-38.2% before paging, ~96% in vLLM",
                .statement = "paged blocks keep over 90% of the KV they hold real, contiguous reservations under 40%",
                .held = as_paper,
                .evidence = "blocks of 16: " + fixed(real16, 1) + "%, contiguous: " + fixed(real_contiguous, 1) +
                            "% (dry run, " + std::to_string(memory_requests) + " ShareGPT-like requests)",
                .cause = as_paper ? ""
                         : real16 <= 90
                             ? "the requests are short against 16-token blocks: last-block slack takes " +
                                   fixed(mem.number(paged16, "last-block slack [%]"), 1) + "% of the budget"
                             : "the requests are long against --memory-max-model-len: reserved but unused KV is "
                               "only " +
                                   fixed(mem.number(contiguous, "reserved, unused [%]"), 1) + "% of the budget"});
  const auto most_running = [&](long row) { return static_cast<long long>(mem.number(row, "most running")); };
  const bool more_running = most_running(paged16) > most_running(contiguous);
  report.claim(
      {.id = "04.more_requests",
       .source = "the KV cache article, §4-2",
       .statement = "in the same memory paged blocks run more requests at once",
       .held = more_running,
       .evidence = std::to_string(most_running(paged16)) + " at most with blocks of 16 vs " +
                   std::to_string(most_running(contiguous)) + " contiguous",
       .cause = more_running ? "" : "every request grows to --memory-max-model-len, so reserving it costs nothing"});
  report.claim({.id = "04.same_tokens",
                .source = "this lab",
                .statement = "every policy gives every request the same tokens",
                .held = serving.same_tokens,
                .evidence = std::to_string(num_requests) + " requests under 3 policies, hash " +
                            serving.runs[0].run.tokens_hash(),
                .cause = serving.same_tokens ? ""
                                             : "without batch-invariant reductions a row's sums depend on its "
                                               "batch; first differing: " +
                                                   serving.mismatch});
  const Table& s = serving.table;
  const long one = s.row_where("policy", "one_at_a_time"), stat = s.row_where("policy", "static"),
             cont_row = s.row_where("policy", "continuous");
  const auto steps_of = [&](long row) { return static_cast<long long>(s.number(row, "steps")); };
  const bool fewer_steps = steps_of(cont_row) < steps_of(stat);
  const auto wall = [&](long row) { return serving.runs[static_cast<std::size_t>(row)].wall; };
  report.claim({.id = "04.fewer_steps",
                .source = "the TTFT/TPOT article (Continuous Batching)",
                .statement = "continuous batching finishes the workload in fewer steps than static batching",
                .held = fewer_steps,
                .evidence = std::to_string(steps_of(cont_row)) + " steps (" + fixed(wall(cont_row), 2) + " s) vs " +
                            std::to_string(steps_of(stat)) + " static (" + fixed(wall(stat), 2) + " s) and " +
                            std::to_string(steps_of(one)) + " one at a time",
                .cause = fewer_steps ? ""
                                     : "every request fits in one batch (" + std::to_string(num_requests) +
                                           " requests, --max-num-seqs " + std::to_string(max_num_seqs) +
                                           "), so no slot frees while others wait"});
  const auto slots = [&](long row) { return s.number(row, "slots used [%]"); };
  const bool idle_slots = slots(stat) < slots(cont_row);
  report.claim({.id = "04.static_idle_slots",
                .source = "the TTFT/TPOT article (Continuous Batching: idle time)",
                .statement = "static batching leaves batch slots idle that continuous batching fills",
                .held = idle_slots,
                .evidence = "slots used " + fixed(slots(stat), 1) + "% static vs " + fixed(slots(cont_row), 1) +
                            "% continuous (" + fixed(slots(one), 1) + "% one at a time) of " +
                            std::to_string(max_num_seqs) + " per step",
                .cause = idle_slots ? ""
                                    : "every request fits in one batch and all arrive together, so neither "
                                      "policy has a waiting request to fill a freed slot"});
  const double ratio = s.number(cont_row, "vs one at a time");
  const auto step_ms = [&](long row) {
    const ServingRun& r = serving.runs[static_cast<std::size_t>(row)];
    return 1e3 * r.busy / static_cast<double>(r.run.steps.size());
  };
  report.claim({.id = "04.batching_throughput",
                .source = "Yu et al., Orca (OSDI 2022); the TTFT/TPOT article",
                .statement = "continuous batching serves more output tokens/s than one request at a time",
                .held = ratio > 1,
                .evidence = fixed(ratio, 2) + "x (" + fixed(s.number(cont_row, "output tok/s"), 1) + " vs " +
                            fixed(s.number(one, "output tok/s"), 1) + " tok/s)",
                .cause = ratio > 1 ? ""
                                   : "a continuous step took a mean " + fixed(step_ms(cont_row), 2) +
                                         " ms for a mean batch of " + fixed(s.number(cont_row, "mean batch"), 1) +
                                         " against " + fixed(step_ms(one), 2) +
                                         " ms for one request: batching did not share the weight reads here"});
  report.verdict("paged blocks of 16 keep " + fixed(real16, 1) + "% of held KV real vs " + fixed(real_contiguous, 1) +
                 "% contiguous; continuous batching takes " + std::to_string(steps_of(cont_row)) +
                 " steps where static takes " + std::to_string(steps_of(stat)) + " and serves " + fixed(ratio, 1) +
                 "x the output tokens/s of one request at a time, with the same tokens.");
}

}  // namespace servelab::lab04
