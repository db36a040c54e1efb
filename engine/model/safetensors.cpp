// SPDX-License-Identifier: MIT
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "core/checked.h"
#include "core/file.h"
#include "core/error.h"
#include "core/json.h"

namespace servelab {

namespace {

// A NaN or Inf weight turns every logit it touches into NaN, and argmax of
// NaNs is token 0: refuse the file rather than print tokens. The test is on
// the bits (exponent all ones), so it is the same for f32, f16 and bf16.
void check_finite(const TensorEntry& e, std::size_t numel) {
  for (std::size_t i = 0; i < numel; ++i) {
    bool finite = true;
    if (e.dtype == DType::F32) {
      std::uint32_t bits;
      std::memcpy(&bits, e.data + 4 * i, 4);
      finite = (bits & 0x7F800000u) != 0x7F800000u;
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, e.data + 2 * i, 2);
      const std::uint16_t exponent = e.dtype == DType::BF16 ? 0x7F80 : 0x7C00;
      finite = (bits & exponent) != exponent;
    }
    check(finite, e.file, ": tensor '", e.name, "' holds NaN or Inf (first at element ", i,
          "); the checkpoint is corrupt or its training diverged");
  }
}

}  // namespace

std::shared_ptr<void> map_file(const std::filesystem::path& path, const std::string& what, std::size_t& size) {
  // A FIFO or a device is refused by name before it is mapped; mmap() bounds nothing, so any size goes.
  const int fd = open_regular_file(path, std::numeric_limits<std::size_t>::max(), what, size);
  if (size == 0) {
    ::close(fd);
    fail(path.string(), ": file is empty (expected ", what, ")");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  check(p != MAP_FAILED, path.string(), ": mmap failed (", std::strerror(errno), ")");
  return std::shared_ptr<void>(p, FileMapping{size});
}

void FileMapping::operator()(void* base) const { ::munmap(base, size); }

std::size_t release_unused_mapped_pages(const std::vector<const Tensor*>& live) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct Mapping {
    std::uintptr_t begin = 0, end = 0;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> read;  // [begin, end) of each live tensor's bytes
  };
  std::map<const void*, Mapping> mappings;
  for (const Tensor* t : live) {
    const FileMapping* m = t->empty() ? nullptr : std::get_deleter<FileMapping>(t->owner);
    if (m == nullptr) continue;
    Mapping& mapping = mappings[t->owner.get()];
    mapping.begin = reinterpret_cast<std::uintptr_t>(t->owner.get());  // mmap()'s address: page-aligned
    mapping.end = mapping.begin + m->size;
    const auto b = reinterpret_cast<std::uintptr_t>(t->data);
    mapping.read.emplace_back(b, b + t->nbytes());
  }
  std::size_t dropped = 0;
  for (auto& [base, m] : mappings) {
    std::sort(m.read.begin(), m.read.end());
    m.read.emplace_back(m.end, m.end);  // the gap after the last tensor
    std::uintptr_t unread = m.begin;    // every byte from here to the next tensor's start is read by none
    for (const auto& [b, e] : m.read) {
      const std::uintptr_t lo = (unread + page - 1) / page * page, hi = b / page * page;
      if (hi > lo && ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0) dropped += hi - lo;
      unread = std::max(unread, e);
    }
  }
  return dropped;
}

