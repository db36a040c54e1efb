// SPDX-License-Identifier: MIT
// The safetensors reader on files written here byte by byte, so every field
// of the format can be broken on purpose.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/safetensors.h"
#include "test_util.h"

using namespace servelab;

namespace {

struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

template <typename T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<std::uint8_t> b(values.size() * sizeof(T));
  std::memcpy(b.data(), values.data(), b.size());
  return b;
}

// Writes a safetensors file; `header_len_override` and `drop_tail` corrupt it on purpose.
void write_file(const std::filesystem::path& path, const std::vector<RawTensor>& tensors, std::size_t drop_tail = 0,
                std::int64_t header_len_override = -1) {
  nlohmann::json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::uint8_t> data;
  for (const auto& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';  // the format pads the header with spaces
  std::uint64_t len = header_len_override >= 0 ? static_cast<std::uint64_t>(header_len_override) : text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() - drop_tail));
}

std::vector<RawTensor> three_dtypes() {
  return {
      {"a", "F32", {2, 2}, bytes_of(std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f})},
      {"b", "BF16", {3}, bytes_of(std::vector<std::uint16_t>{0x3f80, 0xc000, 0x3e80})},    // 1, -2, 0.25
      {"c", "F16", {1, 3}, bytes_of(std::vector<std::uint16_t>{0x3c00, 0x0001, 0xbc00})},  // 1, 2^-24, -1
  };
}

}  // namespace

TEST_CASE("f32 loads as a view into the mapping - f16 and bf16 are widened", "[safetensors]") {
  test::ScratchDir dir("st");
  write_file(dir.path() / "model.safetensors", three_dtypes());
  Checkpoint ckpt(dir.path());
  const Tensor a = ckpt.load("a", {2, 2});
  CHECK(std::vector<float>(a.as<float>(), a.as<float>() + 4) == std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f});
  // No copy: the tensor's data lies inside the memory-mapped file.
  SafetensorsFile file(dir.path() / "model.safetensors");
  const auto* map_begin = static_cast<const std::byte*>(a.owner.get());
  CHECK(static_cast<const std::byte*>(a.data) > map_begin);
  CHECK(static_cast<const std::byte*>(a.data) <
        map_begin + std::filesystem::file_size(dir.path() / "model.safetensors"));
  const Tensor b = ckpt.load("b", {3});
  CHECK(std::vector<float>(b.as<float>(), b.as<float>() + 3) == std::vector<float>{1.0f, -2.0f, 0.25f});
  const Tensor c = ckpt.load("c", {1, 3});
  CHECK(std::vector<float>(c.as<float>(), c.as<float>() + 3) == std::vector<float>{1.0f, 0x1.0p-24f, -1.0f});
}

TEST_CASE("broken safetensors files: one error naming the file and what is wrong", "[safetensors][bad-input]") {
  test::ScratchDir dir("st-bad");
  const auto path = dir.path() / "model.safetensors";

  write_file(path, three_dtypes(), /*drop_tail=*/3);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, path.string(), "'c'", "truncated");

  write_file(path, three_dtypes(), 0, /*header_len_override=*/1 << 30);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, path.string(), "header length");

  std::ofstream(path, std::ios::binary) << "abc";
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, path.string(), "truncated");

  {
    std::ofstream out(path, std::ios::binary);
    const std::uint64_t len = 8;
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << "{not json";
  }
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, path.string(), "not valid JSON");

  auto tensors = three_dtypes();
  tensors[0].dtype = "I8";
  write_file(path, tensors);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, "'a'", "I8");

  tensors = three_dtypes();
  tensors[1].shape = {4};  // 4 bf16 need 8 bytes, the offsets span 6
  write_file(path, tensors);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, "'b'", "[4]", "span 6");

  REQUIRE_ERROR_MENTIONS(SafetensorsFile{dir.path() / "absent.safetensors"}, "absent.safetensors", "cannot open");
}

namespace {

// A safetensors file whose header is @p header_text verbatim, followed by @p data_bytes zero bytes.
void write_raw(const std::filesystem::path& path, const std::string& header_text, std::size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t len = header_text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header_text << std::string(data_bytes, '\0');
}

}  // namespace

