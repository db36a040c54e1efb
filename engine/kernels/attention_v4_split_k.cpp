// SPDX-License-Identifier: MIT
/**
 * @file attention_v4_split_k.cpp
 * @brief Lab 05's v4, split-K decode (flash-decoding): one query token
 *        against a long cache, the keys split across threads, the pieces
 *        merged by the log-sum-exp rule.
 *
 * What changed from v3: a decode step has one query per head, so v3 has one
 * row per work item and no query tile to share a key read; a batch of one
 * sequence has only num_kv_heads × 1 items, too few for the threads at a
 * long context. v4 makes a work item of (sequence, KV head, key range): the
 * rows are all the query heads of the GQA group (K and V are read once per
 * group, not once per head), and the context is cut into pieces of whole
 * key tiles. Each piece leaves its own (m, l, Õ); the merge is
 * online_softmax_merge() (engine/kernels/math/attention.h):
 * @verbatim
 *  m = max(m_a, m_b)   l = l_a·e^(m_a - m) + l_b·e^(m_b - m)   Õ = Õ_a·e^(m_a - m) + Õ_b·e^(m_b - m)
 * @endverbatim
 * The bottleneck removed: idle cores in a long decode, and the group's
 * repeated reads of K and V. The bottleneck left: each key is used by only
 * `group` query rows, so decode stays memory-bound (about 1 FLOP per byte:
 * lab 03), and the merge writes and reads pieces × heads × (d + 2) floats.
 * What it moves (attention_traffic()): K and V of the context once per KV
 * head, Q and O once, and the pieces' partial states twice.
 *
 * Deterministic mode uses one piece: a merge tree would round differently
 * from one pass, and the piece count depends on the context and the threads.
 * @see labs/05_flash_attention/README.md
 */
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/attention_flash_tile.h"
#include "kernels/gemm.h"

