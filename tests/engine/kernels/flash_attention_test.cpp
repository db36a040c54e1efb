// SPDX-License-Identifier: MIT
// Lab 05's progression, each version against v0 (attention_naive, the plain
// loops): hand-computable cases first, then every version on seeded random
// data over ragged shapes, then the invariants: split-K in any number of
// pieces == one pass, paged == contiguous, and deterministic flash giving a
// row the same bits whatever batch it is in. Last, the byte counts on
// shapes small enough to count by hand. Loops report their case with INFO
// rather than sections: a section re-runs the whole test case each time.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_traffic.h"
#include "test_util.h"

using namespace servelab;

namespace {

/**
 * Tolerance of every version against v0, |v - v0| <= atol + rtol·|v0|, and why:
 * outputs are softmax-weighted means of values in [-1, 1]. Each version sums
 * the same terms in another order (sgemm blocking, tiles of 64 keys,
 * rescaled partial sums, split pieces merged), so f32 rounding differs by a
 * few ulps per term over up to 1,000 keys. Measured worst: under 1e-6; the
 * bound leaves a 10x margin. A wrong key (mask off by one, wrong KV head, a
 * tile skipped or counted twice) moves an output by more than 1e-3.
 */
constexpr double kAtol = 1e-5, kRtol = 1e-5;

using Fn = std::function<void(const KernelContext&, float*, const float*, const std::vector<AttentionSeq>&,
                              const AttentionShape&)>;

struct Version {
  std::string name;
  Fn fn;
};

/// v1 to v4 (v1 on the full matrix and skipping masked tiles, v4 in one, three and seven pieces), the versions
/// checked against v0.
std::vector<Version> versions() {
  return {
      {"v1 standard", [](auto& c, float* o, const float* q, auto& s,
                         auto& sh) { attention_standard(c, o, q, s, sh, StandardWork::FULL_MATRIX); }},
      {"v1 standard, causal", [](auto& c, float* o, const float* q, auto& s,
                                 auto& sh) { attention_standard(c, o, q, s, sh, StandardWork::SKIP_MASKED); }},
      {"v2 blocked", attention_blocked},
      {"v3 flash", attention_flash},
      {"v4 split-K 1 piece",
       [](auto& c, float* o, const float* q, auto& s, auto& sh) { attention_split_k(c, o, q, s, sh, 1); }},
      {"v4 split-K 3 pieces",
       [](auto& c, float* o, const float* q, auto& s, auto& sh) { attention_split_k(c, o, q, s, sh, 3); }},
      {"v4 split-K 7 pieces",
       [](auto& c, float* o, const float* q, auto& s, auto& sh) { attention_split_k(c, o, q, s, sh, 7); }},
      {"engine flash",
       [](auto& c, float* o, const float* q, auto& s, auto& sh) { attention(c, AttentionKind::FLASH, o, q, s, sh); }},
  };
}

/// One sequence's K/V ([L, kv_dim] contiguous) and its queries.
struct Problem {
  AttentionShape shape;
  int L = 0, num_new = 0;
  std::vector<float> k, v, q;  // [L, kv_dim], [L, kv_dim], [num_new, H * D]

  Problem(AttentionShape s, int context, int n, unsigned seed) : shape(s), L(context), num_new(n) {
    const auto kv = static_cast<std::size_t>(L) * s.num_kv_heads * s.head_dim;
    k = test::random_floats(kv, seed);
    v = test::random_floats(kv, seed + 1);
    q = test::random_floats(static_cast<std::size_t>(n) * s.num_heads * s.head_dim, seed + 2);
    for (auto& x : q) x *= 4.0f;  // sharper softmax than O(1) scores: the max matters
  }
  KVView view() {
    return {k.data(), v.data(), static_cast<std::size_t>(shape.num_kv_heads * shape.head_dim), nullptr, 0};
  }
  std::vector<float> run(const Fn& fn, const KernelContext& ctx, KVView kv) const {
    std::vector<float> out(q.size(), NAN);
    fn(ctx, out.data(), q.data(), {AttentionSeq{0, num_new, L - num_new, kv}}, shape);
    return out;
  }
};

std::vector<double> as_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

constexpr AttentionShape kMHA{.num_heads = 2, .num_kv_heads = 2, .head_dim = 16};
constexpr AttentionShape kGQA7{.num_heads = 7, .num_kv_heads = 1, .head_dim = 32};  // qwen2.5-0.5b's 14:2 ratio
constexpr AttentionShape kGQA7x2{.num_heads = 14, .num_kv_heads = 2, .head_dim = 16};
constexpr AttentionShape kMQA{.num_heads = 4, .num_kv_heads = 1, .head_dim = 16};

}  // namespace

