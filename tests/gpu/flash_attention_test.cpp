// SPDX-License-Identifier: MIT
// Lab 05's CUDA attention against the CPU's v0 (attention_naive): flash
// prefill and split-K decode on ragged batches, paged and contiguous, GQA
// 1:1, 7:1 and MQA; split-K in any number of pieces. Labelled gpu: with no
// device the executable exits 77 and ctest reports a skip.
#include <algorithm>
#include <numeric>
#include <random>

#include "core/thread_pool.h"
#include "cuda/attention_flash.h"
#include "gpu_test_util.h"
#include "kernels/attention.h"

using namespace servelab;
using namespace servelab::test;

namespace {

/**
 * |gpu - cpu v0| <= kOpAtol·10 + kOpRtol·10·|cpu|: the kernels sum up to
 * 1,000 exponentials in tile order with expf (2 ulp) where v0 sums in key
 * order with glibc's exp; measured on the CPU progression at under 1e-6,
 * the same kind of difference as one op's kOp bound, over ten times the terms.
 */
constexpr double kAtol = 10 * kOpAtol, kRtol = 10 * kOpRtol;

/// Sequences of (cached, new) tokens in one batch, their K/V on the host and the device.
struct RaggedKv {
  AttentionShape shape;
  std::vector<std::vector<float>> k, v;  // per sequence [context, kv_dim]
  std::vector<Tensor> dk, dv;
  std::vector<std::vector<std::int32_t>> tables;  // per sequence, when paged
  std::vector<Tensor> dtables;
  std::vector<AttentionSeq> host;
  std::vector<KVView> device;
  std::vector<cuda::AttentionRow> rows;
  std::vector<float> q;
  int T = 0, max_keys = 0;

  RaggedKv(AttentionShape s, const std::vector<std::pair<int, int>>& shapes, int block_size, unsigned seed) : shape(s) {
    const int kv_dim = s.num_kv_heads * s.head_dim;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto [cached, fresh] = shapes[i];
      const int context = cached + fresh;
      max_keys = std::max(max_keys, context);
      const int bs = block_size > 0 ? block_size : context, blocks = (context + bs - 1) / bs;
      std::vector<std::int32_t> table(static_cast<std::size_t>(blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(seed + static_cast<unsigned>(i)));
      k.push_back(random_floats(static_cast<std::size_t>(blocks) * bs * kv_dim, seed + 10 + static_cast<unsigned>(i)));
      v.push_back(random_floats(k.back().size(), seed + 20 + static_cast<unsigned>(i)));
      tables.push_back(table);
      dk.push_back(on_device(k.back()));
      dv.push_back(on_device(v.back()));
      dtables.push_back(cuda::upload(tables.back()));
      const bool paged = block_size > 0;
      host.push_back({T, fresh, cached,
                      KVView{k.back().data(), v.back().data(), static_cast<std::size_t>(kv_dim),
                             paged ? tables.back().data() : nullptr, paged ? bs : 0}});
      device.push_back(KVView{dk.back().as<float>(), dv.back().as<float>(), static_cast<std::size_t>(kv_dim),
                              paged ? dtables.back().as<const std::int32_t>() : nullptr, paged ? bs : 0});
      for (int j = 0; j < fresh; ++j) rows.push_back({static_cast<int>(i), cached + j});
      T += fresh;
    }
    q = random_floats(static_cast<std::size_t>(T) * s.num_heads * s.head_dim, seed + 99);
  }
  std::vector<float> cpu() {
    ThreadPool pool(2);
    std::vector<float> out(q.size());
    attention_naive(KernelContext{&pool}, out.data(), q.data(), host, shape);
    return out;
  }
};

constexpr AttentionShape kShapes[] = {{2, 2, 64}, {14, 2, 64}, {8, 1, 128}, {12, 2, 128}};

}  // namespace

TEST_CASE("CUDA flash prefill equals v0 on ragged batches - paged and contiguous - GQA 1:1 7:1 MQA", "[gpu][flash]") {
  for (const AttentionShape& s : kShapes)
    for (int bs : {0, 16}) {
      // A 1000-token prefill, a decode, a 17-token chunk after 40 cached, a 1-token prompt: tiles straddle sequences.
      RaggedKv b(s, {{0, 1000}, {999, 1}, {40, 17}, {0, 1}}, bs, 5);
      INFO("heads " << s.num_heads << ":" << s.num_kv_heads << " d " << s.head_dim << " block " << bs);
      const Tensor dq = on_device(b.q), drows = cuda::upload(b.rows), dviews = cuda::upload(b.device);
      Tensor out = poisoned(b.q.size());
      cuda::attention_flash_prefill(out.as<float>(), dq.as<const float>(), s.num_heads * s.head_dim,
                                    drows.as<const cuda::AttentionRow>(), dviews.as<const KVView>(), b.T,
                                    {s.num_heads, s.num_kv_heads, s.head_dim});
      CHECK(all_close(on_host(out), widen(b.cpu()), kAtol, kRtol));
    }
}

TEST_CASE("CUDA split-K decode equals v0 in any number of pieces", "[gpu][flash][split-k]") {
  for (const AttentionShape& s : kShapes)
    for (int bs : {0, 16}) {
      RaggedKv b(s, {{4095, 1}, {16, 1}, {0, 1}, {1000, 1}}, bs, 7);
      const auto cpu = widen(b.cpu());
      const Tensor dq = on_device(b.q), drows = cuda::upload(b.rows), dviews = cuda::upload(b.device);
      for (int pieces : {0, 1, 2, 3, 7, 64}) {
        INFO("heads " << s.num_heads << ":" << s.num_kv_heads << " d " << s.head_dim << " block " << bs << " pieces "
                      << pieces);
        const std::size_t scratch_floats = cuda::split_k_scratch_floats(b.T, s.num_heads, s.head_dim, 64);
        Tensor out = poisoned(b.q.size()), scratch = poisoned(scratch_floats);
        cuda::attention_split_k_decode(out.as<float>(), dq.as<const float>(), s.num_heads * s.head_dim,
                                       drows.as<const cuda::AttentionRow>(), dviews.as<const KVView>(), b.T, b.max_keys,
                                       {s.num_heads, s.num_kv_heads, s.head_dim}, pieces, scratch.as<float>(),
                                       scratch_floats);
        CHECK(all_close(on_host(out), cpu, kAtol, kRtol));
      }
    }
}
