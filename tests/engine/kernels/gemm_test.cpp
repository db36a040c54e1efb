// Both GEMM paths against a double-precision loop, and the deterministic
// path's promise: a row's result does not depend on the batch it is in.
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/gemm.h"
#include "test_util.h"

using namespace servelab;

namespace {

Tensor weight(int N, int K, unsigned seed) {
  Tensor w = Tensor::zeros(DType::F32, {N, K});
  const auto r = test::random_floats(static_cast<std::size_t>(N) * K, seed);
  std::memcpy(w.data, r.data(), r.size() * sizeof(float));
  return w;
}

std::vector<double> reference(const std::vector<float>& x, const Tensor& w, int M) {
  const int N = static_cast<int>(w.shape[0]), K = static_cast<int>(w.shape[1]);
  std::vector<double> out(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(x[m * K + k]) * w.as<float>()[n * K + k];
      out[m * N + n] = s;
    }
  return out;
}

}  // namespace

TEST_CASE("matmul = x W^T / fast and deterministic / on ragged shapes", "[gemm]") {
  ThreadPool pool(2);
  for (int M : {1, 17, 64})
    for (auto [N, K] : {std::pair{1, 1}, {33, 7}, {96, 130}}) {
      const Tensor w = weight(N, K, 1);
      const auto x = test::random_floats(static_cast<std::size_t>(M) * K, 2);
      const auto expected = reference(x, w, M);
      for (bool det : {false, true}) {
        std::vector<float> out(static_cast<std::size_t>(M) * N, NAN);  // poisoned: an unwritten element fails
        matmul(KernelContext{&pool, det}, out.data(), x.data(), w, M);
        INFO("M " << M << " N " << N << " K " << K << (det ? " deterministic" : " fast"));
        // K products of O(1) terms: error grows like sqrt(K) * 2^-24 per element.
        CHECK(test::all_close(out, expected, 1e-5 * std::sqrt(K), 1e-5));
      }
    }
}

TEST_CASE("deterministic matmul: row m is bit-identical for any batch size and thread count", "[gemm][deterministic]") {
  const int N = 50, K = 300;
  const Tensor w = weight(N, K, 3);
  const auto x = test::random_floats(33 * K, 4);
  ThreadPool one(1), two(2);
  std::vector<float> batch(33 * N), single(N);
  matmul(KernelContext{&two, true}, batch.data(), x.data(), w, 33);
  for (int m : {0, 16, 32}) {
    matmul(KernelContext{&one, true}, single.data(), x.data() + m * K, w, 1);
    CHECK(std::memcmp(single.data(), batch.data() + m * N, N * sizeof(float)) == 0);
  }
}

TEST_CASE("add_bias adds the bias to every row", "[gemm]") {
  std::vector<float> out = {1, 2, 3, 4, 5, 6};
  const float bias[] = {10, 20, 30};
  add_bias(out.data(), bias, 2, 3);
  CHECK(out == std::vector<float>{11, 22, 33, 14, 25, 36});
}
