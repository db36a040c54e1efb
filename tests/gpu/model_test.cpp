// SPDX-License-Identifier: MIT
// The whole model on the GPU against the same model on the CPU: greedy
// generations, teacher-forced logits, a ragged mixed batch and the KV cache's
// contents, for the small presets and the Hugging Face fixtures. Device
// buffers start as NaN (main.cpp turns SERVELAB_CUDA_POISON on).
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <span>

#include "core/error.h"
#include "gpu_test_util.h"
#include "model/model.h"
#include "model/sampler.h"
#include "serve/generate.h"

using namespace servelab;
using namespace servelab::test;

namespace {

// A model of preset or fixture @p name on @p backend with @p dtype weights.
std::unique_ptr<Model> make_model(const std::string& name, Backend backend, DType dtype) {
  ModelOptions options;
  options.backend = backend;
  options.weight_dtype = dtype;
  if (std::filesystem::exists(fixtures_dir() / name)) return Model::from_pretrained(fixtures_dir() / name, options);
  return Model::from_preset(name, 0, options);
}

// A fixture's first recorded prompt, or 20 seeded ids for a preset. Along the
// 24 greedy tokens generated after them, the CPU's top-two logit margins are
// at least 0.02 on the presets (seed 8 was chosen for that; some seeds give
// 1e-4) and 2.4e-3 on the fixtures: ten to a hundred times the f32 bound, so
// identical tokens are a fair demand.
std::vector<std::int32_t> prompt_for(const std::string& name, int vocab) {
  if (std::filesystem::exists(fixtures_dir() / name))
    return load_reference(name)["prompts"][0].get<std::vector<std::int32_t>>();
  std::mt19937 rng(8);
  std::vector<std::int32_t> ids(20);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % vocab);
  return ids;
}

// Logits of every position of @p tokens in one prefill step.
std::vector<float> score_all(Model& model, const std::vector<std::int32_t>& tokens) {
  auto cache = model.make_kv_cache(1, static_cast<int>(tokens.size()));
  Batch batch;
  batch.add({0}, 0, tokens, LogitsFor::All);
  return model.forward(batch, *cache);
}

// Gap between the best and second-best logit of a row.
float top2_margin(std::span<const float> row) {
  std::vector<float> v(row.begin(), row.end());
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  return v[0] - v[1];
}

const char* const kModels[] = {"tiny",       "tiny-llama",      "small",         "qwen2-tiny",
                               "llama-tiny", "qwen2-tiny-bf16", "llama-tiny-f16"};

}  // namespace

TEST_CASE("f32: greedy tokens identical to the CPU's, logits within tolerance", "[gpu][model]") {
  for (const char* name : kModels) {
    DYNAMIC_SECTION(name) {
      auto cpu = make_model(name, Backend::CPU, DType::F32);
      auto gpu = make_model(name, Backend::CUDA, DType::F32);
      const auto prompt = prompt_for(name, cpu->config().vocab_size);
      GenerateOptions options;
      options.max_new_tokens = 24;
      const auto want = generate(*cpu, prompt, options).output_ids;
      const auto got = generate(*gpu, prompt, options).output_ids;
      std::vector<std::int32_t> all = prompt;
      all.insert(all.end(), want.begin(), want.end());
      const auto cpu_logits = score_all(*cpu, all), gpu_logits = score_all(*gpu, all);
      const std::size_t V = cpu->config().vocab_size;
      for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
        const std::size_t row = prompt.size() - 1 + i;
        INFO("step " << i << ": CPU top-2 margin " << top2_margin(std::span(cpu_logits).subspan(row * V, V)));
        CHECK(got[i] == want[i]);
      }
      CHECK(got.size() == want.size());
      CHECK(want.size() == 24);
      CHECK(all_close(gpu_logits, widen(cpu_logits), kModelF32Atol, kModelF32Rtol, all.size() * V));
    }
  }
}

TEST_CASE("f32: without the KV cache the GPU recomputes to the same tokens", "[gpu][model]") {
  auto cpu = make_model("qwen2-tiny", Backend::CPU, DType::F32);
  auto gpu = make_model("qwen2-tiny", Backend::CUDA, DType::F32);
  const auto prompt = prompt_for("qwen2-tiny", cpu->config().vocab_size);
  GenerateOptions options;
  options.max_new_tokens = 8;
  options.use_kv_cache = false;
  CHECK(generate(*gpu, prompt, options).output_ids == generate(*cpu, prompt, options).output_ids);
}

