// SPDX-License-Identifier: MIT
/**
 * @file fuzz_gguf.cpp
 * @brief libFuzzer target: a whole GGUF file as parse_gguf() sees a memory-mapped
 *        one, then the config and tokenizer read from what it accepted.
 *
 * A servelab::Error is the expected answer to a bad file; any other
 * exception, a crash or a sanitizer report is a bug.
 */
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  servelab::GgufContents g;
  try {
    g = servelab::parse_gguf(begin, size, "fuzz.gguf");
  } catch (const servelab::Error&) {
    return 0;
  }
  // Every accepted tensor must lie inside the input (ASan reports a read outside it).
  for (const auto& [name, t] : g.tensors)
    if (t.data < begin || t.data + t.nbytes > begin + size) __builtin_trap();
  try {
    (void)servelab::gguf_config(g, "fuzz.gguf");
  } catch (const servelab::Error&) {
  }
  try {
    (void)servelab::gguf_tokenizer(g, "fuzz.gguf");
  } catch (const servelab::Error&) {
  }
  return 0;
}
