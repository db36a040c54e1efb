// SPDX-License-Identifier: MIT
// Each CUDA op against the CPU kernel it mirrors (the specification), on
// seeded random inputs over ragged shapes, with every output NaN-poisoned
// before the op runs so an element it fails to write fails the comparison.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "cuda/gemm.h"
#include "cuda/ops.h"
#include "gemm_reference.h"
#include "gpu_test_util.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "model/sampler.h"

using namespace servelab;
using namespace servelab::test;

namespace {

constexpr bool round_bf16_off = false, round_bf16_on = true;

// x [M, K] · W [N, K]ᵀ in double, with both inputs first rounded to bf16 when @p bf16.
std::vector<double> reference_gemm(const std::vector<float>& x, const std::vector<float>& w, int M, int N, int K,
                                   bool bf16) {
  const auto value = [bf16](float v) { return double(bf16 ? bf16_to_f32(f32_to_bf16(v)) : v); };
  std::vector<double> out(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int k = 0; k < K; ++k)
        sum += value(x[static_cast<std::size_t>(m) * K + k]) * value(w[static_cast<std::size_t>(n) * K + k]);
      out[static_cast<std::size_t>(m) * N + n] = sum;
    }
  return out;
}

std::vector<std::int32_t> random_ids(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % vocab);
  return ids;
}

}  // namespace

TEST_CASE("embedding: rows copied and bf16 widened exactly as on the CPU", "[gpu][ops]") {
  const int vocab = 50, H = 33, T = 17;  // H odd: no vector-width assumptions
  const auto ids = random_ids(T, vocab, 1);
  for (DType dtype : {DType::F32, DType::BF16}) {
    DYNAMIC_SECTION(dtype_name(dtype)) {
      const Tensor table = host_matrix(random_floats(vocab * H, 2), vocab, H, dtype);
      std::vector<float> cpu(T * H);
      embedding_lookup(table, ids, cpu.data());
      const Tensor dev_table = cuda::to_device(table), dev_ids = cuda::upload(ids);
      Tensor out = poisoned(T * H);
      cuda::embedding_lookup(out.as<float>(), dev_table, dev_ids.as<const std::int32_t>(), T);
      CHECK(on_host(out) == cpu);
    }
  }
}

TEST_CASE("rmsnorm matches the CPU kernel, in place too", "[gpu][ops]") {
  ThreadPool pool(2);
  for (int T : {1, 17, 100})
    for (int n : {64, 896, 4864}) {
      DYNAMIC_SECTION("T " << T << " n " << n) {
        const auto x = random_floats(static_cast<std::size_t>(T) * n, T + n), w = random_floats(n, 7);
        std::vector<float> cpu(x.size());
        rmsnorm(KernelContext{&pool}, cpu.data(), x.data(), w.data(), T, n, 1e-6f);
        const Tensor dx = on_device(x), dw = on_device(w);
        Tensor out = poisoned(x.size());
        cuda::rmsnorm(out.as<float>(), dx.as<const float>(), dw.as<const float>(), T, n, 1e-6f);
        CHECK(all_close(on_host(out), widen(cpu), kOpAtol, kOpRtol, x.size()));
        cuda::rmsnorm(dx.as<float>(), dx.as<const float>(), dw.as<const float>(), T, n, 1e-6f);  // out aliases x
        CHECK(all_close(on_host(dx), widen(cpu), kOpAtol, kOpRtol, x.size()));
      }
    }
}

