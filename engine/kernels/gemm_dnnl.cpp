// SPDX-License-Identifier: MIT
#include "kernels/gemm_dnnl.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <dnnl.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/cpu/rows.h"

// The one OpenMP call the engine makes, declared here rather than through <omp.h>: the header
// belongs to the compiler (GCC's or LLVM's), while the function must be libgomp's, the runtime
// Debian's oneDNN was built against (CMake links it); the C API is the same in both.
extern "C" void omp_set_num_threads(int num_threads);

namespace servelab {

namespace {

using dnnl::memory;

// Fewest input rows worth a thread: below this a brgemm tile is mostly edge (measured on one
// Zen 4 core, qwen2.5-0.5b shapes: 16 rows run at 80-85% of 512 rows' GFLOP/s, 8 rows at 60%).
constexpr std::size_t kMinRowsPerThread = 16;
// Weight rows widened to f32 at a time when bf16 arithmetic is off (256 × K f32 stays in L2).
constexpr int kPanelRows = 256;
// Shapes kept; past this the cache starts again (a long-running server sees one M per batch size).
constexpr std::size_t kMaxCachedShapes = 1024;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One thread's product: out[M, n] (row stride ldc) = x[M, K] · w[n, K]ᵀ, in data type dt.
struct Shape {
  int M, n, K, ldc;
  memory::data_type dt;
  bool operator<(const Shape& o) const { return std::tie(M, n, K, ldc, dt) < std::tie(o.M, o.n, o.K, o.ldc, o.dt); }
};

struct Primitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
  std::size_t scratch_bytes;
};

dnnl::matmul::primitive_desc describe(const Shape& s) {
  const memory::desc src({s.M, s.K}, s.dt, {s.K, 1});
  const memory::desc weights({s.K, s.n}, s.dt, {1, s.K});  // W [n, K] row-major read as Wᵀ
  const memory::desc dst({s.M, s.n}, memory::data_type::f32, {s.ldc, 1});
  dnnl::primitive_attr attr;
  // Our scratch, one per thread: workers run the same primitive at the same time.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, cpu_engine());
}

std::shared_ptr<const Primitive> primitive_for(const Shape& s) {
  cpu_engine();  // constructed before the cache, so destroyed after the primitives that use it
  static std::mutex mutex;
  static std::map<Shape, std::shared_ptr<const Primitive>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(s); it != cache.end()) return it->second;
  if (cache.size() >= kMaxCachedShapes) cache.clear();  // holders keep theirs alive through the shared_ptr
  try {
    auto pd = describe(s);
    auto p = std::make_shared<const Primitive>(Primitive{pd, dnnl::matmul(pd), pd.scratchpad_desc().get_size()});
    cache.emplace(s, p);
    return p;
  } catch (const dnnl::error& e) {
    fail("matmul_dnnl: oneDNN has no matmul for ", s.M, " x ", s.n, " x ", s.K, " (", e.what(), ")");
  }
}

// Runs one primitive on this thread, alone: the engine's pool is the only parallelism.
void execute(const Shape& s, const void* x, const void* w, float* out) {
  thread_local const bool one_omp_thread = (omp_set_num_threads(1), true);
  (void)one_omp_thread;
  thread_local dnnl::stream stream(cpu_engine());
  thread_local std::vector<std::uint8_t> scratch;
  const auto p = primitive_for(s);
  if (scratch.size() < p->scratch_bytes) scratch.resize(p->scratch_bytes);
  memory src(p->pd.src_desc(), cpu_engine(), const_cast<void*>(x));
  memory weights(p->pd.weights_desc(), cpu_engine(), const_cast<void*>(w));
  memory dst(p->pd.dst_desc(), cpu_engine(), out);
  memory pad(p->pd.scratchpad_desc(), cpu_engine(), scratch.data());
  p->matmul.execute(
      stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, pad}});
  stream.wait();
}

