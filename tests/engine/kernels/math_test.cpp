// SPDX-License-Identifier: MIT
// The __host__ __device__ math of kernels/math/, run on the CPU: the exact
// functions the CUDA kernels call, so these tests cover the GPU's per-element
// and per-tile arithmetic on every machine. Hand-computable cases first, then
// the properties the kernels rely on (any split of a reduction, any order of
// an argmax tree gives the sequential answer).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "kernels/math/argmax.h"
#include "kernels/math/attention.h"
#include "kernels/math/rmsnorm.h"
#include "kernels/math/rope.h"
#include "model/sampler.h"
#include "test_util.h"

using namespace servelab;

namespace {

// The shape of cuda/reduce.cuh's block_reduce on the host: per-thread values,
// a butterfly inside each warp of 32, then the same over the warps' results.
template <typename T, typename Combine>
T block_tree_reduce(std::vector<T> lanes, Combine combine, T identity) {
  auto butterfly = [&](std::vector<T>& v) {
    for (int offset = 16; offset > 0; offset /= 2) {
      std::vector<T> next = v;
      for (int lane = 0; lane < 32; ++lane) next[lane] = combine(v[lane], v[lane ^ offset]);
      v = next;
    }
    return v[0];
  };
  std::vector<T> warps(32, identity);
  for (std::size_t w = 0; w * 32 < lanes.size(); ++w) {
    std::vector<T> warp(lanes.begin() + w * 32, lanes.begin() + (w + 1) * 32);
    warps[w] = butterfly(warp);
  }
  return butterfly(warps);
}

constexpr int kThreads = 128;  // blockDim of the attention kernel

}  // namespace

TEST_CASE("rms_inv: 1 / sqrt(sum_sq / n + eps), the same bits from the sum or the row", "[math]") {
  // Row (3, 4): sum of squares 25, mean 12.5.
  const float row[] = {3.0f, 4.0f};
  CHECK(rms_inv_from_sum_sq(25.0f, 2, 0.0f) == 1.0f / std::sqrt(12.5f));
  CHECK(rms_inv(row, 2, 0.0f) == rms_inv_from_sum_sq(25.0f, 2, 0.0f));
  CHECK(rms_inv_from_sum_sq(0.0f, 4, 0.25f) == 2.0f);  // an all-zero row: eps alone
  // The GPU reduces the sum of squares as a tree; it differs from the CPU's
  // left-to-right sum by rounding only.
  const auto x = test::random_floats(4864, 1);
  std::vector<float> lanes(256, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) lanes[i % 256] += x[i] * x[i];
  const float tree = block_tree_reduce(
      lanes, [](float a, float b) { return a + b; }, 0.0f);
  CHECK(rms_inv_from_sum_sq(tree, 4864, 1e-6f) == Approx(rms_inv(x.data(), 4864, 1e-6f)).epsilon(1e-6));
}

TEST_CASE("rmsnorm_scale: weight * (x * inv) in Hugging Face's order", "[math]") {
  CHECK(rmsnorm_scale(3.0f, 0.5f, 2.0f) == 3.0f);
  CHECK(rmsnorm_scale(-4.0f, 0.25f, 1.0f) == -1.0f);
  // The order matters in f32: (x * inv) first, as transformers' LlamaRMSNorm.
  const float x = 1.1f, inv = 0.3f, w = 0.7f;
  CHECK(rmsnorm_scale(x, inv, w) == w * (x * inv));
}

TEST_CASE("silu and swiglu", "[math]") {
  CHECK(silu(0.0f) == 0.0f);
  CHECK(silu(1.0f) == Approx(1.0 / (1.0 + std::exp(-1.0))));
  CHECK(silu(-2.0f) == Approx(-2.0 / (1.0 + std::exp(2.0))));
  CHECK(silu(30.0f) == Approx(30.0f));     // sigma -> 1
  CHECK(std::abs(silu(-30.0f)) < 1e-11f);  // sigma -> 0, no NaN
  CHECK(silu(-200.0f) == -0.0f);           // exp overflows to inf: x / inf = -0, still no NaN
  CHECK(swiglu(2.0f, 3.0f) == silu(2.0f) * 3.0f);
  CHECK(swiglu(0.0f, 5.0f) == 0.0f);
}

