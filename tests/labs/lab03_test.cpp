// SPDX-License-Identifier: MIT
// Grading tests of lab 03 (ctest -L lab03): the prefill/decode article's intensity table, the
// engine's op-by-op counters against the closed form, the roofline and cost
// model arithmetic, and the lab's own run. No timing is asserted.
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "lab.h"
#include "lab_runner.h"
#include "model/model.h"
#include "perf/cost_model.h"
#include "perf/hardware.h"
#include "perf/work.h"
#include "test_util.h"

using namespace servelab;

TEST_CASE("lab 03 = lab 02: it measures, it switches nothing on", "[lab03]") { CHECK(test::ladder_step(3).empty()); }

TEST_CASE("the prefill/decode article's table: a 4096 projection in fp16 at 410 / 683 / 1 / 32 FLOP per byte",
          "[lab03]") {
  auto intensity = [](int M) { return gemm_work(M, 4096, 4096, DType::F16, DType::F16).intensity(); };
  CHECK(intensity(512) == Approx(409.6));                  // ~410
  CHECK(intensity(1024) == Approx(682.67).epsilon(1e-4));  // ~683 (the prefill/decode article rounds to ~680)
  CHECK(std::round(intensity(1)) == 1);
  CHECK(std::round(intensity(32)) == 32);                            // 31.5
  CHECK(gpu("A100 80GB SXM").ridge() == Approx(153.0).margin(0.1));  // 312 TFLOP/s / 2,039 GB/s
  CHECK(bound_of(intensity(512), 153) == Bound::Compute);
  CHECK(bound_of(intensity(32), 153) == Bound::Memory);
}

TEST_CASE("the engine's op counters equal the closed form - ragged batches - bias or not - f32 or bf16", "[lab03]") {
  for (const char* name : {"tiny", "tiny-llama"})
    for (DType dtype : {DType::F32, DType::BF16}) {
      DYNAMIC_SECTION(name << " " << dtype_name(dtype)) {
        ModelOptions options;
        options.weight_dtype = dtype;
        auto model = Model::from_preset(name, 1, options);
        const ModelConfig& c = model->config();
        HostKVCache cache(c, 3, 64);
        // Fill slot 1 with 20 tokens and slot 2 with 5 first, counting nothing.
        Batch warm;
        warm.add({1}, 0, std::vector<std::int32_t>(20, 3));
        warm.add({2}, 0, std::vector<std::int32_t>(5, 4));
        model->forward(warm, cache);
        // A mixed step: a 7-token prefill, a decode after 20 cached, a 3-token chunk after 5 cached.
        Batch step;
        step.add({0}, 0, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7});
        step.add({1}, 20, std::vector<std::int32_t>{8});
        step.add({2}, 5, std::vector<std::int32_t>{9, 10, 11}, LogitsFor::All);
        model->work_counter().enable(true);
        model->forward(step, cache);
        const Work counted = model->work_counter().total();
        const Work formula = step_work(c, {dtype, DType::F32, DType::F32}, {{0, 7}, {20, 1}, {5, 3}}, 5);
        CHECK(counted.flops == Approx(formula.flops).epsilon(1e-12));
        CHECK(counted.weight_bytes == Approx(formula.weight_bytes).epsilon(1e-12));
        CHECK(counted.act_read == Approx(formula.act_read).epsilon(1e-12));
        CHECK(counted.act_written == Approx(formula.act_written).epsilon(1e-12));
        CHECK(counted.kv_read == Approx(formula.kv_read).epsilon(1e-12));
        CHECK(counted.kv_written == Approx(formula.kv_written).epsilon(1e-12));
        // Per op, against formulas written out by hand.
        const auto& ops = model->work_counter().ops();
        const double L = c.num_hidden_layers, T = 11, H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim();
        CHECK(ops.at("qkv_proj").flops == 2 * T * H * (Q + 2 * KV) * L);
        CHECK(ops.at("attention").flops ==
              L * (attention_flops(c, 0, 7) + attention_flops(c, 20, 1) + attention_flops(c, 5, 3)) / L);
        CHECK(ops.at("lm_head").flops == 2.0 * 5 * c.vocab_size * H);
        CHECK(ops.at("kv_write").kv_written == L * T * 2 * KV * 4);
        CHECK(ops.at("attention").kv_read == L * (7 + 21 + 8) * 2 * KV * 4);
        CHECK(ops.count("bias") == (c.attention_bias ? 1u : 0u));
        // Counting off: nothing more is added.
        model->work_counter().enable(false);
        model->forward(step, cache);
        CHECK(model->work_counter().total().flops == counted.flops);
      }
    }
}