std::map<std::string, TensorEntry> parse_safetensors(const std::byte* base, std::size_t size, const std::string& file) {
  check(size >= 8, file, ": truncated (", size, " bytes; a safetensors file starts with an 8-byte header length)");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);  // little-endian on every platform we build for
  check(header_len <= size - 8, file, ": truncated or not safetensors (header length ", header_len, " but only ",
        size - 8, " bytes follow)");
  const nlohmann::json header =
      parse_json(std::string_view(reinterpret_cast<const char*>(base + 8), header_len), file + " header");
  check(header.is_object(), file, ": header must be a JSON object");
  const std::byte* data = base + 8 + header_len;
  const std::size_t data_size = size - 8 - header_len;
  std::map<std::string, TensorEntry> entries;
  std::vector<std::pair<std::uint64_t, const TensorEntry*>> by_offset;  // (begin, entry) of every non-empty tensor
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
    // The byte count is a product of numbers from the file: checked, so that a
    // shape whose product wraps around cannot match a small data_offsets span.
    std::optional<std::int64_t> nbytes = static_cast<std::int64_t>(dtype_size(e.dtype));
    for (const auto& d : info["shape"]) {
      e.shape.push_back(
          json_int<std::int64_t>(d, 0, std::numeric_limits<std::int64_t>::max(), where + ": shape entry"));
      if (nbytes) nbytes = checked_mul(*nbytes, e.shape.back());
    }
    check(nbytes.has_value(), where, ": shape ", shape_to_string(e.shape), " has more elements than any file holds");
    const auto& off = info["data_offsets"];
    const auto begin =
        json_int<std::uint64_t>(off[0], 0, std::numeric_limits<std::uint64_t>::max(), where + ": data_offsets begin");
    const auto end =
        json_int<std::uint64_t>(off[1], 0, std::numeric_limits<std::uint64_t>::max(), where + ": data_offsets end");
    check(begin <= end, where, ": data_offsets begin ", begin, " > end ", end);
    check(end <= data_size, where, ": data runs to byte ", end, " of the data section but the file holds only ",
          data_size, " (truncated file?)");
    check(end - begin == static_cast<std::uint64_t>(*nbytes), where, ": shape ", shape_to_string(e.shape), " of ",
          dtype_name(e.dtype), " needs ", *nbytes, " bytes but data_offsets span ", end - begin);
    e.data = data + begin;
    e.nbytes = end - begin;
    const auto [it, added] = entries.emplace(name, std::move(e));
    if (end > begin) by_offset.emplace_back(begin, &it->second);
  }
  // Two tensors sharing bytes would alias each other's weights: a corrupt or hand-made file.
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const TensorEntry& prev = *by_offset[i - 1].second;
    const TensorEntry& cur = *by_offset[i].second;
    const std::uint64_t prev_end = by_offset[i - 1].first + prev.nbytes;
    check(by_offset[i].first >= prev_end, file, ": tensors '", prev.name, "' and '", cur.name,
          "' overlap (data_offsets [", by_offset[i - 1].first, ", ", prev_end, ") and [", by_offset[i].first, ", ",
          by_offset[i].first + cur.nbytes, "))");
  }
  return entries;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) {
  std::size_t size = 0;
  mapping_ = map_file(path, "a safetensors file", size);
  entries_ = parse_safetensors(static_cast<const std::byte*>(mapping_.get()), size, path.string());
}

std::vector<std::string> parse_safetensors_index(const nlohmann::json& index, const std::string& source) {
  check(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), source,
        ": missing object field 'weight_map'");
  std::vector<std::string> shard_names;
  std::set<std::string> seen;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    check(shard.is_string(), source, ": weight_map entry for '", tensor, "' must be a file name");
    const std::string name = shard.get<std::string>();
    // A shard is a file beside the index: "../x" or "/etc/passwd" would read outside the model folder.
    const std::filesystem::path as_path(name);
    check(!name.empty() && as_path == as_path.filename() && name != "." && name != "..", source,
          ": weight_map entry for '", tensor, "' is '", name,
          "', which is not a file name inside the model folder (expected e.g. model-00001-of-00002.safetensors)");
    if (seen.insert(name).second) shard_names.push_back(name);
  }
  return shard_names;
}

Checkpoint::Checkpoint(const std::filesystem::path& dir) : dir_(dir) {
  check(std::filesystem::is_directory(dir), dir.string(), ": not a directory (expected a Hugging Face model folder)");
  const auto index_path = dir / "model.safetensors.index.json";
  const auto single_path = dir / "model.safetensors";
  std::vector<std::string> shard_names;
  if (std::filesystem::exists(index_path)) {
    shard_names = parse_safetensors_index(read_json_file(index_path, "a safetensors index"), index_path.string());
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

std::vector<std::string> Checkpoint::unused() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : index_)
    if (!used_.contains(name)) names.push_back(name);
  return names;
}

bool Checkpoint::contains(const std::string& name) const { return index_.count(name) != 0; }

Tensor Checkpoint::load(const std::string& name, const std::vector<std::int64_t>& expected, DType as) const {
  check(as == DType::F32 || as == DType::BF16, "weights can be loaded as f32 or bf16, not ", dtype_name(as));
  auto it = index_.find(name);
  check(it != index_.end(), dir_.string(), ": missing tensor '", name, "' (expected shape ", shape_to_string(expected),
        ")");
  const TensorEntry& e = *it->second;
  check(e.shape == expected, e.file, ": tensor '", name, "' has shape ", shape_to_string(e.shape), ", expected ",
        shape_to_string(expected), " from config.json");
  used_.insert(name);
  const auto numel = static_cast<std::size_t>(e.nbytes / dtype_size(e.dtype));
  check_finite(e, numel);
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