TEST_CASE("safetensors headers that lie: overflowing shapes - overlapping offsets - deep nesting",
          "[safetensors][bad-input]") {
  test::ScratchDir dir("st-lies");
  const auto path = dir.path() / "model.safetensors";
  // 2^62 x 4 floats is 2^66 bytes: the product wrapped to 0 and matched offsets [0, 0].
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})", 0);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, "'w'", "[4611686018427387904, 4]", "more elements");
  write_raw(path, R"({"w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 0]}})", 0);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, "'w': shape entry must be an integer in [0, 9223372036854775807]");
  // Two tensors on the same bytes would alias each other.
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            12);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, "tensors 'a' and 'b' overlap", "[0, 8) and [4, 12)");
  // Empty tensors take no bytes, so sharing an offset is fine.
  write_raw(path,
            R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},)"
            R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
            8);
  CHECK(SafetensorsFile{path}.entries().size() == 2);
  // 100 000 levels of shape: dump() in the error message overflowed the stack.
  write_raw(path,
            R"({"w": {"dtype": "F32", "shape": )" + std::string(100000, '[') + std::string(100000, ']') +
                R"(, "data_offsets": [0, 0]}})",
            0);
  REQUIRE_ERROR_MENTIONS(SafetensorsFile{path}, "header: JSON nested deeper than 64 levels");
}

TEST_CASE("a NaN or Inf weight is refused at load, naming the tensor", "[safetensors][bad-input]") {
  test::ScratchDir dir("st-nan");
  auto tensors = three_dtypes();
  tensors[0].bytes = bytes_of(std::vector<float>{1.0f, std::nanf(""), 0.5f, 3.0f});
  tensors[1].bytes = bytes_of(std::vector<std::uint16_t>{0x3f80, 0x7f80, 0x3e80});  // bf16 +Inf
  tensors[2].bytes = bytes_of(std::vector<std::uint16_t>{0x3c00, 0x0001, 0xfc00});  // f16 -Inf
  write_file(dir.path() / "model.safetensors", tensors);
  Checkpoint ckpt(dir.path());
  REQUIRE_ERROR_MENTIONS(ckpt.load("a", {2, 2}), "tensor 'a' holds NaN or Inf (first at element 1)");
  REQUIRE_ERROR_MENTIONS(ckpt.load("b", {3}, DType::BF16), "tensor 'b' holds NaN or Inf (first at element 1)");
  REQUIRE_ERROR_MENTIONS(ckpt.load("c", {1, 3}), "tensor 'c' holds NaN or Inf (first at element 2)");
}

