// SPDX-License-Identifier: MIT
/**
 * @file fuzz_config.cpp
 * @brief libFuzzer target: config.json through parse_json() and parse_config().
 */
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/model_config.h"
#include "core/error.h"
#include "core/json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto json = servelab::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
    const servelab::ModelConfig c = servelab::parse_config(json, "config.json");
    // An accepted config has a shape whose sizes can be computed without overflow.
    if (c.q_dim() <= 0 || c.kv_dim() <= 0 || c.num_parameters() <= 0) __builtin_trap();
  } catch (const servelab::Error&) {
  }
  return 0;
}
