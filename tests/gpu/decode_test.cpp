// SPDX-License-Identifier: MIT
// The decode step's pieces at the shapes that matter (head_dim 128, 32 query
// heads over 8 KV heads, positions up to 32k): the fused kernels against the
// CPU ops they replace, attention over 32k keys against a double loop, the
// device argmax on NaN rows, CUDA Graph capture and replay, and whole decode
// steps (no allocation, graphs replayed, the same bits as eager launches).
// Every output starts as NaN (poisoned() here, SERVELAB_CUDA_POISON for the model).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/cuda_model.h"
#include "cuda/graph.h"
#include "cuda/ops.h"
#include "attention_reference.h"
#include "gpu_test_util.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "model/rope_freq.h"
#include "model/sampler.h"
#include "model/weights.h"

using namespace servelab;
using namespace servelab::test;

namespace {

constexpr int kHeads = 32, kKVHeads = 8, kHeadDim = 128;  // llama-3-8b's attention; qwen2.5-1.5b's head_dim

std::vector<float> inv_freq_for(int D) {
  std::vector<float> inv(static_cast<std::size_t>(D) / 2);
  for (int i = 0; i < D / 2; ++i) inv[i] = std::pow(5e5f, -2.0f * i / D);
  return inv;
}

}  // namespace

TEST_CASE("fused bias + RoPE + KV write equals add_bias then rope then the cache copy at 32 over 8 heads of 128",
          "[gpu][ops][fused]") {
  ThreadPool pool(2);
  const int H = kHeads, KVH = kKVHeads, D = kHeadDim, Q = H * D, KV = KVH * D, QKV = Q + 2 * KV, block = 16;
  const std::vector<int> positions = {0, 1, 4095, 32767, 17, 30000};  // one row per sequence
  const int T = static_cast<int>(positions.size());
  const auto inv = inv_freq_for(D);
  const auto qkv = random_floats(static_cast<std::size_t>(T) * QKV, 80), bias = random_floats(QKV, 81);
  // CPU: the unfused ops, on a copy.
  std::vector<float> cpu = qkv, q(static_cast<std::size_t>(T) * Q), k(static_cast<std::size_t>(T) * KV);
  add_bias(cpu.data(), bias.data(), T, QKV);
  for (int t = 0; t < T; ++t) {
    std::memcpy(&q[static_cast<std::size_t>(t) * Q], &cpu[static_cast<std::size_t>(t) * QKV], sizeof(float) * Q);
    std::memcpy(&k[static_cast<std::size_t>(t) * KV], &cpu[static_cast<std::size_t>(t) * QKV + Q], sizeof(float) * KV);
  }
  rope(KernelContext{&pool}, q.data(), positions.data(), T, H, D, inv.data());
  rope(KernelContext{&pool}, k.data(), positions.data(), T, KVH, D, inv.data());
  // GPU: sequence t owns block t of a NaN cache; its row sits at position % block of that block.
  Tensor kc = poisoned(static_cast<std::size_t>(T) * block * KV),
         vc = poisoned(static_cast<std::size_t>(T) * block * KV);
  std::vector<std::vector<std::int32_t>> tables(T);
  std::vector<Tensor> dtables;
  std::vector<KVView> views;
  std::vector<cuda::AttentionRow> rows;
  for (int t = 0; t < T; ++t) {
    tables[t].assign(static_cast<std::size_t>(positions[t] / block) + 1, 0);
    tables[t].back() = t;  // only the block holding the new token matters
    dtables.push_back(cuda::upload(tables[t]));
    views.push_back(
        {kc.as<float>(), vc.as<float>(), static_cast<std::size_t>(KV), dtables.back().as<const std::int32_t>(), block});
    rows.push_back({t, positions[t]});
  }
  const Tensor dqkv = on_device(qkv), dbias = on_device(bias), dinv = on_device(inv);
  const Tensor drows = cuda::upload(rows), dviews = cuda::upload(views);
  cuda::qkv_bias_rope_kv_write(dqkv.as<float>(), dbias.as<const float>(), drows.as<const cuda::AttentionRow>(),
                               dviews.as<const KVView>(), T, {H, KVH, D}, dinv.as<const float>());
  const auto got = on_host(dqkv), got_k = on_host(kc), got_v = on_host(vc);
  std::vector<float> got_q, cache_k, cache_v;
  std::vector<double> want_v;
  for (int t = 0; t < T; ++t) {
    const std::size_t row = (static_cast<std::size_t>(t) * block + positions[t] % block) * KV;
    got_q.insert(got_q.end(), &got[static_cast<std::size_t>(t) * QKV], &got[static_cast<std::size_t>(t) * QKV + Q]);
    cache_k.insert(cache_k.end(), &got_k[row], &got_k[row + KV]);
    cache_v.insert(cache_v.end(), &got_v[row], &got_v[row + KV]);
    want_v.insert(want_v.end(), &cpu[static_cast<std::size_t>(t) * QKV + Q + KV],
                  &cpu[static_cast<std::size_t>(t + 1) * QKV]);
  }
  CHECK(all_close(got_q, widen(q), kOpAtol, kOpRtol, q.size()));
  CHECK(all_close(cache_k, widen(k), kOpAtol, kOpRtol, k.size()));
  CHECK(all_close(cache_v, want_v, 0.0, 0.0, want_v.size()));  // one f32 add: identical bits
  // Every other cache row is still NaN: the kernel wrote only where the tables point.
  const std::size_t written = static_cast<std::size_t>(T) * KV;
  CHECK(static_cast<std::size_t>(std::count_if(got_k.begin(), got_k.end(), [](float x) { return !std::isnan(x); })) ==
        written);
  CHECK(static_cast<std::size_t>(std::count_if(got_v.begin(), got_v.end(), [](float x) { return !std::isnan(x); })) ==
        written);
}