TEST_CASE("rope on the q and k heads of stacked qkv rows matches the CPU's separate calls", "[gpu][ops]") {
  // The model's layout: a qkv row is [q heads | k heads | v heads]; one launch rotates q and k, v stays.
  ThreadPool pool(2);
  const int T = 17, H = 14, KVH = 2, D = 64, Q = H * D, KV = KVH * D, QKV = Q + 2 * KV;
  std::vector<float> inv(D / 2);
  for (int i = 0; i < D / 2; ++i) inv[i] = std::pow(1e6f, -2.0f * i / D);
  std::vector<int> positions(T);
  std::mt19937 rng(3);
  for (auto& p : positions) p = static_cast<int>(rng() % 32768);  // large angles too
  const auto qkv = random_floats(static_cast<std::size_t>(T) * QKV, 4);
  std::vector<float> q(T * Q), k(T * KV);
  for (int t = 0; t < T; ++t) {
    std::memcpy(&q[t * Q], &qkv[t * QKV], sizeof(float) * Q);
    std::memcpy(&k[t * KV], &qkv[t * QKV + Q], sizeof(float) * KV);
  }
  rope(KernelContext{&pool}, q.data(), positions.data(), T, H, D, inv.data());
  rope(KernelContext{&pool}, k.data(), positions.data(), T, KVH, D, inv.data());
  const Tensor dev = on_device(qkv), dpos = cuda::upload(positions), dinv = on_device(inv);
  cuda::rope(dev.as<float>(), QKV, dpos.as<const int>(), T, H + KVH, D, dinv.as<const float>());
  const auto got = on_host(dev);
  std::vector<float> got_q(T * Q), got_k(T * KV);
  for (int t = 0; t < T; ++t) {
    std::memcpy(&got_q[t * Q], &got[t * QKV], sizeof(float) * Q);
    std::memcpy(&got_k[t * KV], &got[t * QKV + Q], sizeof(float) * KV);
    INFO("row " << t);
    CHECK(std::equal(&got[t * QKV + Q + KV], &got[(t + 1) * QKV], &qkv[t * QKV + Q + KV]));  // v untouched
  }
  CHECK(all_close(got_q, widen(q), kOpAtol, kOpRtol, q.size()));
  CHECK(all_close(got_k, widen(k), kOpAtol, kOpRtol, k.size()));
}

TEST_CASE("silu_mul, add_inplace, add_bias and gather_rows match the CPU", "[gpu][ops]") {
  ThreadPool pool(2);
  const int T = 17, F = 4864, N = 1152;
  const auto gate_up = random_floats(static_cast<std::size_t>(T) * 2 * F, 5);
  std::vector<float> cpu(static_cast<std::size_t>(T) * F);
  silu_mul(KernelContext{&pool}, cpu.data(), gate_up.data(), T, F);
  const Tensor dgu = on_device(gate_up);
  Tensor out = poisoned(cpu.size());
  cuda::silu_mul(out.as<float>(), dgu.as<const float>(), T, F);
  CHECK(all_close(on_host(out), widen(cpu), kOpAtol, kOpRtol, cpu.size()));

  auto x = random_floats(static_cast<std::size_t>(T) * N, 6);
  const auto y = random_floats(x.size(), 7), bias = random_floats(N, 8);
  const Tensor dx = on_device(x), dy = on_device(y), db = on_device(bias);
  add_inplace(x.data(), y.data(), x.size());
  cuda::add_inplace(dx.as<float>(), dy.as<const float>(), x.size());
  CHECK(on_host(dx) == x);  // one f32 add per element: identical bits
  add_bias(x.data(), bias.data(), T, N);
  cuda::add_bias(dx.as<float>(), db.as<const float>(), T, N);
  CHECK(on_host(dx) == x);

  const std::vector<std::int32_t> rows = {16, 0, 5, 5};
  const Tensor drows = cuda::upload(rows);
  Tensor picked = poisoned(rows.size() * N);
  cuda::gather_rows(picked.as<float>(), dx.as<const float>(), drows.as<const std::int32_t>(), 4, N);
  const auto got = on_host(picked);
  for (std::size_t r = 0; r < rows.size(); ++r)
    CHECK(std::equal(&got[r * N], &got[(r + 1) * N], &x[static_cast<std::size_t>(rows[r]) * N]));
}

