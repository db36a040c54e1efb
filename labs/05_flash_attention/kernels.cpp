// SPDX-License-Identifier: MIT
/**
 * @file kernels.cpp
 * @brief Lab 05's kernel tables: (1) every attention version on causal
 *        prefill, (2) blocked against flash on each preset's heads, (3)
 *        decode with and without split-K. Each version is checked against v0
 *        before it is timed; one that fails is left out and named.
 * @see labs/05_flash_attention/README.md
 */
#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_traffic.h"
#include "lab05.h"

namespace servelab::lab05 {

using namespace servelab::lab;

namespace {

/// |version - v0| <= kAtol + kRtol·|v0|: a few f32 ulps per term over 8,192 keys, with room (the tests use 1e-5).
constexpr double kAtol = 1e-4, kRtol = 1e-4;

using AttentionCall = std::function<void(const KernelContext&, float*, const float*, const std::vector<AttentionSeq>&)>;

/// One sequence's attention inputs: Q of its new tokens, K and V of its whole context, contiguous and paged.
struct Inputs {
  AttentionShape shape;
  int context = 0, num_new = 0, block_size = 16;
  std::vector<float> q, k, v;  // [num_new, H·D], [context, KVH·D], [context, KVH·D]
  std::vector<float> pk, pv;   // the same rows in shuffled blocks
  std::vector<std::int32_t> table;

  Inputs(AttentionShape s, int ctx, int n, std::uint64_t seed) : shape(s), context(ctx), num_new(n) {
    std::mt19937 rng(static_cast<unsigned>(seed + ctx));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const std::size_t kv_dim = static_cast<std::size_t>(s.num_kv_heads) * s.head_dim;
    q.resize(static_cast<std::size_t>(n) * s.num_heads * s.head_dim);
    k.resize(static_cast<std::size_t>(ctx) * kv_dim);
    v.resize(k.size());
    for (auto* x : {&q, &k, &v})
      for (float& f : *x) f = u(rng);
    const int blocks = (ctx + block_size - 1) / block_size;
    table.resize(static_cast<std::size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    pk.resize(static_cast<std::size_t>(blocks) * block_size * kv_dim);
    pv.resize(pk.size());
    for (int t = 0; t < ctx; ++t) {
      const std::size_t row =
          static_cast<std::size_t>(table[static_cast<std::size_t>(t / block_size)]) * block_size + t % block_size;
      std::copy_n(k.begin() + static_cast<std::ptrdiff_t>(t * kv_dim), kv_dim,
                  pk.begin() + static_cast<std::ptrdiff_t>(row * kv_dim));
      std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(t * kv_dim), kv_dim,
                  pv.begin() + static_cast<std::ptrdiff_t>(row * kv_dim));
    }
  }
  AttentionSeq seq(bool paged) {
    const std::size_t kv_dim = static_cast<std::size_t>(shape.num_kv_heads) * shape.head_dim;
    return {0, num_new, context - num_new,
            paged ? KVView{pk.data(), pv.data(), kv_dim, table.data(), block_size}
                  : KVView{k.data(), v.data(), kv_dim, nullptr, 0}};
  }
};

/// A version as the tables run it.
struct Candidate {
  std::string name;
  AttentionVersion version;
  bool paged;
  AttentionCall call;
  int pieces = 1;  // v4's split
  bool single_thread = false;
};

/// Largest |a - ref| / (atol + rtol·|ref|) scaled back to an absolute error; reports the first mismatches.
double max_error(const std::vector<float>& a, const std::vector<float>& ref, const std::string& what, bool& ok) {
  double worst = 0;
  int shown = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - ref[i]);
    if (!(err <= kAtol + kRtol * std::abs(ref[i]))) {  // NaN fails too
      ok = false;
      if (shown++ < 3)
        std::cerr << "lab_05: " << what << " mismatch at " << i << ": " << a[i] << " vs v0 " << ref[i] << "\n";
    }
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

/// A row of a plot table: the x value, then one number per line.
std::vector<Cell> as_cells(long long x, const std::vector<double>& ys) {
  std::vector<Cell> row;
  row.reserve(ys.size() + 1);
  row.emplace_back(x);
  for (double y : ys) row.emplace_back(y);
  return row;
}

/// An error in the tables: "0" or one significant digit, e.g. "2e-07".
std::string sci(double x) {
  if (x == 0) return "0";
  std::ostringstream os;
  os << std::scientific << std::setprecision(0) << x;
  return os.str();
}

std::string mib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(bytes < 10 * 1048576.0 ? 2 : 0) << bytes / 1048576.0;
  return os.str();
}

/// The prefill versions, in table order: v0 to v3, then v3 through a block table (v5).
std::vector<Candidate> prefill_versions(const AttentionShape& sh) {
  const auto wrap = [sh](auto fn) {
    return AttentionCall([sh, fn](const KernelContext& k, float* out, const float* q,
                                  const std::vector<AttentionSeq>& s) { fn(k, out, q, s, sh); });
  };
  return {{"v0 reference", AttentionVersion::REFERENCE, false, wrap(attention_naive)},
          {"v1 standard", AttentionVersion::STANDARD, false, wrap(attention_standard)},
          {"v2 blocked", AttentionVersion::BLOCKED, false, wrap(attention_blocked)},
          {"v3 flash", AttentionVersion::FLASH, false, wrap(attention_flash)},
          {"v5 paged flash", AttentionVersion::FLASH, true, wrap(attention_flash)}};
}

}  // namespace

