// SPDX-License-Identifier: MIT
#include "model/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "model/safetensors.h"
#include "tokenizer/pretokenizer.h"

namespace servelab {

namespace {

// The largest dimension count ggml tensors have.
constexpr std::uint32_t kMaxDims = 4;

// The engine's name for a ggml type (the loader refuses the others when parsing).
DType dtype_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    case GgmlType::Q8_0: return DType::Q8_0;
    case GgmlType::Q4_0: return DType::Q4_0;
    case GgmlType::Q4_1: return DType::Q4_1;
  }
  fail("unreachable ggml type");
}

// A bounds-checked cursor over the file's bytes: every read first checks that the bytes are there.
class Cursor {
 public:
  Cursor(const std::byte* base, std::size_t size, const std::string& file) : base_(base), size_(size), file_(file) {}

  std::size_t pos() const { return pos_; }
  std::size_t left() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string string(const std::string& what) {
    const auto n = read<std::uint64_t>(what.c_str());
    need(n, what.c_str());
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }

  // A count of items of at least min_bytes each must fit in what is left: checked before anything is reserved.
  std::uint64_t count(const std::string& what, std::uint64_t min_bytes) {
    const auto n = read<std::uint64_t>(what.c_str());
    check(n <= left() / min_bytes, file_, ": ", what, " is ", n, ", but only ", left(),
          " bytes are left in the file (truncated or corrupt)");
    return n;
  }

  void need(std::uint64_t n, const char* what) const {
    check(n <= left(), file_, ": truncated reading ", what, " at byte ", pos_, " (", n, " bytes needed, ", left(),
          " left)");
  }

 private:
  const std::byte* base_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const std::string& file_;
};

const char* value_type_name(GgufValueType t) {
  static const char* const names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

GgufValueType value_type(std::uint32_t raw, const std::string& file, const std::string& key) {
  check(raw <= static_cast<std::uint32_t>(GgufValueType::FLOAT64), file, ": metadata '", key, "' has value type ", raw,
        ", which GGUF does not define (expected 0 to 12)");
  return static_cast<GgufValueType>(raw);
}

// Bytes a value of scalar type t takes at least (strings: their 8-byte length).
std::uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32: return 4;
    default: return 8;
  }
}

// Reads one scalar of type t into (integer, number, string); returns which kind it was.
enum class Kind { Integer, Number, String };
Kind read_scalar(Cursor& in, GgufValueType t, const std::string& file, const std::string& key, std::int64_t& integer,
                 double& number, std::string& string) {
  const std::string what = "metadata '" + key + "'";
  switch (t) {
    case GgufValueType::UINT8: integer = in.read<std::uint8_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::INT8: integer = in.read<std::int8_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::UINT16: integer = in.read<std::uint16_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::INT16: integer = in.read<std::int16_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::UINT32: integer = in.read<std::uint32_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::INT32: integer = in.read<std::int32_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::INT64: integer = in.read<std::int64_t>(what.c_str()); return Kind::Integer;
    case GgufValueType::UINT64: {
      const auto v = in.read<std::uint64_t>(what.c_str());
      check(v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), file, ": ", what, " is ", v,
            ", larger than any count or id servelab reads");
      integer = static_cast<std::int64_t>(v);
      return Kind::Integer;
    }
    case GgufValueType::BOOL: {
      const auto v = in.read<std::uint8_t>(what.c_str());
      check(v <= 1, file, ": ", what, " is a bool of value ", int{v}, " (expected 0 or 1)");
      integer = v;
      return Kind::Integer;
    }
    case GgufValueType::FLOAT32: number = in.read<float>(what.c_str()); return Kind::Number;
    case GgufValueType::FLOAT64: number = in.read<double>(what.c_str()); return Kind::Number;
    case GgufValueType::STRING: string = in.string(what); return Kind::String;
    case GgufValueType::ARRAY: break;
  }
  fail(file, ": ", what, " is an array of arrays, which servelab does not read");
}