TEST_CASE("fused residual add + RMSNorm and silu_mul_to match the CPU ops in f32 and round once to bf16",
          "[gpu][ops][fused]") {
  ThreadPool pool(2);
  const int T = 5, n = 1536, F = 8960;  // qwen2.5-1.5b's hidden and intermediate sizes
  const auto x0 = random_floats(static_cast<std::size_t>(T) * n, 90), y = random_floats(x0.size(), 91);
  const auto w = random_floats(n, 92), gate_up = random_floats(static_cast<std::size_t>(T) * 2 * F, 93);
  std::vector<float> x = x0, norm(x0.size()), act(static_cast<std::size_t>(T) * F);
  add_inplace(x.data(), y.data(), x.size());
  rmsnorm(KernelContext{&pool}, norm.data(), x.data(), w.data(), T, n, 1e-6f);
  silu_mul(KernelContext{&pool}, act.data(), gate_up.data(), T, F);
  const Tensor dy = on_device(y), dw = on_device(w), dgu = on_device(gate_up);
  // Bounds for the bf16 outputs: the f32 bound, then one rounding to bf16 (half an ulp, 2⁻⁹ relative).
  const auto within_bf16 = [](const std::vector<std::uint16_t>& bits, const std::vector<float>& want) {
    std::vector<float> wide(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) wide[i] = bf16_to_f32(bits[i]);
    return all_close(wide, widen(want), kOpAtol, 0x1.0p-9 + kOpRtol, want.size());
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    DYNAMIC_SECTION(dtype_name(dtype)) {
      const Tensor dx = on_device(x0);
      Tensor out = poisoned(x0.size()), act_out = poisoned(act.size());
      cuda::add_rmsnorm(dx.as<float>(), dy.as<const float>(), dw.as<const float>(), out.data, dtype, T, n, 1e-6f);
      cuda::silu_mul_to(act_out.data, dtype, dgu.as<const float>(), T, F);
      CHECK(on_host(dx) == x);  // the residual stream: one f32 add per element, identical bits
      if (dtype == DType::F32) {
        CHECK(all_close(on_host(out), widen(norm), kOpAtol, kOpRtol, norm.size()));
        CHECK(all_close(on_host(act_out), widen(act), kOpAtol, kOpRtol, act.size()));
      } else {
        CHECK(within_bf16(cuda::download<std::uint16_t>(out.data, norm.size()), norm));
        CHECK(within_bf16(cuda::download<std::uint16_t>(act_out.data, act.size()), act));
      }
    }
  }
  // Without y: a plain RMSNorm, x untouched.
  const Tensor dx = on_device(x);
  Tensor out = poisoned(x.size());
  cuda::add_rmsnorm(dx.as<float>(), nullptr, dw.as<const float>(), out.data, DType::F32, T, n, 1e-6f);
  CHECK(on_host(dx) == x);
  CHECK(all_close(on_host(out), widen(norm), kOpAtol, kOpRtol, norm.size()));
}

