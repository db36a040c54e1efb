// SPDX-License-Identifier: MIT
#include "workload/text.h"

#include <filesystem>
#include <fstream>

#include "workload/limits.h"

namespace servelab {

std::vector<std::string_view> split_at(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

std::string shortest_text(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

int FlagText::integer(std::string_view part, const char* name) const {
  const auto v = to_number<long long>(part);
  if (!v) bad(name, " must be an integer, got '", part, "'");
  if (*v < 1 || *v > kMaxWorkloadTokens) bad(name, " must be in [1, ", kMaxWorkloadTokens, "], got ", *v);
  return static_cast<int>(*v);
}

double FlagText::real(std::string_view part, const char* name) const {
  const auto v = to_number<double>(part);
  if (!v) bad(name, " must be a number, got '", part, "'");
  return *v;
}

std::string read_limited(const std::string& path, const char* what) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  check(!ec, path, ": cannot open the ", what, " (", ec.message(), ")");
  check(size <= static_cast<std::uintmax_t>(kMaxWorkloadFileBytes), path, ": the ", what, " is ", size,
        " bytes, over the limit of ", kMaxWorkloadFileBytes, " bytes");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path, ": cannot open the ", what);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  check(in.gcount() == static_cast<std::streamsize>(size), path, ": cannot read the ", what);
  return text;
}

std::vector<std::pair<int, std::string_view>> content_lines(std::string_view text, const std::string& path) {
  std::vector<std::pair<int, std::string_view>> lines;
  int number = 0;
  for (std::string_view line : split_at(text, '\n')) {
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    check(static_cast<int>(lines.size()) < kMaxWorkloadRequests, path, ":", number, ": more than ",
          kMaxWorkloadRequests, " requests (the limit)");
    lines.emplace_back(number, line);
  }
  return lines;
}

}  // namespace servelab