GgufValue read_value(Cursor& in, GgufValueType t, const std::string& file, const std::string& key) {
  GgufValue v;
  v.type = t;
  if (t != GgufValueType::ARRAY) {
    read_scalar(in, t, file, key, v.integer, v.number, v.string);
    return v;
  }
  v.element = value_type(in.read<std::uint32_t>("an array's element type"), file, key);
  check(v.element != GgufValueType::ARRAY, file, ": metadata '", key,
        "' is an array of arrays, which servelab does not read");
  const std::uint64_t n = in.count("the length of metadata array '" + key + "'", min_value_bytes(v.element));
  std::int64_t integer = 0;
  double number = 0;
  std::string string;
  for (std::uint64_t i = 0; i < n; ++i) {
    switch (read_scalar(in, v.element, file, key, integer, number, string)) {
      case Kind::Integer: v.integers.push_back(integer); break;
      case Kind::Number: v.numbers.push_back(number); break;
      case Kind::String: v.strings.push_back(std::move(string)); break;
    }
  }
  return v;
}

GgmlType tensor_type(std::uint32_t raw, const std::string& file, const std::string& name) {
  switch (raw) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 8:
    case 30: return static_cast<GgmlType>(raw);
    default:
      fail(file, ": tensor '", name, "' is of type ", ggml_type_name(raw),
           ", which servelab does not read (expected F32, F16, BF16, Q8_0, Q4_0 or Q4_1)");
  }
}

}  // namespace

std::string ggml_type_name(std::uint32_t type) {
  static const char* const names[] = {
      "F32",     "F16",   "Q4_0",   "Q4_1",  "Q4_2 (removed)", "Q4_3 (removed)", "Q5_0", "Q5_1",    "Q8_0",
      "Q8_1",    "Q2_K",  "Q3_K",   "Q4_K",  "Q5_K",           "Q6_K",           "Q8_K", "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",          "IQ4_XS",         "I8",   "I16",     "I32",
      "I64",     "F64",   "IQ1_M",  "BF16"};
  return type < std::size(names) ? names[type] : "type " + std::to_string(type);
}

GgufContents parse_gguf(const std::byte* bytes, std::size_t size, const std::string& file) {
  Cursor in(bytes, size, file);
  in.need(4, "the magic");
  check(std::memcmp(bytes, "GGUF", 4) == 0, file, ": not a GGUF file (it does not start with \"GGUF\")");
  in.read<std::uint32_t>("the magic");
  GgufContents g;
  g.version = in.read<std::uint32_t>("the version");
  check(g.version != 0x02000000u && g.version != 0x03000000u, file,
        ": a big-endian GGUF, which servelab does not read (expected a little-endian file)");
  check(g.version == 2 || g.version == 3, file, ": GGUF version ", g.version,
        " is not supported (expected 2 or 3; version 1 files predate 64-bit counts, convert them again)");
  // A tensor info takes at least 8 (name) + 4 (n_dims) + 4 (type) + 8 (offset) bytes; a key/value 8 + 4 + 1.
  const std::uint64_t tensor_count = in.read<std::uint64_t>("the tensor count");
  const std::uint64_t kv_count = in.count("the metadata count", 13);
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.string("a metadata key");
    const GgufValueType t = value_type(in.read<std::uint32_t>("a value type"), file, key);
    GgufValue v = read_value(in, t, file, key);
    check(!g.metadata.contains(key), file, ": metadata key '", key, "' appears twice");
    g.metadata.emplace(std::move(key), std::move(v));
  }
  check(tensor_count <= in.left() / 24, file, ": the tensor count is ", tensor_count, ", but only ", in.left(),
        " bytes are left for tensor infos (truncated or corrupt)");
  if (const auto it = g.metadata.find("general.alignment"); it != g.metadata.end()) {
    const GgufValue& a = it->second;
    check(a.type == GgufValueType::UINT32 && a.integer > 0 && a.integer <= (1 << 20) &&
              (a.integer & (a.integer - 1)) == 0,
          file, ": general.alignment must be a uint32 power of two up to 2^20, got ", a.integer, " (",
          value_type_name(a.type), ")");
    g.alignment = static_cast<std::size_t>(a.integer);
  }
  struct Info {
    std::string name;
    std::uint64_t offset;
  };
  std::vector<Info> infos;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = in.string("a tensor name");
    const auto n_dims = in.read<std::uint32_t>("a tensor's dimension count");
    check(n_dims >= 1 && n_dims <= kMaxDims, file, ": tensor '", t.name, "' has ", n_dims,
          " dimensions (expected 1 to ", kMaxDims, ")");
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = in.read<std::uint64_t>("a tensor dimension");
      check(ne >= 1 && ne <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), file, ": tensor '",
            t.name, "' dimension ", d, " is ", ne, " (expected at least 1)");
      t.ne.push_back(static_cast<std::int64_t>(ne));
    }
    t.type = tensor_type(in.read<std::uint32_t>("a tensor type"), file, t.name);
    const std::uint64_t offset = in.read<std::uint64_t>("a tensor offset");
    check(offset % g.alignment == 0, file, ": tensor '", t.name, "' starts at offset ", offset,
          ", which is not a multiple of the alignment ", g.alignment);
    const DType dtype = dtype_of(t.type);  // its blocks' elements and bytes (core/dtype.h)
    const std::int64_t block = dtype_block_elements(dtype);
    check(t.ne[0] % block == 0, file, ": tensor '", t.name, "' has rows of ", t.ne[0], " elements, not a multiple of ",
          ggml_type_name(static_cast<std::uint32_t>(t.type)), "'s block of ", block);
    // A checked product, so that dimensions whose product wraps cannot match a small span.
    std::optional<std::int64_t> nbytes =
        checked_mul(t.ne[0] / block, static_cast<std::int64_t>(dtype_block_bytes(dtype)));
    for (std::size_t d = 1; d < t.ne.size() && nbytes; ++d) nbytes = checked_mul(*nbytes, t.ne[d]);
    check(nbytes.has_value(), file, ": tensor '", t.name, "' has more elements than any file holds");
    t.nbytes = static_cast<std::size_t>(*nbytes);
    check(!g.tensors.contains(t.name), file, ": tensor '", t.name, "' appears twice");
    infos.push_back({t.name, offset});
    g.tensors.emplace(t.name, std::move(t));
  }
  const std::size_t data_start = (in.pos() + g.alignment - 1) / g.alignment * g.alignment;
  check(data_start <= size || tensor_count == 0, file, ": truncated before the tensor data");
  const std::size_t data_size = data_start <= size ? size - data_start : 0;
  std::sort(infos.begin(), infos.end(), [](const Info& a, const Info& b) { return a.offset < b.offset; });
  std::uint64_t prev_end = 0;
  std::string prev_name;
  for (const Info& info : infos) {
    GgufTensor& t = g.tensors.at(info.name);
    check(info.offset <= data_size && t.nbytes <= data_size - info.offset, file, ": tensor '", t.name,
          "' runs to byte ", info.offset + t.nbytes, " of the data section but the file holds only ", data_size,
          " (truncated file?)");
    check(info.offset >= prev_end, file, ": tensors '", prev_name, "' and '", t.name, "' overlap");
    t.data = bytes + data_start + info.offset;
    prev_end = info.offset + t.nbytes;
    prev_name = t.name;
  }
  return g;
}