TEST_CASE("narrow_to: bf16 is the CPU's f32_to_bf16, f16 rounds to nearest", "[gpu][ops]") {
  auto x = random_floats(1000, 9);
  for (auto& v : x) v *= 100.0f;
  x.insert(x.end(), {0.0f, -0.0f, 1.0f + 0x1.0p-8f, 1.0f + 0x1.8p-8f, INFINITY, 65504.0f, 1e-5f});
  const Tensor dx = on_device(x);
  Tensor out = cuda::device_empty(DType::BF16, {static_cast<std::int64_t>(x.size())});
  cuda::narrow_to(out.data, DType::BF16, dx.as<const float>(), x.size());
  const auto bf16 = cuda::download<std::uint16_t>(out.data, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(bf16[i] == f32_to_bf16(x[i]));
  cuda::narrow_to(out.data, DType::F16, dx.as<const float>(), x.size());
  const auto f16 = cuda::download<std::uint16_t>(out.data, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float back = f16_to_f32(f16[i]);
    INFO("x = " << x[i]);
    if (std::isinf(x[i]))
      CHECK(back == x[i]);
    else
      CHECK(std::abs(back - x[i]) <= std::max(std::abs(x[i]) * 0x1.0p-11f, 0x1.0p-25f));  // half an f16 ulp
  }
}

TEST_CASE("GEMM through cuBLAS: f32, bf16 and f16 weights against a CPU reference", "[gpu][ops][gemm]") {
  cuda::Gemm gemm;
  for (int M : {1, 7, 64, 300})
    for (auto [N, K] : {std::pair{33, 65}, std::pair{1152, 896}, std::pair{896, 4864}}) {
      DYNAMIC_SECTION("M " << M << " N " << N << " K " << K) {
        const auto x = random_floats(static_cast<std::size_t>(M) * K, M + K),
                   wv = random_floats(static_cast<std::size_t>(N) * K, N);
        const Tensor dx = on_device(x);
        // f32: full f32 products (no TF32) against a double loop, so the bound measures cuBLAS alone.
        const Tensor w32 = host_matrix(wv, N, K, DType::F32);
        const std::size_t outputs = static_cast<std::size_t>(M) * N;
        Tensor out = poisoned(outputs);
        gemm.matmul(out.as<float>(), dx.as<const float>(), cuda::to_device(w32), M);
        CHECK(all_close(on_host(out), reference_gemm(x, wv, M, N, K, round_bf16_off), kGemmAtol, kGemmRtol, outputs));
        // bf16: x and W rounded to bf16 as the GPU path does, then a double loop.
        const Tensor w16 = host_matrix(wv, N, K, DType::BF16);
        out = poisoned(outputs);
        gemm.matmul(out.as<float>(), dx.as<const float>(), cuda::to_device(w16), M);
        CHECK(all_close(on_host(out), reference_gemm(x, wv, M, N, K, round_bf16_on), kGemmAtol, kGemmRtol, outputs));
        // f16: the GPU's own rounding of x (checked above) read back, and a double loop.
        Tensor x16 = cuda::device_empty(DType::F16, {M, K});
        Tensor w_dev = cuda::device_empty(DType::F16, {N, K});
        cuda::narrow_to(w_dev.data, DType::F16, on_device(wv).as<const float>(), wv.size());
        cuda::narrow_to(x16.data, DType::F16, dx.as<const float>(), x.size());
        const auto w_bits = cuda::download<std::uint16_t>(w_dev.data, wv.size());
        const auto x_bits = cuda::download<std::uint16_t>(x16.data, x.size());
        std::vector<double> ref16(outputs);
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) {
            double sum = 0.0;
            for (int k = 0; k < K; ++k)
              sum += double(f16_to_f32(x_bits[static_cast<std::size_t>(m) * K + k])) *
                     f16_to_f32(w_bits[static_cast<std::size_t>(n) * K + k]);
            ref16[static_cast<std::size_t>(m) * N + n] = sum;
          }
        out = poisoned(outputs);
        gemm.matmul(out.as<float>(), dx.as<const float>(), w_dev, M);
        CHECK(all_close(on_host(out), ref16, kGemmAtol, kGemmRtol, outputs));
      }
    }
}

TEST_CASE("GEMV on Q8_0, Q4_0 and Q4_1 blocks matches a double loop over the dequantized weights", "[gpu][ops][gemm]") {
  ThreadPool pool(2);
  for (int M : {1, 3, 9})
    for (auto [N, K] : {std::pair{33, 64}, std::pair{576, 1536}}) {
      const auto x = random_floats(static_cast<std::size_t>(M) * K, M + K);
      const Tensor w32 = host_matrix(random_floats(static_cast<std::size_t>(N) * K, N), N, K, DType::F32);
      for (DType d : {DType::Q8_0, DType::Q4_0, DType::Q4_1}) {
        DYNAMIC_SECTION(dtype_name(d) << " M " << M << " N " << N << " K " << K) {
          // A double loop over the values dequantize() gives (the CPU's widening kernels multiply the same).
          const Tensor q = convert(w32, d, pool), dq = convert(q, DType::F32, pool);
          const std::vector<float> wv(dq.as<const float>(), dq.as<const float>() + dq.numel());
          const std::vector<double> want = reference_gemm(x, wv, M, N, K, round_bf16_off);
          Tensor out = poisoned(want.size());
          cuda::matmul_blocks(out.as<float>(), on_device(x).as<const float>(), cuda::to_device(q), M);
          CHECK(all_close(on_host(out), want, kGemmAtol, kGemmRtol, want.size()));
        }
      }
    }
}