TEST_CASE("naive attention over up to 32k keys at 32 over 8 heads of 128 matches a double loop",
          "[gpu][ops][attention]") {
  const int H = kHeads, KVH = kKVHeads, D = kHeadDim, KV = KVH * D, block = 16, max_len = 32768;
  // (cached, new): a decode at the last position of a 32k context, one at 16k, a chunk of 4 after 3000.
  const std::pair<int, int> shapes[] = {{32767, 1}, {16383, 1}, {3000, 4}};
  int total_blocks = 0;
  for (auto [cached, fresh] : shapes) total_blocks += (cached + fresh + block - 1) / block;
  const auto k = random_floats(static_cast<std::size_t>(total_blocks) * block * KV, 100);
  const auto v = random_floats(k.size(), 101);
  std::vector<std::vector<std::int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  std::vector<cuda::AttentionRow> rows;
  int next = total_blocks, T = 0;
  for (auto [cached, fresh] : shapes) {
    tables.emplace_back();
    for (int b = 0; b < (cached + fresh + block - 1) / block; ++b) tables.back().push_back(--next);  // back to front
    seqs.push_back({T, fresh, cached,
                    KVView{const_cast<float*>(k.data()), const_cast<float*>(v.data()), static_cast<std::size_t>(KV),
                           tables.back().data(), block}});
    for (int j = 0; j < fresh; ++j) rows.push_back({static_cast<int>(seqs.size()) - 1, cached + j});
    T += fresh;
  }
  auto q = random_floats(static_cast<std::size_t>(T) * H * D, 102);
  for (auto& x : q) x *= 4.0f;  // a peaked softmax: a wrong key or head shows
  const auto expected = test::attention_reference(q, static_cast<std::size_t>(H) * D, seqs, AttentionShape{H, KVH, D});
  const Tensor dk = on_device(k), dv = on_device(v), dq = on_device(q);
  std::vector<Tensor> dtables;
  std::vector<KVView> views;
  for (const auto& t : tables) {
    dtables.push_back(cuda::upload(t));
    views.push_back(
        {dk.as<float>(), dv.as<float>(), static_cast<std::size_t>(KV), dtables.back().as<const std::int32_t>(), block});
  }
  const Tensor dviews = cuda::upload(views), drows = cuda::upload(rows);
  const std::size_t scratch = cuda::attention_scores_floats(T, H, max_len);
  Tensor scores = poisoned(scratch), out = poisoned(q.size());
  cuda::attention_naive(out.as<float>(), dq.as<const float>(), static_cast<std::size_t>(H) * D,
                        drows.as<const cuda::AttentionRow>(), dviews.as<const KVView>(), T, max_len, {H, KVH, D},
                        scores.as<float>(), scratch);
  const auto got = on_host(out);
  const Closeness c = closeness(got, expected, kLongAttentionAtol, kLongAttentionRtol);
  WARN("32k-key attention: worst |gpu - double| = " << c.worst << " (bound " << kLongAttentionAtol << " + "
                                                    << kLongAttentionRtol << "·|ref|)");
  CHECK(all_close(got, expected, kLongAttentionAtol, kLongAttentionRtol, q.size()));
}

