// SPDX-License-Identifier: MIT
// The workload generator: seeded and portable draws, each distribution's
// sample statistics against its closed form, arrivals, the JSONL file and
// every way it can be wrong, the context clamp and the summary.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "core/random.h"
#include "test_util.h"
#include "workload/summary.h"
#include "workload/synthetic_prompt.h"
#include "workload/workload.h"
#include "workload/workload_file.h"

using namespace servelab;

namespace {

// Sampling tolerances, in one place. A sample statistic must lie within kSigmas
// standard errors of its closed form over kDraws draws. At 5 standard errors a
// correct sampler misses with probability below 1e-6 per check, while the bugs
// these tests look for (a missing e^(sigma^2/2), a bound off by one, a gap of
// 1 / rate^2) move the statistic by tens of standard errors. The seeds are fixed,
// so every run sees the same numbers: the bound says how lucky a wrong sampler
// would have to be, not how often the test flakes.
constexpr double kSigmas = 5;
constexpr int kDraws = 20000;
// Lengths are rounded to whole tokens, which moves a median by up to half a token.
constexpr double kRounding = 0.5;

std::vector<double> draws(const LengthDist& d, std::uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<double> v(kDraws);
  for (auto& x : v) x = d.sample(rng);
  return v;
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }  // standard normal CDF

// Mean and standard deviation of clamp(X, a, b) for X = median * e^(sigma Z): the
// closed form of a clamped lognormal (partial moments E[X^k; a < X < b] = m^k e^(k^2 s^2 / 2)
// [Phi(beta - k s) - Phi(alpha - k s)]).
std::pair<double, double> clamped_lognormal_moments(const LengthDist& d) {
  const double mu = std::log(d.median), s = d.sigma, a = d.min, b = d.max;
  const double alpha = (std::log(a) - mu) / s, beta = (std::log(b) - mu) / s;
  auto partial = [&](int k) { return std::exp(k * mu + k * k * s * s / 2) * (Phi(beta - k * s) - Phi(alpha - k * s)); };
  const double m1 = a * Phi(alpha) + partial(1) + b * (1 - Phi(beta));
  const double m2 = a * a * Phi(alpha) + partial(2) + b * b * (1 - Phi(beta));
  return {m1, std::sqrt(m2 - m1 * m1)};
}

std::string write(const test::ScratchDir& dir, const std::string& name, const std::string& text) {
  const auto path = (dir.path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

WorkloadSpec spec_of(int n, LengthDist prompt, LengthDist output, std::uint64_t seed = 0) {
  WorkloadSpec s;
  s.num_requests = n;
  s.prompt_len = prompt;
  s.output_len = output;
  s.seed = seed;
  return s;
}

}  // namespace

TEST_CASE("workload: synthetic prompts are seeded and inside the vocabulary", "[workload]") {
  const auto a = synthetic_prompt(50, 100, 1), b = synthetic_prompt(50, 100, 1), c = synthetic_prompt(50, 100, 2);
  CHECK(a == b);
  CHECK(a != c);
  for (auto id : a) CHECK((id >= 0 && id < 100));
  REQUIRE_ERROR_MENTIONS(synthetic_prompt(0, 100, 1), "--prompt-len");
}

TEST_CASE("workload: the same spec gives the same requests and another seed gives others", "[workload]") {
  const auto spec = spec_of(50, LengthDist::uniform(1, 1000), sharegpt_output_lengths(), 3);
  const auto a = make_workload(spec, 500), b = make_workload(spec, 500);
  REQUIRE(a.size() == 50);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].prompt_ids == b[i].prompt_ids);
    CHECK(a[i].max_tokens == b[i].max_tokens);
  }
  auto other = spec;
  other.seed = 4;
  CHECK(make_workload(other, 500)[0].prompt_ids != a[0].prompt_ids);
  // Each request has its own streams: the first 10 of 50 are the 10 of a 10-request workload.
  auto fewer = spec;
  fewer.num_requests = 10;
  const auto c = make_workload(fewer, 500);
  for (std::size_t i = 0; i < c.size(); ++i) CHECK(c[i].prompt_ids == a[i].prompt_ids);
}