Prefill prefill_tables(const Bench& bench, const std::vector<int>& lengths, int max_v0_len,
                       std::vector<std::string>& failed) {
  const LabOptions& o = bench.options;
  const AttentionShape& shape = bench.shape;
  const KernelContext& fast = bench.fast;
  const double M = bench.fast_memory;
  Prefill result{.table = {.name = "prefill",
                           .title = "Causal prefill of L tokens, " + bench.model_name + " heads (one layer)",
                           .columns = {{"L"},
                                       {"version"},
                                       {"time [ms]", 2},
                                       {"GB/s", 1},
                                       {"GFLOP/s", 1},
                                       {"bytes [MiB]"},
                                       {"paper form [MiB]"},
                                       {"max err vs v0"},
                                       {"vs v1", 2}}},
                 .time = {.name = "prefill_time", .title = "Prefill time against L", .columns = {{"L"}}},
                 .bytes = {.name = "prefill_bytes", .title = "Prefill bytes against L", .columns = {{"L"}}}};
  Table &prefill = result.table, &prefill_time = result.time, &prefill_bytes = result.bytes;
  double &v1_4096 = result.v1_4096_ms, &v2_4096 = result.v2_4096_ms, &v3_4096 = result.v3_4096_ms;
  double& bytes_ratio_4096 = result.bytes_ratio_4096;
  Progress bar("prefill", static_cast<long>(lengths.size()));
  for (int L : lengths) {
    Inputs in(shape, L, L, o.seed);
    // The reference: v0 on every row, or past --max-v0-length on the last 256 rows (the longest ones).
    const int ref_rows = L <= max_v0_len ? L : std::min(L, 256);
    std::vector<float> ref(static_cast<std::size_t>(ref_rows) * shape.num_heads * shape.head_dim);
    {
      AttentionSeq tail = in.seq(false);
      tail.num_new_tokens = ref_rows;
      tail.num_computed_tokens = L - ref_rows;
      attention_naive(fast, ref.data(), in.q.data() + (in.q.size() - ref.size()), {tail}, shape);
    }
    std::vector<double> time_row,
        bytes_row;  // per version, in the order of versions(); v0's time only up to --max-v0-length
    double v1_ms = 0;
    for (const Candidate& cand : prefill_versions(shape)) {
      const bool v0 = cand.version == AttentionVersion::REFERENCE;
      const std::vector<AttentionSeq> seqs = {in.seq(cand.paged)};
      std::vector<float> out(in.q.size(), NAN);
      if (!(v0 && L > max_v0_len)) cand.call(fast, out.data(), in.q.data(), seqs);
      const std::vector<float> tail(out.end() - static_cast<std::ptrdiff_t>(ref.size()), out.end());
      bool ok = true;
      const double err =
          v0 && L > max_v0_len ? 0.0 : max_error(tail, ref, cand.name + " at L " + std::to_string(L), ok);
      if (!ok) {
        failed.push_back(cand.name + " at L " + std::to_string(L));
        continue;  // left out of the timing table
      }
      AttentionProblem problem{shape, L, 0, cand.paged ? in.block_size : 0, 1};
      const AttentionTraffic tr = attention_traffic(cand.version, problem, M);
      const double paper = cand.version == AttentionVersion::FLASH      ? paper_flash_bytes(problem, M)
                           : cand.version == AttentionVersion::STANDARD ? paper_standard_bytes(problem)
                                                                        : 0.0;
      bytes_row.push_back(tr.bytes / 1048576.0);
      if (v0 && L > max_v0_len) continue;
      const double s =
          summarize(time_runs(o.warmup, o.repeats, [&] { cand.call(fast, out.data(), in.q.data(), seqs); })).median;
      if (cand.version == AttentionVersion::STANDARD) v1_ms = 1e3 * s;
      prefill.add_row({static_cast<long long>(L), cand.name, 1e3 * s, tr.bytes / s / 1e9, tr.flops / s / 1e9,
                       mib(tr.bytes), paper > 0 ? mib(paper) : std::string("-"), sci(err),
                       v1_ms > 0 ? v1_ms / (1e3 * s) : 0.0});
      if (!v0) time_row.push_back(1e3 * s);
      if (L == 4096 && cand.version == AttentionVersion::STANDARD) v1_4096 = 1e3 * s;
      if (L == 4096 && cand.version == AttentionVersion::BLOCKED) v2_4096 = 1e3 * s;
      if (L == 4096 && cand.name == "v3 flash") {
        v3_4096 = 1e3 * s;
        bytes_ratio_4096 = attention_traffic(AttentionVersion::STANDARD, problem, M).bytes / tr.bytes;
      }
    }
    if (prefill_time.columns.size() == 1)
      for (const Candidate& cand : prefill_versions(shape)) {
        if (cand.version != AttentionVersion::REFERENCE)  // v0 is not timed at every L
          prefill_time.columns.push_back({cand.name + " [ms]", 2});
        prefill_bytes.columns.push_back({cand.name + " [MiB]", 1});
      }
    // A version that failed validation leaves its row short: the plot tables keep full rows only.
    if (time_row.size() + 1 == prefill_time.columns.size()) prefill_time.add_row(as_cells(L, time_row));
    if (bytes_row.size() + 1 == prefill_bytes.columns.size()) prefill_bytes.add_row(as_cells(L, bytes_row));
    bar.advance();
  }
  prefill.note =
      "GB/s and GFLOP/s are the counted bytes and the useful FLOPs (4·d per visible query-key pair and "
      "head) over the time. 'vs v1' is v1's time over this version's. The paper's forms are orders, "
      "evaluated with constant 1 (standard: (N·d + N²)·heads floats; flash: N²d²/M·heads).";
  return result;
}

