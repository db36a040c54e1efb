// SPDX-License-Identifier: MIT
// Naive causal GQA attention: hand-computable cases (one-hot keys with a
// large query select one value) and a differential check against a double loop.
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "attention_reference.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("a query matching one key with a large score returns that key's value", "[attention]") {
  ThreadPool pool(2);
  const int D = 4, L = 4;
  // Keys are one-hot: token t's key is e_t. Values are (t, t, t, t) + 1.
  std::vector<float> k(L * D, 0.0f), v(L * D);
  for (int t = 0; t < L; ++t) {
    k[t * D + t] = 1.0f;
    for (int d = 0; d < D; ++d) v[t * D + d] = t + 1.0f;
  }
  // Last token (pos 3) asks for key 2 with weight 100: softmax puts ~all mass there.
  std::vector<float> q(D, 0.0f);
  q[2] = 100.0f;
  std::vector<float> out(D, NAN);
  AttentionSeq seq{0, 1, 3, KVView{k.data(), v.data(), D, nullptr, 0}};
  attention_naive(KernelContext{&pool}, out.data(), q.data(), {seq}, {1, 1, D});
  for (float o : out) CHECK(o == Approx(3.0f).margin(1e-6));
}

TEST_CASE("causal: the first token attends only to itself", "[attention]") {
  ThreadPool pool(1);
  const int D = 2;
  std::vector<float> k = {1, 0, 0, 1}, v = {7, 8, 100, 200}, q = {0.3f, -0.2f, 0.5f, 0.5f};
  std::vector<float> out(4, NAN);
  AttentionSeq seq{0, 2, 0, KVView{k.data(), v.data(), D, nullptr, 0}};
  attention_naive(KernelContext{&pool}, out.data(), q.data(), {seq}, {1, 1, D});
  CHECK(out[0] == 7.0f);
  CHECK(out[1] == 8.0f);
  // Second token: scores 0.5/sqrt2 for both keys -> the mean of the two values.
  CHECK(out[2] == Approx(53.5f));
  CHECK(out[3] == Approx(104.0f));
}

TEST_CASE("GQA: query head h reads kv head h / group - ragged sequences", "[attention]") {
  ThreadPool pool(2);
  const int H = 4, KVH = 2, D = 8;
  // Two sequences: A has 3 cached + 2 new tokens, B has 0 cached + 4 new.
  struct S {
    int computed, fresh;
  };
  const S shapes[] = {{3, 2}, {0, 4}};
  std::vector<std::vector<float>> ks, vs;
  std::vector<AttentionSeq> seqs;
  int row = 0;
  for (int s = 0; s < 2; ++s) {
    const int n = shapes[s].computed + shapes[s].fresh;
    ks.push_back(test::random_floats(n * KVH * D, 10 + s));
    vs.push_back(test::random_floats(n * KVH * D, 20 + s));
    seqs.push_back({row, shapes[s].fresh, shapes[s].computed, KVView{ks[s].data(), vs[s].data(), KVH * D, nullptr, 0}});
    row += shapes[s].fresh;
  }
  const auto q = test::random_floats(row * H * D, 30);
  std::vector<float> out(q.size(), NAN);
  attention_naive(KernelContext{&pool}, out.data(), q.data(), seqs, {H, KVH, D});
  const auto expected = test::attention_reference(q, static_cast<std::size_t>(H) * D, seqs, {H, KVH, D});
  CHECK(test::all_close(out, expected, test::kKernelAtol, test::kKernelRtol));
}

TEST_CASE("blocked attention equals naive attention - ragged - GQA - cached prefix - paged view", "[attention]") {
  ThreadPool pool(2);
  const int H = 4, KVH = 2, D = 16;
  // (cached, new): a decode step, a short prefill, one spanning two 64-query blocks, a chunk after a prefix.
  const std::pair<int, int> shapes[] = {{40, 1}, {0, 17}, {0, 100}, {30, 70}};
  for (bool paged : {false, true}) {
    DYNAMIC_SECTION((paged ? "paged" : "contiguous")) {
      std::vector<std::vector<float>> ks, vs;
      std::vector<std::vector<std::int32_t>> tables;
      std::vector<AttentionSeq> seqs;
      int row = 0;
      for (std::size_t s = 0; s < std::size(shapes); ++s) {
        const int n = shapes[s].first + shapes[s].second, block = 16, blocks = (n + block - 1) / block;
        ks.push_back(test::random_floats(static_cast<std::size_t>(blocks) * block * KVH * D, 40 + s));
        vs.push_back(test::random_floats(ks.back().size(), 50 + s));
        tables.emplace_back();
        for (int b = 0; b < blocks; ++b)
          tables.back().push_back(blocks - 1 - b);  // reversed: runs break at every block
        KVView kv{ks.back().data(), vs.back().data(), static_cast<std::size_t>(KVH * D),
                  paged ? tables.back().data() : nullptr, paged ? block : 0};
        seqs.push_back({row, shapes[s].second, shapes[s].first, kv});
        row += shapes[s].second;
      }
      const auto q = test::random_floats(static_cast<std::size_t>(row) * H * D, 60);
      std::vector<float> naive(q.size(), NAN), blocked(q.size(), NAN);
      attention_naive(KernelContext{&pool}, naive.data(), q.data(), seqs, {H, KVH, D});
      attention_blocked(KernelContext{&pool}, blocked.data(), q.data(), seqs, {H, KVH, D});
      CHECK(test::all_close(blocked, std::vector<double>(naive.begin(), naive.end()), test::kKernelAtol,
                            test::kKernelRtol));
    }
  }
}
