#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace servelab {

namespace {

// Maps a whole file read-only; the shared_ptr unmaps it when the last tensor view goes.
std::shared_ptr<void> map_file(const std::filesystem::path& path, std::size_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, path.string(), ": cannot open safetensors file (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path.string(), ": cannot stat (", std::strerror(errno), ")");
  }
  size = static_cast<std::size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(path.string(), ": file is empty (expected a safetensors header)");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  check(p != MAP_FAILED, path.string(), ": mmap failed (", std::strerror(errno), ")");
  return std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::size_t size = 0;
  mapping_ = map_file(path, size);
  const auto* base = static_cast<const std::byte*>(mapping_.get());
  check(size >= 8, file, ": truncated (", size, " bytes; a safetensors file starts with an 8-byte header length)");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);  // little-endian on every platform we build for
  check(header_len <= size - 8, file, ": truncated or not safetensors (header length ", header_len,
        " but only ", size - 8, " bytes follow)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(base + 8),
                                   reinterpret_cast<const char*>(base + 8 + header_len));
  } catch (const nlohmann::json::exception& e) {
    fail(file, ": header is not valid JSON (", e.what(), ")");
  }
  check(header.is_object(), file, ": header must be a JSON object");
  const std::byte* data = base + 8 + header_len;
  const std::size_t data_size = size - 8 - header_len;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = file + ": tensor '" + name + "'";
    check(info.is_object() && info.contains("dtype") && info["dtype"].is_string() && info.contains("shape") &&
              info["shape"].is_array() && info.contains("data_offsets") && info["data_offsets"].is_array() &&
              info["data_offsets"].size() == 2,
          where, ": header entry needs dtype, shape and data_offsets [begin, end]");
    TensorEntry e;
    e.name = name;
    e.file = file;
    e.dtype = parse_dtype(info["dtype"].get<std::string>(), where + " dtype");
    std::uint64_t numel = 1;
    for (const auto& d : info["shape"]) {
      check(d.is_number_unsigned(), where, ": shape must hold non-negative integers, got ", info["shape"].dump());
      e.shape.push_back(d.get<std::int64_t>());
      numel *= d.get<std::uint64_t>();
    }
    const auto& off = info["data_offsets"];
    check(off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
          ": data_offsets must be non-negative integers");
    const std::uint64_t begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
    check(begin <= end, where, ": data_offsets begin ", begin, " > end ", end);
    check(end <= data_size, where, ": data runs to byte ", end, " of the data section but the file holds only ",
          data_size, " (truncated file?)");
    check(end - begin == numel * dtype_size(e.dtype), where, ": shape ", shape_to_string(e.shape), " of ",
          dtype_name(e.dtype), " needs ", numel * dtype_size(e.dtype), " bytes but data_offsets span ", end - begin);
    e.data = data + begin;
    e.nbytes = end - begin;
    entries_.emplace(name, std::move(e));
  }
}

Checkpoint::Checkpoint(const std::filesystem::path& dir) : dir_(dir) {
  check(std::filesystem::is_directory(dir), dir.string(), ": not a directory (expected a Hugging Face model folder)");
  const auto index_path = dir / "model.safetensors.index.json";
  const auto single_path = dir / "model.safetensors";
  std::vector<std::string> shard_names;
  if (std::filesystem::exists(index_path)) {
    std::ifstream in(index_path);
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail(index_path.string(), ": not valid JSON (", e.what(), ")");
    }
    check(index.contains("weight_map") && index["weight_map"].is_object(), index_path.string(),
          ": missing object field 'weight_map'");
    std::set<std::string> seen;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      check(shard.is_string(), index_path.string(), ": weight_map entry for '", tensor, "' must be a file name");
      if (seen.insert(shard.get<std::string>()).second) shard_names.push_back(shard.get<std::string>());
    }
  } else if (std::filesystem::exists(single_path)) {
    shard_names.push_back("model.safetensors");
  } else {
    fail(dir.string(), ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& shard : shard_names) {
    files_.push_back(std::make_unique<SafetensorsFile>(dir / shard));
    for (const auto& [name, entry] : files_.back()->entries()) {
      check(index_.emplace(name, &entry).second, dir.string(), ": tensor '", name, "' appears in two shards");
      owner_[name] = files_.back().get();
    }
  }
}

bool Checkpoint::contains(const std::string& name) const { return index_.count(name) != 0; }

Tensor Checkpoint::load(const std::string& name, const std::vector<std::int64_t>& expected, DType as) const {
  check(as == DType::F32 || as == DType::BF16, "weights can be loaded as f32 or bf16, not ", dtype_name(as));
  auto it = index_.find(name);
  check(it != index_.end(), dir_.string(), ": missing tensor '", name, "' (expected shape ",
        shape_to_string(expected), ")");
  const TensorEntry& e = *it->second;
  check(e.shape == expected, e.file, ": tensor '", name, "' has shape ", shape_to_string(e.shape), ", expected ",
        shape_to_string(expected), " from config.json");
  const auto numel = static_cast<std::size_t>(e.nbytes / dtype_size(e.dtype));
  if (e.dtype == as && reinterpret_cast<std::uintptr_t>(e.data) % dtype_size(as) == 0) {
    Tensor view;
    view.dtype = as;
    view.shape = e.shape;
    view.data = const_cast<std::byte*>(e.data);  // read-only mapping; the engine never writes weights
    view.owner = owner_.at(name)->mapping();
    return view;
  }
  // memcpy for every element read: shard offsets need not be aligned.
  auto element = [&](std::size_t i) -> float {
    if (e.dtype == DType::F32) {
      float f;
      std::memcpy(&f, e.data + 4 * i, 4);
      return f;
    }
    std::uint16_t bits;
    std::memcpy(&bits, e.data + 2 * i, 2);
    return e.dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
  };
  Tensor out = Tensor::zeros(as, e.shape);
  for (std::size_t i = 0; i < numel; ++i) {
    if (as == DType::F32)
      out.as<float>()[i] = element(i);
    else
      out.as<std::uint16_t>()[i] = f32_to_bf16(element(i));
  }
  return out;
}

}  // namespace servelab
