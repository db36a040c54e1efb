// SPDX-License-Identifier: MIT
#include "http/text_stream.h"

#include <algorithm>

#include "core/utf8.h"

namespace servelab {

TextStream::TextStream(const Tokenizer* tokenizer, std::vector<std::string> stop)
    : tokenizer_(tokenizer), stop_(std::move(stop)) {
  if (tokenizer_) detokenizer_.emplace(*tokenizer_, true);
}

std::string TextStream::push(std::int32_t id) {
  if (!tokenizer_ || stopped_) return {};
  // A vocabulary padded past the tokenizer's (Qwen2.5) has ids without text: U+FFFD, as `servelab generate` shows them.
  if (tokenizer_->has_id(id)) {
    held_ += detokenizer_->push(id);
  } else {
    held_ += detokenizer_->finish();
    held_ += kReplacementChar;
  }
  return release(false);
}

std::string TextStream::finish() {
  if (!tokenizer_ || stopped_) return {};
  held_ += detokenizer_->finish();
  return release(true);
}

std::string TextStream::release(bool final) {
  // The earliest stop string ends the reply; the text before it is sent.
  std::size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that some stop string starts with (it starts at a character boundary).
  std::size_t keep = 0;
  if (!final)
    for (const std::string& s : stop_)
      for (std::size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
        if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace servelab