GgufFile::GgufFile(const std::filesystem::path& path) : path_(path.string()) {
  std::size_t size = 0;
  mapping_ = map_file(path, "a GGUF file", size);
  contents_ = parse_gguf(static_cast<const std::byte*>(mapping_.get()), size, path_);
}

bool is_gguf_path(const std::filesystem::path& path) {
  return path.extension() == ".gguf" && !std::filesystem::is_directory(path);
}

namespace {

const GgufValue* find(const GgufContents& g, const std::string& key) {
  const auto it = g.metadata.find(key);
  return it == g.metadata.end() ? nullptr : &it->second;
}

bool is_integer(GgufValueType t) {
  return t != GgufValueType::FLOAT32 && t != GgufValueType::FLOAT64 && t != GgufValueType::STRING &&
         t != GgufValueType::ARRAY;
}

// An integer key in [lo, hi], or fallback when absent (nullopt: required).
std::int64_t int_key(const GgufContents& g, const std::string& key, const std::string& file, std::int64_t lo,
                     std::int64_t hi, std::optional<std::int64_t> fallback = std::nullopt) {
  const GgufValue* v = find(g, key);
  if (v == nullptr) {
    check(fallback.has_value(), file, ": missing metadata key '", key, "'");
    return *fallback;
  }
  check(is_integer(v->type), file, ": metadata '", key, "' must be an integer, got ", value_type_name(v->type));
  check(v->integer >= lo && v->integer <= hi, file, ": metadata '", key, "' is ", v->integer, " (expected ", lo, " to ",
        hi, ")");
  return v->integer;
}

double float_key(const GgufContents& g, const std::string& key, const std::string& file, double fallback) {
  const GgufValue* v = find(g, key);
  if (v == nullptr) return fallback;
  check(v->type == GgufValueType::FLOAT32 || v->type == GgufValueType::FLOAT64, file, ": metadata '", key,
        "' must be a float, got ", value_type_name(v->type));
  return v->number;
}

std::string string_key(const GgufContents& g, const std::string& key, const std::string& file,
                       std::optional<std::string> fallback = std::nullopt) {
  const GgufValue* v = find(g, key);
  if (v == nullptr) {
    check(fallback.has_value(), file, ": missing metadata key '", key, "'");
    return *fallback;
  }
  check(v->type == GgufValueType::STRING, file, ": metadata '", key, "' must be a string, got ",
        value_type_name(v->type));
  return v->string;
}

const GgufValue& array_key(const GgufContents& g, const std::string& key, const std::string& file, bool strings) {
  const GgufValue* v = find(g, key);
  check(v != nullptr, file, ": missing metadata key '", key, "'");
  check(v->type == GgufValueType::ARRAY && (v->element == GgufValueType::STRING) == strings, file, ": metadata '", key,
        "' must be an array of ", strings ? "strings" : "integers");
  return *v;
}

constexpr int kIntMax = std::numeric_limits<int>::max();

}  // namespace

