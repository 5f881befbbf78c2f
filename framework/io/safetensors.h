#pragma once
// The safetensors checkpoint format, read and written without dependencies:
//   8 bytes  N, the header length, unsigned little-endian
//   N bytes  a JSON object: "<name>": {"dtype": "F32", "shape": [...],
//            "data_offsets": [begin, end]} per tensor, and optionally
//            "__metadata__": {string: string}; padded with spaces so the data
//            starts 8-byte aligned
//   the data: each tensor row-major, little-endian, at [begin, end) of this
//            buffer; together they cover it exactly, without gaps or overlaps.
// Files written here are F32 (converted from Real), tensors in the order
// given. The reader accepts F32 and F64 and converts to Real.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/tensor.h"

namespace attnlab {

using TensorRefs = std::vector<std::pair<std::string, const Tensor*>>;

struct SafetensorsData {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;
  // The tensor of this name, or nullptr.
  const Tensor* find(const std::string& name) const;
};

// The file's bytes. ValueError for an empty, repeated or reserved
// ("__metadata__") name, a null tensor, or a name/metadata string that is
// not valid UTF-8.
std::string encode_safetensors(const TensorRefs& tensors, const std::map<std::string, std::string>& metadata = {});
// Parses and validates the bytes; IoError naming `source` and the problem:
// fewer than 8 bytes, a header length beyond the end, invalid JSON, a
// malformed entry, an unsupported dtype, offsets outside the data or not
// matching the shape, gaps, overlaps, trailing bytes.
SafetensorsData decode_safetensors(const std::string& bytes, const std::string& source);

// encode_safetensors written with write_file_atomic.
void save_safetensors(const std::string& path, const TensorRefs& tensors,
                      const std::map<std::string, std::string>& metadata = {});
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// read_file + decode_safetensors; IoError also for a missing file.
SafetensorsData load_safetensors(const std::string& path);

}  // namespace attnlab