TEST_CASE("integer draws are pinned so every machine makes the same workload", "[workload]") {
  // Uniform lengths use integer arithmetic only, so these values hold on every platform.
  // If they change, every lab's workload changed with them.
  const auto w = make_workload(spec_of(5, LengthDist::uniform(1, 1000), LengthDist::uniform(1, 1000)), 100);
  std::vector<int> prompt_lens, output_lens;
  for (const auto& r : w)
    prompt_lens.push_back(static_cast<int>(r.prompt_ids.size())), output_lens.push_back(r.max_tokens);
  CHECK(prompt_lens == std::vector<int>{972, 245, 793, 524, 853});
  CHECK(output_lens == std::vector<int>{912, 171, 991, 862, 299});
  CHECK(w[0].prompt_ids[0] == 54);
}

TEST_CASE("workload: fixed lengths are exactly N", "[workload]") {
  for (double x : draws(LengthDist::fixed(37), 1)) CHECK(x == 37);
}

TEST_CASE("workload: uniform lengths cover both bounds with the closed-form mean", "[workload]") {
  const auto d = LengthDist::uniform(10, 200);
  const auto v = draws(d, 2);
  CHECK(*std::min_element(v.begin(), v.end()) == 10);
  CHECK(*std::max_element(v.begin(), v.end()) == 200);
  // Discrete uniform on n = HI - LO + 1 values: mean (LO + HI) / 2, variance (n^2 - 1) / 12.
  const double n = 191, sd = std::sqrt((n * n - 1) / 12);
  CHECK(std::abs(mean(v) - 105.0) < kSigmas * sd / std::sqrt(kDraws));
}

TEST_CASE("workload: lognormal lengths have the closed-form median and mean", "[workload]") {
  const auto d = parse_length_dist("lognormal:100:0.8", LengthRole::prompt, "--prompt-len-dist");
  const auto v = draws(d, 3);
  // Median: e^mu = 100. Its standard error is 1 / (2 f(m) sqrt(n)) with the density
  // f(m) = 1 / (m sigma sqrt(2 pi)), i.e. m sigma sqrt(pi / 2) / sqrt(n).
  const double median_se = 100 * 0.8 * std::sqrt(std::acos(-1.0) / 2) / std::sqrt(kDraws);
  CHECK(std::abs(percentile(v, 50) - 100) < kSigmas * median_se + kRounding);
  // Mean: m e^(sigma^2 / 2); standard deviation mean * sqrt(e^(sigma^2) - 1).
  const double m = 100 * std::exp(0.32), sd = m * std::sqrt(std::exp(0.64) - 1);
  CHECK(std::abs(mean(v) - m) < kSigmas * sd / std::sqrt(kDraws));
}

TEST_CASE("workload: lognormal lengths are clamped to MIN and MAX", "[workload]") {
  const auto v = draws(LengthDist::lognormal(100, 2.0, 20, 300), 4);
  CHECK(*std::min_element(v.begin(), v.end()) == 20);
  CHECK(*std::max_element(v.begin(), v.end()) == 300);
  // A sigma of 2 puts P(X < 20) = Phi(-0.80) = 21% of draws on the floor.
  const auto floor = std::count(v.begin(), v.end(), 20.0);
  CHECK(std::abs(floor / double(kDraws) - 0.2118) < kSigmas * std::sqrt(0.2118 * 0.7882 / kDraws));
}

