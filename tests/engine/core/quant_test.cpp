// SPDX-License-Identifier: MIT
// llama.cpp's block formats (core/quant.h): f16 narrowing, each quantizer's
// error bound, and the row kernels on quantized weights against the same
// kernels on the dequantized f32 weights (bit for bit, every instruction set
// this CPU runs), and a model read in a GGUF's own types against it read as f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/quant.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/context.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"
#include "model/gguf.h"
#include "model/model.h"
#include "serve/generate.h"
#include "test_util.h"

using namespace servelab;

namespace {

constexpr DType kQuantized[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1};

Tensor f32_matrix(std::vector<float> v, std::int64_t rows, std::int64_t cols) {
  Tensor t = Tensor::zeros(DType::F32, {rows, cols});
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

}  // namespace

TEST_CASE("f32_to_f16 inverts f16_to_f32 on every half and rounds ties to even", "[quant]") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      CHECK(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    INFO("half 0x" << std::hex << h);
    REQUIRE(f32_to_f16(f) == h);
  }
  CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);      // halfway to the next half: to the even one
  CHECK(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);  // halfway, odd below: up
  CHECK(f32_to_f16(65520.0f) == 0x7c00);             // past the largest half: infinity
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);             // half the smallest subnormal: to zero
  CHECK(f32_to_f16(0x1.8p-25f) == 0x0001);
}

TEST_CASE("each quantizer keeps every element within its step of the original", "[quant]") {
  const std::int64_t n = 32 * 64;
  std::vector<float> x = test::random_floats(static_cast<std::size_t>(n), 11);
  for (std::size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;  // outliers, as real weights have
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);              // an all-zero block
  for (DType d : kQuantized) {
    INFO(dtype_name(d));
    std::vector<std::byte> blocks(dtype_nbytes(d, n));
    quantize_row(d, x.data(), blocks.data(), n);
    std::vector<float> y(static_cast<std::size_t>(n));
    dequantize_row(d, blocks.data(), y.data(), n);
    for (std::int64_t b = 0; b < n / 32; ++b) {
      const auto [lo, hi] = std::minmax_element(x.begin() + b * 32, x.begin() + b * 32 + 32);
      const float amax = std::max(std::fabs(*lo), std::fabs(*hi));
      const float step = d == DType::Q8_0 ? amax / 127 : d == DType::Q4_0 ? amax / 8 : (*hi - *lo) / 15;
      // Half a step from rounding, a little more from the f16 scale (2^-11 relative, times up to 127 steps).
      const float bound = 0.5f * step + amax * 0x1p-10f + 1e-30f;
      for (std::int64_t j = b * 32; j < b * 32 + 32; ++j) {
        INFO("element " << j << " = " << x[j] << ", got " << y[j]);
        // Q4_0's top level clamps at 7 steps above -8: the largest positive element may lose one more step.
        REQUIRE(std::fabs(y[j] - x[j]) <= bound + (d == DType::Q4_0 ? step : 0.0f));
      }
    }
    CHECK(std::all_of(y.begin() + 64, y.begin() + 96, [](float v) { return v == 0.0f; }));
  }
}

