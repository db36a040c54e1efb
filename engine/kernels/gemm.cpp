// SPDX-License-Identifier: MIT
#include "kernels/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm_dnnl.h"

namespace servelab {

namespace {

// The weight types the row kernels read (cpu/rows.h): all but f16.
DType checked_dtype(const Tensor& w) {
  check(w.dtype != DType::F16, "matmul: weights must be f32, bf16, q8_0, q4_0 or q4_1, got ", dtype_name(w.dtype));
  return w.dtype;
}

// Weight rows handed to a thread at a time: a multiple of the kernels' 4-row tiles.
constexpr int kRowBlock = 16;

// Where the row kernels stop beating oneDNN (rows_kernel_max_m(), measured in gemm.h).
constexpr int kRowsMaxMDnnl = 64;

// Runs fn(n0, n1) on the pool over blocks of kRowBlock weight rows.
template <typename Fn>
void for_row_blocks(const KernelContext& ctx, int N, Fn fn) {
  const std::size_t blocks = (static_cast<std::size_t>(N) + kRowBlock - 1) / kRowBlock;
  ctx.pool->parallel_for(blocks, [&](std::size_t b0, std::size_t b1) {
    fn(static_cast<int>(b0) * kRowBlock, std::min(N, static_cast<int>(b1) * kRowBlock));
  });
}

}  // namespace

void matmul_reference(float* out, const float* x, const Tensor& w, int M) {
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  const DType dtype = checked_dtype(w);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const std::byte* row = w.as<const std::byte>() + dtype_nbytes(dtype, static_cast<std::int64_t>(n) * K);
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum += x[static_cast<std::size_t>(m) * K + k] * element_at(dtype, row, k);
      out[static_cast<std::size_t>(m) * N + n] = sum;
    }
}

void matmul_rows(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M) {
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  const DType dtype = checked_dtype(w);
#if defined(SERVELAB_X86_KERNELS)
  if (dtype == DType::BF16 && ctx.bf16_activations && cpu::bf16_dot_supported()) {
    // bf16 arithmetic: the inputs rounded to bf16 once (M·K values, against N·K weights read).
    thread_local std::vector<std::uint16_t> x_bf16;
    x_bf16.resize(static_cast<std::size_t>(M) * K);
    f32_to_bf16(x, x_bf16.data(), x_bf16.size());
    const std::uint16_t* xb = x_bf16.data();
    for_row_blocks(
        ctx, N, [&](int n0, int n1) { cpu::rows_avx512_bf16(out, xb, w.as<const std::uint16_t>(), M, N, K, n0, n1); });
    return;
  }
#endif
  if (dtype_is_quantized(dtype) && ctx.int8_activations) {
    // Integer arithmetic: the inputs rounded to 8 bits once (M·K values, against N·K weights read).
    thread_local std::vector<BlockQ8Input> x_q8;
    x_q8.resize(static_cast<std::size_t>(M) * (K / kQuantBlock));
    for (int m = 0; m < M; ++m)
      quantize_inputs(x + static_cast<std::size_t>(m) * K,
                      x_q8.data() + static_cast<std::size_t>(m) * (K / kQuantBlock), K);
    const BlockQ8Input* xq = x_q8.data();
    const cpu::RowsInt8Kernel kernel = cpu::rows_int8_kernel(cpu::active_isa());
    for_row_blocks(ctx, N, [&](int n0, int n1) { kernel(out, xq, w.data, dtype, M, N, K, n0, n1); });
    return;
  }
  const cpu::RowsKernel kernel = cpu::rows_kernel(cpu::active_isa());
  for_row_blocks(ctx, N, [&](int n0, int n1) { kernel(out, x, w.data, dtype, M, N, K, n0, n1); });
}

void use_blas_inside_engine_threads() {
  // One pool: OpenBLAS runs single-threaded inside each of our threads, so the
  // two never fight over the cores (a shared-core oversubscription is several times slower).
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void matmul_blas(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M) {
  use_blas_inside_engine_threads();
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  const DType dtype = checked_dtype(w);
  const cpu::WidenKernel widen = cpu::widen_kernel(cpu::active_isa());
  for_row_blocks(ctx, N, [&](int n0, int n1) {
    if (dtype == DType::F32) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, n1 - n0, K, 1.0f, x, K,
                  w.as<const float>() + static_cast<std::size_t>(n0) * K, K, 0.0f, out + n0, N);
      return;
    }
    // bf16 or quantized: widen a tile of weight rows into f32 scratch (it stays in cache), then sgemm on it.
    constexpr int kTile = 64;
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<std::size_t>(kTile) * K);
    for (int t0 = n0; t0 < n1; t0 += kTile) {
      const int rows = std::min(kTile, n1 - t0);
      if (dtype_is_quantized(dtype)) {
        widen(scratch.data(), w.data, dtype, K, t0, t0 + rows);
      } else {
        const std::size_t row_bytes = dtype_nbytes(dtype, K);
        for (int r = 0; r < rows; ++r)
          dequantize_row(dtype, w.as<const std::byte>() + (static_cast<std::size_t>(t0) + r) * row_bytes,
                         scratch.data() + static_cast<std::size_t>(r) * K, K);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, rows, K, 1.0f, x, K, scratch.data(), K, 0.0f, out + t0,
                  N);
    }
  });
}

int rows_kernel_max_m(const KernelContext& ctx, DType weight_dtype) {
  const cpu::Isa isa = cpu::active_isa();
  if (dnnl_available() && isa != cpu::Isa::Generic) return kRowsMaxMDnnl;
  switch (isa) {
    case cpu::Isa::Avx512: return 256;
    case cpu::Isa::Avx2: return 16;
    case cpu::Isa::Generic: return 4;
  }
  return 4;
}

std::string openblas_core_name() { return openblas_get_corename(); }

constexpr EnumNames<GemmPath, 3> kGemmPaths{
    {{{GemmPath::Rows, "rows"}, {GemmPath::OneDnn, "onednn"}, {GemmPath::OpenBlas, "openblas"}}}};

const char* gemm_path_name(GemmPath path) { return kGemmPaths.name(path); }

GemmPath matmul_path(const KernelContext& ctx, DType weight_dtype, int M) {
  if (ctx.deterministic || M <= rows_kernel_max_m(ctx, weight_dtype)) return GemmPath::Rows;
  // oneDNN takes f32 and bf16 weights; quantized rows are widened per tile for OpenBLAS (prefill only).
  return dnnl_available() && !dtype_is_quantized(weight_dtype) ? GemmPath::OneDnn : GemmPath::OpenBlas;
}

std::string matmul_kernel_name(const KernelContext& ctx, DType weight_dtype, int M, int N, int K) {
  switch (matmul_path(ctx, weight_dtype, M)) {
    case GemmPath::Rows: return std::string("rows_") + cpu::isa_name(cpu::active_isa());
    case GemmPath::OneDnn: return dnnl_kernel_name(ctx, weight_dtype, M, N, K);
    case GemmPath::OpenBlas: return "OpenBLAS " + openblas_core_name();
  }
  return "?";
}

void matmul(const KernelContext& ctx, float* out, const float* x, const Tensor& w, int M) {
  switch (matmul_path(ctx, w.dtype, M)) {
    case GemmPath::Rows: return matmul_rows(ctx, out, x, w, M);
    case GemmPath::OneDnn: return matmul_dnnl(ctx, out, x, w, M);
    case GemmPath::OpenBlas: return matmul_blas(ctx, out, x, w, M);
  }
}

void add_bias(float* out, const float* bias, int M, int N) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) out[static_cast<std::size_t>(m) * N + n] += bias[n];
}

}  // namespace servelab
