// SPDX-License-Identifier: MIT
/**
 * @file gguf.h
 * @brief Reads GGUF files (llama.cpp's single-file model format, versions 2
 *        and 3): metadata, tensor infos and tensor data, memory-mapped; and
 *        turns a `llama` or `qwen2` GGUF into the engine's config, weights,
 *        tokenizer, chat template and stop ids.
 *
 * Layout (little-endian; strings are a u64 length and that many bytes):
 * @verbatim
 * | "GGUF" | u32 version | u64 tensor_count | u64 kv_count |
 * | kv_count × (string key, u32 value type, value)            |   arrays: u32 element type, u64 n, n values
 * | tensor_count × (string name, u32 n_dims, n_dims × u64 ne, u32 ggml type, u64 offset) |
 * | padding to general.alignment (default 32) | tensor data: each tensor at data start + offset |
 * @endverbatim
 * ne[0] is the fastest-varying dimension: a Hugging Face `[out, in]` matrix is
 * ne = {in, out}. Quantized types store rows of ne[0] elements as blocks of 32.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "model/weights.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace servelab {

class ThreadPool;

/// Metadata value types, in the GGUF specification's order (UINT8 = 0 ... FLOAT64 = 12).
// clang-format off
enum class GgufValueType : std::uint32_t {
  UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64
};
// clang-format on

/// One metadata value. Scalars fill one field; an array fills the vector of its element kind.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT32;     ///< the stored type (ARRAY for arrays)
  GgufValueType element = GgufValueType::UINT32;  ///< element type of an array
  std::int64_t integer = 0;                       ///< integer and bool scalars (bool: 0 or 1)
  double number = 0;                              ///< float scalars
  std::string string;                             ///< string scalars
  std::vector<std::int64_t> integers;             ///< integer and bool arrays
  std::vector<double> numbers;                    ///< float arrays
  std::vector<std::string> strings;               ///< string arrays
};

/// ggml tensor types servelab reads, numbered as in ggml.h.
enum class GgmlType : std::uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, BF16 = 30 };

/// Name of ggml type id @p type ("Q4_K", ...), or "type N" for an id ggml does not define.
std::string ggml_type_name(std::uint32_t type);

/// One tensor's info, pointing into the file's bytes.
struct GgufTensor {
  std::string name;                 ///< llama.cpp's name, e.g. "blk.0.attn_q.weight"
  GgmlType type = GgmlType::F32;    ///< stored type
  std::vector<std::int64_t> ne;     ///< dimensions, fastest first (1 to 4 of them)
  const std::byte* data = nullptr;  ///< first byte, inside the file
  std::size_t nbytes = 0;           ///< stored bytes
};

/// A parsed GGUF: metadata by key and tensors by name.
struct GgufContents {
  std::uint32_t version = 0;                  ///< 2 or 3
  std::size_t alignment = 32;                 ///< general.alignment
  std::map<std::string, GgufValue> metadata;  ///< every key/value
  std::map<std::string, GgufTensor> tensors;  ///< every tensor
};

/**
 * @brief Parses and validates a whole GGUF file held in memory (the mapping, or a fuzzer's bytes).
 *
 * Every count, length, dimension and offset is checked against the bytes that
 * remain before anything is allocated or read: strings and arrays cannot be
 * longer than the file, a tensor's bytes (a checked product of its dimensions)
 * lie inside the data section at an aligned offset and overlap no other
 * tensor, and keys and tensor names are unique.
 * @param file names the file in errors.
 * @throws Error naming the file (and key or tensor) on any violation, on
 *         version 1 or a big-endian file, and on a tensor type servelab does
 *         not read (named as ggml names it, e.g. Q4_K).
 */
GgufContents parse_gguf(const std::byte* bytes, std::size_t size, const std::string& file);

/// A memory-mapped GGUF file with its parsed contents.
class GgufFile {
 public:
  /**
   * @brief Maps @p path read-only and parses it.
   * @throws Error naming the file when it is missing, not a regular file, or as parse_gguf().
   */
  explicit GgufFile(const std::filesystem::path& path);

  /// Metadata and tensors (pointing into the mapping).
  const GgufContents& contents() const { return contents_; }
  /// Keeps the mapping alive; tensors that view into it share this.
  const std::shared_ptr<void>& mapping() const { return mapping_; }
  /// The file's path, for messages.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<void> mapping_;
  GgufContents contents_;
};

/// True when @p path names a regular file whose name ends in ".gguf" (what --model takes besides a folder).
bool is_gguf_path(const std::filesystem::path& path);

/**
 * @brief The model config from a GGUF's metadata (`general.architecture` and `<arch>.*` keys).
 *
 * Tied embeddings when the file has no `output.weight`; head_dim from
 * `<arch>.attention.key_length` or hidden / heads; vocabulary from
 * `<arch>.vocab_size` or the length of tokenizer.ggml.tokens.
 * @throws Error naming the file and key when the architecture is not llama or
 *         qwen2, a required key is missing or not a number, or the file asks
 *         for something the engine does not compute (partial RoPE, RoPE
 *         scaling, a rope_freqs tensor).
 */
ModelConfig gguf_config(const GgufContents& gguf, const std::string& file);

/**
 * @brief Every weight the config calls for, as @p weight_dtype (f32, bf16, q8_0, q4_0, q4_1) or in the
 *        file's own types.
 *
 * llama.cpp's names map to the engine's (token_embd -> embed_tokens, blk.N.attn_q
 * -> layers.N.self_attn.q_proj, ...); for `llama` the Q and K rows are put back
 * in Hugging Face's order (llama.cpp's converter interleaves the two halves of
 * each head for its RoPE). A tensor loaded in the type it is stored in is a
 * view into the mapping (the llama Q and K rows are moved, not converted).
 * @param pool threads that convert the rows.
 * @param stored_types keep each matrix in its stored type (f16 is widened to
 *        f32) instead of @p weight_dtype: what llama.cpp runs, with no conversion.
 * @throws Error naming the tensor when one is missing, has the wrong shape, is
 *         not used, or holds NaN/Inf after dequantization.
 */
ModelWeights gguf_weights(const GgufFile& gguf, const ModelConfig& config, DType weight_dtype, ThreadPool& pool,
                          bool stored_types = false);

/**
 * @brief The tokenizer from tokenizer.ggml.*: a gpt2-style byte-level BPE
 *        (tokens, merges, token types; CONTROL tokens are special added
 *        tokens, USER_DEFINED ones plain added tokens), the split regexes that
 *        `tokenizer.ggml.pre` names, and bos/eos added as add_bos_token/add_eos_token say.
 * @throws Error naming the file and key when the tokenizer model is not gpt2,
 *         the pre-tokenizer is one servelab does not know, or an array is malformed.
 */
Tokenizer gguf_tokenizer(const GgufContents& gguf, const std::string& file);

/**
 * @brief The chat template `tokenizer.chat_template`, parsed for execution, with the texts of the bos, eos,
 *        unk and pad tokens the file names (the special tokens transformers gives a template).
 * @throws Error naming the file when it has no template, or as ChatTemplate's constructor.
 */
ChatTemplate gguf_chat_template(const GgufContents& gguf, const std::string& file);

/**
 * @brief Ids that end generation: tokenizer.ggml.eos_token_id, then eot and eom ids when present.
 * @throws Error naming the key when an id is outside the token list.
 */
std::vector<std::int32_t> gguf_stop_token_ids(const GgufContents& gguf, const std::string& file);

}  // namespace servelab
