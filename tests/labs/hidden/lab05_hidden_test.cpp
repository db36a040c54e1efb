// SPDX-License-Identifier: MIT
// Hidden lab 05 tests: scores large enough to overflow e^s without the
// running max, and a ragged batch through split-K's automatic pieces.
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("hidden: flash and split-K stay finite and exact on scores near 1000", "[lab05][hidden]") {
  // Every key equals the query scaled up: scores of about 1000, whose e^s is inf in f32.
  ThreadPool pool(2);
  const int L = 150, D = 4;
  std::vector<float> k(static_cast<std::size_t>(L) * D), v = test::random_floats(static_cast<std::size_t>(L) * D, 9);
  for (int t = 0; t < L; ++t)
    for (int d = 0; d < D; ++d) k[static_cast<std::size_t>(t * D + d)] = 250.0f + 0.01f * static_cast<float>(t % 7);
  const std::vector<float> q(static_cast<std::size_t>(L) * D, 2.0f);
  const KVView kv{k.data(), v.data(), D, nullptr, 0};
  std::vector<float> naive(q.size()), flash(q.size(), NAN), split(D, NAN);
  attention_naive(KernelContext{&pool}, naive.data(), q.data(), {AttentionSeq{0, L, 0, kv}}, {1, 1, D});
  attention_flash(KernelContext{&pool}, flash.data(), q.data(), {AttentionSeq{0, L, 0, kv}}, {1, 1, D});
  attention_split_k(KernelContext{&pool}, split.data(), q.data(), {AttentionSeq{0, 1, L - 1, kv}}, {1, 1, D}, 3);
  CHECK(test::all_close(flash, {naive.begin(), naive.end()}, 1e-4, 1e-4));
  CHECK(test::all_close(split, {naive.end() - D, naive.end()}, 1e-4, 1e-4));
}

TEST_CASE("hidden: split-K on a ragged batch of decodes equals v0 sequence by sequence", "[lab05][hidden]") {
  ThreadPool pool(2);
  const AttentionShape shape{.num_heads = 6, .num_kv_heads = 2, .head_dim = 8};
  const int kv_dim = 16, q_dim = 48;
  const std::vector<int> lengths{1, 700, 65, 1100};
  std::vector<std::vector<float>> ks, vs;
  std::vector<AttentionSeq> seqs;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    ks.push_back(test::random_floats(static_cast<std::size_t>(lengths[i]) * kv_dim, 20 + static_cast<unsigned>(i)));
    vs.push_back(test::random_floats(static_cast<std::size_t>(lengths[i]) * kv_dim, 30 + static_cast<unsigned>(i)));
  }
  for (std::size_t i = 0; i < lengths.size(); ++i)
    seqs.push_back({static_cast<int>(i), 1, lengths[i] - 1, KVView{ks[i].data(), vs[i].data(), kv_dim, nullptr, 0}});
  auto q = test::random_floats(lengths.size() * q_dim, 40);
  for (auto& x : q) x *= 3.0f;
  std::vector<float> naive(q.size()), split(q.size(), NAN);
  attention_naive(KernelContext{&pool}, naive.data(), q.data(), seqs, shape);
  for (int pieces : {0, 4, 9}) {
    INFO("pieces " << pieces);
    attention_split_k(KernelContext{&pool}, split.data(), q.data(), seqs, shape, pieces);
    CHECK(test::all_close(split, {naive.begin(), naive.end()}, 1e-5, 1e-5));
  }
}