ModelConfig gguf_config(const GgufContents& g, const std::string& file) {
  const std::string arch = string_key(g, "general.architecture", file);
  ModelConfig c;
  check(arch == "llama" || arch == "qwen2", file, ": general.architecture is '", arch,
        "' (expected llama or qwen2, the architectures servelab computes)");
  c.arch = arch == "llama" ? Arch::Llama : Arch::Qwen2;
  c.name = std::filesystem::path(file).stem().string();
  const std::string p = arch + ".";
  c.hidden_size = static_cast<int>(int_key(g, p + "embedding_length", file, 1, kIntMax));
  c.num_hidden_layers = static_cast<int>(int_key(g, p + "block_count", file, 1, kIntMax));
  c.num_attention_heads = static_cast<int>(int_key(g, p + "attention.head_count", file, 1, kIntMax));
  c.num_key_value_heads =
      static_cast<int>(int_key(g, p + "attention.head_count_kv", file, 1, kIntMax, c.num_attention_heads));
  c.head_dim =
      static_cast<int>(int_key(g, p + "attention.key_length", file, 1, kIntMax, c.hidden_size / c.num_attention_heads));
  check(int_key(g, p + "attention.value_length", file, 1, kIntMax, c.head_dim) == c.head_dim, file, ": ", p,
        "attention.value_length differs from the key length, which servelab does not compute");
  check(int_key(g, p + "rope.dimension_count", file, 1, kIntMax, c.head_dim) == c.head_dim, file, ": ", p,
        "rope.dimension_count is not the head size ", c.head_dim, "; servelab rotates whole heads (no partial RoPE)");
  const std::string scaling = string_key(g, p + "rope.scaling.type", file, "none");
  check(scaling == "none", file, ": ", p, "rope.scaling.type is '", scaling,
        "', which servelab does not compute from a GGUF (expected none)");
  check(!g.tensors.contains("rope_freqs.weight"), file,
        ": the file has a rope_freqs.weight tensor (Llama 3 RoPE scaling), which servelab does not read from a GGUF");
  c.intermediate_size = static_cast<int>(int_key(g, p + "feed_forward_length", file, 1, kIntMax));
  const GgufValue* tokens = find(g, "tokenizer.ggml.tokens");
  const std::int64_t listed = tokens != nullptr ? static_cast<std::int64_t>(tokens->strings.size()) : 0;
  if (find(g, p + "vocab_size") != nullptr || listed == 0)
    c.vocab_size = static_cast<int>(int_key(g, p + "vocab_size", file, 1, kIntMax));
  else
    c.vocab_size = static_cast<int>(std::min<std::int64_t>(listed, kIntMax));
  c.max_position_embeddings = static_cast<int>(int_key(g, p + "context_length", file, 1, kIntMax));
  c.rope_theta = float_key(g, p + "rope.freq_base", file, 10000.0);
  c.rms_norm_eps = float_key(g, p + "attention.layer_norm_rms_epsilon", file, 1e-6);
  c.tie_word_embeddings = !g.tensors.contains("output.weight");
  c.attention_bias = c.arch == Arch::Qwen2;
  c.torch_dtype = DType::F32;  // what the engine computes in from a dequantized GGUF
  c.validate(file);
  return c;
}

