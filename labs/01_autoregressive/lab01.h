// SPDX-License-Identifier: MIT
/**
 * @file lab01.h
 * @brief Lab 01's claims (claims.cpp); main.cpp generates without a cache,
 *        checks the tokens against the cached path and prints the tables.
 * @see labs/01_autoregressive/README.md
 */
#pragma once

#include <vector>

#include "lab.h"
#include "model/model.h"
#include "serve/generate.h"

namespace servelab::lab01 {

/// The chapter's claims, each decided on this run's per-step table @p steps and timed @p runs (at least one, all
/// with the same tokens) of @p model generating @p max_new_tokens after a @p prompt_len-token prompt; then the
/// verdict.
void check_claims(lab::Report& report, const lab::Table& steps, const Model& model, int prompt_len, int max_new_tokens,
                  const std::vector<GenerateResult>& runs);

}  // namespace servelab::lab01