TEST_CASE("shard names in the index must be files inside the model folder", "[safetensors][bad-input]") {
  using nlohmann::json;
  for (const std::string shard : {"../other/model.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    INFO("shard '" << shard << "'");
    REQUIRE_ERROR_MENTIONS(parse_safetensors_index(json{{"weight_map", {{"w", shard}}}}, "index.json"),
                           "index.json: weight_map entry for 'w' is '" + shard + "'", "not a file name");
  }
  CHECK(parse_safetensors_index(json{{"weight_map", {{"a", "m-1.safetensors"}, {"b", "m-1.safetensors"}}}}, "i") ==
        std::vector<std::string>{"m-1.safetensors"});
}

TEST_CASE("checkpoint folders: missing tensor / wrong shape / missing files", "[safetensors][bad-input]") {
  test::ScratchDir dir("ckpt-bad");
  REQUIRE_ERROR_MENTIONS(Checkpoint{dir.path()}, dir.path().string(), "model.safetensors");
  write_file(dir.path() / "model.safetensors", three_dtypes());
  Checkpoint ckpt(dir.path());
  REQUIRE_ERROR_MENTIONS(ckpt.load("lm_head.weight", {8, 4}), "lm_head.weight", "[8, 4]", "missing");
  REQUIRE_ERROR_MENTIONS(ckpt.load("a", {4, 2}), "'a'", "[2, 2]", "expected [4, 2]");
  REQUIRE_ERROR_MENTIONS(Checkpoint{dir.path() / "nope"}, "nope", "not a directory");
}

TEST_CASE("sharded checkpoints are read through model.safetensors.index.json", "[safetensors]") {
  // The llama-tiny fixture was saved by transformers in 12 shards.
  Checkpoint ckpt(test::fixtures_dir() / "llama-tiny");
  CHECK(ckpt.num_files() == 12);
  CHECK(ckpt.contains("lm_head.weight"));
  CHECK(ckpt.contains("model.layers.1.mlp.down_proj.weight"));

  test::ScratchDir dir("shards");
  const auto copy = test::copy_fixture("llama-tiny", dir.path());
  std::filesystem::remove(copy / "model-00003-of-00012.safetensors");
  REQUIRE_ERROR_MENTIONS(Checkpoint{copy}, "model-00003-of-00012.safetensors", "cannot open");
  std::ofstream(copy / "model.safetensors.index.json") << "{\"metadata\": {}}";
  REQUIRE_ERROR_MENTIONS(Checkpoint{copy}, "model.safetensors.index.json", "weight_map");
}

TEST_CASE("loading as bf16: a bf16 file is a view, an f32 file is rounded exactly as torch rounds",
          "[safetensors][bf16]") {
  // tools/make_fixtures.py made qwen2-tiny-bf16 with torch's .to(bfloat16) of qwen2-tiny's weights.
  const Checkpoint f32(test::fixtures_dir() / "qwen2-tiny"), bf16(test::fixtures_dir() / "qwen2-tiny-bf16");
  const std::pair<const char*, std::vector<std::int64_t>> tensors[] = {{"model.layers.0.mlp.up_proj.weight", {160, 64}},
                                                                       {"model.embed_tokens.weight", {256, 64}},
                                                                       {"model.layers.1.self_attn.k_proj.bias", {32}}};
  for (const auto& [name, shape] : tensors) {
    const Tensor stored = bf16.load(name, shape, DType::BF16), rounded = f32.load(name, shape, DType::BF16);
    INFO(name);
    CHECK(stored.owner != nullptr);
    CHECK(std::memcmp(stored.data, rounded.data, stored.nbytes()) == 0);
    const Tensor widened = bf16.load(name, shape, DType::F32);  // and back: bf16 -> f32 is exact
    for (std::int64_t i = 0; i < widened.numel(); ++i)
      REQUIRE(widened.as<float>()[i] == bf16_to_f32(stored.as<std::uint16_t>()[i]));
  }
}

namespace {

// Resident bytes of the mapping that starts at @p base, from this process's /proc/self/smaps.
std::size_t resident_bytes(const void* base) {
  std::ifstream smaps("/proc/self/smaps");
  std::ostringstream start;
  start << std::hex << reinterpret_cast<std::uintptr_t>(base) << "-";
  bool in_mapping = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.rfind(start.str(), 0) == 0) in_mapping = true;
    if (in_mapping && line.rfind("Rss:", 0) == 0) return std::stoul(line.substr(4)) * 1024;  // "Rss:   12 kB"
  }
  return 0;
}

}  // namespace

TEST_CASE("pages of a mapped file that no live tensor reads are handed back, the others kept", "[safetensors]") {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  test::ScratchDir dir("st-release");
  std::vector<std::uint8_t> bytes(64 * page);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + i / page);
  std::ofstream(dir.path() / "w.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::size_t size = 0;
  const std::shared_ptr<void> mapping = map_file(dir.path() / "w.bin", "weights", size);
  const auto* mapped = static_cast<const std::uint8_t*>(mapping.get());
  REQUIRE(std::equal(bytes.begin(), bytes.end(), mapped));  // a load reads everything: all 64 pages resident
  REQUIRE(resident_bytes(mapped) == 64 * page);
  // Live: one f32 tensor over pages 10-12, in part at both ends, and one within page 40. A heap tensor,
  // and a mapped tensor that is not passed (converted away at load), are not.
  Tensor view;
  view.shape = {static_cast<std::int64_t>((2 * page + 48) / 4)};
  view.data = const_cast<std::uint8_t*>(mapped + 10 * page + 100);
  view.owner = mapping;
  Tensor small = view;
  small.shape = {4};
  small.data = const_cast<std::uint8_t*>(mapped + 40 * page + 8);
  const Tensor heap = Tensor::zeros(DType::F32, {1024});
  CHECK(release_unused_mapped_pages({&view, &heap, &small}) == (64 - 4) * page);
  CHECK(resident_bytes(mapped) == 4 * page);
  // What stays reads as before, and a dropped page holds the file's bytes again when read.
  CHECK(std::equal(bytes.begin() + 10 * page + 100, bytes.begin() + 12 * page + 148, mapped + 10 * page + 100));
  CHECK(std::equal(bytes.begin(), bytes.end(), mapped));
  CHECK(heap.as<float>()[1023] == 0.0f);
  // Nothing mapped among the tensors: nothing to drop.
  CHECK(release_unused_mapped_pages({&heap}) == 0);
}