TEST_CASE("row kernels on quantized weights equal them on the dequantized f32 weights, bit for bit", "[quant][gemm]") {
  ThreadPool pool(1);
  for (const auto& [N, K] : {std::pair{37, 96}, std::pair{13, 64}, std::pair{5, 32}}) {
    const Tensor w32 = f32_matrix(test::random_floats(static_cast<std::size_t>(N) * K, 3), N, K);
    for (DType d : kQuantized) {
      const Tensor q = convert(w32, d, pool);
      const Tensor dq = convert(q, DType::F32, pool);
      CHECK(q.nbytes() == dtype_nbytes(d, static_cast<std::int64_t>(N) * K));
      for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Generic}) {
        if (!cpu::isa_supported(isa)) continue;
        for (int M : {1, 3, 6}) {
          INFO(cpu::isa_name(isa) << " " << dtype_name(d) << " M " << M << " N " << N << " K " << K);
          const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 4);
          std::vector<float> got(static_cast<std::size_t>(M) * N, NAN), want(got.size(), NAN);
          cpu::rows_kernel(isa)(got.data(), x.data(), q.data, d, M, N, K, 0, N);
          cpu::rows_kernel(isa)(want.data(), x.data(), dq.data, DType::F32, M, N, K, 0, N);
          CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("every instruction set's widening kernel gives dequantize_row()'s floats for its rows alone, bit for bit",
          "[quant][gemm]") {
  ThreadPool pool(1);
  const int N = 13, K = 96, n0 = 2, n1 = 11;
  const Tensor w32 = f32_matrix(test::random_floats(static_cast<std::size_t>(N) * K, 5), N, K);
  for (DType d : kQuantized) {
    const Tensor q = convert(w32, d, pool);
    const Tensor dq = convert(q, DType::F32, pool);
    for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Generic}) {
      if (!cpu::isa_supported(isa)) continue;
      INFO(cpu::isa_name(isa) << " " << dtype_name(d));
      std::vector<float> got(static_cast<std::size_t>(n1 - n0 + 1) * K, NAN);  // one row more: left untouched
      cpu::widen_kernel(isa)(got.data(), q.data, d, K, n0, n1);
      CHECK(std::memcmp(got.data(), dq.as<float>() + static_cast<std::size_t>(n0) * K,
                        static_cast<std::size_t>(n1 - n0) * K * sizeof(float)) == 0);
      CHECK(std::all_of(got.end() - K, got.end(), [](float v) { return std::isnan(v); }));
    }
  }
}

TEST_CASE("the BLAS path multiplies quantized weights as their dequantized f32 weights", "[quant][gemm]") {
  ThreadPool pool(2);
  const int M = 20, N = 150, K = 96;  // N spans several 64-row tiles and both threads
  const Tensor w32 = f32_matrix(test::random_floats(static_cast<std::size_t>(N) * K, 6), N, K);
  const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 7);
  for (DType d : kQuantized) {
    INFO(dtype_name(d));
    const Tensor q = convert(w32, d, pool);
    std::vector<float> got(static_cast<std::size_t>(M) * N, NAN), want(got.size(), NAN);
    matmul_blas(KernelContext{.pool = &pool}, got.data(), x.data(), q, M);
    matmul_reference(want.data(), x.data(), convert(q, DType::F32, pool), M);
    CHECK(test::all_close(got, std::vector<double>(want.begin(), want.end()), 1e-5 * std::sqrt(K), 1e-5));
  }
}

TEST_CASE("inputs rounded to 8 bits per block stay within half a step, with the block's sum kept", "[quant]") {
  const std::int64_t n = 32 * 16;
  std::vector<float> x = test::random_floats(static_cast<std::size_t>(n), 21);
  for (std::size_t i = 0; i < x.size(); i += 41) x[i] *= 20.0f;
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  std::vector<BlockQ8Input> q(static_cast<std::size_t>(n / 32));
  quantize_inputs(x.data(), q.data(), n);
  for (std::int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    CHECK(q[b].d == amax / 127.0f);
    for (int j = 0; j < 32; ++j) {
      INFO("block " << b << " element " << j << " = " << x[b * 32 + j]);
      REQUIRE(std::abs(q[b].qs[j]) <= 127);
      REQUIRE(std::fabs(q[b].d * q[b].qs[j] - x[b * 32 + j]) <= 0.5f * q[b].d * (1.0f + 1e-5f));
      sum += q[b].qs[j];
    }
    CHECK(q[b].s == q[b].d * static_cast<float>(sum));
  }
  CHECK(q[1].d == 0.0f);
  CHECK(std::all_of(std::begin(q[1].qs), std::end(q[1].qs), [](std::int8_t v) { return v == 0; }));
  // A block of subnormals, whose 1 / d overflows to infinity: still within ±127 (and no undefined cast).
  std::vector<float> tiny(32, 1e-40f);
  tiny[3] = -1e-40f;
  BlockQ8Input t;
  quantize_inputs(tiny.data(), &t, 32);
  CHECK(t.qs[0] == 127);
  CHECK(t.qs[3] == -127);
}

