// SPDX-License-Identifier: MIT
// RoPE inverse frequencies, plain and with Llama 3 scaling, against values
// transformers computed for the llama-tiny fixture (tools/make_fixtures.py prints them).
#include "kernels/math/rope.h"
#include "config/model_config.h"
#include "model/rope_freq.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("plain RoPE: inv_freq[i] = theta^(-2i/d)", "[rope]") {
  ModelConfig c = preset("tiny");  // head_dim 16, theta 1e6
  const auto inv = rope_inv_freq(c);
  REQUIRE(inv.size() == 8);
  for (int i = 0; i < 8; ++i) CHECK(inv[i] == Approx(std::pow(1e6, -2.0 * i / 16)).epsilon(1e-6));
}

TEST_CASE("llama3 scaling keeps short wavelengths / divides long ones / blends between", "[rope]") {
  const ModelConfig c = load_config(test::fixtures_dir() / "llama-tiny" / "config.json");
  const auto inv = rope_inv_freq(c);
  // transformers 5.24 model.rotary_emb.inv_freq for this config (kept, smoothed, then scaled by 1/8).
  const std::vector<double> expected = {1.0,
                                        0.03750671446323395,
                                        0.004700753837823868,
                                        0.0009115831344388425,
                                        0.00017677668074611574,
                                        3.428102354519069e-05,
                                        6.647869668086059e-06,
                                        1.289173155782919e-06};
  REQUIRE(inv.size() == expected.size());
  for (std::size_t i = 0; i < inv.size(); ++i) CHECK(inv[i] == Approx(expected[i]).epsilon(1e-6));
}

TEST_CASE("rotate-half RoPE: position 0 is the identity / rotations keep the norm", "[rope]") {
  std::vector<float> inv = {1.0f, 0.1f};
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};  // pairs (x0, x2) and (x1, x3)
  auto y = x;
  rope_rotate_head(y.data(), 4, inv.data(), 0);
  CHECK(y == x);
  rope_rotate_head(y.data(), 4, inv.data(), 3);
  // Pair 0 rotated by 3 rad: (1, 3) -> (cos3 - 3 sin3, 3 cos3 + sin3).
  CHECK(y[0] == Approx(std::cos(3.0) - 3 * std::sin(3.0)));
  CHECK(y[2] == Approx(3 * std::cos(3.0) + std::sin(3.0)));
  CHECK(y[1] * y[1] + y[3] * y[3] == Approx(2.0f * 2.0f + 4.0f * 4.0f));
}
