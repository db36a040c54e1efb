// SPDX-License-Identifier: MIT
// Grading tests of lab 02 (ctest -L lab02): token identity with the cache on
// and off, the KV memory formula against allocated bytes, the work formulas,
// and the lab's own run. No timing is asserted.
#include "core/error.h"
#include "kv/kv_cache.h"
#include "graded.h"
#include "lab_runner.h"
#include "model/model.h"
#include "perf/work.h"
#include "serve/generate.h"
#include "serve/ladder.h"
#include "test_util.h"
#include "workload/synthetic_prompt.h"

using namespace servelab;

TEST_CASE("lab 02 = lab 01 + the KV cache switch: configure() differs in exactly its fields", "[lab02]") {
  CHECK(test::ladder_step(2) == test::Fields{"engine.enable_kv_cache"});
}

TEST_CASE("the cache changes no token on the lab's default preset (deterministic mode)", "[lab02]") {
  auto model = test::deterministic_model("small");
  const auto prompt = synthetic_prompt(30, model->config().vocab_size, 0);
  CHECK(test::generate_as_lab(*model, prompt, 40, 1).output_ids ==
        test::generate_as_lab(*model, prompt, 40, 2).output_ids);
}

TEST_CASE("KV bytes: the formula equals what the cache allocates (MHA, GQA, MQA)", "[lab02]") {
  for (const char* name : {"tiny", "small", "tiny-llama"})
    for (int kv : {0, 1, -1}) {
      ModelConfig c = preset(name);
      if (kv == 1) c.num_key_value_heads = 1;
      if (kv == -1) c.num_key_value_heads = c.num_attention_heads;
      for (auto [L, B] : {std::pair{1, 1}, {77, 3}, {512, 8}}) {
        const HostKVCache cache(c, B, L);
        CHECK(cache.bytes_allocated() == kv_cache_bytes(c, L, B, DType::F32));
        CHECK(kv_cache_bytes(c, L, B, DType::BF16) * 2 == kv_cache_bytes(c, L, B, DType::F32));
      }
    }
}

TEST_CASE("the prefill/decode article's KV sizes: Llama-3-8B and 70B at 2048 tokens in bf16", "[lab02]") {
  // The prefill/decode article quotes about 270 MB and about 670 MB.
  CHECK(kv_cache_bytes(preset("llama-3-8b"), 2048, 1, DType::BF16) == 268435456);
  CHECK(kv_cache_bytes(preset("llama-3-70b"), 2048, 1, DType::BF16) == 671088640);
  // Qwen2.5-0.5B: 2 * 24 layers * 2 kv heads * 64 * 2 bytes = 12 KiB per token.
  CHECK(kv_cache_bytes(preset("qwen2.5-0.5b"), 1, 1, DType::BF16) == 12288);
}

TEST_CASE("work formulas: hand-computed cases and prefill = sum of decode steps", "[lab02]") {
  const ModelConfig c = preset("tiny");  // hidden 64, 2 layers, q_dim 64, kv_dim 32
  // 3 tokens from scratch read 1 + 2 + 3 = 6 keys; each key costs 2 (QK and PV) * 2 FLOP * q_dim, per layer.
  CHECK(attention_flops(c, 0, 3) == 6.0 * 2 * 2 * 64 * 2);
  CHECK(kv_projection_flops(c, 3) == 2.0 * 3 * 64 * 2 * 32 * 2);
  double one_at_a_time = 0;
  for (int p = 0; p < 100; ++p) one_at_a_time += attention_flops(c, p, 1);
  CHECK(one_at_a_time == attention_flops(c, 0, 100));
  // Without a cache step s at context L costs a prefill of L: O(L^2) growth; with it O(L).
  CHECK(attention_flops(c, 0, 200) / attention_flops(c, 0, 100) == Approx(4.0).epsilon(0.02));
  CHECK(attention_flops(c, 199, 1) / attention_flops(c, 99, 1) == Approx(2.0));
}

