// SPDX-License-Identifier: MIT
// Graded tests of what a lab 05 student writes (the LAB05 regions): the
// online-softmax update of one key tile and the final divide, checked by hand
// on scores small enough to follow; the flash tile loop and the split-K
// partial and merge, checked against v0 (the plain loops, which the student
// does not write) where tiles and pieces end and where a piece holds the
// row's maximum. Each one fails on the wrong implementations in
// tests/labs/mutants/lab05/.
#include <array>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_flash_tile.h"
#include "test_util.h"

using namespace servelab;

namespace {

/// One head of width 2 whose key j scores scores[j] against the query q = (1, 0) at scale 1, value j = values[j].
struct GradedHandTile {
  std::vector<float> k, v, q{1.0f, 0.0f};
  GradedHandTile(const std::vector<float>& scores, const std::vector<std::array<float, 2>>& values) {
    for (std::size_t j = 0; j < scores.size(); ++j) {
      k.insert(k.end(), {scores[j], 0.0f});
      v.insert(v.end(), {values[j][0], values[j][1]});
    }
  }
  KVView view() { return {k.data(), v.data(), 2, nullptr, 0}; }
};

/// Every version's tolerance against v0 (tests/engine/kernels/flash_attention_test.cpp says why).
constexpr double kGradedAtol = 1e-5, kGradedRtol = 1e-5;

/// Runs @p fn on one sequence: @p num_new queries after @p L - num_new cached tokens, heads @p shape.
template <typename Fn>
std::vector<float> graded_run(Fn fn, const KernelContext& ctx, const AttentionShape& shape, int L, int num_new,
                              std::vector<float>& k, std::vector<float>& v, const std::vector<float>& q) {
  std::vector<float> out(q.size(), NAN);
  const KVView kv{k.data(), v.data(), static_cast<std::size_t>(shape.num_kv_heads * shape.head_dim), nullptr, 0};
  fn(ctx, out.data(), q.data(), {AttentionSeq{0, num_new, L - num_new, kv}}, shape);
  return out;
}

}  // namespace

TEST_CASE("flash_add_key_tile by hand: the running max, the rescaled sum and output, the causal mask",
          "[lab05][graded]") {
  // Scores 1, 3 in the first tile, then 2, 5, 0 in the second; row 1 may see only keys 0-3 (key 4 is masked).
  GradedHandTile hand({1, 3, 2, 5, 0}, {{{1, 0}}, {{0, 1}}, {{2, 2}}, {{1, 1}}, {{100, -100}}});
  for (bool exact : {true, false}) {
    INFO((exact ? "exact (deterministic)" : "fast (sgemm)"));
    FlashRows acc;
    acc.reset(2, 2);
    acc.visible = {5, 4};
    const float q2[] = {1, 0, 1, 0};  // both rows ask the same query
    flash_add_key_tile(acc, q2, 2, hand.view(), 0, 1.0f, 0, 2, exact);
    for (int r = 0; r < 2; ++r) {
      INFO("row " << r << " after the first tile");
      CHECK(acc.state[r].max == Approx(3.0f));
      CHECK(acc.state[r].sum == Approx(std::exp(-2.0) + 1.0));
      CHECK(acc.o[r * 2] == Approx(std::exp(-2.0)));  // e^(1-3)·(1, 0) + e^0·(0, 1)
      CHECK(acc.o[r * 2 + 1] == Approx(1.0));
    }
    flash_add_key_tile(acc, q2, 2, hand.view(), 0, 1.0f, 2, 5, exact);
    // The new max 5 rescales what the first tile left by e^(3 - 5).
    const double a = std::exp(-2.0);
    const double sum0 = (std::exp(-2.0) + 1.0) * a + std::exp(-3.0) + 1.0 + std::exp(-5.0);
    const double sum1 = (std::exp(-2.0) + 1.0) * a + std::exp(-3.0) + 1.0;  // key 4 masked
    const double ox = std::exp(-2.0) * a + 2 * std::exp(-3.0) + 1.0, oy = a + 2 * std::exp(-3.0) + 1.0;
    CHECK(acc.state[0].max == Approx(5.0f));
    CHECK(acc.state[1].max == Approx(5.0f));
    CHECK(acc.state[0].sum == Approx(sum0));
    CHECK(acc.state[1].sum == Approx(sum1));
    CHECK(acc.o[0] == Approx(ox + 100 * std::exp(-5.0)));
    CHECK(acc.o[1] == Approx(oy - 100 * std::exp(-5.0)));
    CHECK(acc.o[2] == Approx(ox));
    CHECK(acc.o[3] == Approx(oy));
    // A tile wholly past a row's last key leaves the row as it was.
    const SoftmaxState before = acc.state[1];
    const std::vector<float> o_before(acc.o.begin() + 2, acc.o.end());
    flash_add_key_tile(acc, q2, 2, hand.view(), 0, 1.0f, 4, 5, exact);
    CHECK(acc.state[1].max == before.max);
    CHECK(acc.state[1].sum == before.sum);
    CHECK(std::vector<float>(acc.o.begin() + 2, acc.o.end()) == o_before);
  }
}

