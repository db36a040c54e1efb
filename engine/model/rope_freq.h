// SPDX-License-Identifier: MIT
/**
 * @file rope_freq.h
 * @brief RoPE inverse frequencies for a config, with Llama 3 frequency scaling.
 */
#pragma once

#include <vector>

#include "config/model_config.h"

namespace servelab {

/**
 * @brief inv_freq[i] = theta^(-2i / head_dim) for i < head_dim / 2, in f32 as
 *        transformers computes it, then scaled when rope_scaling is "llama3"
 *        (long wavelengths divided by factor, short ones kept, a smooth blend between).
 * @return [head_dim / 2] inverse frequencies.
 */
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace servelab