namespace {

// Σ over blocks of d_w·d_x·Σ level·q (+ m·s), in double from quant.h's level(), and Σ of the products' magnitudes.
template <typename Block>
std::pair<double, double> int8_reference(const Block* w, const BlockQ8Input* x, int blocks) {
  double sum = 0.0, magnitude = 0.0;
  for (int b = 0; b < blocks; ++b) {
    long dot = 0, abs_dot = 0;  // the kernels' partial sums are bounded by the sum of the products' magnitudes
    for (int j = 0; j < 32; ++j) {
      dot += static_cast<long>(level(w[b], j)) * x[b].qs[j];
      abs_dot += std::labs(static_cast<long>(level(w[b], j)) * x[b].qs[j]);
    }
    const double scale = static_cast<double>(f16_to_f32(w[b].d)) * x[b].d;
    sum += static_cast<double>(dot) * scale;
    magnitude += static_cast<double>(abs_dot) * std::fabs(scale);
    if constexpr (requires { w[b].m; }) {
      const double offset = static_cast<double>(f16_to_f32(w[b].m)) * x[b].s;
      sum += offset;
      magnitude += std::fabs(offset);
    }
  }
  return {sum, magnitude};
}

std::pair<double, double> int8_reference(DType d, const void* row, const BlockQ8Input* x, int blocks) {
  switch (d) {
    case DType::Q8_0: return int8_reference(static_cast<const BlockQ8_0*>(row), x, blocks);
    case DType::Q4_0: return int8_reference(static_cast<const BlockQ4_0*>(row), x, blocks);
    default: return int8_reference(static_cast<const BlockQ4_1*>(row), x, blocks);
  }
}

}  // namespace

TEST_CASE("integer-dot row kernels sum each block exactly and stay within 8-bit rounding of the f32 result",
          "[quant][gemm]") {
  ThreadPool pool(1);
  std::vector<std::pair<std::string, cpu::RowsInt8Kernel>> kernels{{"generic", cpu::rows_int8_generic}};
  if (cpu::isa_supported(cpu::Isa::Avx2)) kernels.emplace_back("avx2", cpu::rows_int8_avx2);
  if (cpu::vnni_supported()) kernels.emplace_back("avx512_vnni", cpu::rows_int8_avx512_vnni);
  for (const auto& [N, K] : {std::pair{37, 96}, std::pair{13, 64}, std::pair{5, 32}}) {
    std::vector<float> wv = test::random_floats(static_cast<std::size_t>(N) * K, 5);
    for (std::size_t i = 0; i < wv.size(); i += 7) wv[i] = -wv[i] * 3.0f;  // negative levels of every size
    const Tensor w32 = f32_matrix(wv, N, K);
    for (DType d : kQuantized) {
      const Tensor q = convert(w32, d, pool);
      const Tensor dq = convert(q, DType::F32, pool);
      for (int M : {1, 3, 6}) {
        auto x = test::random_floats(static_cast<std::size_t>(M) * K, 6);
        x[0] = 0.0f;  // a zero input, and a block with one large value
        if (K > 32) x[40] = 9.0f;
        std::vector<BlockQ8Input> xq(static_cast<std::size_t>(M) * K / 32);
        for (int m = 0; m < M; ++m) quantize_inputs(x.data() + m * K, xq.data() + m * K / 32, K);
        std::vector<float> exact(static_cast<std::size_t>(M) * N);
        cpu::rows_generic(exact.data(), x.data(), dq.data, DType::F32, M, N, K, 0, N);
        for (const auto& [name, kernel] : kernels) {
          INFO(name << " " << dtype_name(d) << " M " << M << " N " << N << " K " << K);
          std::vector<float> got(static_cast<std::size_t>(M) * N, NAN), alone(got.size(), NAN);
          kernel(got.data(), xq.data(), q.data, d, M, N, K, 0, N);
          for (int m = 0; m < M; ++m)  // each input row by itself: the same bits whatever the tile
            kernel(alone.data() + m * N, xq.data() + m * K / 32, q.data, d, 1, N, K, 0, N);
          CHECK(std::memcmp(got.data(), alone.data(), got.size() * sizeof(float)) == 0);
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < N; ++n) {
              const auto* row = q.as<const std::byte>() + dtype_nbytes(d, static_cast<std::int64_t>(n) * K);
              const auto [want, magnitude] = int8_reference(d, row, xq.data() + m * K / 32, K / 32);
              const float v = got[m * N + n];
              INFO("m " << m << " n " << n << ": " << v << ", exact sums " << want);
              REQUIRE(std::fabs(v - want) <= 1e-6 * magnitude + 1e-30);  // f32 sums of K / 32 exact terms
              // 8-bit inputs: each within half its block's step of x, so within Σ_b d_x/2 · Σ|w| of the f32 dot.
              double bound = 0.0;
              for (int b = 0; b < K / 32; ++b) {
                double wsum = 0.0;
                for (int j = 0; j < 32; ++j) wsum += std::fabs(dq.as<const float>()[n * K + b * 32 + j]);
                bound += 0.5 * xq[m * K / 32 + b].d * wsum;
              }
              REQUIRE(std::fabs(v - exact[m * N + n]) <= bound * 1.001 + 1e-5 * magnitude + 1e-30);
            }
        }
      }
    }
  }
}