TEST_CASE("workload: the sharegpt presets have their stated clamped means", "[workload]") {
  // Header: means 161 and 338 before the clamp to [4, 1024], about 157 and 301 after it.
  for (const auto& [d, before, after] :
       {std::tuple{sharegpt_prompt_lengths(), 161.0, 157.0}, std::tuple{sharegpt_output_lengths(), 338.0, 301.0}}) {
    CHECK(d.median * std::exp(d.sigma * d.sigma / 2) == Approx(before).epsilon(0.01));
    const auto [m, sd] = clamped_lognormal_moments(d);
    CHECK(m == Approx(after).epsilon(0.01));
    CHECK(std::abs(mean(draws(d, 5)) - m) < kSigmas * sd / std::sqrt(kDraws));
  }
  CHECK(parse_length_dist("sharegpt", LengthRole::prompt, "--x").describe() == "lognormal:98:1:4:1024");
  CHECK(parse_length_dist("sharegpt", LengthRole::output, "--x").describe() == "lognormal:205:1:4:1024");
}

TEST_CASE("workload: Poisson inter-arrival gaps average 1 over the rate", "[workload]") {
  auto spec = spec_of(kDraws + 1, LengthDist::fixed(1), LengthDist::fixed(1), 9);
  spec.arrivals = parse_arrivals("poisson:4", "--arrivals");
  const auto w = make_workload(spec, 10);
  CHECK(w.front().arrival_s == 0.0);
  std::vector<double> gaps;
  for (std::size_t i = 1; i < w.size(); ++i) gaps.push_back(w[i].arrival_s - w[i - 1].arrival_s);
  CHECK(*std::min_element(gaps.begin(), gaps.end()) >= 0.0);  // sorted by arrival
  // Exponential gaps: mean and standard deviation both 1 / rate.
  CHECK(std::abs(mean(gaps) - 0.25) < kSigmas * 0.25 / std::sqrt(kDraws));
}

TEST_CASE("workload: all-at-once arrivals are all at time 0", "[workload]") {
  for (const auto& r : make_workload(spec_of(20, LengthDist::fixed(3), LengthDist::fixed(2)), 10))
    CHECK(r.arrival_s == 0.0);
}

TEST_CASE("workload: length flags parse and describe themselves", "[workload]") {
  for (const char* text : {"fixed:7", "uniform:3:9", "lognormal:98.5:0.75:2:4096", "lognormal:50:0"}) {
    const auto d = parse_length_dist(text, LengthRole::output, "--output-len-dist");
    const auto again = parse_length_dist(d.describe(), LengthRole::output, "--output-len-dist");
    CHECK(again.describe() == d.describe());
  }
  CHECK(parse_length_dist("lognormal:50:0", LengthRole::prompt, "--x").describe() == "lognormal:50:0:1:1048576");
  CHECK(parse_length_dist("uniform:3:9", LengthRole::prompt, "--x").describe() == "uniform:3:9");
}

TEST_CASE("workload: malformed length flags name the flag and the expected spelling", "[workload]") {
  const std::string flag = "--prompt-len-dist";
  auto parse = [&](const char* text) { return parse_length_dist(text, LengthRole::prompt, flag); };
  for (const char* text : {"", "fixed", "fixed:", "fixed:abc", "fixed:1.5", "fixed: 5", "fixed:+5", "fixed:5:6",
                           "gauss:1", "sharegpt:1", "uniform:1", "lognormal:100", "lognormal:100:1:5"})
    REQUIRE_ERROR_MENTIONS(parse(text), flag, std::string("'") + text + "'", "expected fixed:N");
  REQUIRE_ERROR_MENTIONS(parse("fixed:0"), flag, "N must be in [1, 1048576]");
  REQUIRE_ERROR_MENTIONS(parse("fixed:-3"), flag, "N must be in [1");
  REQUIRE_ERROR_MENTIONS(parse("fixed:99999999999999999999"), flag, "N must be an integer");
  REQUIRE_ERROR_MENTIONS(parse("fixed:2000000"), flag, "N must be in [1");
  REQUIRE_ERROR_MENTIONS(parse("uniform:10:5"), flag, "lower bound 10 is above the upper bound 5");
  REQUIRE_ERROR_MENTIONS(parse("lognormal:-1:1"), flag, "MEDIAN");
  REQUIRE_ERROR_MENTIONS(parse("lognormal:100:nan"), flag, "SIGMA");
  REQUIRE_ERROR_MENTIONS(parse("lognormal:100:-0.5"), flag, "SIGMA");
  REQUIRE_ERROR_MENTIONS(parse("lognormal:100:1:0:10"), flag, "MIN must be in [1");
  REQUIRE_ERROR_MENTIONS(LengthDist::uniform(5, 4), "uniform:5:4", "lower bound");
}