TEST_CASE("every version picks the one key a large query matches", "[flash][hand]") {
  // Keys are one-hot (token t's key is e_t), values are t + 1 in every dim; the
  // query asks for key 2 with weight 100, so softmax puts all but e^-70 there.
  ThreadPool pool(2);
  const int D = 4, L = 4;
  std::vector<float> k(L * D, 0.0f), v(L * D), q(D, 0.0f);
  for (int t = 0; t < L; ++t) {
    k[t * D + t] = 1.0f;
    std::fill_n(v.begin() + t * D, D, t + 1.0f);
  }
  q[2] = 100.0f;
  for (bool det : {false, true})
    for (const Version& ver : versions()) {
      {
        INFO(ver.name << (det ? " deterministic" : " fast"));
        std::vector<float> out(D, NAN);
        ver.fn(KernelContext{&pool, det}, out.data(), q.data(),
               {AttentionSeq{0, 1, 3, KVView{k.data(), v.data(), D, nullptr, 0}}}, {1, 1, D});
        for (float o : out) CHECK(o == Approx(3.0f).margin(1e-6));
      }
    }
}

TEST_CASE("every version gives the mean of the values when all scores tie - and token 0 sees only itself",
          "[flash][hand]") {
  // A zero query scores every key 0: the output is the plain mean of the visible values.
  // Values of token t are t, so a prefill of 5 gives row i the mean of 0..i = i / 2.
  ThreadPool pool(2);
  const int D = 2, L = 5;
  std::vector<float> k = test::random_floats(L * D, 3), v(L * D), q(L * D, 0.0f);
  for (int t = 0; t < L; ++t) v[t * D] = v[t * D + 1] = static_cast<float>(t);
  for (bool det : {false, true})
    for (const Version& ver : versions()) {
      {
        INFO(ver.name << (det ? " deterministic" : " fast"));
        std::vector<float> out(L * D, NAN);
        ver.fn(KernelContext{&pool, det}, out.data(), q.data(),
               {AttentionSeq{0, L, 0, KVView{k.data(), v.data(), D, nullptr, 0}}}, {1, 1, D});
        for (int i = 0; i < L; ++i) CHECK(out[i * D] == Approx(i / 2.0).margin(1e-6));
        CHECK(out[0] == 0.0f);
      }
    }
}

TEST_CASE("every version equals v0 on ragged shapes - causal prefill - decode - chunk - GQA 1:1 7:1 MQA",
          "[flash][differential]") {
  ThreadPool pool(2);
  const AttentionShape shapes[] = {kMHA, kGQA7, kGQA7x2, kMQA};
  for (const AttentionShape& shape : shapes)
    for (int L : {1, 17, 1000})
      // Causal prefill (L queries over L keys), a decode (1 query sees every key), a 17-token chunk after a cache.
      for (int num_new : {L, 1, std::min(L, 17)}) {
        if (L == 1000 && num_new == L && shape.num_heads > 7)
          continue;  // the 7:1 ratio is covered by kGQA7 at L = 1000
        Problem p(shape, L, num_new, static_cast<unsigned>(L * 13 + num_new + shape.num_heads));
        const auto ref = as_double(p.run(attention_naive, KernelContext{&pool}, p.view()));
        for (bool det : {false, true})
          for (const Version& ver : versions()) {
            {
              INFO(ver.name << (det ? " deterministic" : " fast") << " heads " << shape.num_heads << ":"
                            << shape.num_kv_heads << " d " << shape.head_dim << " L " << L << " new " << num_new);
              CHECK(test::all_close(p.run(ver.fn, KernelContext{&pool, det}, p.view()), ref, kAtol, kRtol));
            }
          }
      }
}

