// SPDX-License-Identifier: MIT
// Greedy is argmax; top-k / top-p / temperature follow their definitions;
// a seed reproduces a stream.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/random.h"
#include "model/sampler.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("greedy picks the largest logit / the lowest id on a tie", "[sampler]") {
  Sampler greedy(SamplingParams{});
  CHECK(greedy.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}) == 1);
  CHECK(argmax(std::vector<float>{-5.0f}) == 0);
  CHECK(greedy.greedy());
  CHECK_FALSE(Sampler({1.0f, 0, 1.0f, 1}).greedy());
}

TEST_CASE("greedy argmax: a NaN never wins and a row of NaNs gives token 0", "[sampler]") {
  CHECK(argmax(std::vector<float>{NAN, -1.0f, NAN, 2.0f, NAN}) == 3);
  CHECK(argmax(std::vector<float>{NAN, NAN, NAN}) == 0);
  CHECK(argmax(std::vector<float>{-INFINITY, NAN}) == 0);
  CHECK(argmax(std::vector<float>{}) == 0);
}

TEST_CASE("top_k = 1 and a tiny top_p both reduce to greedy", "[sampler]") {
  const std::vector<float> logits = {0.5f, 2.0f, 1.9f, -3.0f};
  Sampler k1({1.0f, 1, 1.0f, 42}), p0({1.0f, 0, 1e-6f, 42});
  for (int i = 0; i < 50; ++i) {
    CHECK(k1.sample(logits) == 1);
    CHECK(p0.sample(logits) == 1);
  }
}

// logits / T overflowed to inf for T = 1e-38, inf - inf = NaN, and the NaN
// softmax let the least likely token win. A temperature that small is greedy.
TEST_CASE("a temperature so small that probabilities underflow acts as greedy", "[sampler]") {
  const std::vector<float> logits = {0.5f, 5.0f, -3.0f, 4.0f};
  for (float t : {1e-38f, 1e-45f, 1e-20f}) {
    Sampler s({t, 0, 1.0f, 7}), with_top_p({t, 0, 0.9f, 7});
    for (int i = 0; i < 20; ++i) {
      CHECK(s.sample(logits) == 1);
      CHECK(with_top_p.sample(logits) == 1);
    }
  }
}

TEST_CASE("temperature 1 samples the softmax distribution", "[sampler]") {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler s({1.0f, 0, 1.0f, 123});
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[s.sample(logits)]++;
  // Binomial std at p = 0.5, n = 20000 is 0.0035; 0.015 is over 4 sigma.
  CHECK(counts[0] / double(n) == Approx(0.5).margin(0.015));
  CHECK(counts[1] / double(n) == Approx(0.3).margin(0.015));
  CHECK(counts[2] / double(n) == Approx(0.2).margin(0.015));
}

TEST_CASE("top_p keeps the smallest prefix reaching p / top_k the k best", "[sampler]") {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler p({1.0f, 0, 0.7f, 5}), k({1.0f, 2, 1.0f, 5});
  std::map<int, int> pc, kc;
  for (int i = 0; i < 4000; ++i) pc[p.sample(logits)]++, kc[k.sample(logits)]++;
  CHECK(pc.count(2) == 0);  // 0.5 + 0.3 >= 0.7: token 2 is cut
  CHECK(kc.count(2) == 0);
  CHECK(pc[0] / 4000.0 == Approx(0.625).margin(0.04));  // renormalised 0.5 / 0.8
}

TEST_CASE("the same seed gives the same stream", "[sampler]") {
  const std::vector<float> logits = test::random_floats(100, 3);
  Sampler a({0.8f, 20, 0.9f, 99}), b({0.8f, 20, 0.9f, 99}), c({0.8f, 20, 0.9f, 100});
  std::vector<int> sa, sb, sc;
  for (int i = 0; i < 64; ++i)
    sa.push_back(a.sample(logits)), sb.push_back(b.sample(logits)), sc.push_back(c.sample(logits));
  CHECK(sa == sb);
  CHECK(sa != sc);
}

TEST_CASE("invalid sampling parameters name the flag", "[sampler][bad-input]") {
  REQUIRE_ERROR_MENTIONS(Sampler({-1.0f, 0, 1.0f, 0}), "--temperature");
  REQUIRE_ERROR_MENTIONS(Sampler({1.0f, -2, 1.0f, 0}), "--top-k");
  REQUIRE_ERROR_MENTIONS(Sampler({1.0f, 0, 1.5f, 0}), "--top-p");
  REQUIRE_ERROR_MENTIONS(Sampler({1.0f, 0, 0.0f, 0}), "--top-p");
}