namespace {

// True when every f16 scale (and Q4_1 minimum) of a quantized tensor is finite: then so is every element.
bool finite_scales(DType dtype, const std::byte* data, std::size_t nbytes) {
  const std::size_t block = dtype_block_bytes(dtype), halves = dtype == DType::Q4_1 ? 2 : 1;
  for (std::size_t at = 0; at + block <= nbytes; at += block)
    for (std::size_t h = 0; h < halves; ++h) {
      std::uint16_t bits;
      std::memcpy(&bits, data + at + 2 * h, 2);
      if ((bits & 0x7c00u) == 0x7c00u) return false;  // exponent all ones: inf or NaN
    }
  return true;
}

// llama.cpp's converter reorders each head's rows from [two halves][half] to [half][two] (its RoPE rotates
// adjacent pairs); row r of the file is row `unpermuted_row(r)` of Hugging Face's matrix.
std::int64_t unpermuted_row(std::int64_t r, std::int64_t head_dim) {
  const std::int64_t head = r / head_dim, within = r % head_dim, half = head_dim / 2;
  return head * head_dim + (within % 2) * half + within / 2;
}

class Loader {
 public:
  Loader(const GgufFile& file, const ModelConfig& config, ThreadPool& pool)
      : file_(file), config_(config), pool_(pool) {}

  // The tensor `name`, shaped [rows, cols] (or [cols] for a vector), as `as` (or, with `stored`, in the file's type
  // where the kernels read it); permute_heads undoes llama's Q/K order.
  Tensor load(const std::string& name, const std::vector<std::int64_t>& shape, DType as, int permute_heads = 0,
              bool stored = false) {
    const auto& tensors = file_.contents().tensors;
    const auto it = tensors.find(name);
    check(it != tensors.end(), file_.path(), ": missing tensor '", name, "' (expected shape ", shape_to_string(shape),
          ")");
    const GgufTensor& t = it->second;
    std::vector<std::int64_t> ne(shape.rbegin(), shape.rend());
    check(t.ne == ne, file_.path(), ": tensor '", name, "' has ggml dimensions ", shape_to_string(t.ne), ", expected ",
          shape_to_string(ne), " from the metadata");
    used_.push_back(name);
    const DType from = dtype_of(t.type);
    if (stored) as = from == DType::F16 ? DType::F32 : from;
    const std::int64_t cols = shape.back(), rows = shape.size() == 2 ? shape[0] : 1;
    const std::size_t row_bytes = dtype_nbytes(from, cols);
    if (from == as && reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) == 0) {
      // The kernels read this type: a view into the mapping (quantized blocks are checked by their scales).
      if (dtype_is_quantized(as))
        check(finite_scales(as, t.data, t.nbytes), file_.path(), ": tensor '", name,
              "' holds NaN or Inf; the file is corrupt");
      else if (as == DType::F32)
        check_finite(name, reinterpret_cast<const float*>(t.data), rows * cols);
      Tensor view;
      view.dtype = as;
      view.shape = shape;
      view.data = const_cast<std::byte*>(t.data);  // read-only mapping; the engine never writes weights
      view.owner = file_.mapping();
      return permute_heads == 0 ? view : permuted(view, permute_heads);
    }
    Tensor out = Tensor::zeros(as, shape);
    const std::int64_t head_dim = permute_heads > 0 ? rows / permute_heads : 0;
    const std::size_t out_row = dtype_nbytes(as, cols);
    // Rows in parallel: converting the 135M-parameter SmolLM2 is most of its load time.
    pool_.parallel_for(
        static_cast<std::size_t>(rows),
        [&](std::size_t begin, std::size_t end) {
          std::vector<float> row(static_cast<std::size_t>(cols));
          for (auto r = static_cast<std::int64_t>(begin); r < static_cast<std::int64_t>(end); ++r) {
            dequantize_row(from, t.data + static_cast<std::size_t>(r) * row_bytes, row.data(), cols);
            check_finite(name, row.data(), cols);
            const std::int64_t dst = permute_heads > 0 ? unpermuted_row(r, head_dim) : r;
            quantize_row(as, row.data(), out.as<std::byte>() + static_cast<std::size_t>(dst) * out_row, cols);
          }
        },
        64);
    return out;
  }

  // The rows of @p t put back in Hugging Face's order (whole rows are moved, so any type, blocks included).
  Tensor permuted(const Tensor& t, int heads) const {
    Tensor out = Tensor::zeros(t.dtype, t.shape);
    const std::int64_t rows = t.shape[0], head_dim = rows / heads;
    const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(rows);
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(out.as<std::byte>() + static_cast<std::size_t>(unpermuted_row(r, head_dim)) * row_bytes,
                  t.as<const std::byte>() + static_cast<std::size_t>(r) * row_bytes, row_bytes);
    return out;
  }

