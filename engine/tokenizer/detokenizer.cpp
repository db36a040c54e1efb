// SPDX-License-Identifier: MIT
#include "tokenizer/detokenizer.h"

#include "core/utf8.h"

namespace servelab {

std::string StreamingDetokenizer::take_complete() {
  // Emit everything up to an incomplete character at the very end; invalid
  // bytes are final, so they are repaired now rather than held.
  std::size_t pos = 0, keep = pending_.size();
  while (pos < pending_.size()) {
    const int n = utf8_classify(pending_, pos);
    if (n == 0) {
      keep = pos;
      break;
    }
    pos += n > 0 ? n : -n;
  }
  std::string out = to_valid_utf8(std::string_view(pending_).substr(0, keep));
  pending_.erase(0, keep);
  return out;
}

std::string StreamingDetokenizer::push(std::int32_t id) {
  const std::string& bytes = tokenizer_.bytes(id);
  if (const AddedToken* added = tokenizer_.added_token(id)) {
    if (skip_special_tokens_ && added->special) return {};
    // An added token ends the byte run, as in Tokenizer::decode(): a character cut by it is lost.
    std::string out = finish();
    return out + bytes;
  }
  pending_ += bytes;
  return take_complete();
}

std::string StreamingDetokenizer::finish() {
  std::string out = to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace servelab