TEST_CASE("flash handles query and key tiles that end at the sequence's end", "[flash][tiles]") {
  // Either side of a key tile (64) and of a query tile (256): a last tile of one key, of 63, a full one.
  ThreadPool pool(2);
  for (int L : {63, 64, 65, 255, 256, 257, 320})
    for (bool det : {false, true}) {
      {
        INFO("L " << L << (det ? " deterministic" : " fast"));
        Problem p(kMQA, L, L, static_cast<unsigned>(L));
        const auto ref = as_double(p.run(attention_naive, KernelContext{&pool}, p.view()));
        CHECK(test::all_close(p.run(attention_flash, KernelContext{&pool, det}, p.view()), ref, kAtol, kRtol));
        Problem d(kMQA, L, 1, static_cast<unsigned>(L + 1));
        const auto dref = as_double(d.run(attention_naive, KernelContext{&pool}, d.view()));
        const Fn split_auto = [](auto& c, float* o, const float* q, auto& s, auto& sh) {
          attention_split_k(c, o, q, s, sh);
        };
        CHECK(test::all_close(d.run(split_auto, KernelContext{&pool, det}, d.view()), dref, kAtol, kRtol));
      }
    }
}

TEST_CASE("split-K in any number of pieces equals one pass", "[flash][split-k]") {
  // 1000 keys are 16 tiles: pieces 1..16 cut them every way, 17 and 100 ask for more pieces than tiles (clamped).
  ThreadPool pool(2);
  for (int num_new : {1, 3}) {
    Problem p(kGQA7x2, 1000, num_new, 41);
    const Fn one = [](auto& c, float* o, const float* q, auto& s, auto& sh) { attention_split_k(c, o, q, s, sh, 1); };
    const auto one_pass = as_double(p.run(one, KernelContext{&pool}, p.view()));
    for (int pieces : {2, 3, 4, 5, 7, 8, 15, 16, 17, 100}) {
      {
        INFO("new tokens " << num_new << " pieces " << pieces);
        const Fn split = [pieces](auto& c, float* o, const float* q, auto& s, auto& sh) {
          attention_split_k(c, o, q, s, sh, pieces);
        };
        CHECK(test::all_close(p.run(split, KernelContext{&pool}, p.view()), one_pass, kAtol, kRtol));
        // Deterministic mode takes one piece whatever is asked: the same bits as one pass.
        CHECK(p.run(split, KernelContext{&pool, true}, p.view()) == p.run(one, KernelContext{&pool, true}, p.view()));
      }
    }
  }
}

TEST_CASE("split-K pieces: one while the items fill the threads - more for a long lone decode", "[flash][split-k]") {
  CHECK(split_k_pieces(32768, 2, 2) == 4);  // 2 KV heads on 2 threads: four items per thread
  CHECK(split_k_pieces(32768, 1, 2) == 8);
  CHECK(split_k_pieces(32768, 64, 2) == 1);  // a batch of 32 sequences × 2 KV heads already fills them
  CHECK(split_k_pieces(1000, 1, 2) == 2);    // 16 tiles: pieces of at least 8 tiles, so 2 at most
  CHECK(split_k_pieces(100, 1, 16) == 1);    // shorter than 8 tiles: one piece
}