TEST_CASE("a decode step reads every weight once: step_work agrees with decode_weight_bytes", "[lab03]") {
  for (const char* name : {"qwen2.5-0.5b", "llama-3-8b"})
    for (DType dtype : {DType::F32, DType::BF16}) {
      const ModelConfig c = preset(name);
      const Work w = step_work(c, {dtype, DType::F32, DType::F32}, {{100, 1}}, 1);
      // plus the one embedding row the token looks up
      CHECK(w.weight_bytes == Approx(decode_weight_bytes(c, dtype) + c.hidden_size * dtype_size(dtype)));
      CHECK(w.intensity() < 1.1);  // decode at batch 1 is ~1 FLOP per weight byte or less
    }
}

TEST_CASE("cost model: the roofline max plus overhead, and calibration recovers a known machine", "[lab03]") {
  const CostModel m{"test", 100e9, 10e9, 0.002, false, 1.0, 1.0};
  Work w;
  w.flops = 1e9;         // 10 ms of compute
  w.weight_bytes = 5e7;  // 5 ms of memory
  CHECK(m.predict(w) == Approx(0.012));
  // Points made by a machine reaching 50% of peak, 80% of bandwidth, with 1 ms of overhead per step.
  std::vector<std::pair<Work, double>> points;
  for (double flops : {1e9, 4e9, 1e8, 1e7})
    for (double bytes : {1e6, 5e8}) {
      Work p;
      p.flops = flops;
      p.act_read = bytes;
      points.push_back({p, std::max(flops / 50e9, bytes / 8e9) + 0.001});
    }
  const CostModel fit = CostModel::calibrate("fit", 100e9, 10e9, points);
  CHECK(fit.compute_efficiency == Approx(0.5).epsilon(0.1));
  CHECK(fit.memory_efficiency == Approx(0.8).epsilon(0.15));
  for (const auto& [p, seconds] : points) CHECK(fit.predict(p) == Approx(seconds).epsilon(0.25));
  REQUIRE_ERROR_MENTIONS(CostModel::calibrate("x", 1, 1, {}), "no measured points");
  CHECK(CostModel::for_hardware(gpu("H100 SXM"), 0).simulated);
  REQUIRE_ERROR_MENTIONS(gpu("B300"), "unknown hardware 'B300'", "H100 SXM");
}

TEST_CASE("predicted generation: with no overhead the cache saves the recomputed prefixes", "[lab03]") {
  const ModelConfig c = preset("qwen2.5-1.5b");
  const StepDtypes fp16{DType::F16, DType::F16, DType::F16};
  const CostModel a100 = CostModel::for_hardware(gpu("A100 80GB SXM"), 0.0);
  const double off = predict_generation(a100, c, fp16, 30, 400, false),
               on = predict_generation(a100, c, fp16, 30, 400, true);
  CHECK(off > on);
  // One step at a time, by hand, for two tokens without a cache: prefill 30, then prefill 31.
  const double two = a100.predict(step_work(c, fp16, {{0, 30}}, 1)) + a100.predict(step_work(c, fp16, {{0, 31}}, 1));
  CHECK(predict_generation(a100, c, fp16, 30, 2, false) == Approx(two));
  // A large per-step overhead hides the difference: the article's situation.
  const CostModel slow = CostModel::for_hardware(gpu("A100 80GB SXM"), 0.040);
  CHECK(predict_generation(slow, c, fp16, 30, 400, false) / predict_generation(slow, c, fp16, 30, 400, true) < 1.1);
}

TEST_CASE("the lab warns that the machine was busy when its own repeated roofs disagree by more than 15%", "[lab03]") {
  using lab::RoofSamples;
  // Quiet: the worst repeat is within 5% of the best.
  CHECK(lab::busy_machine_warning({{"f32 FMA", {40, 39, 38}}, {"read", {20, 19.5, 20}}}).empty());
  // Busy: read's worst repeat reached 60% of its best; only the unsteady roof is named, with its spread.
  const std::string busy = lab::busy_machine_warning({{"f32 FMA", {40, 39, 38}}, {"read", {20, 12, 18}}});
  CHECK_THAT(busy, Catch::Contains("read by 40%"));
  CHECK_THAT(busy, Catch::Contains("not to be trusted"));
  CHECK_THAT(busy, !Catch::Contains("FMA"));
  REQUIRE_ERROR_MENTIONS(lab::busy_machine_warning({{"read", {}}}), "empty");
}

