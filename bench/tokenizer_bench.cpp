// SPDX-License-Identifier: MIT
/**
 * @file tokenizer_bench.cpp
 * @brief Google Benchmark of the tokenizer: encode (the whole text as one
 *        string, and line by line) and decode throughput in MB/s of UTF-8
 *        text, on a few MB of mixed Korean/English text, for each fixture tokenizer.
 *
 * Run: build/bench/bench_tokenizer, or tools/tokenizer_throughput.py to put
 * Hugging Face tokenizers' numbers on the same text beside these.
 * Environment:
 *   SERVELAB_BENCH_TEXT       a UTF-8 file to encode as is (default: the fixture
 *                             training text repeated to SERVELAB_BENCH_MB)
 *   SERVELAB_BENCH_MB         size of the default text in MB (default 4)
 *   SERVELAB_BENCH_TOKENIZER  a tokenizer.json to add to the fixture ones (e.g. a real Qwen2.5)
 *
 * The counter `ids_hash` (FNV-1a of the ids, 32 bits) lets a caller check
 * that two tokenizers produced the same ids before comparing their speed.
 */
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

using namespace servelab;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string& bench_text() {
  static const std::string text = [] {
    if (const char* path = std::getenv("SERVELAB_BENCH_TEXT")) return read_file(path);
    const char* mb = std::getenv("SERVELAB_BENCH_MB");
    const std::size_t target = static_cast<std::size_t>((mb ? std::atof(mb) : 4.0) * 1e6);
    // Whole copies of the training text, so every copy is the same mix of Korean, English and Markdown.
    const std::string unit =
        read_file(std::filesystem::path(SERVELAB_FIXTURES_DIR) / "tokenizer" / "training_text.txt");
    std::string out;
    while (out.size() < target) out += unit;
    return out;
  }();
  return text;
}

double fnv1a32(const std::vector<std::int32_t>& ids) {
  std::uint32_t h = 2166136261u;
  for (std::int32_t id : ids)
    for (int b = 0; b < 4; ++b) h = (h ^ ((static_cast<std::uint32_t>(id) >> (8 * b)) & 0xff)) * 16777619u;
  return static_cast<double>(h);
}

void BM_Encode(benchmark::State& state, const Tokenizer* tok) {
  const std::string& text = bench_text();
  std::vector<std::int32_t> ids;
  for (auto _ : state) {
    ids = tok->encode(text, false);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["ids_hash"] = fnv1a32(ids);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(ids.size());
}

// One call per line, as a server sees many short prompts: adds the per-call cost.
void BM_EncodeLines(benchmark::State& state, const Tokenizer* tok) {
  const std::string& text = bench_text();
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size() - 1) + 1;
    lines.push_back(std::string_view(text).substr(start, end - start));
    start = end;
  }
  std::size_t tokens = 0;
  for (auto _ : state) {
    tokens = 0;
    for (auto line : lines) tokens += tok->encode(line, false).size();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Decode(benchmark::State& state, const Tokenizer* tok) {
  const std::string& text = bench_text();
  const std::vector<std::int32_t> ids = tok->encode(text, false);
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

void BM_Load(benchmark::State& state, std::filesystem::path path) {
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::from_file(path));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::filesystem::path>> files;
  for (const char* name : {"qwen2-style", "llama3-style", "gpt2-style"})
    files.emplace_back(name, std::filesystem::path(SERVELAB_FIXTURES_DIR) / "tokenizer" / name / "tokenizer.json");
  if (const char* extra = std::getenv("SERVELAB_BENCH_TOKENIZER")) files.emplace_back("custom", extra);
  static std::vector<Tokenizer> tokenizers;  // benchmarks hold pointers: reserve so none moves
  tokenizers.reserve(files.size());
  // Wall-clock milliseconds: a tokenizer's work is one thread's, and its users wait for it in real time.
  const auto add = [](const std::string& bench, auto fn, auto arg) {
    benchmark::RegisterBenchmark(bench.c_str(), fn, arg)->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (const auto& [name, path] : files) {
    const Tokenizer* tok = &tokenizers.emplace_back(Tokenizer::from_file(path));
    add("BM_Encode/" + name, BM_Encode, tok);
    add("BM_EncodeLines/" + name, BM_EncodeLines, tok);
    add("BM_Decode/" + name, BM_Decode, tok);
    add("BM_Load/" + name, BM_Load, path);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
