// SPDX-License-Identifier: MIT
/**
 * @file quantized.cpp
 * @brief Lab 03's quantization lesson: the lab's model in f32, bf16, Q8_0 and
 *        Q4_1 weights, its decode and prefill steps timed on this machine and
 *        placed on the read roof, and what the rounding costs (lab03.h).
 * @see labs/03_roofline/README.md
 */
#include <algorithm>
#include <cmath>
#include <span>
#include <sstream>

#include "core/error.h"
#include "core/stats.h"
#include "core/timer.h"
#include "kv/kv_cache.h"
#include "lab03.h"
#include "model/sampler.h"
#include "perf/work.h"

namespace servelab::lab03 {

using namespace servelab::lab;

namespace {

// The text perplexity is measured on, for a model with a tokenizer: the lesson in a paragraph, in our words.
constexpr const char* kLessonText =
    "A language model writes one token at a time. Before the first new token it reads the whole prompt in one "
    "step, which multiplies every weight by many rows at once: that step is limited by arithmetic. After it, each "
    "step feeds a single token, so every weight is read from memory to be used once, and the step takes as long as "
    "the read. The cache of keys and values spares the model from computing the past again, but it cannot spare it "
    "from reading its own weights. A smaller number format for the weights is therefore the most direct way to make "
    "each step faster: half the bytes, half the time, as long as the arithmetic keeps up. The price is rounding, and "
    "the question is how much of the model's judgement the rounding changes.\n";

// The weights each row of the table runs: the blocks in int8 arithmetic, as llama.cpp multiplies them.
constexpr const char* kDtypes[] = {"f32", "bf16", "q8_0-math", "q4_1-math"};

// What teacher forcing gives at each position of the text: the greedy token and, with real text, −log p(next).
struct Scored {
  std::vector<std::int32_t> top1;
  double nll_sum = 0;
};

Scored score(Model& model, const std::vector<std::int32_t>& ids) {
  Batch batch;
  batch.add({0}, 0, ids, LogitsFor::All);
  const std::vector<float> logits = model.forward(batch);
  const int vocab = model.config().vocab_size;
  Scored s;
  for (std::size_t p = 0; p < ids.size(); ++p) {
    const float* row = logits.data() + p * static_cast<std::size_t>(vocab);
    s.top1.push_back(argmax(std::span<const float>(row, static_cast<std::size_t>(vocab))));
    if (p + 1 == ids.size()) break;
    const double top = *std::max_element(row, row + vocab);
    double z = 0;
    for (int i = 0; i < vocab; ++i) z += std::exp(static_cast<double>(row[i]) - top);
    s.nll_sum += top + std::log(z) - static_cast<double>(row[ids[p + 1]]);
  }
  return s;
}

// Median seconds of @p batch's forward over a cache sized for it.
double step_seconds(Model& model, const LabOptions& o, const Batch& batch, int cache_tokens) {
  auto cache = model.make_kv_cache(1, cache_tokens);
  return summarize(time_runs(o.warmup, o.repeats, [&] { model.forward(batch, *cache); })).median;
}

// The lesson's text as ids (at most @p max_tokens) with the model's tokenizer; seeded stand-in ids without one.
std::vector<std::int32_t> lesson_text_ids(const LabOptions& o, const ModelConfig& config, int max_tokens,
                                          bool& real_text) {
  const LabPrompt prompt = article_prompt(o, config, max_tokens);
  real_text = prompt.tokenizer.has_value();
  if (!real_text) return prompt.ids;
  std::vector<std::int32_t> ids = prompt.tokenizer->encode(kLessonText, true);
  if (static_cast<int>(ids.size()) > max_tokens) ids.resize(static_cast<std::size_t>(max_tokens));
  return ids;
}

}  // namespace

QuantizationLesson quantization_lesson(const LabOptions& o, const ModelOptions& base, int context, int prefill_len,
                                       double read_roof) {
  QuantizationLesson out;
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> reference_top1;
  Table& t = out.table;
  t = Table{.name = "quantization",
            .title = "Weight dtype, the decode lever: the same model in four formats",
            .columns = {"weights", Column{"bytes per weight", 3}, Column{"MB read per decode step", 1},
                        Column{"decode [ms]", 2}, Column{"decode GB/s", 1}, Column{"of the read roof [%]", 0},
                        Column{"prefill " + std::to_string(prefill_len) + " [ms]", 1}, Column{"top-1 = f32 [%]", 1},
                        Column{"perplexity", 2}}};
  double f32_decode = 0, f32_prefill = 0, f32_bytes = 0;
  for (const char* dtype : kDtypes) {
    ModelOptions options = base;
    apply_dtype_flag(dtype, "quantization lesson", options);
    options.deterministic = false;
    auto model = load_model(o, options);
    const ModelConfig& c = model->config();
    if (ids.empty()) ids = lesson_text_ids(o, c, o.quick ? 48 : 160, out.real_text);
    // A decode step of one sequence with `context` tokens cached, and a prefill of prefill_len fresh tokens.
    Batch decode, prefill;
    const std::vector<std::int32_t> next{ids[0]};
    decode.add({0}, context, next);
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(prefill_len));
    for (int i = 0; i < prefill_len; ++i)
      prompt[static_cast<std::size_t>(i)] = ids[static_cast<std::size_t>(i) % ids.size()];
    prefill.add({0}, 0, prompt);
    const double decode_s = step_seconds(*model, o, decode, context + 1);
    const double prefill_s = step_seconds(*model, o, prefill, prefill_len);
    const Work work = step_work(c, {model->options().weight_dtype, DType::F32, DType::F32}, {{context, 1}}, 1);
    const Scored scored = score(*model, ids);
    if (reference_top1.empty()) reference_top1 = scored.top1;
    std::size_t agree = 0;
    for (std::size_t p = 0; p < ids.size(); ++p) agree += scored.top1[p] == reference_top1[p];
    const double agreement = 100.0 * static_cast<double>(agree) / static_cast<double>(ids.size());
    const double perplexity = std::exp(scored.nll_sum / static_cast<double>(ids.size() - 1));
    const double gbs = work.bytes() / decode_s / 1e9;
    t.add_row({std::string(dtype), dtype_bytes_per_element(model->options().weight_dtype), work.bytes() / 1e6,
               decode_s * 1e3, gbs, 100 * gbs / read_roof, prefill_s * 1e3, agreement,
               out.real_text ? Cell{perplexity} : Cell{std::string("-")}});
    if (f32_decode == 0) f32_decode = decode_s, f32_prefill = prefill_s, f32_bytes = work.bytes();
    out.decode_speedup = f32_decode / decode_s;  // the last row's: Q4_1
    out.prefill_speedup = f32_prefill / prefill_s;
    out.bytes_ratio = f32_bytes / work.bytes();
    out.agreement.push_back(agreement);
  }
  out.positions = static_cast<int>(ids.size());
  std::ostringstream note;
  note << "Each format loaded from the same checkpoint (" << (o.model_dir.empty() ? "synthetic weights" : o.model_dir)
       << "); Q8_0 and Q4_1 are llama.cpp's blocks, multiplied in int8 with the inputs rounded to 8 bits per block "
          "(--dtype q8_0-math, q4_1-math). Decode: one sequence, "
       << context << " tokens cached; bytes counted by perf/work.h, against the read roof of table 3. Prefill of "
       << prefill_len << " tokens runs on the GEMM library, the blocks widened to f32 tiles. Top-1: the greedy "
       << "token at each of " << ids.size() << " positions, teacher-forced, the same as the f32 model's. "
       << (out.real_text ? "Perplexity: exp of the mean -log p of each next token of a paragraph in quantized.cpp."
                         : "Synthetic weights have no tokenizer and no meaningful perplexity: seeded ids, and "
                           "near-tied random logits make the top-1 share a lower bound of what a trained model keeps.");
  t.note = note.str();
  return out;
}

}  // namespace servelab::lab03