TEST_CASE("rope_rotate_pair: a 2-D rotation of (x[i], x[i + half])", "[math][rope]") {
  // Quarter turn: (1, 0) -> (0, 1).
  float x[] = {1.0f, 0.0f};
  rope_rotate_pair(x, 1, 0, std::numbers::pi_v<float> / 2);
  CHECK(x[0] == Approx(0.0f).margin(1e-7));
  CHECK(x[1] == Approx(1.0f));
  // Pairs are (i, i + half): with head_dim 4, pair 1 is (x[1], x[3]); x[0] and x[2] stay.
  float h[] = {5.0f, 1.0f, 7.0f, 2.0f};
  rope_rotate_pair(h, 2, 1, 0.3f);
  CHECK(h[0] == 5.0f);
  CHECK(h[2] == 7.0f);
  CHECK(h[1] == Approx(1.0 * std::cos(0.3) - 2.0 * std::sin(0.3)));
  CHECK(h[3] == Approx(2.0 * std::cos(0.3) + 1.0 * std::sin(0.3)));
  CHECK(std::hypot(h[1], h[3]) == Approx(std::hypot(1.0f, 2.0f)));  // a rotation keeps the length
  // Turning back by the same angle restores the pair.
  rope_rotate_pair(h, 2, 1, -0.3f);
  CHECK(h[1] == Approx(1.0f));
  CHECK(h[3] == Approx(2.0f));
}

TEST_CASE("rope_angle is the f32 product pos * inv_freq, as transformers computes it", "[math][rope]") {
  CHECK(rope_angle(0, 0.5f) == 0.0f);
  CHECK(rope_angle(3, 0.5f) == 1.5f);
  const float f = 0.0001f;
  CHECK(rope_angle(12345, f) == 12345.0f * f);  // one f32 rounding, not a double product
}

TEST_CASE("rope_rotate_head is the per-pair rotation applied to every pair", "[math][rope]") {
  // The CPU rotates a head with a loop; the GPU gives each pair a thread. Same bits.
  const int D = 64;
  std::vector<float> inv(D / 2);
  for (int i = 0; i < D / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / D);
  for (int pos : {0, 1, 17, 1000, 32767}) {
    auto head = test::random_floats(D, pos + 1), pairs = head;
    rope_rotate_head(head.data(), D, inv.data(), pos);
    for (int i = 0; i < D / 2; ++i) rope_rotate_pair(pairs.data(), D / 2, i, rope_angle(pos, inv[i]));
    INFO("pos " << pos);
    CHECK(head == pairs);
  }
}

TEST_CASE("rope: q·k after rotation depends on the distance between positions only", "[math][rope]") {
  const int D = 8;
  const std::vector<float> inv = {1.0f, 0.1f, 0.01f, 0.001f};
  const auto q = test::random_floats(D, 3), k = test::random_floats(D, 4);
  auto rotated_dot = [&](int pq, int pk) {
    auto a = q, b = k;
    rope_rotate_head(a.data(), D, inv.data(), pq);
    rope_rotate_head(b.data(), D, inv.data(), pk);
    return dot(a.data(), b.data(), D);
  };
  CHECK(rotated_dot(10, 7) == Approx(rotated_dot(3, 0)).epsilon(1e-5));
  CHECK(rotated_dot(105, 100) == Approx(rotated_dot(5, 0)).epsilon(1e-5));
}

TEST_CASE("attention_scale and dot", "[math][attention]") {
  CHECK(attention_scale(64) == 0.125f);
  CHECK(attention_scale(128) == 1.0f / std::sqrt(128.0f));
  const float a[] = {1, 2, 3}, b[] = {4, -5, 6};
  CHECK(dot(a, b, 3) == 12.0f);
  CHECK(dot(a, b, 0) == 0.0f);
  // Left to right in f32: exactly the CPU reference loop the kernels are compared with.
  const auto x = test::random_floats(128, 5), y = test::random_floats(128, 6);
  float sum = 0.0f;
  for (int i = 0; i < 128; ++i) sum += x[i] * y[i];
  CHECK(dot(x.data(), y.data(), 128) == sum);
}

