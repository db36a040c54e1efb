// SPDX-License-Identifier: MIT
// Greedy is argmax; top-k / top-p / temperature follow their definitions;
// a seed reproduces a stream.
#include <cmath>
#include <map>

#include "core/error.h"
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
