#include "serve/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/random.h"

namespace servelab {

std::vector<std::int32_t> synthetic_prompt(int length, int vocab_size, std::uint64_t seed) {
  check(length >= 1, "--prompt-len must be >= 1, got ", length);
  check(vocab_size >= 1, "synthetic prompt: vocab_size must be >= 1, got ", vocab_size);
  std::vector<std::int32_t> ids(length);
  // Knuth's MMIX LCG, not SplitMix64 (core/random.h): every synthetic prompt id, and so every
  // lab's token hash, comes from this stream, and another generator would change them all.
  std::uint64_t state = seed * kSplitMixGamma + 1;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    id = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab_size));
  }
  return ids;
}

std::uint64_t request_seed(std::uint64_t seed, std::uint64_t index, std::uint64_t purpose) {
  // Two rounds of the mix: request streams of neighbouring seeds and indices share no structure.
  return mix64(mix64(seed + kSplitMixGamma * (index + 1)) ^ (0xd1b54a32d192ed03ull * (purpose + 1)));
}

// ---- length distributions ---------------------------------------------------

namespace {

// Shortest text that reads back as the same double (98, 0.8, 2.5).
std::string shortest(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

// What is wrong with `d`, or "" when nothing is.
std::string problem(const LengthDist& d) {
  std::ostringstream os;
  const int top = kMaxWorkloadTokens;
  if (d.min < 1 || d.max < 1 || d.min > top || d.max > top)
    os << "lengths must be in [1, " << top << "] tokens, got [" << d.min << ", " << d.max << "]";
  else if (d.min > d.max)
    os << "the lower bound " << d.min << " is above the upper bound " << d.max;
  else if (d.kind == LengthDist::Kind::fixed && d.min != d.max)
    os << "a fixed length has min == max";
  else if (d.kind == LengthDist::Kind::lognormal && !(std::isfinite(d.median) && d.median > 0 && d.median <= top))
    os << "MEDIAN must be a number in (0, " << top << "], got " << d.median;
  else if (d.kind == LengthDist::Kind::lognormal && !(std::isfinite(d.sigma) && d.sigma >= 0))
    os << "SIGMA must be a finite number >= 0, got " << d.sigma;
  return os.str();
}

LengthDist checked(const LengthDist& d) {
  const std::string why = problem(d);
  check(why.empty(), "length distribution ", d.describe(), ": ", why);
  return d;
}

// The whole of `text` as a T, or nothing (from_chars: no locale, no leading '+' or spaces).
template <typename T>
std::optional<T> to_number(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// A flag's value being read: every error names the flag, the text and the expected spelling.
struct FlagText {
  std::string_view flag, text, expected;

  template <typename... Why>
  [[noreturn]] void bad(const Why&... why) const {
    fail(flag, " '", text, "': ", why..., " (expected ", expected, ")");
  }
  int integer(std::string_view part, const char* name) const {
    const auto v = to_number<long long>(part);
    if (!v) bad(name, " must be an integer, got '", part, "'");
    if (*v < 1 || *v > kMaxWorkloadTokens) bad(name, " must be in [1, ", kMaxWorkloadTokens, "], got ", *v);
    return static_cast<int>(*v);
  }
  double real(std::string_view part, const char* name) const {
    const auto v = to_number<double>(part);
    if (!v) bad(name, " must be a number, got '", part, "'");
    return *v;
  }
};

}  // namespace

LengthDist LengthDist::fixed(int n) { return checked({.kind = Kind::fixed, .min = n, .max = n}); }

LengthDist LengthDist::uniform(int lo, int hi) { return checked({.kind = Kind::uniform, .min = lo, .max = hi}); }

LengthDist LengthDist::lognormal(double median, double sigma, int min, int max) {
  return checked({.kind = Kind::lognormal, .min = min, .max = max, .median = median, .sigma = sigma});
}

int LengthDist::sample(SplitMix64& rng) const {
  switch (kind) {
    case Kind::fixed: return min;
    case Kind::uniform: return rng.uniform_int(min, max);
    case Kind::lognormal: {
      // length = median * e^(sigma Z), clamped in double first so a far tail cannot overflow the int.
      const double x = median * std::exp(sigma * rng.normal());
      return static_cast<int>(std::lround(std::clamp(x, static_cast<double>(min), static_cast<double>(max))));
    }
  }
  return min;
}

std::string LengthDist::describe() const {
  switch (kind) {
    case Kind::fixed: return "fixed:" + std::to_string(min);
    case Kind::uniform: return "uniform:" + std::to_string(min) + ":" + std::to_string(max);
    case Kind::lognormal:
      return "lognormal:" + shortest(median) + ":" + shortest(sigma) + ":" + std::to_string(min) + ":" +
             std::to_string(max);
  }
  return "?";
}

// See the header for the sources: vLLM paper's ShareGPT means (161 in, 338 out), SIGMA 1 our
// assumption, MEDIAN = mean / e^(1/2), bounds from vLLM's benchmark filter.
LengthDist sharegpt_prompt_lengths() { return LengthDist::lognormal(98, 1.0, 4, 1024); }
LengthDist sharegpt_output_lengths() { return LengthDist::lognormal(205, 1.0, 4, 1024); }

LengthDist parse_length_dist(std::string_view text, LengthRole role, std::string_view flag) {
  const FlagText ft{flag, text, "fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:MIN:MAX] or sharegpt"};
  const auto parts = split(text, ':');
  const std::string_view kind = parts[0];
  LengthDist d;
  if (kind == "sharegpt" && parts.size() == 1) {
    return role == LengthRole::prompt ? sharegpt_prompt_lengths() : sharegpt_output_lengths();
  } else if (kind == "fixed" && parts.size() == 2) {
    d = {.kind = LengthDist::Kind::fixed, .min = ft.integer(parts[1], "N")};
    d.max = d.min;
  } else if (kind == "uniform" && parts.size() == 3) {
    d = {.kind = LengthDist::Kind::uniform, .min = ft.integer(parts[1], "LO"), .max = ft.integer(parts[2], "HI")};
  } else if (kind == "lognormal" && (parts.size() == 3 || parts.size() == 5)) {
    d = {.kind = LengthDist::Kind::lognormal, .min = 1, .max = kMaxWorkloadTokens,
         .median = ft.real(parts[1], "MEDIAN"), .sigma = ft.real(parts[2], "SIGMA")};
    if (parts.size() == 5) d.min = ft.integer(parts[3], "MIN"), d.max = ft.integer(parts[4], "MAX");
  } else {
    ft.bad("unknown distribution or wrong number of ':'-separated fields");
  }
  if (const std::string why = problem(d); !why.empty()) ft.bad(why);
  return d;
}

// ---- arrivals -----------------------------------------------------------------

std::string Arrivals::describe() const {
  switch (kind) {
    case Kind::all: return "all";
    case Kind::poisson: return "poisson:" + shortest(rate);
    case Kind::trace: return "trace:" + trace_path;
  }
  return "?";
}

Arrivals parse_arrivals(std::string_view text, std::string_view flag) {
  const FlagText ft{flag, text, "all, poisson:RATE (requests/s) or trace:PATH"};
  if (text == "all") return {};
  if (text.starts_with("poisson:")) {
    const double rate = ft.real(text.substr(8), "RATE");
    if (!(std::isfinite(rate) && rate > 0)) ft.bad("RATE must be a positive finite number of requests/s, got ", rate);
    Arrivals a;
    a.kind = Arrivals::Kind::poisson, a.rate = rate;
    return a;
  }
  if (text.starts_with("trace:") && text.size() > 6)  // a path may hold ':', so split once only
    return {.kind = Arrivals::Kind::trace, .trace_path = std::string(text.substr(6))};
  ft.bad("unknown arrival process");
}

std::string WorkloadSpec::describe() const {
  std::ostringstream os;
  if (file.empty())
    os << num_requests << " requests, prompt " << prompt_len.describe() << ", output " << output_len.describe();
  else
    os << (num_requests > 0 ? "first " + std::to_string(num_requests) : std::string("all")) << " requests of "
       << file;
  os << ", arrivals " << arrivals.describe() << ", seed " << seed;
  return os.str();
}

// ---- files ----------------------------------------------------------------------

namespace {

// The file's bytes, its size checked against the limit before anything is allocated.
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

// Non-blank lines with their 1-based numbers (a trailing '\r' dropped), at most kMaxWorkloadRequests.
std::vector<std::pair<int, std::string_view>> content_lines(std::string_view text, const std::string& path) {
  std::vector<std::pair<int, std::string_view>> lines;
  int number = 0;
  for (std::string_view line : split(text, '\n')) {
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    check(static_cast<int>(lines.size()) < kMaxWorkloadRequests, path, ":", number, ": more than ",
          kMaxWorkloadRequests, " requests (the limit)");
    lines.emplace_back(number, line);
  }
  return lines;
}

// A JSON value for a message, cut short: a 1 MB array must not become a 1 MB error line.
std::string brief(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

// j[key] as a token count in [1, kMaxWorkloadTokens].
int length_field(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.contains(key), where, ": missing field '", key, "'");
  const auto& v = j.at(key);
  check(v.is_number_integer(), where, ": field '", key, "' must be an integer number of tokens, got ", brief(v));
  // nlohmann keeps non-negative literals as unsigned and negative ones as signed: read each without wrapping.
  const bool positive = v.is_number_unsigned() ? v.get<std::uint64_t>() >= 1 : v.get<std::int64_t>() >= 1;
  check(positive, where, ": field '", key, "' must be >= 1, got ", brief(v));
  check(v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxWorkloadTokens), where, ": field '", key,
        "' must be <= ", kMaxWorkloadTokens, " tokens, got ", brief(v));
  return static_cast<int>(v.get<std::uint64_t>());
}

WorkloadFileEntry parse_entry(std::string_view text, const std::string& where, int vocab_size) {
  nlohmann::json j;
  try {
    // The callback sees each object/array open with its depth (0 for the line itself): stop early.
    j = nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
      const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                         event == nlohmann::json::parse_event_t::array_start;
      if (opens && depth + 1 > kMaxWorkloadJsonDepth)
        fail(where, ": JSON nested deeper than ", kMaxWorkloadJsonDepth, " levels (expected one flat object)");
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    fail(where, ": not valid JSON (", e.what(), ")");
  }
  check(j.is_object(), where, ": expected a JSON object like {\"prompt_len\": 120, \"output_len\": 300}, got ",
        brief(j));
  WorkloadFileEntry e;
  const bool has_len = j.contains("prompt_len"), has_ids = j.contains("prompt_ids");
  check(has_len != has_ids, where, has_len ? ": has both fields 'prompt_len' and 'prompt_ids' (expected one)"
                                           : ": missing field 'prompt_len' (or 'prompt_ids')");
  if (has_len) {
    e.prompt_len = length_field(j, "prompt_len", where);
  } else {
    const auto& ids = j.at("prompt_ids");
    check(ids.is_array(), where, ": field 'prompt_ids' must be an array of token ids, got ", brief(ids));
    check(!ids.empty() && ids.size() <= static_cast<std::size_t>(kMaxWorkloadTokens), where,
          ": field 'prompt_ids' must hold 1 to ", kMaxWorkloadTokens, " ids, got ", ids.size());
    e.prompt_ids.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto& id = ids[i];
      // Unsigned literals only: a negative id is signed, and is_number_unsigned() is false for it.
      check(id.is_number_unsigned() && id.get<std::uint64_t>() < static_cast<std::uint64_t>(vocab_size), where,
            ": field 'prompt_ids[", i, "]' must be a token id in [0, ", vocab_size, "), got ", brief(id));
      e.prompt_ids.push_back(static_cast<std::int32_t>(id.get<std::uint64_t>()));
    }
    e.prompt_len = static_cast<int>(e.prompt_ids.size());
  }
  e.output_len = length_field(j, "output_len", where);
  if (j.contains("arrival")) {
    const auto& a = j.at("arrival");
    check(a.is_number() && std::isfinite(a.get<double>()) && a.get<double>() >= 0, where,
          ": field 'arrival' must be a number of seconds >= 0, got ", brief(a));
    e.arrival_s = a.get<double>();
  }
  return e;
}

// One arrival time (seconds >= 0) per non-blank line.
std::vector<double> read_trace(const std::string& path) {
  const std::string text = read_limited(path, "arrival trace");
  const auto lines = content_lines(text, path);
  std::vector<double> times;
  times.reserve(lines.size());
  for (const auto& [number, raw] : lines) {
    const std::size_t first = raw.find_first_not_of(" \t"), last = raw.find_last_not_of(" \t");
    const auto t = to_number<double>(raw.substr(first, last - first + 1));
    check(t && std::isfinite(*t) && *t >= 0, path, ":", number, ": expected an arrival time in seconds >= 0, got '",
          raw, "'");
    times.push_back(*t);
  }
  return times;
}

}  // namespace

