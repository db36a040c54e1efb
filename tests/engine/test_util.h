// SPDX-License-Identifier: MIT
/**
 * @file test_util.h
 * @brief Shared helpers of the engine tests: fixture paths, a scratch
 *        folder, and the one place where numeric tolerances are stated.
 */
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"  // REQUIRE_ERROR_MENTIONS catches servelab::Error

namespace servelab::test {

/// Folder holding the committed Hugging Face fixtures (see tests/fixtures/PROVENANCE.md).
inline std::filesystem::path fixtures_dir() { return SERVELAB_FIXTURES_DIR; }

/// reference.json of fixture @p name.
inline nlohmann::json load_reference(const std::string& name) {
  std::ifstream in(fixtures_dir() / name / "reference.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

/**
 * Tolerances, |engine - reference| <= atol + rtol * |reference|, and why:
 * - kF32*: our f32 forward vs transformers' f32 forward. Both round every op
 *   to f32 but sum in different orders (OpenBLAS vs torch's GEMM blocking,
 *   torch's pairwise mean in RMSNorm). Measured worst error on the fixtures:
 *   5e-5 on logits of magnitude up to ~6 (their weights are large on purpose,
 *   to keep greedy margins wide, which also amplifies rounding), so the bound
 *   leaves a 2-3x margin, while a wrong op (a missing bias, RoPE off by one
 *   position, a wrong KV head) moves logits by more than 1e-2.
 * - kKernel*: one f32 kernel vs a double-precision loop on random O(1) data.
 */
inline constexpr double kF32Atol = 1e-4, kF32Rtol = 1e-4;
inline constexpr double kKernelAtol = 1e-5, kKernelRtol = 1e-5;

/// What a comparison of a result with its reference found, element by element.
struct Closeness {
  std::size_t compared = 0;   ///< elements compared (a.size())
  std::size_t outside = 0;    ///< finite pairs farther apart than atol + rtol * |ref|
  std::size_t nonfinite = 0;  ///< pairs where a or ref is NaN or infinite: never a match
  std::size_t first_bad = 0;  ///< index of the first failing element (valid when outside + nonfinite > 0)
  double worst = 0.0;         ///< largest finite |a - ref|
  std::size_t worst_i = 0;    ///< where it is
  /// True when at least @p min_count elements were compared and every one matched.
  bool ok(std::size_t min_count = 1) const { return compared >= min_count && outside == 0 && nonfinite == 0; }
};

/**
 * @brief Compares @p a with @p ref under |a - ref| <= atol + rtol * |ref|.
 *
 * A NaN or infinity on either side is a failure, counted apart: a kernel that
 * never writes a NaN-poisoned output must fail the test, and `NaN > tol` is
 * false, so a plain tolerance test would let it pass.
 */
inline Closeness closeness(const std::vector<float>& a, const std::vector<double>& ref, double atol, double rtol) {
  REQUIRE(a.size() == ref.size());
  Closeness c;
  c.compared = a.size();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool finite = std::isfinite(a[i]) && std::isfinite(ref[i]);
    const double err = finite ? std::abs(a[i] - ref[i]) : 0.0;
    const bool bad = !finite || err > atol + rtol * std::abs(ref[i]);
    if (bad && c.outside + c.nonfinite == 0) c.first_bad = i;
    if (!finite)
      ++c.nonfinite;
    else if (bad)
      ++c.outside;
    if (err > c.worst) c.worst = err, c.worst_i = i;
  }
  return c;
}

/**
 * @brief True when @p a matches @p ref element for element (see closeness())
 *        and at least @p min_count elements were compared; otherwise reports
 *        the counts, the first failing element and the worst finite error.
 */
inline bool all_close(const std::vector<float>& a, const std::vector<double>& ref, double atol, double rtol,
                      std::size_t min_count = 1) {
  const Closeness c = closeness(a, ref, atol, rtol);
  if (c.ok(min_count)) return true;
  UNSCOPED_INFO(c.compared << " compared (at least " << min_count << " required), " << c.outside << " outside atol "
                           << atol << " + rtol " << rtol << ", " << c.nonfinite << " not finite");
  if (c.outside + c.nonfinite > 0)
    UNSCOPED_INFO("first failure at " << c.first_bad << ": " << a[c.first_bad] << " vs ref " << ref[c.first_bad]);
  if (c.compared > 0)
    UNSCOPED_INFO("worst finite |a - ref| = " << c.worst << " at " << c.worst_i << " (ref " << ref[c.worst_i] << ")");
  return false;
}

/**
 * @brief How a deterministic and a fast path are held to a reference: with @p exact (deterministic mode, the
 *        same sums in the same order), @p a == @p ref element for element; otherwise all_close() under
 *        @p atol and @p rtol. Reports the first differing element when an exact match fails.
 */
inline bool equal_or_close(const std::vector<float>& a, const std::vector<float>& ref, bool exact, double atol,
                           double rtol) {
  if (!exact) return all_close(a, std::vector<double>(ref.begin(), ref.end()), atol, rtol);
  if (a == ref) return true;
  std::size_t i = 0;
  while (i < a.size() && i < ref.size() && a[i] == ref[i]) ++i;
  UNSCOPED_INFO("not equal: sizes " << a.size() << " and " << ref.size() << ", first difference at " << i);
  if (i < a.size() && i < ref.size()) UNSCOPED_INFO(a[i] << " vs ref " << ref[i]);
  return false;
}

/// @p n floats uniform in [-1, 1) from a fixed seed.
inline std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// A fresh empty folder under the system temp dir, removed when the object dies.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() / ("servelab-" + tag + "-" + std::to_string(std::random_device{}()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// The folder.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Copies fixture @p name into @p dir and returns the copy's path.
inline std::filesystem::path copy_fixture(const std::string& name, const std::filesystem::path& dir) {
  const auto dst = dir / name;
  std::filesystem::copy(fixtures_dir() / name, dst, std::filesystem::copy_options::recursive);
  return dst;
}

/// Asserts that @p expr throws servelab::Error whose message contains every string in @p parts.
#define REQUIRE_ERROR_MENTIONS(expr, ...)                                   \
  do {                                                                      \
    try {                                                                   \
      (void)(expr);                                                         \
      FAIL("expected servelab::Error from " #expr);                         \
    } catch (const ::servelab::Error& e) {                                  \
      const std::string msg = e.what();                                     \
      INFO("error message: " << msg);                                       \
      for (const std::string& part : std::vector<std::string>{__VA_ARGS__}) \
        CHECK(msg.find(part) != std::string::npos);                         \
    }                                                                       \
  } while (0)

}  // namespace servelab::test