TEST_CASE("workload: arrival flags parse and bad ones are refused", "[workload]") {
  CHECK(parse_arrivals("all", "--arrivals").kind == Arrivals::Kind::all);
  CHECK(parse_arrivals("poisson:2.5", "--arrivals").rate == 2.5);
  CHECK(parse_arrivals("poisson:2.5", "--arrivals").describe() == "poisson:2.5");
  CHECK(parse_arrivals("trace:C:/a:b.txt", "--arrivals").trace_path == "C:/a:b.txt");
  for (const char* text :
       {"", "poisson", "poisson:", "poisson:0", "poisson:-1", "poisson:inf", "poisson:x", "trace:", "burst:3", "All"})
    REQUIRE_ERROR_MENTIONS(parse_arrivals(text, "--arrivals"), "--arrivals", std::string("'") + text + "'",
                           "expected all");
}

TEST_CASE("a JSONL workload file gives its requests in arrival order", "[workload]") {
  test::ScratchDir dir("workload");
  const auto path = write(dir, "w.jsonl",
                          "{\"prompt_len\": 12, \"output_len\": 30, \"arrival\": 0.5}\r\n"
                          "\n"
                          "{\"prompt_ids\": [5, 6, 7], \"output_len\": 4, \"arrival\": 0.25, \"note\": {\"x\": 1}}\n"
                          "   \n"
                          "{\"prompt_len\": 1, \"output_len\": 1, \"arrival\": 2}");
  const auto entries = read_workload_file(path, 100);
  REQUIRE(entries.size() == 3);
  CHECK(entries[1].line == 3);
  WorkloadSpec spec;
  spec.num_requests = 0;  // every line
  spec.file = path;
  const auto w = make_workload(spec, 100);
  REQUIRE(w.size() == 3);
  CHECK(w[0].arrival_s == 0.25);
  CHECK(w[0].prompt_ids == std::vector<std::int32_t>{5, 6, 7});
  CHECK(w[0].max_tokens == 4);
  CHECK(w[1].arrival_s == 0.5);
  CHECK(w[1].prompt_ids.size() == 12);
  CHECK(w[1].max_tokens == 30);
  CHECK(w[2].arrival_s == 2.0);
  // The first line's synthetic prompt is request 0's, whatever its place after sorting.
  CHECK(w[1].prompt_ids == synthetic_prompt(12, 100, request_seed(0, 0)));
  spec.num_requests = 2;
  CHECK(make_workload(spec, 100).size() == 2);
  spec.num_requests = 4;
  REQUIRE_ERROR_MENTIONS(make_workload(spec, 100), path, "has 3 requests", "4");
}

TEST_CASE("workload: a file without arrival times takes the arrivals of the spec", "[workload]") {
  test::ScratchDir dir("workload-noarr");
  WorkloadSpec spec;
  spec.file = write(dir, "w.jsonl", "{\"prompt_len\": 2, \"output_len\": 3}\n{\"prompt_len\": 4, \"output_len\": 5}\n");
  spec.num_requests = 0;
  spec.arrivals = parse_arrivals("poisson:1", "--arrivals");
  const auto w = make_workload(spec, 10);
  CHECK(w[0].arrival_s == 0.0);
  CHECK(w[1].arrival_s > 0.0);
  // A file with its own times and a Poisson process would fight: refused.
  spec.file = write(dir, "t.jsonl", "{\"prompt_len\": 2, \"output_len\": 3, \"arrival\": 1}\n");
  REQUIRE_ERROR_MENTIONS(make_workload(spec, 10), "t.jsonl", "own arrival times", "poisson:1");
}

