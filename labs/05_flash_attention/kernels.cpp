// SPDX-License-Identifier: MIT
/**
 * @file kernels.cpp
 * @brief Lab 05's kernel tables: (1) every attention version on causal
 *        prefill, (2) blocked against flash around the crossover length on
 *        one head, (3) blocked against flash on each preset's heads, (4)
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

/// Median seconds of @p run over the options' warm-up and @p repeats timed runs.
double median_seconds(const LabOptions& o, int repeats, const std::function<void()>& run) {
  return summarize(time_runs(o.warmup, repeats, run)).median;
}

/// The prefill versions, in table order: v0 to v3, then v3 through a block table (v5).
std::vector<Candidate> prefill_versions(const AttentionShape& sh) {
  const auto wrap = [sh](auto fn) {
    return AttentionCall([sh, fn](const KernelContext& k, float* out, const float* q,
                                  const std::vector<AttentionSeq>& s) { fn(k, out, q, s, sh); });
  };
  const auto standard = [](StandardWork work) { return [work](auto&... args) { attention_standard(args..., work); }; };
  return {{"v0 reference", AttentionVersion::REFERENCE, false, wrap(attention_naive)},
          {"v1 standard", AttentionVersion::STANDARD, false, wrap(standard(StandardWork::FULL_MATRIX))},
          {"v1 standard, causal", AttentionVersion::STANDARD_CAUSAL, false, wrap(standard(StandardWork::SKIP_MASKED))},
          {"v2 blocked", AttentionVersion::BLOCKED, false, wrap(attention_blocked)},
          {"v3 flash", AttentionVersion::FLASH, false, wrap(attention_flash)},
          {"v5 paged flash", AttentionVersion::FLASH, true, wrap(attention_flash)}};
}

}  // namespace

std::string time_ratio(double t_new, double t_base) {
  if (!(t_new > 0) || !(t_base > 0)) return "-";
  std::ostringstream os;
  const double r = t_new / t_base;
  os << std::fixed << std::setprecision(2) << r << "x (" << (r < 1 ? "faster" : r > 1 ? "slower" : "the same") << ")";
  return os.str();
}

Prefill prefill_tables(const Bench& bench, const std::vector<int>& lengths, int max_v0_len,
                       std::vector<std::string>& failed) {
  const LabOptions& o = bench.options;
  const AttentionShape& shape = bench.shape;
  const KernelContext& fast = bench.fast;
  const double M = bench.fast_memory;
  Prefill result{.table = {.name = "prefill",
                           .title = "Causal prefill of L tokens, " + bench.model_name + " heads (one layer)",
                           .columns = {"L", "version", Column{"time [ms]", 2}, Column{"GFLOP done", 2},
                                       Column{"GFLOP/s", 1}, "bytes [MiB]", Column{"GB/s", 1}, "paper form [MiB]",
                                       "max err vs v0", "flash's time over this"}},
                 .time = {.name = "prefill_time", .title = "Prefill time against L", .columns = {"L"}},
                 .bytes = {.name = "prefill_bytes", .title = "Prefill bytes against L", .columns = {"L"}}};
  Table &prefill = result.table, &prefill_time = result.time, &prefill_bytes = result.bytes;
  const std::vector<Candidate> versions = prefill_versions(shape);
  for (const Candidate& cand : versions) {
    if (cand.version != AttentionVersion::REFERENCE)  // v0 is not timed at every L
      prefill_time.columns.push_back({cand.name + " [ms]", 2});
    prefill_bytes.columns.push_back({cand.name + " [MiB]", 1});
  }
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
    PrefillPoint point{.length = L, .version = {}};
    std::vector<double> time_row, bytes_row;  // per version, in table order; v0's time only up to --max-v0-length
    for (const Candidate& cand : versions) {
      const bool v0 = cand.version == AttentionVersion::REFERENCE;
      const std::vector<AttentionSeq> seqs = {in.seq(cand.paged)};
      std::vector<float> out(in.q.size(), NAN);
      Measured m;
      m.traffic = attention_traffic(cand.version, {shape, L, 0, cand.paged ? in.block_size : 0, 1}, M);
      bytes_row.push_back(m.traffic.bytes / 1048576.0);
      if (v0) {  // the reference itself: exact by definition, timed while L <= --max-v0-length
        if (L <= max_v0_len)
          m.ms = 1e3 * median_seconds(o, o.repeats, [&] { cand.call(fast, out.data(), in.q.data(), seqs); });
        point.version[cand.name] = m;
        continue;
      }
      cand.call(fast, out.data(), in.q.data(), seqs);
      const std::vector<float> tail(out.end() - static_cast<std::ptrdiff_t>(ref.size()), out.end());
      bool ok = true;
      m.max_error = max_error(tail, ref, cand.name + " at L " + std::to_string(L), ok);
      if (!ok) {
        failed.push_back(cand.name + " at L " + std::to_string(L));
        continue;  // left out of the timing table
      }
      m.ms = 1e3 * median_seconds(o, o.repeats, [&] { cand.call(fast, out.data(), in.q.data(), seqs); });
      time_row.push_back(m.ms);
      point.version[cand.name] = m;
    }
    const auto v3 = point.version.find("v3 flash");
    for (const Candidate& cand : versions) {
      const auto it = point.version.find(cand.name);
      if (it == point.version.end() || it->second.ms == 0) continue;
      const Measured& m = it->second;
      const double s = m.ms / 1e3;
      const double paper =
          cand.version == AttentionVersion::FLASH ? paper_flash_bytes({shape, L, 0, 0, 1}, M)
          : (cand.version == AttentionVersion::STANDARD || cand.version == AttentionVersion::STANDARD_CAUSAL)
              ? paper_standard_bytes({shape, L, 0, 0, 1})
              : 0.0;
      const bool flash_itself = cand.name == "v3 flash", v0 = cand.version == AttentionVersion::REFERENCE;
      prefill.add_row({static_cast<long long>(L), cand.name, m.ms, m.traffic.flops_done / 1e9,
                       m.traffic.flops_done / s / 1e9, mib(m.traffic.bytes), m.traffic.bytes / s / 1e9,
                       paper > 0 ? mib(paper) : std::string("-"), v0 ? std::string("-") : sci(m.max_error),
                       flash_itself || v3 == point.version.end() ? std::string("-") : time_ratio(v3->second.ms, m.ms)});
    }
    // A version that failed validation leaves its row short: the plot tables keep full rows only.
    if (time_row.size() + 1 == prefill_time.columns.size()) prefill_time.add_row(as_cells(L, time_row));
    if (bytes_row.size() + 1 == prefill_bytes.columns.size()) prefill_bytes.add_row(as_cells(L, bytes_row));
    result.points.push_back(std::move(point));
    bar.advance();
  }
  prefill.note =
      "'GFLOP done' counts what the loops execute (4·d per computed query-key pair and head, masked pairs "
      "inside a computed tile included); GFLOP/s and GB/s are it and the counted bytes over the time. v1 "
      "computes every pair; 'v1 standard, causal' skips the masked tiles at flash's 256-query tiles, so it "
      "does flash's FLOPs exactly and differs only in S and P going through memory. The last column is v3's "
      "time over this version's (below 1: flash is faster). The paper's forms are orders, evaluated with "
      "constant 1 (standard: (N·d + N²)·heads floats; flash: N²d²/M·heads).";
  return result;
}

Crossover crossover_table(const Bench& bench, const std::vector<int>& lengths, std::vector<std::string>& failed) {
  const LabOptions& o = bench.options;
  const double M = bench.fast_memory;
  const AttentionShape sh{1, 1, bench.shape.head_dim};
  Crossover result{
      .table = {.name = "crossover",
                .title = "Blocked (v2) against flash (v3) around L* = " + std::to_string(blocked_crossover_length(M)) +
                         ", one head of " + std::to_string(sh.head_dim),
                .columns = {"L", "v2 slab 64 x L [KiB]", "slab in L2", Column{"v2 [ms]", 2}, Column{"v3 [ms]", 2},
                            "v3's time over v2's", "v2 bytes [MiB]", "v3 bytes [MiB]",
                            Column{"v3 FLOPs over v2's", 3}}},
      .crossover_length = blocked_crossover_length(M),
      .num_heads = sh.num_heads,
      .points = {}};
  for (int L : lengths) {
    Inputs in(sh, L, L, o.seed);
    const std::vector<AttentionSeq> seqs = {in.seq(false)};
    std::vector<float> a(in.q.size()), b(in.q.size());
    CrossoverPoint p{.length = L, .v2 = {}, .v3 = {}};
    p.v2.ms =
        1e3 * median_seconds(o, o.repeats, [&] { attention_blocked(bench.fast, a.data(), in.q.data(), seqs, sh); });
    p.v3.ms = 1e3 * median_seconds(o, o.repeats, [&] { attention_flash(bench.fast, b.data(), in.q.data(), seqs, sh); });
    bool ok = true;
    p.v3.max_error = max_error(b, a, "v3 flash against v2 at L " + std::to_string(L) + " (one head)", ok);
    if (!ok) {
      failed.push_back("v3 flash against v2 at L " + std::to_string(L) + " (one head)");
      continue;
    }
    const AttentionProblem problem{sh, L, 0, 0, 1};
    p.v2.traffic = attention_traffic(AttentionVersion::BLOCKED, problem, M);
    p.v3.traffic = attention_traffic(AttentionVersion::FLASH, problem, M);
    const double slab = static_cast<double>(kBlockedQueryBlock) * L * sizeof(float);
    result.table.add_row({static_cast<long long>(L), static_cast<long long>(slab / 1024),
                          std::string(slab < M ? "fits" : "spills"), p.v2.ms, p.v3.ms, time_ratio(p.v3.ms, p.v2.ms),
                          mib(p.v2.traffic.bytes), mib(p.v3.traffic.bytes),
                          p.v3.traffic.flops_done / p.v2.traffic.flops_done});
    result.points.push_back(p);
  }
  result.table.note =
      "L2 per core M = " + human_bytes(M) +
      ", so v2's slab of 64 × L floats fills it at L* = M / 256 B = " + std::to_string(result.crossover_length) +
      "; from there its four passes over S count as main-memory traffic. One head keeps the long "
      "lengths affordable; each thread's slab is in its own core's L2 either way.";
  return result;
}

Table head_shapes(const Bench& bench, int shapes_len) {
  const LabOptions& o = bench.options;
  const KernelContext& fast = bench.fast;
  const double M = bench.fast_memory;
  Table shapes{.name = "head_shapes",
               .title = "Blocked (v2) against flash (v3) on each preset's heads, L = " + std::to_string(shapes_len),
               .columns = {"preset", "heads", Column{"v2 [ms]", 2}, Column{"v3 [ms]", 2}, "v3's time over v2's",
                           "v2 bytes [MiB]", "v3 bytes [MiB]", "max err v3 vs v2"}};
  for (const char* name : {"tiny", "small", "qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b"}) {
    const ModelConfig pc = preset(name);
    const AttentionShape sh{pc.num_attention_heads, pc.num_key_value_heads, pc.head_dim};
    Inputs in(sh, shapes_len, shapes_len, o.seed);
    std::vector<float> a(in.q.size()), b(in.q.size());
    const std::vector<AttentionSeq> seqs = {in.seq(false)};
    const double t2 = median_seconds(o, o.repeats, [&] { attention_blocked(fast, a.data(), in.q.data(), seqs, sh); });
    const double t3 = median_seconds(o, o.repeats, [&] { attention_flash(fast, b.data(), in.q.data(), seqs, sh); });
    double err = 0;
    for (std::size_t i = 0; i < a.size(); ++i) err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    const AttentionProblem p{sh, shapes_len, 0, 0, 1};
    shapes.add_row(
        {std::string(name),
         std::to_string(sh.num_heads) + "/" + std::to_string(sh.num_kv_heads) + " x " + std::to_string(sh.head_dim),
         1e3 * t2, 1e3 * t3, time_ratio(t3, t2), mib(attention_traffic(AttentionVersion::BLOCKED, p, M).bytes),
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
            .columns = {"context", "version", "threads", "pieces", Column{"time [us]", 1}, Column{"GB/s", 1},
                        Column{"bytes [MiB]", 2}, "max err vs v0", "time over one pass, same threads"}};
  Table& decode_time = result.time;
  decode_time = {.name = "decode_time",
                 .title = "Decode time against the context",
                 .columns = {"context", Column{"one pass, 1 thread [us]", 1}, Column{"one pass [us]", 1},
                             Column{"split-K [us]", 1}}};
  enum class Role { REFERENCE, ONE_PASS_ALONE, ONE_PASS, SPLIT, PAGED_SPLIT };
  for (int ctx_len : contexts) {
    Inputs in(shape, ctx_len, 1, o.seed + 1);
    std::vector<float> ref(in.q.size());
    attention_naive(fast, ref.data(), in.q.data(), {in.seq(false)}, shape);
    const int auto_pieces = split_k_pieces(ctx_len, shape.num_kv_heads, num_threads);
    struct Row {
      std::string name;
      Role role;
      bool paged;
      int pieces;
      bool single;
    };
    const Row rows[] = {{"v0 reference", Role::REFERENCE, false, 1, false},
                        {"v4 one pass", Role::ONE_PASS_ALONE, false, 1, true},
                        {"v4 one pass", Role::ONE_PASS, false, 1, false},
                        {"v4 split-K", Role::SPLIT, false, auto_pieces, false},
                        {"v5 paged split-K", Role::PAGED_SPLIT, true, auto_pieces, false}};
    DecodePoint point{.context = ctx_len, .threads = num_threads, .pieces = auto_pieces};
    std::vector<double> trow;
    for (const Row& r : rows) {
      const KernelContext& k = r.single ? alone : fast;
      const std::vector<AttentionSeq> seqs = {in.seq(r.paged)};
      std::vector<float> out(in.q.size(), NAN);
      const bool v0 = r.role == Role::REFERENCE;
      const auto run = [&] {
        if (v0)
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
      Measured m{.ms = 1e3 * median_seconds(o, 10 * o.repeats, run),
                 .traffic = attention_traffic(v0 ? AttentionVersion::REFERENCE : AttentionVersion::SPLIT_K,
                                              {shape, 1, ctx_len - 1, r.paged ? in.block_size : 0, r.pieces}, M),
                 .max_error = err};
      if (r.role == Role::ONE_PASS_ALONE) point.one_pass_alone = m;
      if (r.role == Role::ONE_PASS) point.one_pass = m;
      if (r.role == Role::SPLIT) point.split = m;
      const bool baseline = r.role == Role::ONE_PASS_ALONE || r.role == Role::ONE_PASS;
      decode.add_row({static_cast<long long>(ctx_len), r.name, static_cast<long long>(r.single ? 1 : num_threads),
                      static_cast<long long>(r.pieces), 1e3 * m.ms, m.traffic.bytes / (m.ms / 1e3) / 1e9,
                      mib(m.traffic.bytes), v0 ? std::string("-") : sci(err),
                      v0         ? std::string("-")
                      : baseline ? std::string("baseline")
                                 : time_ratio(m.ms, point.one_pass.ms)});
      if (!v0 && !r.paged) trow.push_back(1e3 * m.ms);
    }
    if (trow.size() == 3) decode_time.add_row(as_cells(ctx_len, trow));
    result.points.push_back(point);
  }
  decode.note =
      "v4 one pass has one work item per KV head (all the group's query heads share its K/V reads); "
      "split-K cuts the keys into pieces of whole 64-key tiles and merges them by the log-sum-exp rule. "
      "The last column is the time over one pass's on the same threads (below 1: faster). Deterministic mode "
      "always takes one piece.";
  return result;
}

}  // namespace servelab::lab05