TEST_CASE("flash_write_row divides the output by the running sum, and a row that saw nothing is zeros",
          "[lab05][graded]") {
  FlashRows acc;
  acc.reset(2, 3);
  acc.state[0] = {.max = 7.0f, .sum = 4.0f};
  acc.o = {2.0f, -1.0f, 6.0f, 9.0f, 9.0f, 9.0f};  // row 1 keeps the empty state (sum 0)
  std::vector<float> out(3, NAN);
  flash_write_row(acc, 0, out.data());
  CHECK(out == std::vector<float>{0.5f, -0.25f, 1.5f});
  flash_write_row(acc, 1, out.data());
  CHECK(out == std::vector<float>{0.0f, 0.0f, 0.0f});
  CHECK(acc.o[0] == 2.0f);  // the state is not changed
}

TEST_CASE("the flash tile loop equals v0 where query and key tiles end, on a prefill and on a chunk after a cache",
          "[lab05][graded]") {
  ThreadPool pool(2);
  const AttentionShape shape{.num_heads = 4, .num_kv_heads = 2, .head_dim = 8};
  const int kv_dim = shape.num_kv_heads * shape.head_dim, q_dim = shape.num_heads * shape.head_dim;
  for (int L : {1, 63, 64, 65, 129, 300})
    for (int num_new : {L, 1, std::min(L, 70)}) {
      auto k = test::random_floats(static_cast<std::size_t>(L) * kv_dim, L + 1);
      auto v = test::random_floats(static_cast<std::size_t>(L) * kv_dim, L + 2);
      auto q = test::random_floats(static_cast<std::size_t>(num_new) * q_dim, L + 3);
      for (auto& x : q) x *= 4.0f;  // a sharp softmax: the max and the mask matter
      const auto naive = graded_run(attention_naive, KernelContext{&pool}, shape, L, num_new, k, v, q);
      const std::vector<double> ref(naive.begin(), naive.end());
      for (bool det : {false, true}) {
        INFO("L " << L << " new " << num_new << (det ? " deterministic" : " fast"));
        CHECK(test::all_close(graded_run(attention_flash, KernelContext{&pool, det}, shape, L, num_new, k, v, q), ref,
                              kGradedAtol, kGradedRtol));
      }
    }
}

TEST_CASE(
    "split-K merges its pieces by their maxima: any number of pieces equals v0, also when one piece holds the max",
    "[lab05][graded]") {
  ThreadPool pool(2);
  const AttentionShape shape{.num_heads = 4, .num_kv_heads = 1, .head_dim = 8};
  const int L = 640, kv_dim = shape.head_dim, q_dim = shape.num_heads * shape.head_dim;  // 10 key tiles
  auto k = test::random_floats(static_cast<std::size_t>(L) * kv_dim, 11);
  auto v = test::random_floats(static_cast<std::size_t>(L) * kv_dim, 12);
  // Keys 400-409 (the 7th tile) align with the query: one piece holds scores far above the others', so pieces
  // weighted by their key counts or by their sums without e^(max - new max) give other outputs.
  for (int t = 400; t < 410; ++t)
    for (int d = 0; d < kv_dim; ++d) k[static_cast<std::size_t>(t * kv_dim + d)] = 1.0f;
  for (int num_new : {1, 3, 130}) {  // 130 new tokens: the first rows see none of the last pieces' keys
    std::vector<float> q(static_cast<std::size_t>(num_new) * q_dim, 4.0f);
    for (std::size_t i = 0; i < q.size(); i += 3) q[i] = -2.0f;
    const auto naive = graded_run(attention_naive, KernelContext{&pool}, shape, L, num_new, k, v, q);
    const std::vector<double> ref(naive.begin(), naive.end());
    for (int pieces : {1, 2, 3, 7, 10})
      for (bool det : {false, true}) {
        INFO("new " << num_new << " pieces " << pieces << (det ? " deterministic" : " fast"));
        const auto split = [pieces](const KernelContext& c, float* o, const float* qq,
                                    const std::vector<AttentionSeq>& s,
                                    const AttentionShape& sh) { attention_split_k(c, o, qq, s, sh, pieces); };
        CHECK(test::all_close(graded_run(split, KernelContext{&pool, det}, shape, L, num_new, k, v, q), ref,
                              kGradedAtol, kGradedRtol));
      }
  }
}