Table head_shapes(const Bench& bench, int shapes_len) {
  const LabOptions& o = bench.options;
  const KernelContext& fast = bench.fast;
  const double M = bench.fast_memory;
  Table shapes{.name = "head_shapes",
               .title = "Blocked (v2) against flash (v3) on each preset's heads, L = " + std::to_string(shapes_len),
               .columns = {{"preset"},
                           {"heads"},
                           {"v2 [ms]", 2},
                           {"v3 [ms]", 2},
                           {"v3 speedup", 2},
                           {"v2 bytes [MiB]"},
                           {"v3 bytes [MiB]"},
                           {"max err v3 vs v2"}}};
  for (const char* name : {"tiny", "small", "qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b"}) {
    const ModelConfig pc = preset(name);
    const AttentionShape sh{pc.num_attention_heads, pc.num_key_value_heads, pc.head_dim};
    Inputs in(sh, shapes_len, shapes_len, o.seed);
    std::vector<float> a(in.q.size()), b(in.q.size());
    const std::vector<AttentionSeq> seqs = {in.seq(false)};
    const auto t2 = summarize(time_runs(o.warmup, o.repeats, [&] {
                      attention_blocked(fast, a.data(), in.q.data(), seqs, sh);
                    })).median;
    const auto t3 = summarize(time_runs(o.warmup, o.repeats, [&] {
                      attention_flash(fast, b.data(), in.q.data(), seqs, sh);
                    })).median;
    double err = 0;
    for (std::size_t i = 0; i < a.size(); ++i) err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    const AttentionProblem p{sh, shapes_len, 0, 0, 1};
    shapes.add_row(
        {std::string(name),
         std::to_string(sh.num_heads) + "/" + std::to_string(sh.num_kv_heads) + " x " + std::to_string(sh.head_dim),
         1e3 * t2, 1e3 * t3, t2 / t3, mib(attention_traffic(AttentionVersion::BLOCKED, p, M).bytes),
         mib(attention_traffic(AttentionVersion::FLASH, p, M).bytes), sci(err)});
  }
  return shapes;
}

