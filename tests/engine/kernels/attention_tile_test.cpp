// SPDX-License-Identifier: MIT
// The register kernels of a decode's attention tile (kernels/cpu/attention_tile.h), each
// instruction set's against a double-precision loop, on strided rows as the paged cache has them.
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_tile.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("every instruction set's attention tile kernels give S = scale QK^T and O += PV", "[attention][tile]") {
  for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Generic}) {
    if (!cpu::isa_supported(isa)) {
      WARN("attention tile kernels for " << cpu::isa_name(isa) << " not tested: this CPU lacks it");
      continue;
    }
    const cpu::TileKernels kernels = cpu::tile_kernels(isa);
    if (isa == cpu::Isa::Generic) {  // its tiles stay on sgemm
      CHECK(kernels.scores == nullptr);
      CHECK(kernels.values == nullptr);
      continue;
    }
    REQUIRE(kernels.scores != nullptr);
    REQUIRE(kernels.values != nullptr);
    // Rows 1-9: the 4-row tiles and every remainder; D = 36 and 72 leave tails after 8 and 16 lanes (and after
    // the values kernel's two vectors); n = 1, 5, 16: a run cut by a block edge, and a whole block.
    for (int rows : {1, 2, 3, 4, 5, 7, 9})
      for (int D : {64, 36, 72, 128})
        for (int n : {1, 5, 16}) {
          const int ldq = D + 3, lds = 64, ldo = D + 1, ldp = 64;
          const std::size_t ldkv = static_cast<std::size_t>(3 * D);  // three KV heads per cache row
          const auto q = test::random_floats(static_cast<std::size_t>(rows) * ldq, 11);
          const auto k = test::random_floats(n * ldkv, 12), v = test::random_floats(n * ldkv, 13);
          const auto p = test::random_floats(static_cast<std::size_t>(rows) * ldp, 14);
          const auto o0 = test::random_floats(static_cast<std::size_t>(rows) * ldo, 15);
          const float scale = 0.125f;
          std::vector<float> s(static_cast<std::size_t>(rows) * lds, NAN), o = o0;
          kernels.scores(s.data(), lds, q.data(), ldq, rows, k.data() + D, ldkv, n, D, scale);  // KV head 1
          kernels.values(o.data(), ldo, p.data(), ldp, rows, v.data() + D, ldkv, n, D);
          INFO(cpu::isa_name(isa) << " rows " << rows << " D " << D << " n " << n);
          for (int r = 0; r < rows; ++r) {
            for (int j = 0; j < n; ++j) {
              double ref = 0;
              for (int d = 0; d < D; ++d) ref += static_cast<double>(q[r * ldq + d]) * k[j * ldkv + D + d];
              CHECK(std::abs(s[r * lds + j] - scale * ref) <= 1e-6 * std::sqrt(D));
            }
            CHECK(std::isnan(s[r * lds + n]));  // past the run: untouched
            for (int d = 0; d < D; ++d) {
              double ref = o0[r * ldo + d];
              for (int j = 0; j < n; ++j) ref += static_cast<double>(p[r * ldp + j]) * v[j * ldkv + D + d];
              CHECK(std::abs(o[r * ldo + d] - ref) <= 1e-6 * std::sqrt(n + 1));
            }
            CHECK(o[r * ldo + D] == o0[r * ldo + D]);  // the gap between rows: untouched
          }
        }
  }
}