TEST_CASE("KV write and naive attention over a ragged batch match the CPU", "[gpu][ops][attention]") {
  // Sequences as a mixed step sees them: a prefill, a decode, a prefill chunk
  // after 5 cached tokens, and a decode at position 999.
  ThreadPool pool(2);
  const int H = 14, KVH = 2, D = 64, Q = H * D, KV = KVH * D, QKV = Q + 2 * KV;
  struct Shape {
    int computed, fresh;
  };
  const std::vector<Shape> shapes = {{0, 17}, {40, 1}, {5, 3}, {999, 1}};
  const int max_len = 1000;
  int T = 0;
  for (const auto& s : shapes) T += s.fresh;
  const auto qkv = random_floats(static_cast<std::size_t>(T) * QKV, 10);

  // CPU: per-sequence caches, cached rows random, new rows written from qkv as the model does.
  std::vector<std::vector<float>> k_cache, v_cache;
  std::vector<AttentionSeq> seqs;
  std::vector<cuda::AttentionRow> rows;
  std::vector<float> q(static_cast<std::size_t>(T) * Q);
  int row = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    k_cache.push_back(random_floats(static_cast<std::size_t>(max_len) * KV, 20 + i));
    v_cache.push_back(random_floats(static_cast<std::size_t>(max_len) * KV, 30 + i));
    const KVView view{k_cache[i].data(), v_cache[i].data(), static_cast<std::size_t>(KV), nullptr, 0};
    seqs.push_back({row, shapes[i].fresh, shapes[i].computed, view});
    for (int j = 0; j < shapes[i].fresh; ++j, ++row) {
      const int pos = shapes[i].computed + j;
      rows.push_back({static_cast<int>(i), pos});
      std::memcpy(&q[static_cast<std::size_t>(row) * Q], &qkv[static_cast<std::size_t>(row) * QKV], sizeof(float) * Q);
      std::memcpy(view.key(pos), &qkv[static_cast<std::size_t>(row) * QKV + Q], sizeof(float) * KV);
      std::memcpy(view.value(pos), &qkv[static_cast<std::size_t>(row) * QKV + Q + KV], sizeof(float) * KV);
    }
  }
  std::vector<float> cpu(static_cast<std::size_t>(T) * Q);
  attention_naive(KernelContext{&pool}, cpu.data(), q.data(), seqs, {H, KVH, D});

  // GPU: the cached rows uploaded, the rows this step writes left as NaN for the KV-write kernel.
  std::vector<Tensor> dk, dv;
  std::vector<KVView> views;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    auto k = k_cache[i], v = v_cache[i];
    std::fill(k.begin() + static_cast<std::size_t>(shapes[i].computed) * KV, k.end(), NAN);
    std::fill(v.begin() + static_cast<std::size_t>(shapes[i].computed) * KV, v.end(), NAN);
    dk.push_back(on_device(k));
    dv.push_back(on_device(v));
    views.push_back({dk.back().as<float>(), dv.back().as<float>(), static_cast<std::size_t>(KV), nullptr, 0});
  }
  const Tensor dqkv = on_device(qkv), drows = cuda::upload(rows), dviews = cuda::upload(views);
  const auto* rows_p = drows.as<const cuda::AttentionRow>();
  cuda::kv_cache_write(dqkv.as<const float>(), QKV, Q, Q + KV, rows_p, dviews.as<const KVView>(), T, KV);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::size_t written = static_cast<std::size_t>(shapes[i].computed + shapes[i].fresh) * KV;
    const auto k = on_host(dk[i]), v = on_host(dv[i]);
    INFO("sequence " << i);
    CHECK(std::equal(k.begin(), k.begin() + written, k_cache[i].begin()));
    CHECK(std::equal(v.begin(), v.begin() + written, v_cache[i].begin()));
  }
  // Scratch for all rows in one launch, then for 3 rows per launch (several launches).
  for (int rows_per_launch : {T, 3}) {
    DYNAMIC_SECTION(rows_per_launch << " rows per launch") {
      const std::size_t scratch = cuda::attention_scores_floats(rows_per_launch, H, max_len);
      Tensor scores = poisoned(scratch), out = poisoned(cpu.size());
      cuda::attention_naive(out.as<float>(), dqkv.as<const float>(), QKV, rows_p, dviews.as<const KVView>(), T, max_len,
                            {H, KVH, D}, scores.as<float>(), scratch);
      CHECK(all_close(on_host(out), widen(cpu), kOpAtol, kOpRtol, cpu.size()));
    }
  }
  Tensor out = poisoned(cpu.size());
  REQUIRE_ERROR_MENTIONS(cuda::attention_naive(out.as<float>(), dqkv.as<const float>(), QKV, rows_p,
                                               dviews.as<const KVView>(), T, max_len, {H, KVH, D}, out.as<float>(), 10),
                         "score scratch");
}

