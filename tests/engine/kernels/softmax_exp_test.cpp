// SPDX-License-Identifier: MIT
// The vector exponentials of flash attention's softmax (kernels/cpu/softmax_exp.h), each
// instruction set's against double-precision exp, over the range a softmax row covers.
#include <cmath>
#include <vector>

#include "kernels/cpu/softmax_exp.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("every instruction set's exp_sum gives e^(x - max) within 4e-7 relative and their sum", "[attention][exp]") {
  // Exponents from 0 down past -87, where the vector kernels stop (their e^-87 is 1.6e-38: nothing beside e^0);
  // 61 values leave a tail after the 8- and 16-lane loops, and the lengths 1 to 17 every tail there is.
  std::vector<float> x;
  for (int i = 0; i < 61; ++i) x.push_back(3.0f - 1.7f * static_cast<float>(i) + 0.013f * static_cast<float>(i * i));
  const float max = 3.0f;
  for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Generic}) {
    if (!cpu::isa_supported(isa)) {
      WARN("exp_sum for " << cpu::isa_name(isa) << " not tested: this CPU lacks it");
      continue;
    }
    for (int n : {1, 7, 8, 9, 15, 16, 17, 61}) {
      std::vector<float> p(x.begin(), x.begin() + n);
      p.push_back(NAN);  // past the end: must stay untouched
      const float sum = cpu::exp_sum_kernel(isa)(p.data(), n, max);
      double sum_ref = 0;
      for (int j = 0; j < n; ++j) {
        const double ref = std::exp(static_cast<double>(x[j] - max));  // the kernels subtract in float too
        sum_ref += ref;
        INFO(cpu::isa_name(isa) << " n " << n << " x - max = " << x[j] - max);
        if (x[j] - max >= -87.0f)
          CHECK(std::abs(p[j] - ref) <= 4e-7 * ref);
        else
          CHECK(p[j] <= 2e-38f);
      }
      INFO(cpu::isa_name(isa) << " n " << n);
      CHECK(std::abs(sum - sum_ref) <= 1e-6 * sum_ref);
      CHECK(std::isnan(p[n]));
    }
  }
}
