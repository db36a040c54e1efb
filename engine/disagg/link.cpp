// SPDX-License-Identifier: MIT
#include "disagg/link.h"

#include "core/error.h"

namespace servelab::disagg {

const std::vector<Link>& named_links() {
  // Line rates of one direction of one port; real transfers reach 80-95% of them.
  static const std::vector<Link> links = {
      {"ib-hdr", 25e9, "InfiniBand HDR, 200 Gb/s"},
      {"ib-ndr", 50e9, "InfiniBand NDR, 400 Gb/s"},
      {"roce-100g", 12.5e9, "RoCE / Ethernet, 100 Gb/s"},
      {"nvlink", 450e9, "NVLink 4 (H100), 450 GB/s each way"},
      {"none", 0, "no emulation: loopback as fast as it goes"},
  };
  return links;
}

const Link& find_link(const std::string& name, const std::string& what) {
  std::string known;
  for (const Link& l : named_links()) {
    if (l.name == name) return l;
    known += " " + l.name;
  }
  fail(what, " must be one of", known, ", got '", name, "'");
}

double kv_bytes_per_token(const ModelConfig& config, double dtype_bytes) {
  // The one formula (config/model_config.h) at f32, rescaled to the element size given:
  // 2 · layers · kv_dim is exact in a double, so this equals 2.0 · layers · kv_dim · dtype_bytes.
  return static_cast<double>(servelab::kv_bytes_per_token(config, DType::F32)) / dtype_size(DType::F32) * dtype_bytes;
}

double emulated_rate(const Link& link, const ModelConfig& small, const ModelConfig& large) {
  return link.bytes_per_second * kv_bytes_per_token(small, 4) / kv_bytes_per_token(large, 2);
}

}  // namespace servelab::disagg