TEST_CASE("device argmax: a NaN never wins and a row of NaNs gives 0, as servelab::argmax", "[gpu][ops]") {
  const int n = 151936;
  std::vector<float> x(static_cast<std::size_t>(3) * n, NAN);                                   // row 0: all NaN
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(n) + i] = (i % 2 == 0) ? NAN : -1.0f;  // row 1: NaN and -1
  x[static_cast<std::size_t>(n) + 12345] = 3.0f;
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(2) * n + i] = -INFINITY;  // row 2: all -inf but one NaN
  x[static_cast<std::size_t>(2) * n + 7] = NAN;
  const Tensor dx = on_device(x);
  Tensor out = poisoned(3);
  cuda::argmax_rows(out.as<std::int32_t>(), dx.as<const float>(), 3, n);
  const auto got = cuda::download<std::int32_t>(out.data, 3);
  for (int r = 0; r < 3; ++r) {
    INFO("row " << r);
    CHECK(got[r] == argmax(std::span(x).subspan(static_cast<std::size_t>(r) * n, n)));
  }
  CHECK(got[0] == 0);
  CHECK(got[1] == 12345);
  CHECK(got[2] == 0);
}

TEST_CASE("a failed CUDA call leaves no stale error for the next launch check", "[gpu][errors]") {
  // An allocation far beyond any GPU fails with cudaErrorMemoryAllocation, an error that is not sticky.
  // Without the clear in check_cuda() the runtime would keep it as its last error, and the next
  // CUDA_CHECK_LAUNCH would blame the innocent kernel below. (Not testable without a GPU: there every
  // call fails with the same sticky initialisation error.)
  REQUIRE_ERROR_MENTIONS(cuda::device_empty(DType::F32, {std::int64_t{1} << 50}), "cudaMalloc",
                         "cudaErrorMemoryAllocation");
  CHECK_FALSE(cuda::error_pending());
  const Tensor x = on_device(std::vector<float>(8, 1.0f)), y = on_device(std::vector<float>(8, 2.0f));
  cuda::add_inplace(x.as<float>(), y.as<const float>(), 8);  // would throw "launch of add_inplace_kernel failed"
  CHECK(on_host(x) == std::vector<float>(8, 3.0f));
}

TEST_CASE("a GraphCache captures once and replays what it captured", "[gpu][graph]") {
  const std::size_t n = 1000;
  const auto y = random_floats(n, 110);
  const Tensor dx = on_device(std::vector<float>(n, 1.0f)), dy = on_device(y);
  cuda::GraphCache graphs;
  for (int i = 0; i < 3; ++i) graphs.run(7, [&] { cuda::add_inplace(dx.as<float>(), dy.as<const float>(), n); });
  CHECK(graphs.captures() == 1);
  CHECK(graphs.replays() == 2);
  const auto got = on_host(dx);
  for (std::size_t i = 0; i < n; ++i) {
    float want = 1.0f;
    for (int r = 0; r < 3; ++r) want += y[i];
    REQUIRE(got[i] == want);  // ran three times: the capture itself queued nothing
  }
  // A capture whose recording throws leaves no graph and the stream usable.
  REQUIRE_THROWS_AS(graphs.run(8, [] { servelab::fail("recording failed"); }), Error);
  CHECK(graphs.size() == 1);
  cuda::add_inplace(dx.as<float>(), dy.as<const float>(), n);
  cuda::synchronize();
}