TEST_CASE("lab 02 --quick prints the article's table after checking token identity", "[lab02]") {
  test::ScratchDir out("lab02");
  const auto [r, dir, results] = test::run_lab_quick(LAB02_EXE, "02_kv_cache", out.path());
  CHECK(test::rung_step(results, {"no cache", 1}, {"KV cache", 2}) == test::Fields{"engine.enable_kv_cache"});
  const auto& speed = test::table(results, "kv_cache_speedup");
  REQUIRE(speed["rows"].size() == 2);
  for (const auto& row : speed["rows"]) CHECK(row[test::column(speed, "same tokens")] == "yes");
  const auto& alloc = test::table(results, "kv_allocated");
  CHECK(alloc["rows"].size() == 18);
  for (const auto& row : alloc["rows"])
    CHECK(row[test::column(alloc, "formula [bytes]")] == row[test::column(alloc, "allocated [bytes]")]);
  CHECK(test::table(results, "kv_memory")["rows"].size() == 12);
  const auto& work = test::table(results, "work_per_step");
  CHECK(work["rows"].back()[0] == "total");
  // GPU memory = weights + activations + runtime + KV: every preset, and the requests of 8,192 tokens the KV room
  // holds, worked out again here from the table's own terms and the engine's per-token KV bytes.
  const auto& memory = test::table(results, "gpu_memory");
  REQUIRE(memory["rows"].size() == preset_names().size());
  for (const auto& row : memory["rows"]) {
    const ModelConfig c = preset(row[0].get<std::string>());
    INFO(c.name);
    const double weights = row[test::column(memory, "weights [GB]")].get<double>() * 1e9;
    CHECK(weights == Approx(2.0 * c.num_parameters()));
    const double left = 80e9 - weights - row[test::column(memory, "activations [GB]")].get<double>() * 1e9 -
                        row[test::column(memory, "runtime [GB]")].get<double>() * 1e9;
    CHECK(row[test::column(memory, "left for KV [GB]")].get<double>() * 1e9 == Approx(std::max(0.0, left)));
    const auto fits = row[test::column(memory, "requests of 8,192")];
    if (c.name == "llama-3-70b") CHECK(fits == 0);  // its bf16 weights alone pass 80 GB
    if (fits.is_number()) {
      const double request = 8192.0 * kv_bytes_per_token(c, DType::BF16);
      CHECK(fits.get<double>() * request <= std::max(0.0, left));
      CHECK((fits.get<double>() + 1) * request > left);
    }
  }
  test::check_claims(results,
                     {"02.same_tokens", "02.kv_bytes_formula", "02.llama_kv_sizes", "02.gpu_memory", "02.cache_faster",
                      "02.cached_step_flat"},
                     {"02.same_tokens", "02.kv_bytes_formula", "02.llama_kv_sizes", "02.gpu_memory"});
  for (const char* csv : {"kv_cache_speedup.csv", "work_per_step.csv", "kv_memory.csv", "kv_allocated.csv",
                          "gpu_memory.csv", "step_times.csv"})
    CHECK(std::filesystem::exists(dir / csv));
}

TEST_CASE("lab 02 refuses bad flags with one error naming the flag", "[lab02]") {
  const std::string lab = LAB02_EXE;
  test::check_refused(lab + " --quick --tokens 0,5 --out /tmp", "--tokens");
  test::check_refused(lab + " --quick --tokens 2 --out /tmp", "--tokens: the largest count must be >= 3");
  test::check_refused(lab + " --quick --tokens 5000 --out /tmp", "max_position_embeddings");
  test::check_refused(lab + " --quick --dtype fp8 --out /tmp", "--dtype: unsupported dtype 'fp8'");
}

TEST_CASE("lab 02 encodes the article's prompt with the model's tokenizer.json", "[lab02]") {
  test::ScratchDir out("lab02-text");
  const auto model = test::fixtures_dir() / "tokenizer" / "qwen2-tiny-chat";
  const auto r = test::run_lab_quick(LAB02_EXE, "02_kv_cache", out.path(), "--model '" + model.string() + "'").run;
  CHECK(r.out.find("the article's prompt, ") != std::string::npos);
  CHECK(r.out.find("tokenizer.json, greedy") != std::string::npos);
}
