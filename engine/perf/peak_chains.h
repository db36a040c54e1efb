// SPDX-License-Identifier: MIT
/**
 * @file peak_chains.h
 * @brief The loop behind measure_peak_gflops() (machine.h): independent
 *        chains of one arithmetic instruction, nothing else.
 *
 * Twelve accumulators, each updated once per step: an FMA has a latency of
 * about 4 cycles and current cores issue two per cycle, so eight chains keep
 * the units busy and twelve leave room. They are named variables, not an
 * array, so they live in registers; the operands come through a volatile,
 * so the compiler cannot fold the chain away. Each instruction set's file
 * (peak_avx512.cpp, peak_avx2.cpp) is compiled for that set, so the step
 * inlines into the loop.
 */
#pragma once

namespace servelab::perf {

/// Accumulators per loop; the FLOPs of one step are kChains × the step's FLOPs.
inline constexpr int kChains = 12;

/// Multiplier of the chains, read at run time (defined in machine.cpp), so no chain can be folded.
extern volatile float peak_mul;
/// Addend of the chains, read at run time like peak_mul.
extern volatile float peak_add;

/**
 * @brief Runs a = step(a) on kChains accumulators for @p steps steps.
 * @param start start(i) is chain i's first value; they must differ, or the
 *        compiler merges identical chains into one.
 * @return the accumulators combined by @p add, so the work is observable.
 */
template <typename Start, typename Step, typename Add>
auto run_chains(long steps, Start start, Step step, Add add) {
  auto a0 = start(0), a1 = start(1), a2 = start(2), a3 = start(3), a4 = start(4), a5 = start(5);
  auto a6 = start(6), a7 = start(7), a8 = start(8), a9 = start(9), a10 = start(10), a11 = start(11);
  for (long i = 0; i < steps; ++i) {
    a0 = step(a0), a1 = step(a1), a2 = step(a2), a3 = step(a3), a4 = step(a4), a5 = step(a5);
    a6 = step(a6), a7 = step(a7), a8 = step(a8), a9 = step(a9), a10 = step(a10), a11 = step(a11);
  }
  return add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))), add(add(a8, a9), add(a10, a11)));
}
static_assert(kChains == 12, "run_chains() names twelve accumulators");

float peak_f32_generic(long steps);  ///< plain multiply and add in C++, as the generic kernels run
float peak_f32_avx2(long steps);     ///< 8-lane FMA (compiled with -mavx2 -mfma)
float peak_f32_avx512(long steps);   ///< 16-lane FMA (compiled with -mavx512f -mfma)
float peak_bf16_avx512(long steps);  ///< vdpbf16ps, 32 bf16 products into 16 f32 lanes (-mavx512bf16)

}  // namespace servelab::perf