namespace servelab {

int split_k_pieces(int keys, int work_items, int threads) {
  constexpr int kMinTilesPerPiece = 8;  // 512 keys: a piece's merge (d + 2 floats per row) is then ~1% of its reads
  const int tiles = (keys + kFlashKeyTile - 1) / kFlashKeyTile;
  if (work_items <= 0 || work_items >= 2 * threads) return 1;
  const int wanted = (4 * threads + work_items - 1) / work_items;  // about four items per thread evens out the chunks
  return std::max(1, std::min(wanted, tiles / kMinTilesPerPiece));
}

void attention_split_k(const KernelContext& ctx, float* out, const float* q, const std::vector<AttentionSeq>& seqs,
                       const AttentionShape& shape, int num_splits) {
  use_blas_inside_engine_threads();
  const int H = shape.num_heads, KVH = shape.num_kv_heads, D = shape.head_dim, group = H / KVH;
  const int ldq = H * D;
  struct Item {
    const AttentionSeq* seq;
    int kvh, t_begin, t_end;  // keys [t_begin, t_end), on key-tile edges
    std::size_t part;         // index of its first row in the partial states
  };
  // Rows of an item: the group's heads of each new token, r = token * group + g.
  std::vector<Item> items;
  std::vector<int> first_item;  // [seqs] index of the sequence's first item
  std::size_t part_rows = 0;
  for (const auto& s : seqs) {
    const int keys = s.num_computed_tokens + s.num_new_tokens, tiles = (keys + kFlashKeyTile - 1) / kFlashKeyTile;
    int pieces = ctx.deterministic ? 1
                 : num_splits > 0  ? num_splits
                                   : split_k_pieces(keys, static_cast<int>(seqs.size()) * KVH, ctx.pool->num_threads());
    pieces = std::max(1, std::min(pieces, tiles));
    first_item.push_back(static_cast<int>(items.size()));
    for (int kvh = 0; kvh < KVH; ++kvh)
      for (int p = 0; p < pieces; ++p) {
        const int b = static_cast<int>(static_cast<long>(tiles) * p / pieces) * kFlashKeyTile;
        const int e = std::min(keys, static_cast<int>(static_cast<long>(tiles) * (p + 1) / pieces) * kFlashKeyTile);
        items.push_back({&s, kvh, b, e, part_rows});
        part_rows += static_cast<std::size_t>(s.num_new_tokens) * group;
      }
  }
  first_item.push_back(static_cast<int>(items.size()));
  std::vector<float> part_o(part_rows * D);         // [part rows, D] each piece's Õ
  std::vector<SoftmaxState> part_state(part_rows);  // [part rows] each piece's m and l
  ctx.pool->parallel_for(items.size(), [&](std::size_t i0, std::size_t i1) {
    thread_local FlashRows acc;
    thread_local std::vector<float> qg;  // [new tokens * group, D] the group's query rows, packed for the sgemm
    for (std::size_t i = i0; i < i1; ++i) {
      const Item& it = items[i];
      const AttentionSeq& s = *it.seq;
      const int rows = s.num_new_tokens * group;
      qg.resize(static_cast<std::size_t>(rows) * D);
      acc.reset(rows, D);
      for (int tok = 0; tok < s.num_new_tokens; ++tok)
        for (int g = 0; g < group; ++g) {
          const int r = tok * group + g;
          std::memcpy(qg.data() + static_cast<std::size_t>(r) * D,
                      q + static_cast<std::size_t>(s.first_row + tok) * ldq + (it.kvh * group + g) * D,
                      sizeof(float) * D);
          acc.visible[r] = s.num_computed_tokens + tok + 1;
        }
      // BEGIN LAB05 SOLUTION: attention_split_k, one piece's partial: its key tiles [t_begin, t_end) into (m, l, Õ), kept for the merge
      for (int t0 = it.t_begin; t0 < it.t_end; t0 += kFlashKeyTile)
        flash_add_key_tile(acc, qg.data(), D, s.kv, it.kvh, attention_scale(D), t0,
                           std::min(it.t_end, t0 + kFlashKeyTile), ctx.deterministic);
      std::copy(acc.o.begin(), acc.o.end(), part_o.begin() + static_cast<std::ptrdiff_t>(it.part * D));
      std::copy(acc.state.begin(), acc.state.end(), part_state.begin() + static_cast<std::ptrdiff_t>(it.part));
      // END LAB05 SOLUTION
    }
  });
  // Merge the pieces of each (sequence, KV head) left to right, then O = Õ / l.
  for (std::size_t si = 0; si < seqs.size(); ++si) {
    // BEGIN LAB05 SOLUTION: attention_split_k, the merge of each row's pieces by their maxima (log-sum-exp), then O = Õ / l
    const AttentionSeq& s = seqs[si];
    const int rows = s.num_new_tokens * group, per_kvh = (first_item[si + 1] - first_item[si]) / KVH;
    std::vector<float> o(static_cast<std::size_t>(D));
    for (int kvh = 0; kvh < KVH; ++kvh)
      for (int r = 0; r < rows; ++r) {
        SoftmaxState st;
        std::fill(o.begin(), o.end(), 0.0f);
        for (int p = 0; p < per_kvh; ++p) {
          const Item& it = items[static_cast<std::size_t>(first_item[si] + kvh * per_kvh + p)];
          const SoftmaxState piece = part_state[it.part + r];
          if (piece.max == -INFINITY) continue;  // the piece lies past this row's last key
          const SoftmaxState merged = online_softmax_merge(st, piece);
          const float a = std::exp(st.max - merged.max), b = std::exp(piece.max - merged.max);
          const float* po = part_o.data() + (it.part + r) * D;
          for (int d = 0; d < D; ++d) o[d] = o[d] * a + po[d] * b;
          st = merged;
        }
        const int tok = r / group, h = kvh * group + r % group;
        float* dst = out + static_cast<std::size_t>(s.first_row + tok) * ldq + h * D;
        const float inv = st.sum > 0.0f ? 1.0f / st.sum : 0.0f;
        for (int d = 0; d < D; ++d) dst[d] = o[d] * inv;
      }
    // END LAB05 SOLUTION
  }
}

}  // namespace servelab