TEST_CASE("bad JSONL workload lines are refused with file line and field", "[workload]") {
  test::ScratchDir dir("workload-bad");
  const std::string good = "{\"prompt_len\": 8, \"output_len\": 8}\n";
  // Each bad line is line 2, after a good one, so the message must point past line 1.
  const std::vector<std::tuple<std::string, std::string>> cases = {
      {"{\"prompt_len\": 8, \"output_len\": }", "not valid JSON"},
      {"{\"prompt_len\": 8 \"output_len\": 8}", "not valid JSON"},
      {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "nested deeper than 4"},
      {"{\"prompt_len\": 8, \"output_len\": 8, \"x\": {\"a\": {\"b\": {\"c\": {}}}}}", "nested deeper than 4"},
      {"[1, 2]", "expected a JSON object"},
      {"17", "expected a JSON object"},
      {"{\"output_len\": 8}", "missing field 'prompt_len' (or 'prompt_ids')"},
      {"{\"prompt_len\": 8}", "missing field 'output_len'"},
      {"{\"prompt_len\": 8, \"prompt_ids\": [1], \"output_len\": 8}", "both fields 'prompt_len' and 'prompt_ids'"},
      {"{\"prompt_len\": -5, \"output_len\": 8}", "field 'prompt_len' must be >= 1, got -5"},
      {"{\"prompt_len\": 0, \"output_len\": 8}", "field 'prompt_len' must be >= 1, got 0"},
      {"{\"prompt_len\": 8, \"output_len\": -1}", "field 'output_len' must be >= 1"},
      {"{\"prompt_len\": 2000000, \"output_len\": 8}", "field 'prompt_len' must be <= 1048576"},
      {"{\"prompt_len\": 18446744073709551615, \"output_len\": 8}", "field 'prompt_len' must be <= 1048576"},
      {"{\"prompt_len\": -9223372036854775808, \"output_len\": 8}", "field 'prompt_len' must be >= 1"},
      {"{\"prompt_len\": 1e30, \"output_len\": 8}", "field 'prompt_len' must be an integer"},
      {"{\"prompt_len\": 99999999999999999999999, \"output_len\": 8}", "field 'prompt_len' must be an integer"},
      {"{\"prompt_len\": 12.5, \"output_len\": 8}", "field 'prompt_len' must be an integer"},
      {"{\"prompt_len\": \"12\", \"output_len\": 8}", "field 'prompt_len' must be an integer"},
      {"{\"prompt_ids\": [], \"output_len\": 8}", "field 'prompt_ids' must hold 1 to"},
      {"{\"prompt_ids\": 5, \"output_len\": 8}", "field 'prompt_ids' must be an array"},
      {"{\"prompt_ids\": [1, 100], \"output_len\": 8}", "field 'prompt_ids[1]' must be a token id in [0, 100)"},
      {"{\"prompt_ids\": [-1], \"output_len\": 8}", "field 'prompt_ids[0]' must be a token id"},
      {"{\"prompt_ids\": [1.0], \"output_len\": 8}", "field 'prompt_ids[0]' must be a token id"},
      {"{\"prompt_len\": 8, \"output_len\": 8, \"arrival\": -0.5}", "field 'arrival' must be a number of seconds >= 0"},
      {"{\"prompt_len\": 8, \"output_len\": 8, \"arrival\": \"soon\"}", "field 'arrival' must be a number"},
  };
  for (const auto& [line, expected] : cases) {
    const auto path = write(dir, "bad.jsonl", good + line + "\n");
    INFO("line: " << line);
    REQUIRE_ERROR_MENTIONS(read_workload_file(path, 100), path + ":2:", expected);
  }
}