TEST_CASE("paged flash and split-K equal contiguous - bit for bit in deterministic mode", "[flash][paged]") {
  ThreadPool pool(2);
  for (int L : {1, 17, 1000})
    for (int bs : {1, 16, 256})
      for (int num_new : {L, 1}) {
        Problem p(kGQA7x2, L, num_new, static_cast<unsigned>(L + 7 * bs + num_new));
        // Scatter the rows into a shuffled pool with NaN spares: a wrong row poisons the output.
        const int blocks = (L + bs - 1) / bs, kv_dim = kGQA7x2.num_kv_heads * kGQA7x2.head_dim;
        std::vector<std::int32_t> table(static_cast<std::size_t>(blocks + 2));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(static_cast<unsigned>(L + bs)));
        std::vector<float> pk(table.size() * bs * kv_dim, NAN), pv = pk;
        for (int t = 0; t < L; ++t) {
          const std::size_t row = static_cast<std::size_t>(table[static_cast<std::size_t>(t / bs)]) * bs + t % bs;
          std::copy_n(p.k.begin() + static_cast<std::ptrdiff_t>(t) * kv_dim, kv_dim,
                      pk.begin() + static_cast<std::ptrdiff_t>(row * kv_dim));
          std::copy_n(p.v.begin() + static_cast<std::ptrdiff_t>(t) * kv_dim, kv_dim,
                      pv.begin() + static_cast<std::ptrdiff_t>(row * kv_dim));
        }
        const KVView paged{pk.data(), pv.data(), static_cast<std::size_t>(kv_dim), table.data(), bs};
        for (bool det : {false, true})
          for (const Version& ver : versions()) {
            if (ver.name.starts_with("v1") || ver.name == "v2 blocked") continue;  // lab 04 tests those
            if (ver.name.starts_with("v4") && num_new > 1) continue;  // split-K is the decode path; prefills go to v3
            {
              INFO(ver.name << (det ? " deterministic" : " fast") << " L " << L << " block " << bs << " new "
                            << num_new);
              const auto contiguous = p.run(ver.fn, KernelContext{&pool, det}, p.view());
              const auto in_blocks = p.run(ver.fn, KernelContext{&pool, det}, paged);
              CHECK(test::equal_or_close(in_blocks, contiguous, det, kAtol, kRtol));
            }
          }
      }
}

TEST_CASE("deterministic flash gives a row the same bits in a prefill - a decode - any batch - any thread count",
          "[flash][deterministic]") {
  // Deterministic means: the output of (query, position, keys) is a function
  // of those alone. Row 299 of a 300-token prefill, the same token decoded
  // after 299 cached ones, the same decode beside two other sequences, and
  // the same with one thread or two must agree bit for bit.
  ThreadPool one(1), two(2);
  Problem p(kGQA7x2, 300, 300, 5);
  const std::size_t row = static_cast<std::size_t>(kGQA7x2.num_heads) * kGQA7x2.head_dim;
  const std::vector<float> last_q(p.q.end() - static_cast<std::ptrdiff_t>(row), p.q.end());
  const auto flash = [&](ThreadPool& pool, std::vector<AttentionSeq> seqs, const std::vector<float>& q,
                         std::size_t rows) {
    std::vector<float> out(rows * row, NAN);
    attention(KernelContext{&pool, true}, AttentionKind::FLASH, out.data(), q.data(), seqs, kGQA7x2);
    return out;
  };
  const auto prefill = flash(two, {AttentionSeq{0, 300, 0, p.view()}}, p.q, 300);
  const std::vector<float> from_prefill(prefill.end() - static_cast<std::ptrdiff_t>(row), prefill.end());
  const auto decode = flash(two, {AttentionSeq{0, 1, 299, p.view()}}, last_q, 1);
  CHECK(decode == from_prefill);
  CHECK(flash(one, {AttentionSeq{0, 1, 299, p.view()}}, last_q, 1) == from_prefill);
  // In a batch: a 40-token prefill of another sequence first, our decode, then a decode of a third.
  Problem other(kGQA7x2, 1000, 41, 9);
  std::vector<float> q(other.q.begin(), other.q.begin() + static_cast<std::ptrdiff_t>(40 * row));
  q.insert(q.end(), last_q.begin(), last_q.end());
  q.insert(q.end(), other.q.end() - static_cast<std::ptrdiff_t>(row), other.q.end());
  const auto batch = flash(two,
                           {AttentionSeq{0, 40, 0, other.view()}, AttentionSeq{40, 1, 299, p.view()},
                            AttentionSeq{41, 1, 999, other.view()}},
                           q, 42);
  CHECK(std::vector<float>(batch.begin() + static_cast<std::ptrdiff_t>(40 * row),
                           batch.begin() + static_cast<std::ptrdiff_t>(41 * row)) == from_prefill);
}

