// SPDX-License-Identifier: MIT
#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace servelab {

namespace {

/// Unmaps the whole reservation, of which the caller saw only the aligned part.
struct Unmap {
  void* base;
  std::size_t size;
  void operator()(std::byte*) const { ::munmap(base, size); }
};

}  // namespace

std::shared_ptr<std::byte> allocate_huge_pages(std::size_t bytes) {
  check(bytes > 0 && bytes <= (std::size_t{1} << 46), "allocate_huge_pages: size ", bytes,
        " is outside (0, 64 TiB]");
  const std::size_t size = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // mmap() aligns to 4 KiB only: reserve one huge page more and start at the first 2 MiB boundary.
  const std::size_t reserved = size + kHugePageBytes;
  void* base = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(base != MAP_FAILED, "allocate_huge_pages: mmap of ", reserved, " bytes failed (", std::strerror(errno), ")");
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  auto* aligned = reinterpret_cast<std::byte*>((b + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  // Under one huge page (a test's or a lab's small KV cache) the advice would make each first touch fault in and
  // zero a whole 2 MiB frame for a few KiB of data. EINVAL where the kernel has no THP support: the memory then
  // stays in ordinary pages, which is fine.
  if (bytes >= kHugePageBytes) (void)::madvise(aligned, size, MADV_HUGEPAGE);
  return std::shared_ptr<std::byte>(aligned, Unmap{base, reserved});
}

std::size_t huge_page_bytes(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's block starts with "begin-end perms ...", both in hex; its fields follow as "Name: value kB".
    const std::size_t dash = line.find('-'), space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space && line.find(':') > space) {
      std::uintptr_t begin = 0, end = 0;
      const char* text = line.data();
      const bool parsed = std::from_chars(text, text + dash, begin, 16).ec == std::errc{} &&
                          std::from_chars(text + dash + 1, text + space, end, 16).ec == std::errc{};
      inside = parsed && begin <= addr && addr < end;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      const std::size_t digits = line.find_first_not_of(' ', 14);
      std::size_t kb = 0;
      if (digits != std::string::npos) std::from_chars(line.data() + digits, line.data() + line.size(), kb);
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace servelab