namespace {

// The sampler's definition, step by step over the whole vocabulary sorted, in double precision: what
// the ranking made only as far as the draw reads must reproduce, draw for draw, from the same seed,
// except where u lies so close to the edge of the drawn id's interval that the float weights of ids
// far below the best one (Sampler's sum) can move the edge past it.
struct SortedReference {
  SamplingParams params;
  std::mt19937_64 rng{params.seed};
  double margin = 0.0;  // of the last draw: how far u was from the nearer edge of the drawn id's interval
  std::int32_t sample(const std::vector<float>& logits) {
    std::vector<std::int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    std::size_t keep = params.top_k > 0 ? std::min<std::size_t>(params.top_k, ids.size()) : ids.size();
    std::vector<double> probs(keep);
    double sum = 0.0;
    for (std::size_t i = 0; i < keep; ++i)
      sum += probs[i] = std::exp((logits[ids[i]] - logits[ids[0]]) / static_cast<double>(params.temperature));
    for (auto& p : probs) p /= sum;
    double mass = 1.0;
    if (params.top_p < 1.0f) {
      mass = 0.0;
      std::size_t n = 0;
      while (n < keep && mass < params.top_p) mass += probs[n++];
      keep = n;
    }
    const double u = unit_double(rng());
    double cdf = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
      const double below = cdf;
      if (u < (cdf += probs[i] / mass)) {
        margin = std::min(u - below, cdf - u);
        return ids[i];
      }
    }
    margin = 0.0;
    return ids[keep - 1];
  }
};

// Draws @p draws tokens from @p logits with Sampler and the reference, from the same seed: every
// draw must agree, or lie within 1e-6 of an edge (then it is counted). Returns how many draws landed
// 512 or more ranks deep, and the count of edge cases in @p at_edge.
int compare_with_reference(const std::vector<float>& logits, const SamplingParams& params, int draws, int& at_edge) {
  Sampler fast(params);
  SortedReference reference{params};
  int deep = 0;
  at_edge = 0;
  for (int i = 0; i < draws; ++i) {
    const std::int32_t want = reference.sample(logits), got = fast.sample(logits);
    if (got != want) {
      INFO("draw " << i << ": " << got << " where the reference drew " << want << ", u " << reference.margin
                   << " from the edge");
      REQUIRE(reference.margin < 1e-6);
      ++at_edge;
    }
    deep += std::count_if(logits.begin(), logits.end(), [&](float l) { return l > logits[want]; }) >= 512;
  }
  return deep;
}

}  // namespace

TEST_CASE("ranking only as far as the draw reads gives the fully sorted definition's tokens", "[sampler]") {
  // 49,152 ids as SmolLM2's vocabulary; a hot temperature flattens the distribution so draws land
  // thousands of ranks deep and the ranking must grow past its first passes.
  std::vector<float> logits = test::random_floats(49152, 17);
  for (float& l : logits) l *= 8.0f;  // a spread of logits like a model's: T = 1 is peaked, T = 200 nearly flat
  for (std::size_t i = 0; i < logits.size(); i += 97) logits[i] = logits[i / 2];  // equal logits: ties by id
  for (const SamplingParams params :
       {SamplingParams{1.0f, 0, 1.0f, 3}, SamplingParams{20.0f, 0, 1.0f, 4}, SamplingParams{200.0f, 0, 0.95f, 5},
        SamplingParams{0.7f, 40, 0.9f, 6}, SamplingParams{50.0f, 30000, 1.0f, 7}}) {
    int at_edge = 0;
    const int deep = compare_with_reference(logits, params, 100, at_edge);
    CHECK(at_edge == 0);                                // no draw here comes near enough to an edge
    if (params.temperature >= 20.0f) CHECK(deep > 30);  // the test reached past the first two passes
  }
}

// The case the float weights are for: a few likely ids, and 50k ids just over 9·T below them whose
// weights (each about e^-9.5 of the best) hold a quarter of the mass and are summed in float.
TEST_CASE("a large mass far below the best ids moves a draw only at an edge", "[sampler]") {
  std::vector<float> logits = test::random_floats(49152, 23);
  for (float& l : logits) l = 0.5f + 0.4f * l;  // [0.1, 0.9]: cold, under 10 - 9
  for (int i = 0; i < 10; ++i) logits[i * 4099] = 10.0f - 0.1f * static_cast<float>(i);
  int at_edge = 0;
  const int deep = compare_with_reference(logits, SamplingParams{1.0f, 0, 1.0f, 11}, 2000, at_edge);
  CHECK(deep > 200);            // many draws walked deep into the float-summed ids
  CHECK(at_edge <= 2000 / 50);  // and few of them met an edge
}
