// SPDX-License-Identifier: MIT
// Percentiles as numpy computes them (linear interpolation between closest ranks).
#include "core/error.h"
#include "core/stats.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("percentile interpolates between closest ranks like numpy", "[metrics]") {
  CHECK(percentile({4, 1, 3, 2}, 50) == 2.5);  // numpy.percentile([1,2,3,4], 50)
  CHECK(percentile({1, 2, 3, 4}, 0) == 1.0);
  CHECK(percentile({1, 2, 3, 4}, 100) == 4.0);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  CHECK(percentile(hundred, 99) == Approx(99.01));  // numpy: 99.01
  CHECK(percentile({7}, 99) == 7.0);
  REQUIRE_ERROR_MENTIONS(percentile({}, 50), "empty");
  REQUIRE_ERROR_MENTIONS(percentile({1}, 101), "[0, 100]");
}

TEST_CASE("summary of repeated runs", "[metrics]") {
  const Summary s = summarize({3, 1, 2});
  CHECK(s.median == 2);
  CHECK(s.min == 1);
  CHECK(s.max == 3);
  CHECK(s.mean == 2);
  CHECK(s.count == 3);
}

TEST_CASE("the spread of repeated roofs is (max - min) / max", "[metrics]") {
  CHECK(relative_spread({40}) == 0.0);
  CHECK(relative_spread({40, 40, 40}) == 0.0);
  CHECK(relative_spread({30, 40, 36}) == Approx(0.25));  // the worst repeat reached 75% of the best
  REQUIRE_ERROR_MENTIONS(relative_spread({}), "empty");
  REQUIRE_ERROR_MENTIONS(relative_spread({40, 0}), "positive");
}
