// SPDX-License-Identifier: MIT
/**
 * @file graded.h
 * @brief What the graded tests of the labs' regions share.
 */
#pragma once

#include <catch2/catch.hpp>

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

/// Runs @p check(gen) greedy and then at temperature 0.9 (each failure names which), gen asking for
/// @p max_new_tokens from a sampler of @p seed with no top-k or top-p cut.
template <typename Check>
void at_greedy_and_sampled(int max_new_tokens, std::uint64_t seed, Check check) {
  for (const float temperature : {0.0f, 0.9f}) {
    INFO("temperature " << temperature);
    GenerateOptions gen;
    gen.max_new_tokens = max_new_tokens;
    gen.sampling = {temperature, 0, 1.0f, seed};
    check(gen);
  }
}

/// The "tiny" preset from @p seed in deterministic mode (batch-invariant reductions), so a cached and
/// a recomputed path give the same floats and the same tokens.
inline std::unique_ptr<Model> deterministic_tiny(std::uint64_t seed = 0) { return deterministic_model("tiny", seed); }

}  // namespace servelab::test