TEST_CASE("online softmax: one pass gives the two-pass max and normaliser", "[math][softmax]") {
  SoftmaxState one;
  online_softmax_update(one, 2.5f);
  CHECK(one.max == 2.5f);
  CHECK(one.sum == 1.0f);
  // Scores 0, ln 2, ln 4 (increasing: every update rescales): max ln 4, sum 1/4 + 1/2 + 1 = 1.75.
  SoftmaxState rising;
  for (float s : {0.0f, std::log(2.0f), std::log(4.0f)}) online_softmax_update(rising, s);
  CHECK(rising.max == std::log(4.0f));
  CHECK(rising.sum == Approx(1.75f));
  for (int n : {1, 17, 1000}) {
    auto scores = test::random_floats(n, 7 + n);
    for (auto& s : scores) s *= 8.0f;  // spread like real attention scores
    SoftmaxState state;
    for (float s : scores) online_softmax_update(state, s);
    const float mx = *std::max_element(scores.begin(), scores.end());
    double sum = 0.0;
    for (float s : scores) sum += std::exp(double(s) - mx);
    INFO("n = " << n);
    CHECK(state.max == mx);  // the max is exact, whatever the order
    CHECK(state.sum == Approx(sum).epsilon(1e-5));
  }
}

TEST_CASE("online softmax: rescale and weight keep a running weighted sum exact", "[math][softmax]") {
  // Flash attention's accumulator: o = o * rescale + weight * v, divided by the sum at the end.
  const int n = 300;
  auto scores = test::random_floats(n, 11);
  const auto values = test::random_floats(n, 12);
  for (auto& s : scores) s *= 10.0f;
  SoftmaxState state;
  float o = 0.0f;
  for (int t = 0; t < n; ++t) {
    const SoftmaxStep step = online_softmax_update(state, scores[t]);
    o = o * step.rescale + step.weight * values[t];
  }
  double mx = -1e300, sum = 0.0, ref = 0.0;
  for (float s : scores) mx = std::max(mx, double(s));
  for (int t = 0; t < n; ++t) {
    sum += std::exp(scores[t] - mx);
    ref += std::exp(scores[t] - mx) * values[t];
  }
  CHECK(o / state.sum == Approx(ref / sum).margin(1e-6));
}

TEST_CASE("online softmax: any split into per-thread states merges to the whole", "[math][softmax]") {
  // As attention_naive.cu: thread j takes keys j, j + 128, ...; the block merges in a tree.
  for (int n : {1, 5, 127, 128, 129, 1000, 4096}) {
    auto scores = test::random_floats(n, 20 + n);
    for (auto& s : scores) s *= 12.0f;
    SoftmaxState whole;
    for (float s : scores) online_softmax_update(whole, s);
    std::vector<SoftmaxState> lanes(kThreads);
    for (int t = 0; t < n; ++t) online_softmax_update(lanes[t % kThreads], scores[t]);
    const SoftmaxState merged = block_tree_reduce(
        lanes, [](SoftmaxState a, SoftmaxState b) { return online_softmax_merge(a, b); }, SoftmaxState{});
    INFO("n = " << n);
    CHECK(merged.max == whole.max);
    CHECK(merged.sum == Approx(whole.sum).epsilon(1e-5));
    CHECK(std::isfinite(merged.sum));  // threads with no keys (n < 128) merged as empty states, no NaN
  }
}

TEST_CASE("online softmax: empty states, masked scores and huge scores", "[math][softmax]") {
  SoftmaxState empty, a;
  online_softmax_update(a, 3.0f);
  online_softmax_update(a, 1.0f);
  const SoftmaxState left = online_softmax_merge(empty, a), right = online_softmax_merge(a, empty);
  CHECK(left.max == a.max);
  CHECK(left.sum == a.sum);
  CHECK(right.sum == a.sum);
  const SoftmaxState none = online_softmax_merge(empty, empty);
  CHECK(none.max == -INFINITY);
  CHECK(none.sum == 0.0f);
  // A masked key (-inf) changes nothing and weighs nothing.
  const SoftmaxStep masked = online_softmax_update(a, -INFINITY);
  CHECK(masked.weight == 0.0f);
  CHECK(masked.rescale == 1.0f);
  CHECK(a.sum == right.sum);
  // Scores far beyond exp's range: subtracting the running max keeps everything finite.
  SoftmaxState big;
  for (float s : {1000.0f, 999.0f, 1001.0f}) online_softmax_update(big, s);
  CHECK(big.max == 1001.0f);
  CHECK(big.sum == Approx(1.0 + std::exp(-1.0) + std::exp(-2.0)));
}

