// SPDX-License-Identifier: MIT
/**
 * @file bpe.h
 * @brief The `model` of a byte-level BPE tokenizer.json: the vocabulary, the
 *        ranked merges, and the merge loop that turns one word into ids.
 *
 * A word starts as one symbol per byte. The adjacent pair with the lowest
 * merge rank is merged (the leftmost one on a tie), and so on until no pair
 * of neighbours has a merge. This is Hugging Face tokenizers' `Word::merge_all`:
 * a min-heap of candidate merges over a linked list of symbols, so a word of
 * n bytes costs O(n log n), and a candidate whose symbols have changed since
 * it was queued is skipped when it comes up.
 * @verbatim
 *   "lower" bytes  l o w e r         merges (rank): "l o"=0 "lo w"=1 "e r"=2
 *   rank 0         lo w e r
 *   rank 1         low e r
 *   rank 2         low er            -> ids of "low", "er"
 * @endverbatim
 * With `ignore_merges` (Llama 3) a word that is itself in the vocabulary is
 * emitted as that one token without merging.
 */
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace servelab {

/// Hash that lets a std::string-keyed map be searched with a std::string_view.
struct StringHash {
  using is_transparent = void;  ///< enables heterogeneous lookup
  /// Hash of @p s.
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/**
 * @brief Largest token id a tokenizer.json may use, plus one.
 *
 * Tables indexed by id are allocated densely, so an id of 2^31 from a broken
 * file would ask for tens of gigabytes (and id + 1 would overflow). The
 * largest vocabularies in use hold about 256 000 tokens; this is 16 times that.
 */
inline constexpr std::int32_t kMaxTokenIds = 1 << 22;

/// String -> token id, searchable by string_view.
using TokenMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

/// Byte-level BPE: vocabulary plus ranked merges. Immutable after construction except for its word cache.
class BpeModel {
 public:
  /**
   * @brief Builds the model.
   * @param vocab token (in the byte-level alphabet) -> id; a byte with no single-byte token is dropped
   *        from the text that holds it, as Hugging Face tokenizers does without an unk_token.
   * @param merges (left, right) pairs, highest priority first; both sides and their
   *        concatenation must be in @p vocab. A pair listed twice keeps its last rank,
   *        as in Hugging Face tokenizers.
   * @param ignore_merges emit a word that is in @p vocab as one token without merging.
   * @param source names the file in errors.
   * @throws Error naming the merge (and its index) whose piece is missing from the vocabulary.
   */
  BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
           const std::string& source);
  ~BpeModel();
  /// Movable, not copyable: the model owns its word cache and the cache's mutex.
  BpeModel(BpeModel&&) noexcept;
  /// Move assignment (see the move constructor).
  BpeModel& operator=(BpeModel&&) noexcept;

  /**
   * @brief Reads the `model` field of a tokenizer.json.
   *
   * Merges may be written as "left right" strings (files saved before
   * tokenizers 0.20) or as ["left", "right"] arrays.
   * @throws Error naming the field when the type is not BPE, an option servelab
   *         does not implement is set (dropout, byte_fallback, a subword prefix or
   *         suffix), or an entry is malformed.
   */
  static BpeModel from_json(const nlohmann::json& model, const std::string& source);

  /**
   * @brief Appends the ids of one pre-tokenized word to @p ids.
   * @param word the word's raw bytes (not its byte-level spelling); not empty.
   * Thread-safe: the word cache is guarded by a mutex.
   */
  void encode_word(std::string_view word, std::vector<std::int32_t>& ids) const;

  /// Token -> id, spelled in the byte-level alphabet.
  const TokenMap& vocab() const { return vocab_; }
  /// Number of merges.
  std::size_t num_merges() const { return merges_.size(); }
  /// Whether ignore_merges is on.
  bool ignore_merges() const { return ignore_merges_; }

 private:
  struct Merge {
    std::int32_t rank;    // position in the merges list: lower merges first
    std::int32_t new_id;  // id of the merged token
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  void merge(std::string_view word, std::vector<std::int32_t>& ids) const;

  TokenMap vocab_;
  std::unordered_map<std::uint64_t, Merge> merges_;  // (left id, right id) -> merge
  std::array<std::int32_t, 256> byte_ids_{};         // byte -> id of its single-byte token, -1 for none
  TokenMap whole_words_;                             // raw bytes -> id; filled only with ignore_merges
  bool ignore_merges_ = false;
  struct Cache;
  std::unique_ptr<Cache> cache_;  // word (raw bytes) -> ids
};

}  // namespace servelab
