// SPDX-License-Identifier: MIT
// The GGUF reader against the safetensors originals its fixtures were converted
// from (tools/make_gguf.py --from): the same weights (llama's Q/K rows put back,
// each ggml type within its rounding), transformers' prompt and greedy ids for a
// chat model read from one .gguf file, and one clear error for each broken file.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "test_util.h"
#include "model/pretrained.h"

using namespace servelab;
using namespace servelab::test;

namespace {

std::filesystem::path gguf_fixture(const std::string& name) { return fixtures_dir() / "gguf" / name; }

std::vector<float> floats(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = t.dtype == DType::F32 ? t.as<const float>()[i] : bf16_to_f32(t.as<const std::uint16_t>()[i]);
  return out;
}

// The largest error a 32-element block of `ref` may get from ggml type `type` (its rounding, with f16 scales).
float block_bound(const std::string& type, const float* ref) {
  const auto [lo, hi] = std::minmax_element(ref, ref + 32);
  const float amax = std::max(std::fabs(*lo), std::fabs(*hi));
  if (type == "f32") return 0.0f;
  if (type == "f16") return amax * 0x1p-11f;
  if (type == "bf16") return amax * 0x1p-8f;
  if (type == "q8_0") return amax / 127.0f * 0.51f + amax * 0x1p-10f;
  if (type == "q4_0") return amax / 8.0f * 1.01f + amax * 0x1p-10f;  // the top level clamps at 15: up to one step
  return (*hi - *lo) / 15.0f * 0.51f + amax * 0x1p-10f;              // q4_1
}

// Bytes of a small GGUF, built field by field, for the bad-input tests.
struct Builder {
  std::string bytes;
  template <typename T>
  Builder& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Builder& str(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes += s;
    return *this;
  }
  // A header, one string key, and one 1-D tensor of `n` elements of ggml type `type` at `offset`.
  static Builder file(std::uint32_t version, std::uint32_t type, std::uint64_t n = 32, std::uint64_t offset = 0,
                      std::uint64_t tensors = 1) {  // tensors: 1 or 2
    Builder b;
    b.bytes = "GGUF";
    b.put(version).put(tensors).put<std::uint64_t>(1);
    b.str("general.architecture").put<std::uint32_t>(8).str("llama");
    for (std::uint64_t i = 0; i < tensors; ++i)
      b.str(i == 0 ? "t0" : "t1").put<std::uint32_t>(1).put(n).put(type).put(offset);
    b.bytes.resize((b.bytes.size() + 31) / 32 * 32, '\0');
    b.bytes.resize(b.bytes.size() + 4 * std::min<std::uint64_t>(n, 64), '\0');  // a huge n: a truncated file
    return b;
  }
  GgufContents parse() const {
    return parse_gguf(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "t.gguf");
  }
};

}  // namespace

TEST_CASE("a GGUF holds the safetensors weights it was converted from, Q/K rows unpermuted", "[gguf]") {
  // llama-tiny-mixed.gguf stores each projection in another type (tools/make_gguf.py MIXED).
  const std::map<std::string, std::pair<std::string, Tensor LayerWeights::*>> layer = {
      {"self_attn.q_proj.weight", {"f32", &LayerWeights::q_proj}},
      {"self_attn.k_proj.weight", {"f32", &LayerWeights::k_proj}},
      {"self_attn.v_proj.weight", {"f16", &LayerWeights::v_proj}},
      {"self_attn.o_proj.weight", {"bf16", &LayerWeights::o_proj}},
      {"mlp.gate_proj.weight", {"q8_0", &LayerWeights::gate_proj}},
      {"mlp.up_proj.weight", {"q4_0", &LayerWeights::up_proj}},
      {"mlp.down_proj.weight", {"q4_1", &LayerWeights::down_proj}},
      {"input_layernorm.weight", {"f32", &LayerWeights::input_layernorm}},
  };
  const Checkpoint hf(fixtures_dir() / "llama-tiny");
  const GgufFile file(gguf_fixture("llama-tiny-mixed.gguf"));
  const ModelConfig config = gguf_config(file.contents(), file.path());
  CHECK(config.arch == Arch::Llama);
  CHECK(config.hidden_size == 96);
  CHECK(config.num_key_value_heads == 2);
  CHECK_FALSE(config.tie_word_embeddings);
  for (DType as : {DType::F32, DType::BF16}) {
    ThreadPool pool(2);
    const ModelWeights w = gguf_weights(file, config, as, pool);
    const auto compare = [&](const std::string& name, const Tensor& got, const std::string& type) {
      INFO(name << " (" << type << ") loaded as " << dtype_name(as));
      const Tensor want = hf.load(name, got.shape);
      const std::vector<float> a = floats(got), b = floats(want);
      REQUIRE(a.size() == b.size());
      const bool rounded = as == DType::BF16 && got.shape.size() == 2;
      std::size_t bad = 0;
      for (std::size_t i = 0; i < a.size(); i += 32) {
        const float bound = block_bound(type, &b[i]);
        for (std::size_t j = i; j < i + 32 && j < a.size(); ++j)
          bad += std::fabs(a[j] - b[j]) > bound + (rounded ? std::fabs(b[j]) * 0x1p-8f + bound : 0.0f);
      }
      CHECK(bad == 0);
    };
    compare("model.embed_tokens.weight", w.embed_tokens, "q8_0");
    compare("lm_head.weight", w.lm_head, "f16");
    compare("model.norm.weight", w.norm, "f32");
    for (int l = 0; l < config.num_hidden_layers; ++l)
      for (const auto& [suffix, slot] : layer)
        compare(layer_tensor_name(l, suffix.c_str()), w.layers[l].*slot.second, slot.first);
  }
}

