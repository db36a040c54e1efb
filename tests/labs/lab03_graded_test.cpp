// SPDX-License-Identifier: MIT
// Graded tests of what a lab 03 student writes (the LAB03 regions: the
// engine's op counters, gemm_work, decode_weight_bytes and the cost model's
// roofline bound), by hand. Each one fails on the wrong implementations in
// tests/labs/mutants/lab03/.
#include "perf/cost_model.h"
#include "perf/work.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("gemm_work by hand: bf16 weights and f32 activations, and a zero dimension", "[lab03][graded]") {
  // out [4, 8] = x [4, 16] W[8, 16]^T
  const Work w = gemm_work(4, 8, 16, DType::BF16, DType::F32);
  CHECK(w.flops == 2.0 * 4 * 8 * 16);
  CHECK(w.weight_bytes == 8.0 * 16 * 2);
  CHECK(w.act_read == 4.0 * 16 * 4);
  CHECK(w.act_written == 4.0 * 8 * 4);
  CHECK(w.kv_read == 0);
  CHECK(w.kv_written == 0);
  CHECK(gemm_work(0, 8, 16, DType::F32, DType::F32).flops == 0);
}

TEST_CASE("the cost model's roofline bound: the slower roof at its efficiency, every byte, plus the overhead",
          "[lab03][graded]") {
  const CostModel m{"test", 100e9, 10e9, 0.001, false, 0.5, 0.8};
  Work compute;
  compute.flops = 1e9;  // 1e9 / (100e9 * 0.5) = 20 ms, against 1 MB / 8 GB/s = 0.125 ms of memory
  compute.weight_bytes = 1e6;
  CHECK(m.predict(compute) == Approx(0.020 + 0.001));
  Work memory;  // 80 MB in all kinds of bytes: 10 ms at 8 GB/s, against 0.2 ms of compute
  memory.flops = 1e7;
  memory.weight_bytes = 2e7;
  memory.act_read = 2e7;
  memory.act_written = 1e7;
  memory.kv_read = 2e7;
  memory.kv_written = 1e7;
  CHECK(m.predict(memory) == Approx(0.010 + 0.001));
  CHECK(m.predict(Work{}) == Approx(0.001));
}