// bf16 W widened to f32 a panel of rows at a time, then the f32 product on each panel into a
// dense tile that is copied into its columns of out (brgemm needs the dense destination; the
// copy is M × 256 floats from cache per 2·M·256·K FLOPs).
void widened_bf16(float* out, const float* x, const std::uint16_t* w, int M, int N, int K) {
  thread_local std::vector<float> panel, tile;
  panel.resize(static_cast<std::size_t>(kPanelRows) * K);
  tile.resize(static_cast<std::size_t>(M) * kPanelRows);
  for (int p0 = 0; p0 < N; p0 += kPanelRows) {
    const int rows = std::min(kPanelRows, N - p0);
    const std::uint16_t* src = w + static_cast<std::size_t>(p0) * K;
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * K; ++i) panel[i] = bf16_to_f32(src[i]);
    execute(Shape{M, rows, K, rows, memory::data_type::f32}, x, panel.data(), tile.data());
    for (int m = 0; m < M; ++m)
      std::copy_n(tile.data() + static_cast<std::size_t>(m) * rows, rows, out + static_cast<std::size_t>(m) * N + p0);
  }
}

}  // namespace

bool dnnl_available() {
  static const bool available = [] {
    const cpu::Isa isa = cpu::active_isa();
    if (isa == cpu::Isa::Generic) return false;
    // Before the first primitive: later calls are refused. AVX-512 keeps oneDNN's own choice (AMX included).
    if (isa == cpu::Isa::Avx2) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    return true;
  }();
  return available;
}

bool dnnl_bf16_arithmetic() {
  if (!dnnl_available() || cpu::active_isa() != cpu::Isa::Avx512) return false;
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

void matmul_dnnl(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M) {
  check(dnnl_available(), "matmul_dnnl: oneDNN is not used with SERVELAB_ISA=", cpu::isa_name(cpu::active_isa()));
  check(w.dtype == DType::F32 || w.dtype == DType::BF16, "matmul: weights must be f32 or bf16, got ",
        dtype_name(w.dtype));
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  const bool bf16 = w.dtype == DType::BF16, bf16_math = bf16 && ctx.bf16_activations && dnnl_bf16_arithmetic();
  // bf16 arithmetic: the activations rounded to bf16 once, shared by every worker.
  thread_local std::vector<std::uint16_t> x_bf16;
  if (bf16_math) {
    x_bf16.resize(static_cast<std::size_t>(M) * K);
    f32_to_bf16(x, x_bf16.data(), x_bf16.size());
  }
  const std::uint16_t* xb = x_bf16.data();
  // Threads split the input rows, so each writes whole rows of out: oneDNN 2.6 runs its brgemm
  // kernels only on a dense destination; a column slice of out (row stride N, width n < N) makes
  // it fall back to its older gemm:jit kernels, 30-50% slower on 2 threads here.
  ctx.pool->parallel_for(
      static_cast<std::size_t>(M),
      [&](std::size_t r0, std::size_t r1) {
        const int m0 = static_cast<int>(r0), rows = static_cast<int>(r1 - r0);
        const std::size_t x_at = static_cast<std::size_t>(m0) * K;
        float* o = out + static_cast<std::size_t>(m0) * N;
        if (bf16_math)
          execute(Shape{rows, N, K, N, memory::data_type::bf16}, xb + x_at, w.data, o);
        else if (bf16)
          widened_bf16(o, x + x_at, w.as<const std::uint16_t>(), rows, N, K);
        else
          execute(Shape{rows, N, K, N, memory::data_type::f32}, x + x_at, w.data, o);
      },
      kMinRowsPerThread);
}

std::string dnnl_kernel_name(const KernelContext& ctx, DType weight_dtype, int M, int N, int K) {
  if (!dnnl_available()) return std::string("oneDNN not used (ISA ") + cpu::isa_name(cpu::active_isa()) + ")";
  const bool bf16_math = weight_dtype == DType::BF16 && ctx.bf16_activations && dnnl_bf16_arithmetic();
  const std::size_t threads = static_cast<std::size_t>(ctx.pool->num_threads());
  const bool widened = weight_dtype == DType::BF16 && !bf16_math;
  const int rows = static_cast<int>(std::max<std::size_t>((static_cast<std::size_t>(M) + threads - 1) / threads,
                                                          std::min<std::size_t>(M, kMinRowsPerThread)));
  const int n = widened ? std::min(N, kPanelRows) : N;
  const auto p = primitive_for(Shape{rows, n, K, n, bf16_math ? memory::data_type::bf16 : memory::data_type::f32});
  return std::string(p->pd.impl_info_str()) + (widened ? " (bf16 widened to f32)" : "");
}

}  // namespace servelab