// Its prompt, stop and greedy ids: pretrained_test.cpp runs the folder's test on the .gguf too.
TEST_CASE("a chat model's GGUF tokenizer is its tokenizer.json, id for id", "[gguf][tokenizer]") {
  const auto path = gguf_fixture("qwen2-tiny-chat.gguf");
  auto model = Model::from_pretrained(path, ModelOptions{});
  CHECK(model->config().arch == Arch::Qwen2);
  CHECK(model->config().tie_word_embeddings);
  REQUIRE(has_tokenizer(path));
  const Tokenizer tok = load_tokenizer(path);
  // The GGUF's tokenizer is the tokenizer.json's, id for id, on text the chat never shows.
  const Tokenizer from_json = load_tokenizer(fixtures_dir() / "tokenizer" / "qwen2-tiny-chat");
  for (const char* text : {"Hello, world! 123 4567", "KV 캐시는 메모리를 많이 사용합니다.", "<|im_start|>x<|im_end|>",
                           "  tabs\tand\r\nnewlines  ", "emoji 😀👍🏽"}) {
    INFO(text);
    CHECK(tok.encode(text, true) == from_json.encode(text, true));
    CHECK(tok.decode(tok.encode(text, false)) == from_json.decode(from_json.encode(text, false)));
  }
  // A GGUF without tokenizer keys has no tokenizer, and says which key is missing.
  CHECK_FALSE(has_tokenizer(gguf_fixture("llama-tiny-mixed.gguf")));
  REQUIRE_ERROR_MENTIONS(load_tokenizer(gguf_fixture("llama-tiny-mixed.gguf")), "llama-tiny-mixed.gguf",
                         "tokenizer.ggml.model");
}

TEST_CASE("broken GGUF files are refused with one error naming what is wrong", "[gguf][bad-input]") {
  CHECK(Builder::file(3, 0).parse().tensors.at("t0").nbytes == 128);
  CHECK(Builder::file(2, 8, 64).parse().tensors.at("t0").nbytes == 68);  // Q8_0: 2 blocks of 34 bytes
  REQUIRE_ERROR_MENTIONS(Builder::file(1, 0).parse(), "t.gguf", "version 1", "expected 2 or 3");
  REQUIRE_ERROR_MENTIONS(Builder::file(0x03000000, 0).parse(), "big-endian");
  REQUIRE_ERROR_MENTIONS(Builder::file(3, 12).parse(), "tensor 't0'", "Q4_K", "does not read");
  REQUIRE_ERROR_MENTIONS(Builder::file(3, 99).parse(), "type 99");
  REQUIRE_ERROR_MENTIONS(Builder::file(3, 8, 40).parse(), "not a multiple", "block of 32");
  REQUIRE_ERROR_MENTIONS(Builder::file(3, 0, 32, 16).parse(), "offset 16", "alignment 32");
  REQUIRE_ERROR_MENTIONS(Builder::file(3, 0, 32, 0, 2).parse(), "overlap");
  REQUIRE_ERROR_MENTIONS(Builder::file(3, 0, 1ull << 40).parse(), "tensor 't0'", "truncated");
  Builder bad_magic = Builder::file(3, 0);
  bad_magic.bytes[0] = 'X';
  REQUIRE_ERROR_MENTIONS(bad_magic.parse(), "not a GGUF file");
  // Counts that no file of this size could hold are refused before anything is allocated.
  Builder huge;
  huge.bytes = "GGUF";
  huge.put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1ull << 60);
  REQUIRE_ERROR_MENTIONS(huge.parse(), "metadata count", "bytes are left");
  Builder long_array;
  long_array.bytes = "GGUF";
  long_array.put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1);
  long_array.str("tokenizer.ggml.tokens").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(1ull << 50);
  REQUIRE_ERROR_MENTIONS(long_array.parse(), "tokenizer.ggml.tokens", "bytes are left");
  // Every prefix of a valid file is an error, never a crash or a read past the end.
  const Builder whole = Builder::file(3, 0);
  for (std::size_t n = 0; n + 1 < whole.bytes.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    Builder cut;
    cut.bytes = whole.bytes.substr(0, n);
    CHECK_THROWS_AS(cut.parse(), Error);
  }
}

TEST_CASE("GGUF metadata the engine cannot compute is refused by name", "[gguf][bad-input]") {
  GgufContents g = GgufFile(gguf_fixture("llama-tiny-mixed.gguf")).contents();
  GgufContents other = g;
  other.metadata["general.architecture"].string = "gemma";
  REQUIRE_ERROR_MENTIONS(gguf_config(other, "x.gguf"), "x.gguf", "gemma", "expected llama or qwen2");
  other = g;
  other.metadata.erase("llama.block_count");
  REQUIRE_ERROR_MENTIONS(gguf_config(other, "x.gguf"), "missing metadata key 'llama.block_count'");
  other = g;
  other.metadata["llama.rope.dimension_count"].integer = 8;
  REQUIRE_ERROR_MENTIONS(gguf_config(other, "x.gguf"), "rope.dimension_count", "partial RoPE");
  other = g;
  other.metadata["llama.attention.head_count"].type = GgufValueType::STRING;
  REQUIRE_ERROR_MENTIONS(gguf_config(other, "x.gguf"), "head_count", "must be an integer");
}
