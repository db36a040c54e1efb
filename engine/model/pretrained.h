// SPDX-License-Identifier: MIT
/**
 * @file pretrained.h
 * @brief The text side of a Hugging Face model folder: tokenizer.json, the
 *        chat template, and the ids that end a reply. It sits in model/, not
 *        tokenizer/, because a .gguf checkpoint holds them beside its weights
 *        (model/gguf.h), and tokenizer/ stays below model/.
 *
 * @verbatim
 *   model/
 *     tokenizer.json           vocabulary, merges, pipeline    -> load_tokenizer()
 *     tokenizer_config.json    chat_template, bos/eos tokens   -> load_chat_template(), load_stop_token_ids()
 *     chat_template.jinja      the template, where transformers >= 4.43 writes it
 *     generation_config.json   eos_token_id (an id or a list)  -> load_stop_token_ids()
 * @endverbatim
 * Each function also takes a `.gguf` file instead of the folder, and reads
 * the same from its tokenizer.ggml.* and tokenizer.chat_template keys (model/gguf.h).
 */
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace servelab {

/// Whether @p model (a folder or a .gguf file) carries a tokenizer load_tokenizer() can read.
bool has_tokenizer(const std::filesystem::path& model);

/**
 * @brief Loads `dir/tokenizer.json`.
 * @throws Error naming the file when the folder has none, or as Tokenizer::from_file().
 */
Tokenizer load_tokenizer(const std::filesystem::path& dir);

/**
 * @brief Loads the chat template of the model in @p dir.
 *
 * The template is `chat_template` in tokenizer_config.json (a string, or a
 * list of {name, template} of which "default" is used), else the file
 * chat_template.jinja. The template can read tokenizer_config.json's
 * bos_token, eos_token, unk_token, sep_token, pad_token, cls_token and mask_token.
 * @throws Error naming the folder when there is no template, or as ChatTemplate's constructor.
 */
ChatTemplate load_chat_template(const std::filesystem::path& dir);

/**
 * @brief Ids that end generation: generation_config.json's `eos_token_id` when
 *        the folder has one that sets it, else tokenizer_config.json's `eos_token`
 *        looked up in @p tokenizer, else none.
 * @throws Error naming the file and field when a value is malformed or names a token @p tokenizer lacks.
 */
std::vector<std::int32_t> load_stop_token_ids(const std::filesystem::path& dir, const Tokenizer& tokenizer);

}  // namespace servelab
