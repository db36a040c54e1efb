// SPDX-License-Identifier: MIT
/**
 * @file attention_reference.h
 * @brief The tests' double-precision attention: softmax(q·Kᵀ/√d)·V over keys
 *        0..pos of each query, read through each sequence's KVView. Every
 *        attention kernel, CPU or CUDA, is checked against this one loop.
 */
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/attention.h"

namespace servelab::test {

/**
 * @brief Output of every row and head, in double.
 * @param q        [rows, q_stride] queries; head h of row r starts at r * q_stride + h * head_dim.
 * @param q_stride floats between consecutive query rows (num_heads * head_dim when q holds only queries).
 * @return [rows, num_heads * head_dim], the row order of @p q.
 */
inline std::vector<double> attention_reference(const std::vector<float>& q, std::size_t q_stride,
                                               const std::vector<AttentionSeq>& seqs, const AttentionShape& shape) {
  const int H = shape.num_heads, D = shape.head_dim, group = H / shape.num_kv_heads;
  std::size_t rows = 0;
  for (const auto& s : seqs) rows += static_cast<std::size_t>(s.num_new_tokens);
  std::vector<double> out(rows * H * D);
  for (const auto& s : seqs)
    for (int i = 0; i < s.num_new_tokens; ++i)
      for (int h = 0; h < H; ++h) {
        const std::size_t r = static_cast<std::size_t>(s.first_row + i);
        const int pos = s.num_computed_tokens + i, kvh = h / group;
        const float* qh = &q[r * q_stride + static_cast<std::size_t>(h) * D];
        std::vector<double> w(static_cast<std::size_t>(pos) + 1);
        double mx = -1e300, sum = 0;
        for (int t = 0; t <= pos; ++t) {
          double d = 0;
          for (int j = 0; j < D; ++j) d += double(qh[j]) * s.kv.key(t)[kvh * D + j];
          w[t] = d / std::sqrt(double(D));
          mx = std::max(mx, w[t]);
        }
        for (auto& x : w) sum += x = std::exp(x - mx);
        for (int j = 0; j < D; ++j) {
          double o = 0;
          for (int t = 0; t <= pos; ++t) o += w[t] / sum * s.kv.value(t)[kvh * D + j];
          out[(r * H + h) * D + j] = o;
        }
      }
  return out;
}

}  // namespace servelab::test
