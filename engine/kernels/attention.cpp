// SPDX-License-Identifier: MIT
#include "kernels/attention.h"

#include <algorithm>

#include "core/enum_names.h"
#include "core/error.h"

namespace servelab {

constexpr EnumNames<AttentionKind, 3> kAttentionKinds{
    {{{AttentionKind::NAIVE, "naive"}, {AttentionKind::BLOCKED, "blocked"}, {AttentionKind::FLASH, "flash"}}}};

const char* to_string(AttentionKind kind) { return kAttentionKinds.name(kind); }

AttentionKind parse_attention_kind(const std::string& text, const std::string& flag) {
  return kAttentionKinds.parse(text, flag);
}

void attention(const KernelContext& ctx, AttentionKind kind, float* out, const float* q,
               const std::vector<AttentionSeq>& seqs, const AttentionShape& shape) {
  constexpr int kDecodeRows = 16;  // fewer new tokens than this: a decode (or a short chunk), no query tile to fill
  switch (kind) {
    case AttentionKind::NAIVE: attention_naive(ctx, out, q, seqs, shape); return;
    case AttentionKind::BLOCKED: {
      int longest = 0;
      for (const auto& s : seqs) longest = std::max(longest, s.num_new_tokens);
      if (ctx.deterministic || longest < kDecodeRows)
        attention_naive(ctx, out, q, seqs, shape);
      else
        attention_blocked(ctx, out, q, seqs, shape);
      return;
    }
    case AttentionKind::FLASH: {
      // Deterministic flash computes each row alone, so one call does all; otherwise decodes go to split-K.
      if (ctx.deterministic) return attention_flash(ctx, out, q, seqs, shape);
      std::vector<AttentionSeq> prefill, decode;
      for (const auto& s : seqs) (s.num_new_tokens < kDecodeRows ? decode : prefill).push_back(s);
      if (!prefill.empty()) attention_flash(ctx, out, q, prefill, shape);
      if (!decode.empty()) attention_split_k(ctx, out, q, decode, shape, 0);
      return;
    }
  }
}

}  // namespace servelab