  // A tensor the engine does not read means the file computes something it does not: refused by name.
  void check_all_used() const {
    for (const auto& [name, t] : file_.contents().tensors)
      check(std::find(used_.begin(), used_.end(), name) != used_.end(), file_.path(), ": tensor '", name,
            "' is not used by servelab's ", arch_name(config_.arch),
            "; the file asks for something the engine does "
            "not compute");
  }

 private:
  void check_finite(const std::string& name, const float* v, std::int64_t n) const {
    for (std::int64_t i = 0; i < n; ++i)
      check(std::isfinite(v[i]), file_.path(), ": tensor '", name, "' holds NaN or Inf; the file is corrupt");
  }

  const GgufFile& file_;
  const ModelConfig& config_;
  ThreadPool& pool_;
  std::vector<std::string> used_;
};

}  // namespace

ModelWeights gguf_weights(const GgufFile& file, const ModelConfig& c, DType weight_dtype, ThreadPool& pool,
                          bool stored_types) {
  check(weight_dtype != DType::F16, "GGUF weights load as f32, bf16, q8_0, q4_0 or q4_1, not f16");
  Loader in(file, c, pool);
  const std::int64_t v = c.vocab_size, h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), f = c.intermediate_size;
  const bool llama = c.arch == Arch::Llama;
  ModelWeights w;
  w.embed_tokens = in.load("token_embd.weight", {v, h}, weight_dtype, 0, stored_types);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.input_layernorm = in.load(p + "attn_norm.weight", {h}, DType::F32);
    lw.q_proj = in.load(p + "attn_q.weight", {q, h}, weight_dtype, llama ? c.num_attention_heads : 0, stored_types);
    lw.k_proj = in.load(p + "attn_k.weight", {kv, h}, weight_dtype, llama ? c.num_key_value_heads : 0, stored_types);
    lw.v_proj = in.load(p + "attn_v.weight", {kv, h}, weight_dtype, 0, stored_types);
    if (c.attention_bias) {
      lw.q_bias = in.load(p + "attn_q.bias", {q}, DType::F32);
      lw.k_bias = in.load(p + "attn_k.bias", {kv}, DType::F32);
      lw.v_bias = in.load(p + "attn_v.bias", {kv}, DType::F32);
    }
    lw.o_proj = in.load(p + "attn_output.weight", {h, q}, weight_dtype, 0, stored_types);
    lw.post_attention_layernorm = in.load(p + "ffn_norm.weight", {h}, DType::F32);
    lw.gate_proj = in.load(p + "ffn_gate.weight", {f, h}, weight_dtype, 0, stored_types);
    lw.up_proj = in.load(p + "ffn_up.weight", {f, h}, weight_dtype, 0, stored_types);
    lw.down_proj = in.load(p + "ffn_down.weight", {h, f}, weight_dtype, 0, stored_types);
    w.layers.push_back(std::move(lw));
  }
  w.norm = in.load("output_norm.weight", {h}, DType::F32);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : in.load("output.weight", {v, h}, weight_dtype, 0, stored_types);
  in.check_all_used();
  return w;
}

namespace {

// The split regexes of the pre-tokenizers llama.cpp names in tokenizer.ggml.pre (the models' own tokenizer.json).
std::vector<std::string> split_patterns(const std::string& pre, const std::string& file) {
  static const char* const qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const char* const llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "gpt2" || pre == "default") return {kGpt2SplitPattern};
  if (pre == "smollm") return {R"(\p{N})", kGpt2SplitPattern};  // digits one by one, then GPT-2's split
  if (pre == "qwen2") return {qwen2};
  if (pre == "llama-bpe" || pre == "llama3") return {llama3};
  fail(file, ": tokenizer.ggml.pre is '", pre, "', a pre-tokenizer servelab does not know (expected gpt2, smollm, ",
       "qwen2 or llama-bpe)");
}

// llama.cpp's token types.
enum TokenType : std::int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

std::int32_t token_id(const GgufContents& g, const std::string& key, const std::string& file, std::int64_t vocab,
                      std::optional<std::int64_t> fallback = std::nullopt) {
  return static_cast<std::int32_t>(int_key(g, key, file, 0, vocab - 1, fallback));
}

}  // namespace