TEST_CASE("a ragged batch (prefill, decode, prefill chunk) in one GPU step matches the CPU", "[gpu][model]") {
  auto cpu = make_model("small", Backend::CPU, DType::F32);
  auto gpu = make_model("small", Backend::CUDA, DType::F32);
  const int vocab = cpu->config().vocab_size;
  std::mt19937 rng(11);
  auto ids = [&](int n) {
    std::vector<std::int32_t> v(n);
    for (auto& id : v) id = static_cast<std::int32_t>(rng() % vocab);
    return v;
  };
  const auto a = ids(30), b = ids(9), c = ids(12);
  // Step 1 fills slot 1 with b[0..8) and slot 2 with c[0..5); step 2 mixes a 30-token
  // prefill (slot 0), a decode (slot 1) and a chunk of 7 (slot 2), with logits for every row.
  std::vector<float> results[2];
  std::unique_ptr<Model>* models[2] = {&cpu, &gpu};
  for (int m = 0; m < 2; ++m) {
    Model& model = **models[m];
    auto cache = model.make_kv_cache(3, 64);
    Batch first;
    first.add({1}, 0, std::span(b).first(8), LogitsFor::None);
    first.add({2}, 0, std::span(c).first(5), LogitsFor::None);
    model.forward(first, *cache);
    Batch mixed;
    mixed.add({0}, 0, a, LogitsFor::All);
    mixed.add({1}, 8, std::span(b).subspan(8), LogitsFor::All);
    mixed.add({2}, 5, std::span(c).subspan(5), LogitsFor::All);
    results[m] = model.forward(mixed, *cache);
  }
  REQUIRE(results[1].size() == static_cast<std::size_t>(38) * vocab);
  CHECK(all_close(results[1], widen(results[0]), kModelF32Atol, kModelF32Rtol, results[1].size()));
}

TEST_CASE("the device KV cache holds the CPU's K and V after a paged prefill, NaN beyond it", "[gpu][model]") {
  auto cpu = make_model("tiny-llama", Backend::CPU, DType::F32);
  auto gpu = make_model("tiny-llama", Backend::CUDA, DType::F32);
  const ModelConfig& c = cpu->config();
  const auto prompt = prompt_for("tiny-llama", c.vocab_size);
  const int n = static_cast<int>(prompt.size()), KV = c.kv_dim(), bs = 4;
  const int blocks = (n + bs - 1) / bs + 1;  // one spare block past the prompt
  std::vector<std::int32_t> table;           // physical blocks in reverse: the table, not adjacency, orders them
  for (int b = blocks - 1; b >= 0; --b) table.push_back(b);
  auto host = cpu->make_kv_cache(blocks, bs), device = gpu->make_kv_cache(blocks, bs);
  Batch batch;
  batch.add(table, 0, prompt);
  cpu->forward(batch, *host);
  gpu->forward(batch, *device);
  std::vector<std::byte> host_bytes(table.size() * host->bytes_per_block()), device_bytes(host_bytes.size());
  host->export_blocks(table, host_bytes);
  device->export_blocks(table, device_bytes);
  const auto* h = reinterpret_cast<const float*>(host_bytes.data());
  const auto* d = reinterpret_cast<const float*>(device_bytes.data());
  // Export order: block (table order) → layer → K rows then V rows; logical token t is table slot t / bs, row t % bs.
  std::vector<float> want, got, unwritten;
  for (int t = 0; t < blocks * bs; ++t)
    for (int l = 0; l < c.num_hidden_layers; ++l)
      for (int kv = 0; kv < 2; ++kv) {
        const std::size_t at = ((static_cast<std::size_t>(t / bs) * c.num_hidden_layers + l) * 2 + kv) * bs * KV +
                               static_cast<std::size_t>(t % bs) * KV;
        if (t < n) {
          want.insert(want.end(), h + at, h + at + KV);
          got.insert(got.end(), d + at, d + at + KV);
        } else {
          unwritten.insert(unwritten.end(), d + at, d + at + KV);
        }
      }
  CHECK(all_close(got, widen(want), kModelF32Atol, kModelF32Rtol,
                  static_cast<std::size_t>(n) * c.num_hidden_layers * 2 * KV));
  CHECK(!unwritten.empty());
  CHECK(std::all_of(unwritten.begin(), unwritten.end(), [](float x) { return std::isnan(x); }));  // poisoned
}

