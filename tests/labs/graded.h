// SPDX-License-Identifier: MIT
/**
 * @file graded.h
 * @brief What the graded tests of the labs' regions share.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "serve/generate.h"
#include "serve/ladder.h"

namespace servelab::test {

/// The preset @p name from @p seed in deterministic mode (batch-invariant reductions), so a cached and a
/// recomputed path give the same floats and the same tokens.
inline std::unique_ptr<Model> deterministic_model(const std::string& name, std::uint64_t seed = 0) {
  ModelOptions options;
  options.deterministic = true;
  return Model::from_preset(name, seed, options);
}

/// Greedy generation of @p max_new_tokens after @p prompt with lab @p lab's KV cache switch (Techniques::for_lab).
inline GenerateResult generate_as_lab(Model& model, const std::vector<std::int32_t>& prompt, int max_new_tokens,
                                      int lab) {
  GenerateOptions gen;
  gen.max_new_tokens = max_new_tokens;
  gen.use_kv_cache = Techniques::for_lab(lab).kv_cache;
  return generate(model, prompt, gen);
}

/// The "tiny" preset from @p seed in deterministic mode (batch-invariant reductions), so a cached and
/// a recomputed path give the same floats and the same tokens.
inline std::unique_ptr<Model> deterministic_tiny(std::uint64_t seed = 0) { return deterministic_model("tiny", seed); }

}  // namespace servelab::test
