// SPDX-License-Identifier: MIT
// SwiGLU's gate (kernels/cpu/silu.h), each instruction set's against double precision over
// the range of gates a model produces and past it, and silu_mul() in fast and deterministic mode.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/silu.h"
#include "kernels/math/rmsnorm.h"
#include "kernels/ops.h"
#include "test_util.h"

using namespace servelab;

namespace {

double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

}  // namespace

TEST_CASE("every instruction set's silu_mul gives silu(gate) * up within 1e-6 relative", "[ops][silu]") {
  // Gates from -120 to 120 (past the kernels' clamp at ±87) and near 0; 203 leaves a tail after 8 and 16 lanes.
  std::vector<float> gate, up;
  for (int i = 0; i < 203; ++i) {
    const float t = static_cast<float>(i - 101);
    gate.push_back(i % 3 == 0 ? 1.2f * t : 0.05f * t);
    up.push_back(0.5f + 0.01f * static_cast<float>(i % 17));
  }
  for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Generic}) {
    if (!cpu::isa_supported(isa)) {
      WARN("silu_mul for " << cpu::isa_name(isa) << " not tested: this CPU lacks it");
      continue;
    }
    for (int n : {1, 7, 8, 9, 17, 203}) {
      std::vector<float> out(n + 1, NAN);
      cpu::silu_mul_kernel(isa)(out.data(), gate.data(), up.data(), n);
      for (int i = 0; i < n; ++i) {
        const double ref = silu_ref(gate[i]) * up[i];
        INFO(cpu::isa_name(isa) << " n " << n << " gate " << gate[i]);
        CHECK(std::abs(out[i] - ref) <= 1e-6 * std::abs(ref) + 1e-30);
      }
      CHECK(std::isnan(out[n]));  // past the end: untouched
    }
  }
}

TEST_CASE("silu_mul: deterministic mode is libm's swiglu bit for bit, fast mode within 1e-6", "[ops][silu]") {
  ThreadPool pool(2);
  const int T = 3, F = 37;
  const auto gate_up = test::random_floats(static_cast<std::size_t>(T) * 2 * F, 21);
  std::vector<float> fast(T * F), exact(T * F), ref(T * F);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < F; ++i) ref[t * F + i] = swiglu(gate_up[t * 2 * F + i], gate_up[t * 2 * F + F + i]);
  silu_mul(KernelContext{&pool, true}, exact.data(), gate_up.data(), T, F);
  silu_mul(KernelContext{&pool, false}, fast.data(), gate_up.data(), T, F);
  CHECK(std::memcmp(exact.data(), ref.data(), ref.size() * sizeof(float)) == 0);
  CHECK(test::all_close(fast, std::vector<double>(ref.begin(), ref.end()), 1e-6, 1e-6));
}
