// SPDX-License-Identifier: MIT
#include "perf/machine.h"

#include <chrono>
#include <numeric>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/thread_pool.h"
#include "kernels/cpu/rows.h"
#include "perf/peak_chains.h"

namespace servelab {

namespace perf {
volatile float peak_mul = 0.999f, peak_add = 0.001f;

float peak_f32_generic(long steps) {
  const float b = peak_mul, c = peak_add;
  return run_chains(
      steps, [](int i) { return 1.0f + i * peak_add; }, [=](float a) { return a * b + c; },
      [](float x, float y) { return x + y; });
}
}  // namespace perf

namespace {

// 2^24 steps of twelve chains: about 50 ms at 100 GFLOP/s per core.
constexpr long kPeakSteps = 1L << 24;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Eight independent sums so the loop is limited by memory, not by the adds.
float sum_generic(const float* p, std::size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  return std::accumulate(acc, acc + 8, 0.0f);
}

#if defined(__x86_64__)
// GCC 12 warns about its own _mm512_undefined_* helpers inside the intrinsics headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning: clang does not know the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) float sum_avx512(const float* p, std::size_t n) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::size_t i = 0; i + 128 <= n; i += 128)
    for (int j = 0; j < 8; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(p + i + 16 * j));
  for (int j = 1; j < 8; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_reduce_add_ps(acc[0]);
}
#pragma GCC diagnostic pop

// The same eight sums in 256-bit registers: an AVX2-only CPU (Zen 2/3) or SERVELAB_ISA=avx2, whose decode
// kernels read with 256-bit loads too, so the roof is measured with the loads the kernels issue.
__attribute__((target("avx2"))) float sum_avx2(const float* p, std::size_t n) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t i = 0; i + 64 <= n; i += 64)
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(p + i + 8 * j));
  for (int j = 1; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  return std::accumulate(lanes, lanes + 8, 0.0f);
}

__attribute__((target("avx2"))) void triad_avx2(float* a, const float* b, const float* c, float s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
#endif

// The widest loads the engine's own kernels use (cpu::active_isa(), which SERVELAB_ISA lowers).
float sum(const float* p, std::size_t n) {
#if defined(__x86_64__)
  switch (cpu::active_isa()) {
    case cpu::Isa::Avx512: return sum_avx512(p, n);
    case cpu::Isa::Avx2: return sum_avx2(p, n);
    case cpu::Isa::Generic: break;
  }
#endif
  return sum_generic(p, n);
}

void triad(float* a, const float* b, const float* c, float s, std::size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return triad_avx2(a, b, c, s, n);
#endif
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

double measure_read_gbs(ThreadPool& pool) {
  static std::vector<float> buffer(std::size_t{1} << 28, 1.0f);  // 1 GiB
  const std::size_t parts = static_cast<std::size_t>(pool.num_threads());
  std::vector<float> partial(parts, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  pool.parallel_for(parts, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p)
      partial[p] = sum(buffer.data() + p * (buffer.size() / parts), buffer.size() / parts);
  });
  const double seconds = seconds_since(start);
  volatile float sink = std::accumulate(partial.begin(), partial.end(), 0.0f);
  (void)sink;
  return static_cast<double>(buffer.size() * sizeof(float)) / seconds / 1e9;
}

double measure_triad_gbs(ThreadPool& pool) {
  constexpr std::size_t n = std::size_t{1} << 26;  // 256 MiB per array
  static std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  const std::size_t parts = static_cast<std::size_t>(pool.num_threads());
  const auto start = std::chrono::steady_clock::now();
  pool.parallel_for(parts, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) {
      const std::size_t begin = p * (n / parts);
      triad(a.data() + begin, b.data() + begin, c.data() + begin, 3.0f, n / parts);
    }
  });
  return 3.0 * n * sizeof(float) / seconds_since(start) / 1e9;
}

double measure_peak_gflops(ThreadPool& pool, PeakOp op) {
  const cpu::Isa isa = cpu::active_isa();
  using perf::kChains;
  float (*loop)(long) = perf::peak_f32_generic;
  double flops_per_step = kChains * 2.0;
#if defined(SERVELAB_X86_KERNELS)
  if (op == PeakOp::Bf16Dot) {
    if (isa != cpu::Isa::Avx512 || !__builtin_cpu_supports("avx512bf16")) return 0.0;
    loop = perf::peak_bf16_avx512, flops_per_step = kChains * 16 * 4.0;
  } else if (isa == cpu::Isa::Avx512) {
    loop = perf::peak_f32_avx512, flops_per_step = kChains * 16 * 2.0;
  } else if (isa == cpu::Isa::Avx2) {
    loop = perf::peak_f32_avx2, flops_per_step = kChains * 8 * 2.0;
  }
#else
  if (op == PeakOp::Bf16Dot) return 0.0;
#endif
  const std::size_t threads = static_cast<std::size_t>(pool.num_threads());
  std::vector<float> sink(threads);
  const auto start = std::chrono::steady_clock::now();
  pool.parallel_for(threads, [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) sink[t] = loop(kPeakSteps);
  });
  const double seconds = seconds_since(start);
  volatile float keep = std::accumulate(sink.begin(), sink.end(), 0.0f);
  (void)keep;
  return flops_per_step * kPeakSteps * static_cast<double>(threads) / seconds / 1e9;
}

}  // namespace servelab
