#include "framework/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "framework/io/atomic_file.h"

// Tensor data is copied with memcpy, which is the file's little-endian layout
// only on a little-endian host (x86-64, ARM64).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors IO assumes a little-endian host");

namespace attnlab {

namespace {

using Json = nlohmann::ordered_json;
constexpr const char* kMetadataKey = "__metadata__";

struct TensorEntry {
  std::string name;
  std::string dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
  size_t item_size = 0;
};

[[noreturn]] void bad(const std::string& source, const std::string& problem) {
  throw IoError("safetensors file '" + source + "': " + problem);
}

uint64_t read_u64_le(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return n;
}

void append_u64_le(std::string& out, uint64_t n) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
}

uint64_t offset_value(const std::string& source, const std::string& name, const Json& v, const char* what) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    bad(source, "tensor '" + name + "': " + what + " must be non-negative integers, got " + v.dump());
  return v.get<uint64_t>();
}

TensorEntry parse_entry(const std::string& source, const std::string& name, const Json& spec, uint64_t data_size) {
  if (!spec.is_object()) bad(source, "tensor '" + name + "': expected an object, got " + spec.dump());
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!spec.contains(field)) bad(source, "tensor '" + name + "' has no \"" + field + "\"");
  TensorEntry e;
  e.name = name;
  const Json& dtype = spec["dtype"];
  if (!dtype.is_string()) bad(source, "tensor '" + name + "': dtype must be a string, got " + dtype.dump());
  e.dtype = dtype.get<std::string>();
  if (e.dtype == "F32") e.item_size = 4;
  else if (e.dtype == "F64") e.item_size = 8;
  else bad(source, "tensor '" + name + "' has unsupported dtype '" + e.dtype + "' (supported: F32, F64)");

  const Json& shape = spec["shape"];
  if (!shape.is_array()) bad(source, "tensor '" + name + "': shape must be an array, got " + shape.dump());
  // numel * item_size must fit in the data, which also rules out overflow.
  uint64_t numel = 1;
  bool zero = false;
  for (const Json& s : shape) {
    const uint64_t dim = offset_value(source, name, s, "shape entries");
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(source, "tensor '" + name + "': dimension " + s.dump() + " is too large");
    e.shape.push_back(static_cast<int64_t>(dim));
    if (dim == 0) zero = true;
    else if (!zero && numel > data_size / dim) numel = data_size + 1;  // too big for the data, caught below
    else if (!zero) numel *= dim;
  }
  if (zero) numel = 0;

  const Json& offsets = spec["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    bad(source, "tensor '" + name + "': data_offsets must be [begin, end], got " + offsets.dump());
  e.begin = offset_value(source, name, offsets[0], "data_offsets");
  e.end = offset_value(source, name, offsets[1], "data_offsets");
  if (e.begin > e.end)
    bad(source, "tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] end before they begin");
  if (e.end > data_size)
    bad(source, "tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] lie outside the data of " + std::to_string(data_size) +
                    " bytes: the file is truncated or corrupt");
  if (numel > data_size || e.end - e.begin != numel * e.item_size)
    bad(source, "tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] span " + std::to_string(e.end - e.begin) + " bytes, but shape " + shape_str(e.shape) + " of " +
                    e.dtype + " needs " +
                    (numel > data_size ? std::string("more than the file holds")
                                       : std::to_string(numel * e.item_size)));
  return e;
}

Tensor to_tensor(const TensorEntry& e, const char* data) {
  Tensor t(e.shape);
  const int64_t n = t.numel();
  if (e.dtype == "F32") {
    std::vector<float> buf(static_cast<size_t>(n));
    if (n) std::memcpy(buf.data(), data + e.begin, static_cast<size_t>(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) t[i] = static_cast<Real>(buf[static_cast<size_t>(i)]);
  } else {
    std::vector<double> buf(static_cast<size_t>(n));
    if (n) std::memcpy(buf.data(), data + e.begin, static_cast<size_t>(n) * sizeof(double));
    for (int64_t i = 0; i < n; ++i) t[i] = static_cast<Real>(buf[static_cast<size_t>(i)]);
  }
  return t;
}

}  // namespace

const Tensor* SafetensorsData::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

