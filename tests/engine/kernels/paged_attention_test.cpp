// SPDX-License-Identifier: MIT
// Paged == contiguous, the invariant of lab 04: attention that reads K/V
// through a block table of shuffled physical blocks gives what it gives on
// one contiguous block. Bit for bit in deterministic mode (the same sums in
// the same order, only the row addresses differ); within a stated tolerance
// on the fast path (attention_blocked splits its sgemms at block edges).
// Checked on the kernel, on ragged batches, on the whole model, and for KV
// that moves between caches as bytes (export -> import).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "test_util.h"

using namespace servelab;

namespace {

using Ids = std::vector<std::int32_t>;

constexpr int kContexts[] = {1, 15, 16, 17, 1000};  // 1 token, either side of a 16-block edge, many blocks
constexpr int kBlockSizes[] = {1, 16, 256};         // a block per token, vLLM's default, one block for most
constexpr AttentionShape kShape{.num_heads = 4, .num_kv_heads = 2, .head_dim = 16};  // GQA, as the tiny preset

/**
 * Tolerances of the fast path, |paged - contiguous| <= atol + rtol * |contiguous|, and why:
 * - kPaged*: attention outputs (weighted means of values in [-1, 1]).
 *   attention_blocked computes O = P·V as one sgemm per contiguous run of
 *   keys, accumulating run after run; paged, a run ends at every block edge,
 *   so the same sum of up to 1000 terms is added in another order (block
 *   size 1: one term at a time), and S = Q·Kᵀ goes through sgemm edge kernels
 *   of other widths. Measured worst: 2e-7 (a few f32 ulps); the bound leaves
 *   a 10-20x margin for other OpenBLAS kernels.
 * - kPagedLogits*: logits after both layers of the tiny model, where those
 *   differences pass through the MLP and the LM head. Measured worst: 5e-6
 *   on logits of magnitude up to ~3.
 * A wrong row (an off-by-one in the block table, another sequence's block,
 * a NaN spare row) moves outputs by more than 1e-2.
 */
constexpr double kPagedAtol = 2e-6, kPagedRtol = 2e-6;
constexpr double kPagedLogitsAtol = 5e-5, kPagedLogitsRtol = 5e-5;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// A block table of @p n blocks drawn from @p pool_blocks physical blocks in a seeded shuffled order.
Ids shuffled_table(int n, int pool_blocks, unsigned seed) {
  Ids ids(static_cast<std::size_t>(pool_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  ids.resize(static_cast<std::size_t>(n));
  return ids;
}

/// One sequence's K/V twice: contiguous rows, and scattered into a block pool through a shuffled table.
struct TwoLayouts {
  int kv_dim = kShape.num_kv_heads * kShape.head_dim;
  std::vector<float> k, v;    // [L, kv_dim] contiguous
  std::vector<float> pk, pv;  // [pool_blocks * block_size, kv_dim] paged; unused rows NaN
  Ids table;                  // [ceil(L / block_size)] physical blocks
  int block_size = 0;

  TwoLayouts(int L, int bs, unsigned seed) : block_size(bs) {
    const auto dim = static_cast<std::size_t>(kv_dim);
    k = test::random_floats(static_cast<std::size_t>(L) * dim, seed);
    v = test::random_floats(static_cast<std::size_t>(L) * dim, seed + 1);
    const int pool_blocks = ceil_div(L, bs) + 3;  // spare blocks, so the table really skips around
    table = shuffled_table(ceil_div(L, bs), pool_blocks, seed + 2);
    // NaN everywhere a sequence's row is not: reading a wrong row poisons the output.
    pk.assign(static_cast<std::size_t>(pool_blocks) * bs * dim, NAN);
    pv = pk;
    scatter(k, v, L, table, bs, pk, pv);
  }
  /// Copies contiguous rows 0..L-1 to the rows a block table gives them, by the formula written out here
  /// (not through KVView, so a wrong KVView::row() cannot agree with itself): table[t / bs] * bs + t % bs.
  static void scatter(const std::vector<float>& k, const std::vector<float>& v, int L, const Ids& table, int bs,
                      std::vector<float>& pk, std::vector<float>& pv) {
    const auto dim = static_cast<std::size_t>(kShape.num_kv_heads * kShape.head_dim);
    for (int t = 0; t < L; ++t) {
      const std::size_t row = static_cast<std::size_t>(table[static_cast<std::size_t>(t / bs)]) * bs + t % bs;
      std::copy_n(k.data() + t * dim, dim, pk.data() + row * dim);
      std::copy_n(v.data() + t * dim, dim, pv.data() + row * dim);
    }
  }
  KVView view_contiguous() { return KVView{k.data(), v.data(), static_cast<std::size_t>(kv_dim), nullptr, 0}; }
  KVView view_paged() {
    return KVView{pk.data(), pv.data(), static_cast<std::size_t>(kv_dim), table.data(), block_size};
  }
};

using AttentionFn = void (*)(const KernelContext&, float*, const float*, const std::vector<AttentionSeq>&,
                             const AttentionShape&);

/// Output rows of @p fn for one sequence of context @p L whose last @p num_new tokens are the queries.
std::vector<float> run_one(AttentionFn fn, const KernelContext& ctx, const std::vector<float>& q, int L, int num_new,
                           KVView kv) {
  std::vector<float> out(q.size(), NAN);
  fn(ctx, out.data(), q.data(), {AttentionSeq{0, num_new, L - num_new, kv}}, kShape);
  return out;
}

std::vector<double> as_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

bool all_finite(const std::vector<float>& x) {
  return std::all_of(x.begin(), x.end(), [](float f) { return std::isfinite(f); });
}

std::unique_ptr<Model> tiny_model(bool deterministic) {
  ModelOptions options;
  options.deterministic = deterministic;
  options.num_threads = 2;
  return Model::from_preset("tiny", 3, options);
}

/// Seeded prompt of @p n token ids below the tiny vocabulary (512).
Ids prompt_of(int n, unsigned seed) {
  std::mt19937 rng(seed);
  Ids p(static_cast<std::size_t>(n));
  for (auto& t : p) t = static_cast<std::int32_t>(rng() % 512);
  return p;
}

}  // namespace

TEST_CASE("paged attention equals contiguous attention bit for bit in deterministic mode", "[paged][deterministic]") {
  ThreadPool pool(2);
  const KernelContext ctx{&pool, true};
  for (int L : kContexts)
    for (int bs : kBlockSizes)
      for (int num_new : {L, 1}) {  // prefill of the whole context, then a decode of its last token
        DYNAMIC_SECTION("context " << L << " block size " << bs << " new tokens " << num_new) {
          TwoLayouts kv(L, bs, static_cast<unsigned>(L * 7 + bs));
          const auto q = test::random_floats(static_cast<std::size_t>(num_new) * kShape.num_heads * kShape.head_dim,
                                             static_cast<unsigned>(L + bs + num_new));
          const auto contiguous = run_one(attention, ctx, q, L, num_new, kv.view_contiguous());
          const auto paged = run_one(attention, ctx, q, L, num_new, kv.view_paged());
          REQUIRE(all_finite(contiguous));
          CHECK(paged == contiguous);
        }
      }
}

TEST_CASE("paged attention_blocked (the fast prefill path) matches contiguous within tolerance", "[paged][fast-path]") {
  ThreadPool pool(2);
  const KernelContext ctx{&pool, false};
  for (int L : kContexts) {
    if (L < 16) continue;  // the model takes the blocked path only for prefills of 16+ tokens
    for (int bs : kBlockSizes)
      for (int num_new : {L, 16}) {  // whole prompt; a 16-token chunk after a cached prefix
        DYNAMIC_SECTION("context " << L << " block size " << bs << " new tokens " << num_new) {
          TwoLayouts kv(L, bs, static_cast<unsigned>(L * 11 + bs));
          const auto q = test::random_floats(static_cast<std::size_t>(num_new) * kShape.num_heads * kShape.head_dim,
                                             static_cast<unsigned>(L + 3 * bs + num_new));
          const auto reference = run_one(attention_naive, ctx, q, L, num_new, kv.view_contiguous());
          const auto contiguous = run_one(attention_blocked, ctx, q, L, num_new, kv.view_contiguous());
          const auto paged = run_one(attention_blocked, ctx, q, L, num_new, kv.view_paged());
          REQUIRE(all_finite(paged));
          CHECK(test::all_close(paged, as_double(contiguous), kPagedAtol, kPagedRtol));
          CHECK(test::all_close(paged, as_double(reference), kPagedAtol, kPagedRtol));
          // The model's dispatcher takes this path too.
          CHECK(run_one(attention, ctx, q, L, num_new, kv.view_paged()) == paged);
        }
      }
  }
}

TEST_CASE("a ragged batch of paged sequences sharing one block pool gives each sequence its own attention",
          "[paged][ragged]") {
  // Five sequences of contexts 1, 15, 16, 17 and 1000 (block size 16), their
  // blocks interleaved in one shuffled pool, computing a mix of prefills,
  // decodes and a chunk after a cached prefix in one call.
  ThreadPool pool(2);
  const int bs = 16, kv_dim = kShape.num_kv_heads * kShape.head_dim;
  struct Shape {
    int context, num_new;
  };
  const Shape shapes[] = {{1, 1}, {15, 15}, {16, 1}, {17, 5}, {1000, 20}};
  int total_blocks = 0;
  for (const Shape& s : shapes) total_blocks += ceil_div(s.context, bs);
  const Ids physical = shuffled_table(total_blocks, total_blocks + 2, 99);
  std::vector<float> pk(static_cast<std::size_t>(total_blocks + 2) * bs * kv_dim, NAN), pv = pk;

  std::vector<TwoLayouts> alone;
  std::vector<Ids> tables;
  std::size_t next_block = 0;
  int rows = 0;
  for (const Shape& s : shapes) {
    alone.emplace_back(s.context, s.context, 500 + static_cast<unsigned>(s.context));  // one block: contiguous
    const int n = ceil_div(s.context, bs);
    tables.emplace_back(physical.begin() + static_cast<std::ptrdiff_t>(next_block),
                        physical.begin() + static_cast<std::ptrdiff_t>(next_block + static_cast<std::size_t>(n)));
    next_block += static_cast<std::size_t>(n);
    rows += s.num_new;
  }
  std::vector<AttentionSeq> batch;
  int row = 0;
  for (std::size_t i = 0; i < alone.size(); ++i) {
    const KVView paged{pk.data(), pv.data(), static_cast<std::size_t>(kv_dim), tables[i].data(), bs};
    TwoLayouts::scatter(alone[i].k, alone[i].v, shapes[i].context, tables[i], bs, pk, pv);
    batch.push_back({row, shapes[i].num_new, shapes[i].context - shapes[i].num_new, paged});
    row += shapes[i].num_new;
  }
  const std::size_t row_floats = static_cast<std::size_t>(kShape.num_heads) * kShape.head_dim;
  const auto q = test::random_floats(static_cast<std::size_t>(rows) * row_floats, 77);

  for (bool deterministic : {true, false}) {
    DYNAMIC_SECTION((deterministic ? "deterministic" : "fast path")) {
      const KernelContext ctx{&pool, deterministic};
      std::vector<float> out(q.size(), NAN);
      attention(ctx, out.data(), q.data(), batch, kShape);
      REQUIRE(all_finite(out));
      for (std::size_t i = 0; i < alone.size(); ++i) {
        INFO("sequence " << i << " context " << shapes[i].context);
        const std::size_t first = static_cast<std::size_t>(batch[i].first_row) * row_floats;
        const std::vector<float> q_i(q.begin() + static_cast<std::ptrdiff_t>(first),
                                     q.begin() + static_cast<std::ptrdiff_t>(first + shapes[i].num_new * row_floats));
        const std::vector<float> mine(out.begin() + static_cast<std::ptrdiff_t>(first),
                                      out.begin() + static_cast<std::ptrdiff_t>(first + q_i.size()));
        const auto own = run_one(attention, ctx, q_i, shapes[i].context, shapes[i].num_new, alone[i].view_contiguous());
        CHECK(test::equal_or_close(mine, own, deterministic, kPagedAtol, kPagedRtol));
      }
    }
  }
}

TEST_CASE("the model gives the same logits with its KV in shuffled blocks as in one contiguous block",
          "[paged][model]") {
  for (bool deterministic : {true, false}) {
    auto model = tiny_model(deterministic);
    const ModelConfig& c = model->config();
    for (int L : kContexts)
      for (int bs : kBlockSizes) {
        DYNAMIC_SECTION((deterministic ? "deterministic" : "fast path") << " context " << L << " block size " << bs) {
          const Ids prompt = prompt_of(L, static_cast<unsigned>(L));
          const std::int32_t next = 42;
          // Contiguous: one block as long as the sequence grows (prompt + one decode).
          HostKVCache contiguous(c, 1, L + 1);
          // Paged: the blocks the prompt and the decode need, shuffled among spares.
          const int n = ceil_div(L + 1, bs);
          HostKVCache paged(c, n + 3, bs);
          const Ids table = shuffled_table(n, n + 3, static_cast<unsigned>(L + bs));

          const auto step = [&](KVCache& cache, const Ids& blocks, int computed, std::span<const std::int32_t> tokens) {
            Batch batch;
            batch.add(blocks, computed, tokens, LogitsFor::All);
            return model->forward(batch, cache);
          };
          // Prefill (logits of every prompt token), then one decode step reading everything back.
          const auto prefill_c = step(contiguous, {0}, 0, prompt);
          const auto prefill_p = step(paged, table, 0, prompt);
          const auto decode_c = step(contiguous, {0}, L, std::span(&next, 1));
          const auto decode_p = step(paged, table, L, std::span(&next, 1));
          REQUIRE(all_finite(prefill_c));
          CHECK(test::equal_or_close(prefill_p, prefill_c, deterministic, kPagedLogitsAtol, kPagedLogitsRtol));
          CHECK(test::equal_or_close(decode_p, decode_c, deterministic, kPagedLogitsAtol, kPagedLogitsRtol));
        }
      }
  }
}

TEST_CASE("KV exported from one cache and imported at other block ids decodes to the same logits",
          "[paged][export-import][deterministic]") {
  auto model = tiny_model(true);
  const ModelConfig& c = model->config();
  const Ids prompt = prompt_of(10, 5);
  const std::int32_t next = 7;
  const auto decode = [&](KVCache& cache, const Ids& blocks) {
    Batch batch;
    batch.add(blocks, static_cast<int>(prompt.size()), std::span(&next, 1));
    return model->forward(batch, cache);
  };

  // Cache A: prefill the 10-token prompt into blocks [5, 1, 6] (block size 4).
  HostKVCache a(c, 8, 4), b(c, 6, 4);
  const Ids in_a = {5, 1, 6}, in_b = {0, 4, 2};
  Batch prefill;
  prefill.add(in_a, 0, prompt);
  model->forward(prefill, a);

  // Move the request's blocks to cache B, at other block ids.
  std::vector<std::byte> bytes(in_a.size() * a.bytes_per_block());
  a.export_blocks(in_a, bytes);
  b.import_blocks(in_b, bytes);

  // Without the import, B's decode reads zeros: the logits differ (so the comparison below can fail).
  HostKVCache empty(c, 6, 4);
  const auto control = decode(empty, in_b);

  const auto on_a = decode(a, in_a);
  const auto on_b = decode(b, in_b);
  REQUIRE(on_a.size() == static_cast<std::size_t>(c.vocab_size));
  CHECK(on_b == on_a);
  CHECK(control != on_a);

  // A second decode step on each continues identically (the new token's K/V went into each cache's own block).
  const std::int32_t after = 9;
  Batch step_a, step_b;
  step_a.add(in_a, static_cast<int>(prompt.size()) + 1, std::span(&after, 1));
  step_b.add(in_b, static_cast<int>(prompt.size()) + 1, std::span(&after, 1));
  CHECK(model->forward(step_b, b) == model->forward(step_a, a));

  // A cache of another block size refuses the bytes by name.
  HostKVCache other(c, 6, 8);
  REQUIRE_ERROR_MENTIONS(other.import_blocks(Ids{0, 1, 2}, bytes), "KV import", "block size");
}
