// SPDX-License-Identifier: MIT
/**
 * @file tokenizer_fixtures.h
 * @brief Paths and loaders for the tokenizer fixtures written by
 *        tools/make_tokenizer_fixtures.py (see tests/fixtures/tokenizer/PROVENANCE.md).
 */
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace servelab::test {

/// tests/fixtures/tokenizer/.
inline std::filesystem::path tokenizer_fixtures() { return fixtures_dir() / "tokenizer"; }

/// The reference outputs of Hugging Face tokenizers for every fixture tokenizer.
inline const nlohmann::json& tokenizer_reference() {
  static const nlohmann::json ref = load_reference("tokenizer")["tokenizers_reference"];
  return ref;
}

/// The parsed tokenizer.json of fixture @p name (to be altered by bad-input tests).
inline nlohmann::json tokenizer_json(const std::string& name) {
  std::ifstream in(tokenizer_fixtures() / name / "tokenizer.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace servelab::test
