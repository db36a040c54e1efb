// SPDX-License-Identifier: MIT
/**
 * @file weights.h
 * @brief The model's parameters, loaded from a checkpoint folder or made
 *        from a seed, in Hugging Face's layout (`nn.Linear` weights are
 *        `[out_features, in_features]`, row-major).
 */
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/tensor.h"
#include "config/model_config.h"

namespace servelab {

class ThreadPool;

/// Parameters of one decoder block. Matrices are f32, bf16 or quantized (the
/// model's weight dtype); norm weights and biases are always f32 (they are tiny).
struct LayerWeights {
  Tensor input_layernorm;           ///< [hidden] RMSNorm weight before attention
  Tensor q_proj;                    ///< [q_dim, hidden]
  Tensor k_proj;                    ///< [kv_dim, hidden]
  Tensor v_proj;                    ///< [kv_dim, hidden]
  Tensor q_bias;                    ///< [q_dim]; empty without attention_bias
  Tensor k_bias;                    ///< [kv_dim]; empty without attention_bias
  Tensor v_bias;                    ///< [kv_dim]; empty without attention_bias
  Tensor o_proj;                    ///< [hidden, q_dim]
  Tensor post_attention_layernorm;  ///< [hidden] RMSNorm weight before the MLP
  Tensor gate_proj;                 ///< [intermediate, hidden]
  Tensor up_proj;                   ///< [intermediate, hidden]
  Tensor down_proj;                 ///< [hidden, intermediate]
};

/// All parameters of a model (the embedding and LM head in the weight dtype).
struct ModelWeights {
  Tensor embed_tokens;               ///< [vocab, hidden]
  std::vector<LayerWeights> layers;  ///< num_hidden_layers blocks
  Tensor norm;                       ///< [hidden] final RMSNorm weight
  Tensor lm_head;                    ///< [vocab, hidden]; shares embed_tokens' storage when tied
};

/**
 * @brief Loads every tensor the config calls for from a checkpoint folder.
 *
 * Tensors already stored in the requested dtype are views into the
 * memory-mapped files (a bf16 checkpoint loaded as bf16 is not copied here;
 * Model copies it once into huge pages unless ModelOptions::huge_pages is
 * off); the others are converted once. A tied model's LM head is the embedding (an
 * `lm_head.weight` in the file, if any, is ignored as transformers does).
 * @param weight_dtype f32 or bf16, for the matrices and the embedding.
 * @throws Error naming the tensor and file when one is missing, has the wrong
 *         shape or holds NaN/Inf, and naming the tensors the checkpoint has
 *         but the engine would not use (an `lm_head.weight` of a tied model
 *         and `rotary_emb.inv_freq` buffers excepted).
 */
ModelWeights load_weights(const ModelConfig& config, const std::filesystem::path& dir, DType weight_dtype = DType::F32);

/**
 * @brief Deterministic synthetic weights for any config, so every lab runs with no download.
 *
 * Element i of the tensor named N is a function of (seed, N, i) only, so the
 * weights are the same on every machine and for every thread count. Matrices
 * are uniform with standard deviation 1/sqrt(in_features) (keeps activations
 * and logits of order 1), norm weights are 1, biases are small. In bf16 the
 * values are the f32 ones rounded to nearest even.
 * @param pool threads used to fill the buffers.
 * @param weight_dtype f32, bf16, q8_0, q4_0 or q4_1, for the matrices and the
 *        embedding (rounded or quantized from the f32 values, as convert_matrices()).
 */
ModelWeights synthetic_weights(const ModelConfig& config, std::uint64_t seed, ThreadPool& pool,
                               DType weight_dtype = DType::F32);

/**
 * @brief Stores every matrix of @p w (the layers', the embedding, the LM head,
 *        tied or not) as @p dtype, converting those held in another type
 *        (core/quant.h's convert(), rows in parallel on @p pool); norms and biases stay f32.
 *
 * How an f32 or bf16 checkpoint (or synthetic weights) becomes Q8_0, Q4_0 or
 * Q4_1, as llama.cpp's quantize tool would store it.
 */
void convert_matrices(ModelWeights& w, DType dtype, ThreadPool& pool);

/// Name of a layer tensor as in Hugging Face checkpoints, e.g. layer_tensor_name(3, "mlp.up_proj.weight").
std::string layer_tensor_name(int layer, const char* suffix);

}  // namespace servelab
