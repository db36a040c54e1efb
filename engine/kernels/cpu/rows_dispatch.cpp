// SPDX-License-Identifier: MIT
#include <cstdlib>
#include <string>

#if defined(SERVELAB_X86_KERNELS)
#include <cpuid.h>
#endif

#include "core/enum_names.h"
#include "core/error.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/rows.h"
#include "kernels/cpu/silu.h"
#include "kernels/cpu/softmax_exp.h"

namespace servelab::cpu {

constexpr EnumNames<Isa, 3> kIsaNames{{{{Isa::Avx512, "avx512"}, {Isa::Avx2, "avx2"}, {Isa::Generic, "generic"}}}};

const char* isa_name(Isa isa) { return kIsaNames.name(isa); }

#if defined(SERVELAB_X86_KERNELS)
/// F16C (half <-> float conversion) from CPUID leaf 1, ECX bit 29: clang's
/// __builtin_cpu_supports() does not know the "f16c" feature name.
/// Asked once: CPUID exits to the hypervisor in a VM, microseconds a call.
static bool f16c_supported() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}
#endif

bool isa_supported(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c_supported();
    case Isa::Generic: return true;
  }
  return false;
#else
  return isa == Isa::Generic;
#endif
}

bool bf16_dot_supported() {
#if defined(SERVELAB_X86_KERNELS)
  return active_isa() == Isa::Avx512 && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool vnni_supported() {
#if defined(SERVELAB_X86_KERNELS)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID leaf 7: ECX bit 11 is AVX512_VNNI (asked once, as above)
    return active_isa() == Isa::Avx512 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_AVX512VNNI) != 0;
  }();
  return has;
#else
  return false;
#endif
}

RowsInt8Kernel rows_int8_kernel(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  if (isa == Isa::Avx512 && vnni_supported()) return rows_int8_avx512_vnni;
  if (isa != Isa::Generic && isa_supported(Isa::Avx2)) return rows_int8_avx2;
#endif
  return rows_int8_generic;
}

RowsKernel rows_kernel(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  if (isa == Isa::Avx512) return rows_avx512;
  if (isa == Isa::Avx2) return rows_avx2;
#endif
  return rows_generic;
}

WidenKernel widen_kernel(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  if (isa == Isa::Avx512) return widen_avx512;
  if (isa == Isa::Avx2) return widen_avx2;
#endif
  return widen_generic;
}

ExpSumKernel exp_sum_kernel(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  if (isa == Isa::Avx512) return exp_sum_avx512;
  if (isa == Isa::Avx2) return exp_sum_avx2;
#endif
  return exp_sum_generic;
}

SiluMulKernel silu_mul_kernel(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  if (isa == Isa::Avx512) return silu_mul_avx512;
  if (isa == Isa::Avx2) return silu_mul_avx2;
#endif
  return silu_mul_generic;
}

TileKernels tile_kernels(Isa isa) {
#if defined(SERVELAB_X86_KERNELS)
  if (isa == Isa::Avx512) return {tile_scores_avx512, tile_values_avx512};
  if (isa == Isa::Avx2) return {tile_scores_avx2, tile_values_avx2};
#endif
  return {nullptr, nullptr};
}

Isa active_isa() {
  static const Isa chosen = [] {
    if (const char* env = std::getenv("SERVELAB_ISA")) {
      const Isa isa = kIsaNames.parse(env, "SERVELAB_ISA");
      check(isa_supported(isa), "SERVELAB_ISA=", env, ": this CPU does not support it");
      return isa;
    }
    for (Isa isa : {Isa::Avx512, Isa::Avx2})
      if (isa_supported(isa)) return isa;
    return Isa::Generic;
  }();
  return chosen;
}

}  // namespace servelab::cpu
