// SPDX-License-Identifier: MIT
#include "perf/hardware.h"

#include <sstream>

#include "core/error.h"

namespace servelab {

const std::vector<Hardware>& gpu_catalog() {
  static const std::vector<Hardware> all = {
      {"A100 40GB SXM", 312, 19.5, 1555, 40, "NVIDIA A100 Tensor Core GPU datasheet (2021)"},
      {"A100 80GB SXM", 312, 19.5, 2039, 80, "NVIDIA A100 Tensor Core GPU datasheet (2021)"},
      {"H100 SXM", 989, 67, 3350, 80, "NVIDIA H100 Tensor Core GPU datasheet (dense = half the sparse 1,979)"},
      {"H200 SXM", 989, 67, 4800, 141, "NVIDIA H200 Tensor Core GPU datasheet"},
      {"T4", 65, 8.1, 320, 16, "NVIDIA T4 datasheet (fp16 tensor; no bf16)"},
      {"RTX 4090", 165.2, 82.6, 1008, 24, "NVIDIA Ada Lovelace architecture whitepaper (fp16 tensor, fp32 accumulate)"},
  };
  return all;
}

const Hardware& gpu(const std::string& name) {
  std::ostringstream known;
  for (const auto& h : gpu_catalog()) {
    if (h.name == name) return h;
    known << " '" << h.name << "'";
  }
  fail("unknown hardware '", name, "' (expected one of:", known.str(), ")");
}

}  // namespace servelab
