// SPDX-License-Identifier: MIT
#include "core/hash.h"

#include <cstdio>

namespace servelab {

std::string token_hash(const std::vector<std::int32_t>& ids) {
  std::string bytes;
  for (std::int32_t id : ids)
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((static_cast<std::uint32_t>(id) >> (8 * b)) & 0xffu));
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(fnv1a(bytes)));
  return std::string(out, 8);
}

}  // namespace servelab
