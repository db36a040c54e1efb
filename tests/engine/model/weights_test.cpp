// SPDX-License-Identifier: MIT
// Synthetic weights are reproducible; a real checkpoint that does not fit its
// config.json is refused with the tensor named.
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "model/weights.h"
#include "test_util.h"

using namespace servelab;

namespace {

std::vector<float> values(const Tensor& t) { return {t.as<float>(), t.as<float>() + t.numel()}; }

void edit_config(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  edit(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

}  // namespace

TEST_CASE("synthetic weights depend on the seed only / not on the thread count", "[weights]") {
  const ModelConfig c = preset("tiny");
  ThreadPool one(1), two(2);
  const ModelWeights a = synthetic_weights(c, 7, one), b = synthetic_weights(c, 7, two),
                     d = synthetic_weights(c, 8, one);
  CHECK(values(a.layers[1].k_proj) == values(b.layers[1].k_proj));
  CHECK(values(a.embed_tokens) == values(b.embed_tokens));
  CHECK(values(a.layers[1].k_proj) != values(d.layers[1].k_proj));
  CHECK(values(a.layers[0].q_proj) != values(a.layers[1].q_proj));  // every tensor has its own stream
  // Uniform with std 1/sqrt(in_features): |w| <= sqrt(3)/sqrt(64).
  for (float w : values(a.layers[0].gate_proj)) REQUIRE(std::abs(w) <= std::sqrt(3.0f) / 8.0f);
  CHECK(a.lm_head.data == a.embed_tokens.data);  // tied
  CHECK(c.attention_bias);
  CHECK(a.layers[0].q_bias.numel() == c.q_dim());
}

TEST_CASE("the Qwen2 fixture loads tied - the Llama fixture untied and without biases", "[weights]") {
  auto qwen = Model::from_pretrained(test::fixtures_dir() / "qwen2-tiny", ModelOptions{});
  CHECK(qwen->weights().lm_head.data == qwen->weights().embed_tokens.data);
  auto llama = Model::from_pretrained(test::fixtures_dir() / "llama-tiny", ModelOptions{});
  CHECK(llama->weights().lm_head.data != llama->weights().embed_tokens.data);
  CHECK(llama->weights().layers[0].q_bias.empty());
  CHECK(llama->weights().layers[0].q_proj.shape == std::vector<std::int64_t>{128, 96});
}

TEST_CASE("a checkpoint that does not match its config is refused / naming the tensor", "[weights][bad-input]") {
  test::ScratchDir dir("weights-bad");
  const auto copy = test::copy_fixture("qwen2-tiny", dir.path());

  edit_config(copy, [](auto& j) { j["intermediate_size"] = 161; });
  REQUIRE_ERROR_MENTIONS(Model::from_pretrained(copy, ModelOptions{}), "mlp.gate_proj.weight", "[160, 64]",
                         "expected [161, 64]");

  edit_config(copy, [](auto& j) {
    j["intermediate_size"] = 160;
    j["tie_word_embeddings"] = false;
  });
  REQUIRE_ERROR_MENTIONS(Model::from_pretrained(copy, ModelOptions{}), "lm_head.weight", "missing");

  edit_config(copy, [](auto& j) { j["tie_word_embeddings"] = true; });
  std::filesystem::resize_file(copy / "model.safetensors",
                               std::filesystem::file_size(copy / "model.safetensors") - 100);
  REQUIRE_ERROR_MENTIONS(Model::from_pretrained(copy, ModelOptions{}), "model.safetensors", "truncated");

  std::filesystem::remove(copy / "config.json");
  REQUIRE_ERROR_MENTIONS(Model::from_pretrained(copy, ModelOptions{}), "config.json", "cannot open");
}

namespace {

// Appends a tensor of @p n zero floats named @p name to a safetensors file.
void add_tensor(const std::filesystem::path& file, const std::string& name, std::int64_t n) {
  std::ifstream in(file, std::ios::binary);
  std::uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  std::string header(len, ' ');
  in.read(header.data(), static_cast<std::streamsize>(len));
  std::string data((std::istreambuf_iterator<char>(in)), {});
  nlohmann::json j = nlohmann::json::parse(header);
  j[name] = {{"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {data.size(), data.size() + 4 * n}}};
  data += std::string(4 * n, '\0');
  header = j.dump();
  len = header.size();
  in.close();
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
}

}  // namespace

// An o_proj bias in the file means the checkpoint computes something the
// engine does not; it used to be dropped without a word.
TEST_CASE("checkpoint tensors the engine would not use are refused by name", "[weights][bad-input]") {
  test::ScratchDir dir("weights-unused");
  const auto copy = test::copy_fixture("qwen2-tiny", dir.path());
  add_tensor(copy / "model.safetensors", "model.layers.0.rotary_emb.inv_freq", 8);  // old Llama files: harmless
  CHECK(Model::from_pretrained(copy, ModelOptions{})->config().hidden_size == 64);
  add_tensor(copy / "model.safetensors", "model.layers.1.self_attn.o_proj.bias", 64);
  REQUIRE_ERROR_MENTIONS(Model::from_pretrained(copy, ModelOptions{}), "1 tensor that servelab does not use",
                         "'model.layers.1.self_attn.o_proj.bias'");
}
