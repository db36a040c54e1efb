// SPDX-License-Identifier: MIT
// Attention at the shapes of the models people serve, which the small
// hand-made cases miss: head_dim 128 (qwen2.5-1.5b's is 128, llama-3-8b's
// too), 32 query heads over 8 KV heads (GQA 4:1, llama-3-8b) and a decode
// far into the context, through a paged view. Both CPU kernels against a
// double-precision loop. The GPU tests (tests/gpu) go to 32k positions; here
// 8k keeps the CPU suite fast (2 × 32 MiB of K/V).
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "attention_reference.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("attention at head_dim 128 with 32 query heads over 8 KV heads and 8k keys matches a double loop",
          "[attention]") {
  ThreadPool pool(2);
  const int H = 32, KVH = 8, D = 128, KV = KVH * D, block = 16;
  const AttentionShape shape{H, KVH, D};
  // (cached, new): a decode at position 8191, a decode at 4095, a 5-token chunk after 100, a 3-token prefill.
  const std::pair<int, int> shapes[] = {{8191, 1}, {4095, 1}, {100, 5}, {0, 3}};
  int total_blocks = 0;
  for (auto [cached, fresh] : shapes) total_blocks += (cached + fresh + block - 1) / block;
  // One pool of blocks shared by the sequences, handed out back to front so no table is in order.
  const auto k = test::random_floats(static_cast<std::size_t>(total_blocks) * block * KV, 70);
  const auto v = test::random_floats(k.size(), 71);
  std::vector<std::vector<std::int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  int next = total_blocks, row = 0;
  for (auto [cached, fresh] : shapes) {
    tables.emplace_back();
    for (int b = 0; b < (cached + fresh + block - 1) / block; ++b) tables.back().push_back(--next);
    const KVView view{const_cast<float*>(k.data()), const_cast<float*>(v.data()), static_cast<std::size_t>(KV),
                      tables.back().data(), block};
    seqs.push_back({row, fresh, cached, view});
    row += fresh;
  }
  // Queries scaled by 4 so that softmax is peaked enough for a wrong key or head to show.
  auto q = test::random_floats(static_cast<std::size_t>(row) * H * D, 72);
  for (auto& x : q) x *= 4.0f;
  const auto expected =
      test::attention_reference(q, static_cast<std::size_t>(shape.num_heads) * shape.head_dim, seqs, shape);
  // f32 against double over 8k keys: each dot product of 128 terms is off by ~1e-6 relative
  // (scores up to ~40 after scaling), and each output sums 8k weighted values; measured worst
  // error 4.5e-7 (naive) and 1.6e-7 (blocked). The bound leaves a 20x margin; a wrong head or key
  // moves outputs by ~1e-1.
  const double atol = 1e-5, rtol = 1e-5;
  std::vector<float> naive(q.size(), NAN), blocked(q.size(), NAN);  // NaN: an unwritten element fails
  attention_naive(KernelContext{&pool}, naive.data(), q.data(), seqs, shape);
  attention_blocked(KernelContext{&pool}, blocked.data(), q.data(), seqs, shape);
  CHECK(test::all_close(naive, expected, atol, rtol, q.size()));
  CHECK(test::all_close(blocked, expected, atol, rtol, q.size()));
}
