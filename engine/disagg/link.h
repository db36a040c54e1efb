// SPDX-License-Identifier: MIT
/**
 * @file link.h
 * @brief Named interconnects and ratio-preserving link emulation (`--link`).
 *
 * Loopback here is slower than the links a real deployment uses, so a plain
 * throttle could only make the comparison worse. Instead the small model's
 * KV is paced at the real link's rate scaled by the ratio of KV bytes per
 * token, small over large: then the small model's transfer takes as long as
 * the large model's would over the real link.
 * \f[ rate_{emulated} = rate_{link} \cdot \frac{kv\_bytes\_per\_token_{small}}{kv\_bytes\_per\_token_{large}} \f]
 * For Qwen2.5-0.5B against Llama-3-8B over InfiniBand HDR (25 GB/s) that is
 * 25 · 12,288 / 131,072 = 2.34 GB/s (18.75 Gb/s).
 */
#pragma once

#include <string>
#include <vector>

#include "config/model_config.h"

namespace servelab::disagg {

/// An interconnect by its line rate.
struct Link {
  std::string name;             ///< --link value
  double bytes_per_second = 0;  ///< line rate, one direction; 0 = none (no pacing)
  std::string description;      ///< for tables
};

/// ib-hdr, ib-ndr, roce-100g, nvlink and none.
const std::vector<Link>& named_links();
/// The link called @p name. @throws Error naming @p what and the known names otherwise.
const Link& find_link(const std::string& name, const std::string& what);

/// KV bytes per token of @p config at @p dtype_bytes per element: 2 · layers · kv_heads · head_dim · bytes
/// (servelab::kv_bytes_per_token() for an element size given as a number, as lab 07 gives it).
double kv_bytes_per_token(const ModelConfig& config, double dtype_bytes);

/**
 * @brief The pacing rate that makes @p small's KV (f32 here) take as long over
 *        loopback as @p large's (bf16) over @p link; 0 when the link is none.
 */
double emulated_rate(const Link& link, const ModelConfig& small, const ModelConfig& large);

}  // namespace servelab::disagg