Decode decode_tables(const Bench& bench, const std::vector<int>& contexts, std::vector<std::string>& failed) {
  const LabOptions& o = bench.options;
  const AttentionShape& shape = bench.shape;
  const KernelContext &fast = bench.fast, &alone = bench.alone;
  const double M = bench.fast_memory;
  const int num_threads = bench.fast.pool->num_threads();
  Decode result;
  Table& decode = result.table;
  decode = {.name = "decode",
            .title = "Decode attention, one token against the cache, " + bench.model_name + " heads",
            .columns = {{"context"},
                        {"version"},
                        {"threads"},
                        {"pieces"},
                        {"time [us]", 1},
                        {"GB/s", 1},
                        {"bytes [MiB]", 2},
                        {"max err vs v0"},
                        {"vs one pass, 1 thread", 2}}};
  Table& decode_time = result.time;
  decode_time = {.name = "decode_time",
                 .title = "Decode time against the context",
                 .columns = {{"context"}, {"one pass, 1 thread [us]", 1}, {"one pass [us]", 1}, {"split-K [us]", 1}}};
  double& split_gain_longest = result.split_gain_longest;
  for (int ctx_len : contexts) {
    Inputs in(shape, ctx_len, 1, o.seed + 1);
    std::vector<float> ref(in.q.size());
    attention_naive(fast, ref.data(), in.q.data(), {in.seq(false)}, shape);
    const int auto_pieces = split_k_pieces(ctx_len, shape.num_kv_heads, num_threads);
    struct Row {
      std::string name;
      AttentionVersion version;
      bool paged;
      int pieces;
      bool single;
    };
    const Row rows[] = {{"v0 reference", AttentionVersion::REFERENCE, false, 1, false},
                        {"v4 one pass", AttentionVersion::SPLIT_K, false, 1, true},
                        {"v4 one pass", AttentionVersion::SPLIT_K, false, 1, false},
                        {"v4 split-K", AttentionVersion::SPLIT_K, false, auto_pieces, false},
                        {"v5 paged split-K", AttentionVersion::SPLIT_K, true, auto_pieces, false}};
    double base = 0;
    std::vector<double> trow;
    for (const Row& r : rows) {
      const KernelContext& k = r.single ? alone : fast;
      const std::vector<AttentionSeq> seqs = {in.seq(r.paged)};
      std::vector<float> out(in.q.size(), NAN);
      const auto run = [&] {
        if (r.version == AttentionVersion::REFERENCE)
          attention_naive(k, out.data(), in.q.data(), seqs, shape);
        else
          attention_split_k(k, out.data(), in.q.data(), seqs, shape, r.pieces);
      };
      run();
      bool ok = true;
      const double err = max_error(out, ref, r.name + " at context " + std::to_string(ctx_len), ok);
      if (!ok) {
        failed.push_back(r.name + " at context " + std::to_string(ctx_len));
        continue;
      }
      const double s = summarize(time_runs(o.warmup, 10 * o.repeats, run)).median;
      const AttentionTraffic tr =
          attention_traffic(r.version, {shape, 1, ctx_len - 1, r.paged ? in.block_size : 0, r.pieces}, M);
      if (r.single) base = s;
      const int threads = r.single ? 1 : num_threads;
      decode.add_row({static_cast<long long>(ctx_len), r.name, static_cast<long long>(threads),
                      static_cast<long long>(r.pieces), 1e6 * s, tr.bytes / s / 1e9, mib(tr.bytes), sci(err),
                      base > 0 ? base / s : 0.0});
      if (r.version == AttentionVersion::SPLIT_K && !r.paged) trow.push_back(1e6 * s);
      if (r.name == "v4 split-K" && ctx_len == contexts.back()) split_gain_longest = base / s;
    }
    if (trow.size() == 3) decode_time.add_row(as_cells(ctx_len, trow));
  }
  decode.note =
      "v4 one pass has one work item per KV head (all the group's query heads share its K/V reads); "
      "split-K cuts the keys into pieces of whole 64-key tiles and merges them by the log-sum-exp rule. "
      "Deterministic mode always takes one piece.";
  return result;
}

}  // namespace servelab::lab05