TEST_CASE("the dtypes q8_0-math, q4_1-math and gguf-math choose int8 arithmetic, f32-math is refused", "[quant]") {
  for (const char* text : {"q8_0-math", "q4_0-math", "q4_1-math"}) {
    ModelOptions options;
    apply_dtype_flag(text, "--dtype", options);
    CHECK(options.int8_activations);
    CHECK_FALSE(options.bf16_activations);
  }
  // A GGUF's own types, each in its own arithmetic: int8 for blocks, bf16 for BF16 tensors (llama.cpp's BF16).
  ModelOptions gguf;
  apply_dtype_flag("gguf-math", "--dtype", gguf);
  CHECK(gguf.int8_activations);
  CHECK(gguf.bf16_activations);
  CHECK(gguf.gguf_types);
  ModelOptions options;
  apply_dtype_flag("q4_1", "--dtype", options);
  CHECK_FALSE(options.int8_activations);
  CHECK_THROWS_WITH(apply_dtype_flag("f32-math", "--dtype", options), Catch::Contains("unsupported dtype 'f32-math'"));
}

TEST_CASE("a model quantized, or read in a GGUF's own types, gives the greedy tokens of its dequantized f32 weights",
          "[quant][gguf]") {
  ModelOptions exact;
  exact.num_threads = 2;
  exact.deterministic = true;
  const std::vector<std::int32_t> prompt{1, 17, 42, 5, 99, 3};
  GenerateOptions g;
  g.max_new_tokens = 12;
  ThreadPool pool(2);
  {
    const GgufFile file(test::fixtures_dir() / "gguf" / "qwen2-tiny-chat.gguf");
    const ModelConfig config = gguf_config(file.contents(), file.path());
    for (DType d : kQuantized) {
      INFO(dtype_name(d));
      ModelWeights q = gguf_weights(file, config, d, pool);
      ModelWeights f = q;
      convert_matrices(f, DType::F32, pool);
      CHECK(q.layers[0].down_proj.dtype == d);
      CHECK(q.lm_head.data == q.embed_tokens.data);  // still tied
      Model quantized(config, std::move(q), exact), widened(config, std::move(f), exact);
      CHECK(generate(quantized, prompt, g).output_ids == generate(widened, prompt, g).output_ids);
    }
  }
  // llama-tiny-mixed.gguf stores each projection in another type: read as stored, the blocks are the mapping's.
  const GgufFile file(test::fixtures_dir() / "gguf" / "llama-tiny-mixed.gguf");
  const ModelConfig config = gguf_config(file.contents(), file.path());
  ModelWeights stored = gguf_weights(file, config, DType::F32, pool, true);
  const LayerWeights& l0 = stored.layers[0];
  CHECK(l0.gate_proj.dtype == DType::Q8_0);
  CHECK(l0.up_proj.dtype == DType::Q4_0);
  CHECK(l0.down_proj.dtype == DType::Q4_1);
  CHECK(l0.o_proj.dtype == DType::BF16);
  CHECK(l0.v_proj.dtype == DType::F32);  // f16 is widened
  for (const Tensor* t : {&l0.gate_proj, &l0.up_proj, &l0.down_proj, &l0.o_proj}) CHECK(t->owner == file.mapping());
  CHECK(l0.q_proj.owner != file.mapping());  // llama's Q rows are moved back into Hugging Face's order
  Model native(config, std::move(stored), exact);
  Model widened(config, gguf_weights(file, config, DType::F32, pool), exact);
  CHECK(generate(native, prompt, g).output_ids == generate(widened, prompt, g).output_ids);
}
