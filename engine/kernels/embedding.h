// SPDX-License-Identifier: MIT
/**
 * @file embedding.h
 * @brief Token embedding lookup: one row of the embedding matrix per token.
 */
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace servelab {

/**
 * @brief out[t] = embedding[token_ids[t]], widened to f32.
 * @param embedding [vocab, hidden] f32, bf16 or quantized (rows dequantized as core/quant.h defines).
 * @param token_ids [T] ids, already checked to be inside the vocabulary.
 * @param out [T, hidden] f32.
 */
void embedding_lookup(const Tensor& embedding, const std::vector<std::int32_t>& token_ids, float* out);

}  // namespace servelab