Tokenizer gguf_tokenizer(const GgufContents& g, const std::string& file) {
  const std::string model = string_key(g, "tokenizer.ggml.model", file);
  check(model == "gpt2", file, ": tokenizer.ggml.model is '", model,
        "'; servelab reads byte-level BPE tokenizers only (expected gpt2)");
  const auto& tokens = array_key(g, "tokenizer.ggml.tokens", file, true).strings;
  check(!tokens.empty() && tokens.size() <= static_cast<std::size_t>(kMaxTokenIds), file,
        ": tokenizer.ggml.tokens holds ", tokens.size(), " tokens (expected 1 to ", kMaxTokenIds, ")");
  const auto vocab = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int64_t> types(tokens.size(), kNormal);
  if (find(g, "tokenizer.ggml.token_type") != nullptr) {
    types = array_key(g, "tokenizer.ggml.token_type", file, false).integers;
    check(types.size() == tokens.size(), file, ": tokenizer.ggml.token_type has ", types.size(), " entries for ",
          tokens.size(), " tokens");
  }
  TokenMap map;
  nlohmann::json added = nlohmann::json::array();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    check(map.emplace(tokens[id], static_cast<std::int32_t>(id)).second, file, ": token '", tokens[id],
          "' appears twice in tokenizer.ggml.tokens");
    if (types[id] == kControl || types[id] == kUserDefined)
      added.push_back({{"id", id}, {"content", tokens[id]}, {"special", types[id] == kControl}});
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (find(g, "tokenizer.ggml.merges") != nullptr) {
    const auto& lines = array_key(g, "tokenizer.ggml.merges", file, true).strings;
    merges.reserve(lines.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto space = lines[i].find(' ');
      check(space != std::string::npos && lines[i].find(' ', space + 1) == std::string::npos, file,
            ": tokenizer.ggml.merges[", i, "] = '", lines[i], "' is not two tokens separated by one space");
      merges.emplace_back(lines[i].substr(0, space), lines[i].substr(space + 1));
    }
  }
  std::vector<std::int32_t> prefix, suffix;
  if (int_key(g, "tokenizer.ggml.add_bos_token", file, 0, 1, 0))
    prefix.push_back(token_id(g, "tokenizer.ggml.bos_token_id", file, vocab));
  if (int_key(g, "tokenizer.ggml.add_eos_token", file, 0, 1, 0))
    suffix.push_back(token_id(g, "tokenizer.ggml.eos_token_id", file, vocab));
  const bool prefix_space = int_key(g, "tokenizer.ggml.add_space_prefix", file, 0, 1, 0) != 0;
  return Tokenizer::from_parts(
      file, Normalizer(),
      PreTokenizer(split_patterns(string_key(g, "tokenizer.ggml.pre", file, "gpt2"), file), prefix_space, file),
      BpeModel(std::move(map), merges, false, file), AddedTokens::from_json(added, file), std::move(prefix),
      std::move(suffix));
}

ChatTemplate gguf_chat_template(const GgufContents& g, const std::string& file) {
  check(find(g, "tokenizer.chat_template") != nullptr, file, ": no chat template (no tokenizer.chat_template key)");
  const std::string jinja = string_key(g, "tokenizer.chat_template", file);
  // The named special tokens transformers reads from a GGUF: the template may print them.
  ChatTemplate::SpecialTokens special;
  const auto& tokens = array_key(g, "tokenizer.ggml.tokens", file, true).strings;
  for (const auto& [name, key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                  {"eos_token", "tokenizer.ggml.eos_token_id"},
                                  {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                  {"pad_token", "tokenizer.ggml.padding_token_id"}})
    if (find(g, key) != nullptr)
      special.emplace_back(
          name, tokens.at(static_cast<std::size_t>(token_id(g, key, file, static_cast<std::int64_t>(tokens.size())))));
  return ChatTemplate(jinja, std::move(special), file + " tokenizer.chat_template");
}

std::vector<std::int32_t> gguf_stop_token_ids(const GgufContents& g, const std::string& file) {
  const auto vocab = static_cast<std::int64_t>(array_key(g, "tokenizer.ggml.tokens", file, true).strings.size());
  std::vector<std::int32_t> ids;
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (find(g, key) == nullptr) continue;
    const std::int32_t id = token_id(g, key, file, vocab);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

}  // namespace servelab
