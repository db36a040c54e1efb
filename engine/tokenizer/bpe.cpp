// SPDX-License-Identifier: MIT
#include "tokenizer/bpe.h"

#include <algorithm>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"
#include "tokenizer/byte_level.h"

namespace servelab {

namespace {

// Words longer than this are merged every time: they are rare, and caching
// them would let one long input evict many common words.
constexpr std::size_t kMaxCachedWordBytes = 64;
// Entries before the cache is emptied and refilled.
constexpr std::size_t kCacheCapacity = 1 << 16;

// A symbol of the word being merged: a token id and its neighbours in the list.
struct Symbol {
  std::int32_t id;
  int prev;  // index of the symbol to the left, -1 at the start
  int next;  // index of the symbol to the right, -1 at the end
  bool alive;
};

// A merge waiting in the heap: the pair starting at symbol `pos`.
struct Candidate {
  std::int32_t rank;
  int pos;
  std::int32_t new_id;
};

// std::push_heap builds a max-heap; "greater" puts the lowest rank, then the leftmost position, on top.
bool later(const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; }

}  // namespace

struct BpeModel::Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> words;
};

BpeModel::BpeModel(TokenMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
                   const std::string& source)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges), cache_(std::make_unique<Cache>()) {
  // A byte without a token (SmolLM2 lacks 21, most of them bytes UTF-8 never uses) is dropped when it
  // occurs, as Hugging Face tokenizers does for a BPE model with no unk_token.
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(byte_to_symbol(static_cast<std::uint8_t>(b)));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    // Plain references, not a structured binding: C++20 lambdas cannot capture those (clang refuses).
    const std::string& left = merges[rank].first;
    const std::string& right = merges[rank].second;
    const auto id_of = [&](const std::string& token) {
      const auto it = vocab_.find(token);
      check(it != vocab_.end(), source, ": model.merges[", rank, "] ('", left, " ", right, "'): '", token,
            "' is not in model.vocab");
      return it->second;
    };
    // In this order, so the error names the first missing piece.
    const std::int32_t a = id_of(left), b = id_of(right), merged = id_of(left + right);
    merges_.insert_or_assign(pair_key(a, b), Merge{static_cast<std::int32_t>(rank), merged});
  }
  if (ignore_merges_) {
    for (const auto& [token, id] : vocab_) {
      std::string bytes;
      if (symbols_to_bytes(token, bytes)) whole_words_.emplace(std::move(bytes), id);
    }
  }
}

BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

BpeModel BpeModel::from_json(const nlohmann::json& model, const std::string& source) {
  const std::string type = model.value("type", "");
  check(type == "BPE", source, ": model.type is '", type, "'; servelab supports byte-level BPE only (expected BPE)");
  const auto unset = [&](const char* field) {
    return !model.contains(field) || model[field].is_null() || model[field] == "" || model[field] == false ||
           model[field] == 0.0;
  };
  for (const char* field : {"dropout", "continuing_subword_prefix", "end_of_word_suffix", "byte_fallback"})
    if (!unset(field))
      fail(source, ": model.", field, " = ", json_brief(model[field]), " is not supported (expected null)");

  const auto& vocab_json = model.at("vocab");
  check(vocab_json.is_object(), source, ": model.vocab must be an object of token -> id");
  TokenMap vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [token, id] : vocab_json.items()) {
    vocab.emplace(token, json_int<std::int32_t>(id, 0, kMaxTokenIds - 1, source + ": model.vocab['" + token + "']"));
  }

  std::vector<std::pair<std::string, std::string>> merges;
  // A reference, not value()'s copy: merges can hold hundreds of thousands of entries.
  static const nlohmann::json no_merges = nlohmann::json::array();
  const auto& merges_json = model.contains("merges") ? model["merges"] : no_merges;
  check(merges_json.is_array(), source, ": model.merges must be an array, got ", json_brief(merges_json));
  merges.reserve(merges_json.size());
  for (std::size_t i = 0; i < merges_json.size(); ++i) {
    const auto& m = merges_json[i];
    if (m.is_string()) {
      // Legacy form "left right": byte-level tokens never contain a space, so one space separates the two.
      const std::string line = m.get<std::string>();
      const auto space = line.find(' ');
      check(space != std::string::npos && line.find(' ', space + 1) == std::string::npos, source, ": model.merges[", i,
            "] = '", line, "' is not two tokens separated by one space");
      merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else {
      check(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), source, ": model.merges[", i,
            "] = ", json_brief(m), " is not a pair of tokens");
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  return BpeModel(std::move(vocab), merges, model.value("ignore_merges", false), source);
}

void BpeModel::encode_word(std::string_view word, std::vector<std::int32_t>& ids) const {
  if (word.size() == 1) {
    if (const std::int32_t id = byte_ids_[static_cast<std::uint8_t>(word[0])]; id >= 0) ids.push_back(id);
    return;
  }
  if (ignore_merges_) {
    if (const auto it = whole_words_.find(word); it != whole_words_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (const auto it = cache_->words.find(word); it != cache_->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = ids.size();
  merge(word, ids);
  if (cacheable) {
    std::lock_guard lock(cache_->mutex);
    if (cache_->words.size() >= kCacheCapacity) cache_->words.clear();
    cache_->words.emplace(std::string(word),
                          std::vector<std::int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
  }
}

void BpeModel::merge(std::string_view word, std::vector<std::int32_t>& ids) const {
  thread_local std::vector<Symbol> symbols;  // [n], one per byte that has a token to start with
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();
  const auto find = [&](std::int32_t a, std::int32_t b) -> const Merge* {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  // A byte without a token leaves no symbol: its neighbours become adjacent and may merge, as in tokenizers.
  for (char c : word)
    if (const std::int32_t id = byte_ids_[static_cast<std::uint8_t>(c)]; id >= 0) symbols.push_back({id, -1, -1, true});
  const int n = static_cast<int>(symbols.size());
  if (n == 0) return;
  for (int i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }
  for (int i = 0; i + 1 < n; ++i)
    if (const Merge* m = find(symbols[i].id, symbols[i + 1].id)) heap.push_back({m->rank, i, m->new_id});
  std::make_heap(heap.begin(), heap.end(), later);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    // Stale: the left symbol was merged away, is now last, or its pair changed since it was queued.
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* current = find(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;

    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    // The merged symbol forms new pairs with both neighbours.
    if (left.prev >= 0)
      if (const Merge* m = find(symbols[left.prev].id, left.id)) {
        heap.push_back({m->rank, left.prev, m->new_id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    if (left.next >= 0)
      if (const Merge* m = find(left.id, symbols[left.next].id)) {
        heap.push_back({m->rank, top.pos, m->new_id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
  }
  for (int i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace servelab