TEST_CASE("the byte counts match a count by hand on one tile", "[flash][traffic]") {
  // One head of width 4, 256 tokens: every version reads Q and writes O (2·256·4 floats).
  const AttentionProblem p{
      .shape = {1, 1, 4}, .num_new_tokens = 256, .num_computed_tokens = 0, .block_size = 0, .num_splits = 1};
  const double qo = 2.0 * 256 * 4 * 4, pairs = 256.0 * 257 / 2;
  const double M = 1 << 20;
  // v0: each query reads K and V of its p + 1 keys.
  CHECK(attention_traffic(AttentionVersion::REFERENCE, p, M).bytes == qo + 2.0 * 4 * 4 * pairs);
  // v1: K and V once, S and P 4 × 256 × 256 floats.
  CHECK(attention_traffic(AttentionVersion::STANDARD, p, M).bytes == qo + 2.0 * 256 * 4 * 4 + 4.0 * 256 * 256 * 4);
  // v3: one query tile of 256 reads all 256 keys once.
  CHECK(attention_traffic(AttentionVersion::FLASH, p, M).bytes == qo + 2.0 * 256 * 4 * 4);
  // v5: the same through blocks of 16: 16 table entries of 4 bytes.
  AttentionProblem paged = p;
  paged.block_size = 16;
  CHECK(attention_traffic(AttentionVersion::FLASH, paged, M).bytes == qo + 2.0 * 256 * 4 * 4 + 16 * 4);
  CHECK(attention_traffic(AttentionVersion::FLASH, p, M).flops == 4.0 * 4 * pairs);
  // v1 skipping masked tiles: one tile of 256 queries, the same K and V reads, S and P of its 256 × 256 pairs.
  CHECK(attention_traffic(AttentionVersion::STANDARD_CAUSAL, p, M).bytes ==
        qo + 2.0 * 256 * 4 * 4 + 4.0 * 256 * 256 * 4);
  // The paper's orders: (N·d + N²) and N²d²/M floats.
  CHECK(paper_standard_bytes(p) == (256.0 * 4 + 256.0 * 256) * 4);
  CHECK(paper_flash_bytes(p, 4.0 * 1024) == 256.0 * 256 * 16 / 1024 * 4);
}

TEST_CASE("the FLOPs executed match a count by hand: the causal standard kernel does flash's work",
          "[flash][traffic]") {
  // One head of width 4, 512 tokens. Flash and v1 causal: two tiles of 256 queries, against 256 and 512 keys.
  // Blocked: eight blocks of 64 queries, against 64, 128, ..., 512 keys. v1: all 512 × 512 pairs.
  const AttentionProblem p{
      .shape = {1, 1, 4}, .num_new_tokens = 512, .num_computed_tokens = 0, .block_size = 0, .num_splits = 1};
  const double M = 1 << 20, per_pair = 4.0 * 4;
  const double tiles = 256.0 * 256 + 256.0 * 512, blocks = 64.0 * 64 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8);
  CHECK(attention_traffic(AttentionVersion::FLASH, p, M).flops_done == per_pair * tiles);
  CHECK(attention_traffic(AttentionVersion::STANDARD_CAUSAL, p, M).flops_done == per_pair * tiles);
  CHECK(attention_traffic(AttentionVersion::BLOCKED, p, M).flops_done == per_pair * blocks);
  CHECK(attention_traffic(AttentionVersion::STANDARD, p, M).flops_done == per_pair * 512 * 512);
  CHECK(attention_traffic(AttentionVersion::REFERENCE, p, M).flops_done == per_pair * 512 * 513 / 2);
}

TEST_CASE("at L = 4096 on qwen2.5-0.5b's heads flash moves over 10x fewer bytes than standard attention",
          "[flash][traffic]") {
  const AttentionProblem p{
      .shape = {14, 2, 64}, .num_new_tokens = 4096, .num_computed_tokens = 0, .block_size = 0, .num_splits = 1};
  const double M = 1 << 20;
  const double standard = attention_traffic(AttentionVersion::STANDARD, p, M).bytes;
  const double flash = attention_traffic(AttentionVersion::FLASH, p, M).bytes;
  CHECK(standard / flash >= 10.0);
  CHECK(flash < attention_traffic(AttentionVersion::BLOCKED, p, M).bytes);
}

TEST_CASE("the attention option takes naive blocked or flash and names its flag when refused", "[flash][options]") {
  CHECK(parse_attention_kind("flash", "--attention") == AttentionKind::FLASH);
  CHECK(parse_attention_kind("naive", "--attention") == AttentionKind::NAIVE);
  CHECK(std::string(to_string(AttentionKind::BLOCKED)) == "blocked");
  REQUIRE_THROWS_WITH(parse_attention_kind("fast", "--attention"), Catch::Contains("--attention"));
}