TEST_CASE("bad JSONL workload files as a whole are refused by name", "[workload]") {
  test::ScratchDir dir("workload-file");
  const auto empty = write(dir, "empty.jsonl", "");
  REQUIRE_ERROR_MENTIONS(read_workload_file(empty, 100), empty, "no requests");
  const auto blank = write(dir, "blank.jsonl", "\n  \n\r\n");
  REQUIRE_ERROR_MENTIONS(read_workload_file(blank, 100), blank, "no requests");
  const auto missing = (dir.path() / "nope.jsonl").string();
  REQUIRE_ERROR_MENTIONS(read_workload_file(missing, 100), missing, "cannot open the workload file");
  // Arrival times on some lines only.
  const auto some =
      write(dir, "some.jsonl",
            "{\"prompt_len\": 1, \"output_len\": 1, \"arrival\": 1}\n{\"prompt_len\": 1, \"output_len\": 1}\n");
  REQUIRE_ERROR_MENTIONS(read_workload_file(some, 100), some + ":2:", "missing field 'arrival'", "line 1 has one");
  // Over the size limit: a sparse file, so the check must come before reading (nothing is allocated).
  const auto huge = write(dir, "huge.jsonl", "");
  std::filesystem::resize_file(huge, static_cast<std::uintmax_t>(kMaxWorkloadFileBytes) + 1);
  REQUIRE_ERROR_MENTIONS(read_workload_file(huge, 100), huge, "over the limit of 268435456 bytes");
  // More lines than kMaxWorkloadRequests: refused before any line is parsed.
  std::string lines;
  lines.reserve(2 * (kMaxWorkloadRequests + 1));
  for (int i = 0; i <= kMaxWorkloadRequests; ++i) lines += "x\n";
  const auto too_many = write(dir, "many.jsonl", lines);
  REQUIRE_ERROR_MENTIONS(read_workload_file(too_many, 100), too_many + ":1000001", "more than 1000000 requests");
}

TEST_CASE("workload: trace arrivals come from a file of times", "[workload]") {
  test::ScratchDir dir("workload-trace");
  auto spec = spec_of(3, LengthDist::fixed(2), LengthDist::fixed(2));
  spec.arrivals = parse_arrivals("trace:" + write(dir, "t.txt", "0.5\n\n 0.125 \r\n3\n9\n"), "--arrivals");
  const auto w = make_workload(spec, 10);
  CHECK(w[0].arrival_s == 0.125);
  CHECK(w[1].arrival_s == 0.5);
  CHECK(w[2].arrival_s == 3.0);
  spec.num_requests = 5;
  REQUIRE_ERROR_MENTIONS(make_workload(spec, 10), "t.txt", "has 4 arrival times", "5 requests");
  const auto bad = write(dir, "bad.txt", "0\n1\n-2\n");
  spec.arrivals = parse_arrivals("trace:" + bad, "--arrivals");
  REQUIRE_ERROR_MENTIONS(make_workload(spec, 10), bad + ":3:", "arrival time in seconds >= 0", "-2");
  spec.arrivals = parse_arrivals("trace:" + write(dir, "word.txt", "soon\n"), "--arrivals");
  REQUIRE_ERROR_MENTIONS(make_workload(spec, 10), "word.txt:1:", "'soon'");
}

TEST_CASE("make_workload refuses a bad spec by name", "[workload]") {
  REQUIRE_ERROR_MENTIONS(make_workload(spec_of(0, LengthDist::fixed(1), LengthDist::fixed(1)), 10), "num_requests");
  // Checked before the request vector is reserved.
  REQUIRE_ERROR_MENTIONS(
      make_workload(spec_of(kMaxWorkloadRequests + 1, LengthDist::fixed(1), LengthDist::fixed(1)), 10),
      "num_requests must be in [1, 1000000]");
  REQUIRE_ERROR_MENTIONS(make_workload(spec_of(1, LengthDist::fixed(1), LengthDist::fixed(1)), 0), "vocab_size");
  auto spec = spec_of(1, LengthDist::fixed(1), LengthDist::fixed(1));
  spec.output_len.max = 0;  // built by hand, not by a factory
  REQUIRE_ERROR_MENTIONS(make_workload(spec, 10), "length distribution", "[1, 1048576]");
}