std::vector<WorkloadFileEntry> read_workload_file(const std::string& path, int vocab_size) {
  check(vocab_size >= 1, "workload file: vocab_size must be >= 1, got ", vocab_size);
  const std::string text = read_limited(path, "workload file");
  const auto lines = content_lines(text, path);
  check(!lines.empty(), path, ": no requests (expected one JSON object per line)");
  std::vector<WorkloadFileEntry> entries;
  entries.reserve(lines.size());
  for (const auto& [number, line] : lines) {
    entries.push_back(parse_entry(line, path + ":" + std::to_string(number), vocab_size));
    entries.back().line = number;
  }
  // Arrival times on some lines only would leave the rest undefined: all or none.
  const auto timed = std::find_if(entries.begin(), entries.end(), [](auto& e) { return e.arrival_s >= 0; });
  const auto untimed = std::find_if(entries.begin(), entries.end(), [](auto& e) { return e.arrival_s < 0; });
  if (timed != entries.end() && untimed != entries.end())
    fail(path, ":", untimed->line, ": missing field 'arrival' (line ", timed->line,
         " has one: give it on every line or on none)");
  return entries;
}

std::vector<WorkloadRequest> make_workload(const WorkloadSpec& spec, int vocab_size) {
  check(vocab_size >= 1, "workload: vocab_size must be >= 1, got ", vocab_size);
  std::vector<WorkloadFileEntry> entries;
  int n = spec.num_requests;
  if (!spec.file.empty()) {
    entries = read_workload_file(spec.file, vocab_size);
    check(n >= 0, "workload: num_requests must be >= 0 with a file (0 = every line), got ", n);
    if (n == 0) n = static_cast<int>(entries.size());
    check(n <= static_cast<int>(entries.size()), spec.file, ": has ", entries.size(), " requests, fewer than the ", n,
          " asked for");
  } else {
    check(n >= 1 && n <= kMaxWorkloadRequests, "workload: num_requests must be in [1, ", kMaxWorkloadRequests,
          "], got ", n);
    for (const LengthDist* d : {&spec.prompt_len, &spec.output_len})
      check(problem(*d).empty(), "workload: length distribution ", d->describe(), ": ", problem(*d));
  }

  std::vector<double> arrival(n, 0.0);
  const bool file_times = !entries.empty() && entries.front().arrival_s >= 0;
  if (file_times) {
    check(spec.arrivals.kind == Arrivals::Kind::all, spec.file, ": has its own arrival times, which arrivals ",
          spec.arrivals.describe(), " would replace (use all, or drop the times from the file)");
    for (int i = 0; i < n; ++i) arrival[i] = entries[i].arrival_s;
  } else if (spec.arrivals.kind == Arrivals::Kind::poisson) {
    const double rate = spec.arrivals.rate;
    check(std::isfinite(rate) && rate > 0, "workload: poisson rate must be a positive finite number, got ", rate);
    // A Poisson process: independent exponential gaps. Request 0 opens the run at t = 0.
    SplitMix64 gaps(request_seed(spec.seed, 0, 3));
    for (int i = 1; i < n; ++i) arrival[i] = arrival[i - 1] + gaps.exponential(rate);
  } else if (spec.arrivals.kind == Arrivals::Kind::trace) {
    const auto times = read_trace(spec.arrivals.trace_path);
    check(static_cast<int>(times.size()) >= n, spec.arrivals.trace_path, ": has ", times.size(),
          " arrival times, fewer than the ", n, " requests");
    std::copy_n(times.begin(), n, arrival.begin());
  }

  std::vector<WorkloadRequest> requests;
  requests.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    WorkloadRequest r;
    r.arrival_s = arrival[i];
    int prompt_len = 0;
    if (!entries.empty()) {
      prompt_len = entries[i].prompt_len;
      r.max_tokens = entries[i].output_len;
      r.prompt_ids = std::move(entries[i].prompt_ids);
    } else {
      SplitMix64 prompt_rng(request_seed(spec.seed, index, 1)), output_rng(request_seed(spec.seed, index, 2));
      prompt_len = spec.prompt_len.sample(prompt_rng);
      r.max_tokens = spec.output_len.sample(output_rng);
    }
    if (r.prompt_ids.empty()) r.prompt_ids = synthetic_prompt(prompt_len, vocab_size, request_seed(spec.seed, index));
    requests.push_back(std::move(r));
  }
  std::stable_sort(requests.begin(), requests.end(),
                   [](const WorkloadRequest& a, const WorkloadRequest& b) { return a.arrival_s < b.arrival_s; });
  return requests;
}