TEST_CASE("argmax_pick: the larger value, the lower index on a tie", "[math][argmax]") {
  CHECK(argmax_pick({1.0f, 4}, {2.0f, 9}).index == 9);
  CHECK(argmax_pick({2.0f, 9}, {1.0f, 4}).index == 9);
  CHECK(argmax_pick({2.0f, 9}, {2.0f, 4}).index == 4);
  CHECK(argmax_pick({2.0f, 4}, {2.0f, 9}).index == 4);
  CHECK(argmax_pick({-INFINITY, 2147483647}, {-INFINITY, 0}).index == 0);
  CHECK(argmax_pick({0.0f, kNoArgmax}, {-INFINITY, 7}).index == 7);  // the reduction's identity loses to anything
  CHECK(argmax_pick({-INFINITY, 7}, {0.0f, kNoArgmax}).index == 7);
}

TEST_CASE("argmax_pick: a NaN loses to every number and the lowest NaN index wins among NaNs", "[math][argmax]") {
  CHECK(argmax_pick({NAN, 0}, {-INFINITY, 5}).index == 5);
  CHECK(argmax_pick({-INFINITY, 5}, {NAN, 0}).index == 5);
  CHECK(argmax_pick({NAN, 3}, {NAN, 1}).index == 1);
  CHECK(argmax_pick({NAN, 1}, {NAN, 3}).index == 1);
  CHECK(argmax_pick({0.0f, kNoArgmax}, {NAN, 4}).index == 4);  // an all-NaN row still ends at a real index
}

TEST_CASE("argmax_pick in the GPU's tree order agrees with servelab::argmax", "[math][argmax]") {
  // Values rounded to a coarse grid so that ties are common; the winner must be the first maximum.
  for (int n : {1, 7, 256, 1000, 151936}) {
    auto x = test::random_floats(n, 30 + n);
    for (auto& v : x) v = std::round(v * 4.0f);
    const ArgmaxCandidate none{0.0f, kNoArgmax};
    std::vector<ArgmaxCandidate> lanes(256, none);  // argmax.cu: 256 threads, strided
    for (int i = 0; i < n; ++i) lanes[i % 256] = argmax_pick(lanes[i % 256], {x[i], i});
    const ArgmaxCandidate best = block_tree_reduce(lanes, argmax_pick, none);
    INFO("n = " << n);
    CHECK(best.index == argmax(x));
  }
}

TEST_CASE("argmax_pick in the GPU's tree order gives servelab::argmax's answer on rows with NaNs", "[math][argmax]") {
  // An all-NaN row gave INT_MAX (the old identity's index) before NaN had a rule; now both give 0.
  for (int nan_every : {1, 3}) {
    std::vector<float> x = test::random_floats(1000, 77);
    for (std::size_t i = 0; i < x.size(); i += static_cast<std::size_t>(nan_every)) x[i] = NAN;
    const ArgmaxCandidate none{0.0f, kNoArgmax};
    std::vector<ArgmaxCandidate> lanes(256, none);
    for (int i = 0; i < 1000; ++i) lanes[i % 256] = argmax_pick(lanes[i % 256], {x[i], i});
    const ArgmaxCandidate best = block_tree_reduce(lanes, argmax_pick, none);
    INFO("a NaN every " << nan_every);
    CHECK(best.index == argmax(x));
    CHECK(best.index >= 0);
    CHECK(best.index < 1000);
    if (nan_every == 1)
      CHECK(best.index == 0);
    else
      CHECK_FALSE(std::isnan(x[static_cast<std::size_t>(best.index)]));
  }
}