TEST_CASE("workload: clamp_to_context fits prompt plus output into the context", "[workload]") {
  std::vector<WorkloadRequest> w(4);
  w[0].prompt_ids.assign(10, 1), w[0].max_tokens = 5;   // fits: 15 <= 16
  w[1].prompt_ids.assign(10, 1), w[1].max_tokens = 50;  // output cut to 16 - 10 = 6
  w[2].prompt_ids.assign(40, 1), w[2].max_tokens = 50;  // prompt cut to 15 and output to 1
  w[3].prompt_ids.assign(16, 1), w[3].max_tokens = 1;   // a prompt of the whole context leaves no room: cut to 15
  CHECK(clamp_to_context(w, 16) == 3);
  CHECK((w[0].prompt_ids.size() == 10 && w[0].max_tokens == 5));
  CHECK((w[1].prompt_ids.size() == 10 && w[1].max_tokens == 6));
  CHECK((w[2].prompt_ids.size() == 15 && w[2].max_tokens == 1));
  CHECK((w[3].prompt_ids.size() == 15 && w[3].max_tokens == 1));
  for (const auto& r : w) CHECK(static_cast<int>(r.prompt_ids.size()) + r.max_tokens <= 16);
  CHECK(clamp_to_context(w, 16) == 0);  // already inside: nothing changes
  REQUIRE_ERROR_MENTIONS(clamp_to_context(w, 1), "max_model_len must be >= 2");
  w[0].prompt_ids.clear();
  REQUIRE_ERROR_MENTIONS(clamp_to_context(w, 16), "request 0 has an empty prompt");
}

TEST_CASE("the workload summary counts lengths and the arrival span", "[workload]") {
  std::vector<WorkloadRequest> w(3);
  w[0].prompt_ids.assign(10, 0), w[0].max_tokens = 1, w[0].arrival_s = 0.0;
  w[1].prompt_ids.assign(20, 0), w[1].max_tokens = 2, w[1].arrival_s = 1.0;
  w[2].prompt_ids.assign(60, 0), w[2].max_tokens = 3, w[2].arrival_s = 4.0;
  const auto s = summarize_workload(w);
  CHECK(s.count == 3);
  CHECK(s.prompt_tokens == 90);
  CHECK(s.output_tokens == 6);
  CHECK(s.prompt_len.mean == 30);
  CHECK(s.prompt_len.median == 20);
  CHECK(s.output_len.max == 3);
  CHECK(s.span_s() == 4.0);
  CHECK(s.describe() ==
        "3 requests | prompt tokens mean 30.0 p50 20.0 p99 59.2 (total 90) | output tokens mean 2.0 p50 2.0 p99 3.0 "
        "(total 6) | arrivals over 4.00 s (0.50 req/s)");
  CHECK(summarize_workload({}).count == 0);
  CHECK(summarize_workload({}).describe().find("0 requests") == 0);
}

TEST_CASE("workload: a spec describes itself in one line", "[workload]") {
  auto spec = spec_of(64, sharegpt_prompt_lengths(), LengthDist::fixed(128), 7);
  spec.arrivals = parse_arrivals("poisson:2", "--arrivals");
  CHECK(spec.describe() == "64 requests, prompt lognormal:98:1:4:1024, output fixed:128, arrivals poisson:2, seed 7");
  spec.file = "w.jsonl";
  spec.num_requests = 0;
  CHECK(spec.describe() == "all requests of w.jsonl, arrivals poisson:2, seed 7");
}
