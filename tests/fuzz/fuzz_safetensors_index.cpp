// SPDX-License-Identifier: MIT
/**
 * @file fuzz_safetensors_index.cpp
 * @brief libFuzzer target: model.safetensors.index.json, parsed and its shard
 *        names checked (parse_json(), parse_safetensors_index()).
 */
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "core/json.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto json = servelab::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "index.json");
    for (const auto& shard : servelab::parse_safetensors_index(json, "index.json")) {
      // The promise the loader relies on: a shard is a plain file name in the model folder.
      const std::filesystem::path p(shard);
      if (p != p.filename() || shard == ".." || shard == "." || shard.empty()) __builtin_trap();
    }
  } catch (const servelab::Error&) {
  }
  return 0;
}