TEST_CASE("naive attention reads K/V through a block table as the CPU does", "[gpu][ops][attention]") {
  // One sequence of 40 tokens in blocks of 16, stored out of order: logical block b lives in physical block table[b].
  ThreadPool pool(1);
  const int H = 4, KVH = 2, D = 32, KV = KVH * D, block = 16, tokens = 40;
  const std::vector<std::int32_t> table = {2, 0, 1};
  const auto k = random_floats(static_cast<std::size_t>(3) * block * KV, 40),
             v = random_floats(static_cast<std::size_t>(3) * block * KV, 41),
             q = random_floats(static_cast<std::size_t>(tokens) * H * D, 42);
  const KVView host_view{const_cast<float*>(k.data()), const_cast<float*>(v.data()), static_cast<std::size_t>(KV),
                         table.data(), block};
  std::vector<float> cpu(q.size());
  attention_naive(KernelContext{&pool}, cpu.data(), q.data(), {AttentionSeq{0, tokens, 0, host_view}}, {H, KVH, D});
  const Tensor dk = on_device(k), dv = on_device(v), dq = on_device(q), dtable = cuda::upload(table);
  const std::vector<KVView> views = {
      {dk.as<float>(), dv.as<float>(), static_cast<std::size_t>(KV), dtable.as<const std::int32_t>(), block}};
  std::vector<cuda::AttentionRow> rows;
  for (int t = 0; t < tokens; ++t) rows.push_back({0, t});
  const Tensor dviews = cuda::upload(views), drows = cuda::upload(rows);
  const std::size_t scratch = cuda::attention_scores_floats(tokens, H, tokens);
  Tensor scores = poisoned(scratch), out = poisoned(q.size());
  cuda::attention_naive(out.as<float>(), dq.as<const float>(), H * D, drows.as<const cuda::AttentionRow>(),
                        dviews.as<const KVView>(), tokens, tokens, {H, KVH, D}, scores.as<float>(), scratch);
  CHECK(all_close(on_host(out), widen(cpu), kOpAtol, kOpRtol, cpu.size()));
}

TEST_CASE("argmax per row: servelab::argmax's answer, ties to the lowest index", "[gpu][ops]") {
  const int R = 3, n = 151936;
  auto x = random_floats(static_cast<std::size_t>(R) * n, 50);
  for (auto& v : x) v = std::round(v * 8.0f);           // many ties at the maximum
  x[static_cast<std::size_t>(2) * n + n - 1] = 100.0f;  // the last element wins outright
  const Tensor dx = on_device(x);
  Tensor out = cuda::device_empty(DType::F32, {R});
  cuda::fill_bytes(out.data, 0xFF, out.nbytes());
  cuda::argmax_rows(out.as<std::int32_t>(), dx.as<const float>(), R, n);
  const auto got = cuda::download<std::int32_t>(out.data, R);
  for (int r = 0; r < R; ++r) CHECK(got[r] == argmax(std::span(x).subspan(static_cast<std::size_t>(r) * n, n)));
  CHECK(got[2] == n - 1);
}