TEST_CASE("bf16: logits within the stated bound of the CPU's bf16 path, greedy picks agree where margins are wide",
          "[gpu][model][bf16]") {
  for (const char* name : {"tiny", "tiny-llama", "small", "qwen2-tiny-bf16"}) {
    DYNAMIC_SECTION(name) {
      const bool fixture = std::filesystem::exists(fixtures_dir() / name);
      const double atol = fixture ? kBf16FixtureAtol : kBf16PresetAtol,
                   rtol = fixture ? kBf16FixtureRtol : kBf16PresetRtol;
      auto cpu = make_model(name, Backend::CPU, DType::BF16);
      auto gpu = make_model(name, Backend::CUDA, DType::BF16);
      auto tokens = prompt_for(name, cpu->config().vocab_size);
      GenerateOptions options;
      options.max_new_tokens = 24;
      const auto more = generate(*cpu, tokens, options).output_ids;
      tokens.insert(tokens.end(), more.begin(), more.end());
      const auto cpu_logits = score_all(*cpu, tokens), gpu_logits = score_all(*gpu, tokens);
      CHECK(all_close(gpu_logits, widen(cpu_logits), atol, rtol, tokens.size() * cpu->config().vocab_size));
      const std::size_t V = cpu->config().vocab_size;
      int compared = 0;
      for (std::size_t row = 0; row < tokens.size(); ++row) {
        const auto want = std::span(cpu_logits).subspan(row * V, V), got = std::span(gpu_logits).subspan(row * V, V);
        const std::int32_t best = argmax(want);
        if (top2_margin(want) <= 2 * (atol + rtol * std::abs(want[best]))) continue;
        ++compared;
        INFO("position " << row);
        CHECK(argmax(got) == best);
      }
      // A test that compares no token proves nothing: at least half the positions must have margins
      // wide enough (the CPU-side emulation found all but one of 40 fixture positions comparable).
      INFO(compared << " of " << tokens.size() << " positions had margins wide enough to compare");
      CHECK(static_cast<std::size_t>(compared) * 2 >= tokens.size());
    }
  }
}

TEST_CASE("qwen2.5-0.5b shape: a 64-token prompt and 8 greedy tokens match the CPU in f32", "[gpu][model]") {
  // The real model's shapes (896 hidden, 14 heads over 2 KV heads, 151936 vocab) with synthetic
  // weights; the CPU's greedy margins along these 8 tokens are at least 0.018.
  auto cpu = make_model("qwen2.5-0.5b", Backend::CPU, DType::F32);
  auto gpu = make_model("qwen2.5-0.5b", Backend::CUDA, DType::F32);
  std::vector<std::int32_t> prompt(64);
  for (int i = 0; i < 64; ++i) prompt[i] = (i * 7919 + 13) % cpu->config().vocab_size;
  GenerateOptions options;
  options.max_new_tokens = 8;
  CHECK(generate(*gpu, prompt, options).output_ids == generate(*cpu, prompt, options).output_ids);
  CHECK(all_close(score_all(*gpu, prompt), widen(score_all(*cpu, prompt)), kModelF32Atol, kModelF32Rtol,
                  prompt.size() * cpu->config().vocab_size));
}

TEST_CASE("a model refuses a KV cache in the other backend's memory", "[gpu][model]") {
  auto cpu = make_model("tiny", Backend::CPU, DType::F32);
  auto gpu = make_model("tiny", Backend::CUDA, DType::F32);
  auto host_cache = cpu->make_kv_cache(1, 8), device_cache = gpu->make_kv_cache(1, 8);
  Batch batch;
  const std::vector<std::int32_t> ids = {1, 2, 3};
  batch.add({0}, 0, ids);
  REQUIRE_ERROR_MENTIONS(gpu->forward(batch, *host_cache), "KV cache is in host memory", "--backend cuda",
                         "make_kv_cache");
  REQUIRE_ERROR_MENTIONS(cpu->forward(batch, *device_cache), "KV cache is in device memory", "--backend cpu");
}
