// SPDX-License-Identifier: MIT
/**
 * @file fuzz_safetensors.cpp
 * @brief libFuzzer target: a whole safetensors file (8-byte length, JSON
 *        header, data) as parse_safetensors() sees a memory-mapped file.
 *
 * A servelab::Error is the expected answer to a bad file; any other
 * exception, a crash or a sanitizer report is a bug.
 */
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto entries =
        servelab::parse_safetensors(reinterpret_cast<const std::byte*>(data), size, "fuzz.safetensors");
    // Every accepted entry must lie inside the input (ASan reports a read outside it).
    const auto* begin = reinterpret_cast<const std::byte*>(data);
    for (const auto& [name, e] : entries)
      if (e.data < begin || e.data + e.nbytes > begin + size) __builtin_trap();
  } catch (const servelab::Error&) {
  }
  return 0;
}