namespace {

// A CudaModel of preset @p name with seeded synthetic weights in @p dtype.
std::unique_ptr<CudaModel> cuda_model(const std::string& name, DType dtype) {
  const ModelConfig c = preset(name);
  ThreadPool pool(2);
  return std::make_unique<CudaModel>(c, synthetic_weights(c, 0, pool, dtype), rope_inv_freq(c));
}

// A prefill of two sequences, then @p steps decode steps of both; returns every step's logits, concatenated.
std::vector<float> decode_run(CudaModel& model, KVCache& cache, int vocab, int steps) {
  std::vector<std::int32_t> a(20), b(7);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::int32_t>((i * 7919 + 13) % vocab);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::int32_t>((i * 104729 + 5) % vocab);
  Batch prefill;
  prefill.add({0, 1}, 0, a);
  prefill.add({2, 3}, 0, b);
  std::vector<float> all = model.forward(prefill, cache);
  for (int s = 0; s < steps; ++s) {
    const std::int32_t ta = static_cast<std::int32_t>(s * 31 % vocab), tb = static_cast<std::int32_t>(s * 17 % vocab);
    Batch decode;
    decode.add({0, 1}, 20 + s, std::span(&ta, 1));
    decode.add({2, 3}, 7 + s, std::span(&tb, 1));
    const auto logits = model.forward(decode, cache);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

}  // namespace

TEST_CASE("decode steps allocate nothing, replay one CUDA graph, and give the bits of eager launches",
          "[gpu][model][graph]") {
  for (DType dtype : {DType::F32, DType::BF16}) {
    DYNAMIC_SECTION(dtype_name(dtype)) {
      auto graphed = cuda_model("small", dtype), eager = cuda_model("small", dtype);
      eager->set_graphs(false);
      const int vocab = preset("small").vocab_size, steps = 12;
      auto cache_g = graphed->make_kv_cache(4, 16), cache_e = eager->make_kv_cache(4, 16);
      const long growths = graphed->stats().plan_growths;  // the buffers were sized with the cache
      const auto with_graphs = decode_run(*graphed, *cache_g, vocab, steps);
      const auto without = decode_run(*eager, *cache_e, vocab, steps);
      CHECK(graphed->stats().plan_growths == growths);     // no step allocated
      CHECK(graphed->stats().graph_replays == steps - 1);  // the first decode step captured, the rest replayed
      CHECK(eager->stats().graph_replays == 0);
      REQUIRE(with_graphs.size() == static_cast<std::size_t>(2 * (steps + 1)) * vocab);
      CHECK(all_close(with_graphs, widen(without), 0.0, 0.0, with_graphs.size()));  // same kernels, same bits
    }
  }
}

TEST_CASE("forward_greedy returns the device argmax of forward's logits rows", "[gpu][model]") {
  auto model = cuda_model("small", DType::BF16);
  const int vocab = preset("small").vocab_size;
  auto cache = model->make_kv_cache(4, 16);
  const std::vector<std::int32_t> prompt = {5, 9, 200, 31, 7};
  Batch all;
  all.add({0}, 0, prompt, LogitsFor::All);
  const auto logits = model->forward(all, *cache);
  const auto tokens = model->forward_greedy(all, *cache);  // the same K/V rewritten: same step
  REQUIRE(tokens.size() == prompt.size());
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    INFO("row " << r);
    CHECK(tokens[r] == argmax(std::span(logits).subspan(r * vocab, static_cast<std::size_t>(vocab))));
  }
  // A step with no logits rows returns nothing, after waiting for (and checking) its kernels.
  Batch none;
  none.add({1}, 0, prompt, LogitsFor::None);
  CHECK(model->forward(none, *cache).empty());
  CHECK(model->forward_greedy(none, *cache).empty());
}

TEST_CASE("on CUDA the model counts the same work as on the CPU and keeps no host copy of the weights",
          "[gpu][model]") {
  ModelOptions cpu_options, gpu_options;
  gpu_options.backend = Backend::CUDA;
  auto cpu = Model::from_preset("small", 0, cpu_options), gpu = Model::from_preset("small", 0, gpu_options);
  CHECK(gpu->weights().layers.empty());
  CHECK(gpu->weights().embed_tokens.empty());
  Batch batch;
  const std::vector<std::int32_t> a = {1, 2, 3, 4}, b = {9};
  batch.add({0}, 0, a);
  batch.add({1}, 3, b);
  Work counted[2];
  Model* models[2] = {cpu.get(), gpu.get()};
  for (int m = 0; m < 2; ++m) {
    auto cache = models[m]->make_kv_cache(2, 8);
    models[m]->work_counter().reset();
    models[m]->work_counter().enable(true);
    models[m]->forward(batch, *cache);
    models[m]->work_counter().enable(false);
    counted[m] = models[m]->work_counter().total();
  }
  CHECK(counted[1].flops > 0);
  CHECK(counted[1].flops == counted[0].flops);
  CHECK(counted[1].bytes() == counted[0].bytes());
}
