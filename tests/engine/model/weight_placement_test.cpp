// SPDX-License-Identifier: MIT
// ModelOptions::huge_pages copies the weights into one huge-page region: the
// same logits to the bit, every weight a step reads inside the region, and
// the per-projection views pointing into the copied stacks.
#include <algorithm>
#include <cstdint>

#include "core/huge_pages.h"
#include "model/model.h"
#include "test_util.h"

using namespace servelab;

namespace {

std::vector<float> prompt_logits(Model& model, const std::vector<std::int32_t>& prompt) {
  HostKVCache cache(model.config(), 1, static_cast<int>(prompt.size()));
  Batch batch;
  batch.add({0}, 0, prompt, LogitsFor::All);
  return model.forward(batch, cache);
}

bool inside(const Tensor& t, const std::byte* begin, const std::byte* end) {
  const auto* p = static_cast<const std::byte*>(t.data);
  return begin <= p && p + t.nbytes() <= end;
}

}  // namespace

TEST_CASE("weights in huge pages: same logits to the bit / all in one region / views into the copies",
          "[huge_pages][weights]") {
  // qwen2-tiny: tied embedding and q/k/v biases; llama-tiny: an LM head of its own, no biases;
  // qwen2-tiny-bf16: bf16 matrices that the load leaves in the file's mapping.
  for (const char* name : {"qwen2-tiny", "llama-tiny", "qwen2-tiny-bf16"}) {
    DYNAMIC_SECTION(name) {
      ModelOptions in_place, placed;
      in_place.huge_pages = false;
      if (std::string(name).ends_with("bf16")) in_place.weight_dtype = placed.weight_dtype = DType::BF16;
      auto a = Model::from_pretrained(test::fixtures_dir() / name, in_place);
      auto b = Model::from_pretrained(test::fixtures_dir() / name, placed);
      const std::vector<std::int32_t> prompt{1, 5, 9, 14, 3, 27, 8};
      CHECK(prompt_logits(*a, prompt) == prompt_logits(*b, prompt));

      CHECK(a->weight_placement().bytes == 0);
      const Model::WeightPlacement where = b->weight_placement();
      CHECK(where.bytes >= b->weights().lm_head.nbytes());
      CHECK(where.huge_page_bytes <= where.bytes);
      const ModelWeights& w = b->weights();
      const auto* begin = static_cast<const std::byte*>(w.layers[0].input_layernorm.data);
      CHECK(reinterpret_cast<std::uintptr_t>(begin) % kHugePageBytes == 0);  // the region's first tensor
      const std::byte* end = begin;
      for (const Tensor* t : {&w.norm, &w.lm_head, &w.embed_tokens})
        end = std::max(end, static_cast<const std::byte*>(t->data) + t->nbytes());
      CHECK(w.lm_head.owner == w.layers[0].input_layernorm.owner);
      CHECK((w.lm_head.data == w.embed_tokens.data) == b->config().tie_word_embeddings);
      for (const LayerWeights& l : w.layers) {
        for (const Tensor* t : {&l.input_layernorm, &l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj,
                                &l.post_attention_layernorm, &l.gate_proj, &l.up_proj, &l.down_proj})
          CHECK(inside(*t, begin, end));
        // q, k, v follow each other, as do gate and up: one stack each.
        CHECK(static_cast<const std::byte*>(l.k_proj.data) == static_cast<const std::byte*>(l.q_proj.data) +
                                                                  l.q_proj.nbytes());
        CHECK(static_cast<const std::byte*>(l.up_proj.data) == static_cast<const std::byte*>(l.gate_proj.data) +
                                                                   l.gate_proj.nbytes());
        if (b->config().attention_bias) {
          CHECK(inside(l.q_bias, begin, end));
          CHECK(static_cast<const std::byte*>(l.v_bias.data) ==
                static_cast<const std::byte*>(l.k_bias.data) + l.k_bias.nbytes());
        }
      }
    }
  }
}
