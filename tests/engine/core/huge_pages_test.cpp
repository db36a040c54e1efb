// SPDX-License-Identifier: MIT
// Huge-page memory: 2 MiB aligned, zero-filled, and reported by smaps.
#include <cstdint>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/huge_pages.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("huge-page memory starts on a 2 MiB boundary, is zero and can be written to its end", "[huge_pages]") {
  for (std::size_t bytes : {std::size_t{1}, kHugePageBytes - 1, kHugePageBytes, 3 * kHugePageBytes + 4096}) {
    INFO(bytes << " bytes");
    const std::shared_ptr<std::byte> p = allocate_huge_pages(bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p.get()) % kHugePageBytes == 0);
    // Rounded up to whole huge pages: the last byte of the last page is the caller's too.
    const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    for (std::size_t i = 0; i < rounded; i += 4096) REQUIRE(p.get()[i] == std::byte{0});
    p.get()[rounded - 1] = std::byte{7};
    CHECK(p.get()[rounded - 1] == std::byte{7});
  }
  CHECK_THROWS_AS(allocate_huge_pages(0), Error);
}

TEST_CASE("huge_page_bytes reads the mapping that holds a pointer", "[huge_pages]") {
  CHECK(huge_page_bytes(nullptr) == 0);
  const std::size_t bytes = 8 * kHugePageBytes;
  const std::shared_ptr<std::byte> p = allocate_huge_pages(bytes);
  for (std::size_t i = 0; i < bytes; i += 4096) p.get()[i] = std::byte{1};
  const std::size_t huge = huge_page_bytes(p.get() + bytes / 2);
  CHECK(huge <= bytes + kHugePageBytes);  // never more than the mapping holds
  CHECK(huge % kHugePageBytes == 0);
  std::string mode;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), mode);
  // Whether the kernel found free 2 MiB frames is its choice, so a count of 0 is reported, not failed.
  if (huge == 0) WARN("no huge pages given (transparent_hugepage/enabled: " << mode << ")");
}