std::string encode_safetensors(const TensorRefs& tensors, const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == kMetadataKey) throw ValueError("safetensors: invalid tensor name '" + name + "'");
    if (!seen.insert(name).second) throw ValueError("safetensors: tensor name '" + name + "' appears twice");
    if (t == nullptr) throw ValueError("safetensors: tensor '" + name + "' is null");
    const uint64_t bytes = static_cast<uint64_t>(t->numel()) * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", t->shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(std::string("safetensors: a tensor name or metadata string is not valid UTF-8: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  append_u64_le(out, text.size());
  out += text;
  for (const auto& entry : tensors) {
    const Tensor& t = *entry.second;
    std::vector<float> buf(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) buf[static_cast<size_t>(i)] = static_cast<float>(t[i]);
    out.append(reinterpret_cast<const char*>(buf.data()), buf.size() * sizeof(float));
  }
  return out;
}

namespace {

// What the header says: the metadata, and the entries in the order of their data.
struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<TensorEntry> entries;
};

// The header length from the first 8 bytes, checked against the file's
// `file_size` before anything of that length is read or allocated.
uint64_t header_length(const std::string& first8, uint64_t file_size, const std::string& source) {
  if (file_size < 8)
    bad(source, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_u64_le(first8);
  if (n > file_size - 8)
    bad(source, "header length " + std::to_string(n) + " goes beyond the end of the file (" +
                    std::to_string(file_size) + " bytes): the file is truncated or corrupt");
  return n;
}

// The header's JSON, checked against `data_size`, the bytes after it: every
// entry's offsets and shape must fit in them and tile them exactly.
Header parse_header(const std::string& text, uint64_t data_size, const std::string& source) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!json.is_object()) bad(source, "header must be a JSON object, got " + std::string(json.type_name()));

  Header header;
  std::vector<TensorEntry>& entries = header.entries;
  for (const auto& [key, value] : json.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) bad(source, "__metadata__ must be an object of strings, got " + value.dump());
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad(source, "__metadata__ value of '" + mk + "' must be a string, got " + mv.dump());
        header.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(source, key, value, data_size));
  }

  // The tensors must tile the data buffer exactly.
  std::stable_sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (const TensorEntry& e : entries) {
    if (e.begin > cursor)
      bad(source, "gap of " + std::to_string(e.begin - cursor) + " bytes before tensor '" + e.name + "' at offset " +
                      std::to_string(cursor));
    if (e.begin < cursor)
      bad(source, "tensor '" + e.name + "' at [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                      "] overlaps the previous tensor, which ends at " + std::to_string(cursor));
    cursor = e.end;
  }
  if (cursor != data_size)
    bad(source, std::to_string(data_size - cursor) + " bytes of data after the last tensor (data is " +
                    std::to_string(data_size) + " bytes, tensors cover " + std::to_string(cursor) + ")");
  return header;
}

SafetensorsData tensors_of(Header header, const char* data) {
  SafetensorsData out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.entries.size());
  for (const TensorEntry& e : header.entries) out.tensors.emplace_back(e.name, to_tensor(e, data));
  return out;
}

}  // namespace

SafetensorsData decode_safetensors(const std::string& bytes, const std::string& source) {
  const uint64_t n = header_length(bytes.substr(0, 8), bytes.size(), source);
  const uint64_t data_size = bytes.size() - 8 - n;
  return tensors_of(parse_header(bytes.substr(8, n), data_size, source), bytes.data() + 8 + n);
}

void save_safetensors(const std::string& path, const TensorRefs& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata));
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  TensorRefs refs;
  refs.reserve(tensors.size());
  for (const auto& [name, t] : tensors) refs.emplace_back(name, &t);
  save_safetensors(path, refs, metadata);
}

SafetensorsData load_safetensors(const std::string& path) {
  // The header's sizes are checked against the file's before its data is read,
  // so a header that claims more than the file holds allocates nothing.
  try {
    InputFile file(path);
    const uint64_t size = file.size();
    const uint64_t n = header_length(size < 8 ? std::string() : file.read(8), size, path);
    Header header = parse_header(file.read(n), size - 8 - n, path);
    const std::string data = file.read(size - 8 - n);
    if (!file.read_rest().empty()) file.fail("it grew while it was read");
    return tensors_of(std::move(header), data.data());
  } catch (const IoError& e) {
    const std::string what = e.what();
    if (what.rfind("safetensors", 0) == 0) throw;
    throw IoError("safetensors " + what);
  }
}

}  // namespace attnlab