TEST_CASE("lab 03 --quick prints the article's table and checks counted work against the formula", "[lab03]") {
  test::ScratchDir out("lab03");
  const auto results = test::run_lab_quick(LAB03_EXE, "03_roofline", out.path()).results;
  // The steps were measured in lab 02's configuration, as configure() builds it.
  CHECK(test::ran(results, "measured steps", 3).engine.enable_kv_cache);
  const auto& article = test::table(results, "article_table");
  const auto col = test::column(article, "intensity [FLOP/B]");
  const double expected[] = {409.6, 682.67, 1.0, 31.5};
  for (int i = 0; i < 4; ++i) CHECK(article["rows"][i][col].get<double>() == Approx(expected[i]).epsilon(0.01));
  // Compute use on the articles' GPUs: prefill rows (the first two) above 90%, decode rows below 20%.
  const auto& use = test::table(results, "compute_use");
  REQUIRE(use["rows"].size() == 4);
  for (const char* gpu_name : {"A100 80GB SXM", "H100 SXM"}) {
    const auto c = test::column(use, std::string(gpu_name) + " compute use [%]");
    for (int i = 0; i < 4; ++i) CHECK((use["rows"][i][c].get<double>() > 90) == (i < 2));
  }
  // Decode bytes: the weights are read once whatever the batch; KV's share grows with batch x context.
  const auto& bytes = test::table(results, "decode_bytes");
  // Weights read once per step: every matrix (decode_weight_bytes) and one embedding row per sequence.
  const ModelConfig llama = preset("llama-3-8b");
  for (const auto& row : bytes["rows"]) {
    const double batch = row[test::column(bytes, "batch")].get<double>();
    const double weights = decode_weight_bytes(llama, DType::BF16) + batch * llama.hidden_size * 2.0;
    CHECK(row[test::column(bytes, "weights [GB]")].get<double>() * 1e9 == Approx(weights));
  }
  const auto most = test::column(bytes, "most bytes");
  CHECK(bytes["rows"].front()[most] == "weights");
  CHECK(bytes["rows"].back()[most] == "KV cache");
  test::check_claims(
      results,
      {"03.article_intensities", "03.a100_ridge", "03.compute_use", "03.decode_reads", "03.counted_equals_formula",
       "03.bound_here", "03.quant_decode_bytes", "03.quant_top1"},
      {"03.article_intensities", "03.a100_ridge", "03.compute_use", "03.decode_reads", "03.counted_equals_formula"});
  const auto& points = test::table(results, "measured_points");
  CHECK(points["rows"].size() == 4);
  for (const auto& row : points["rows"]) CHECK(row[test::column(points, "counted = formula")] == "yes");
  CHECK(test::table(results, "roofs")["rows"].size() == gpu_catalog().size() + 2);
  CHECK(test::table(results, "cost_model")["rows"].size() == 4);
  CHECK(test::table(results, "kv_cache_puzzle")["rows"].size() == 5);
  CHECK(results["plots"][0]["kind"] == "roofline");
  // The quantization lesson: four formats, bytes per weight as core/dtype.h has them, bytes per step falling with them.
  const auto& quant = test::table(results, "quantization");
  REQUIRE(quant["rows"].size() == 4);
  const double per_weight[] = {4.0, 2.0, 34.0 / 32, 20.0 / 32};
  double previous_mb = 1e30;
  for (std::size_t r = 0; r < 4; ++r) {
    const auto& row = quant["rows"][r];
    CHECK(row[test::column(quant, "bytes per weight")].get<double>() == Approx(per_weight[r]));
    const double mb = row[test::column(quant, "MB read per decode step")].get<double>();
    CHECK(mb < previous_mb);
    previous_mb = mb;
  }
  CHECK(quant["rows"][0][test::column(quant, "top-1 = f32 [%]")].get<double>() == 100.0);
}

TEST_CASE("lab 03 refuses bad flags with one error naming the flag", "[lab03]") {
  test::check_flags_refused(LAB03_EXE, {"--prefill-lens 0", "--decode-batches -2"});
}

TEST_CASE("lab 03 checks --out before it loads a model or measures anything", "[lab03]") {
  const test::RunResult r = test::run_command(std::string(LAB03_EXE) + " --quick --out /proc/servelab-no");
  INFO("stderr: " << r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("--out /proc/servelab-no") != std::string::npos);
  CHECK(r.err.find("loading") == std::string::npos);  // load_model() announces itself on stderr
  CHECK(r.out.empty());
}