int clamp_to_context(std::vector<WorkloadRequest>& requests, int max_model_len) {
  check(max_model_len >= 2, "clamp_to_context: max_model_len must be >= 2 (one prompt and one output token), got ",
        max_model_len);
  int changed = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& r = requests[i];
    check(!r.prompt_ids.empty(), "clamp_to_context: request ", i, " has an empty prompt");
    const auto before = std::make_pair(r.prompt_ids.size(), r.max_tokens);
    // vLLM's rule: prompt + output <= max_model_len, and we keep room for at least one output token.
    if (static_cast<int>(r.prompt_ids.size()) > max_model_len - 1) r.prompt_ids.resize(max_model_len - 1);
    r.max_tokens = std::clamp(r.max_tokens, 1, max_model_len - static_cast<int>(r.prompt_ids.size()));
    changed += before != std::make_pair(r.prompt_ids.size(), r.max_tokens);
  }
  return changed;
}

// ---- summary ----------------------------------------------------------------------

WorkloadSummary summarize_workload(const std::vector<WorkloadRequest>& requests) {
  WorkloadSummary s;
  s.count = static_cast<int>(requests.size());
  if (requests.empty()) return s;
  std::vector<double> prompt, output;
  prompt.reserve(requests.size());
  output.reserve(requests.size());
  s.first_arrival_s = s.last_arrival_s = requests.front().arrival_s;
  for (const auto& r : requests) {
    prompt.push_back(static_cast<double>(r.prompt_ids.size()));
    output.push_back(r.max_tokens);
    s.prompt_tokens += static_cast<std::int64_t>(r.prompt_ids.size());
    s.output_tokens += r.max_tokens;
    s.first_arrival_s = std::min(s.first_arrival_s, r.arrival_s);
    s.last_arrival_s = std::max(s.last_arrival_s, r.arrival_s);
  }
  s.prompt_len = summarize(prompt);
  s.output_len = summarize(output);
  return s;
}

std::string WorkloadSummary::describe() const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  auto lengths = [&](const char* name, const Summary& l, std::int64_t total) {
    os << " | " << name << " tokens mean " << l.mean << " p50 " << l.median << " p99 " << l.p99 << " (total "
       << total << ")";
  };
  os << count << " requests";
  lengths("prompt", prompt_len, prompt_tokens);
  lengths("output", output_len, output_tokens);
  os.precision(2);
  if (span_s() > 0)  // n arrivals over the span are n - 1 gaps: the offered rate
    os << " | arrivals over " << span_s() << " s (" << (count - 1) / span_s() << " req/s)";
  else
    os << " | all arrive at " << first_arrival_s << " s";
  return os.str();
}

}  // namespace servelab
