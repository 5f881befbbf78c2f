#include "framework/io/checkpoint.h"

#include <cstring>
#include <iomanip>
#include <sstream>

#include "framework/io/safetensors.h"

namespace attnlab {
namespace {

// FNV-1a 64 over each tensor's name, shape and float32 values, in order.
std::string checksum(const TensorRefs& tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (const auto& [name, t] : tensors) {
    mix(name.data(), name.size());
    for (int64_t s : t->shape()) mix(&s, sizeof s);
    for (int64_t i = 0; i < t->numel(); ++i) {
      float v = static_cast<float>((*t)[i]);
      mix(&v, sizeof v);
    }
  }
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << h;
  return out.str();
}

// FNV-1a 64 over every metadata key and value but its own, so that a flipped
// byte in the header's strings (a step, a generator state) is caught too.
constexpr const char* kMetadataChecksum = "metadata_checksum";
std::string metadata_checksum(const Metadata& metadata) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // a separator no UTF-8 string contains
  };
  for (const auto& [key, value] : metadata)
    if (key != kMetadataChecksum) {
      mix(key);
      mix(value);
    }
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << h;
  return out.str();
}

void write(const std::string& path, const TensorRefs& tensors, Metadata metadata, const char* kind) {
  metadata["format"] = kCheckpointFormat;
  metadata["format_version"] = std::to_string(kCheckpointVersion);
  metadata["kind"] = kind;
  metadata["checksum"] = checksum(tensors);
  metadata[kMetadataChecksum] = metadata_checksum(metadata);
  save_safetensors(path, tensors, metadata);
}

std::string meta(const Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) throw IoError(path + ": not an attnlab checkpoint (no '" + key + "' in its metadata)");
  return it->second;
}

// Loads and checks one file: format, version, kind, checksum.
SafetensorsData read_checked(const std::string& path, const char* kind) {
  SafetensorsData data = load_safetensors(path);
  if (meta(data.metadata, "format", path) != kCheckpointFormat)
    throw IoError(path + ": not an attnlab checkpoint (format '" + data.metadata["format"] + "')");
  std::string version = meta(data.metadata, "format_version", path);
  if (version != std::to_string(kCheckpointVersion))
    throw IoError(path + ": checkpoint format version " + version + ", this attnlab reads version " +
                  std::to_string(kCheckpointVersion));
  // After format and version (which say how to read the rest), before anything else.
  if (meta(data.metadata, kMetadataChecksum, path) != metadata_checksum(data.metadata))
    throw IoError(path + ": metadata checksum mismatch: the metadata (step, config, generator states) is corrupt");
  if (meta(data.metadata, "kind", path) != kind)
    throw IoError(path + ": holds " + (data.metadata["kind"] == "optimizer" ? "an " : "a ") + data.metadata["kind"] +
                  " checkpoint, expected " + (std::string(kind) == "optimizer" ? "an " : "a ") + kind + " checkpoint");
  TensorRefs refs;
  for (const auto& [name, t] : data.tensors) refs.emplace_back(name, &t);
  if (checksum(refs) != meta(data.metadata, "checksum", path))
    throw IoError(path + ": checksum mismatch: the tensor data is corrupt");
  return data;
}

}  // namespace

std::string model_path(const std::string& stem) { return stem + ".safetensors"; }
std::string optimizer_path(const std::string& stem) { return stem + ".optim.safetensors"; }

namespace {

void write_checkpoint(const std::string& stem, const Module& model, const NamedTensors* optimizer_state,
                      const Metadata& metadata) {
  if (optimizer_state) {
    const NamedTensors& state = *optimizer_state;
    TensorRefs refs;
    for (const auto& [name, t] : state) refs.emplace_back(name, &t);
    write(optimizer_path(stem), refs, metadata, "optimizer");
  }
  auto params = model.named_parameters();
  TensorRefs refs;
  for (const auto& [name, v] : params) refs.emplace_back(name, &v.value());
  write(model_path(stem), refs, metadata, "model");
}

}  // namespace

void save_checkpoint(const std::string& stem, const Module& model, const Optimizer* optimizer, const Metadata& metadata) {
  const NamedTensors state = optimizer ? optimizer->state() : NamedTensors{};
  write_checkpoint(stem, model, optimizer ? &state : nullptr, metadata);
}

void save_checkpoint(const std::string& stem, const Module& model, const NamedTensors& optimizer_state,
                     const Metadata& metadata) {
  write_checkpoint(stem, model, &optimizer_state, metadata);
}

Metadata read_checkpoint_metadata(const std::string& stem) { return read_checked(model_path(stem), "model").metadata; }

Metadata load_checkpoint(const std::string& stem, Module& model, Optimizer* optimizer) {
  const std::string path = model_path(stem);
  SafetensorsData weights = read_checked(path, "model");
  auto params = model.named_parameters();
  for (const auto& [name, v] : params) {
    const Tensor* t = weights.find(name);
    if (!t) throw IoError(path + ": no tensor '" + name + "': the checkpoint is of a different model");
    if (t->shape() != v.shape())
      throw IoError(path + ": tensor '" + name + "' has shape " + t->shape_str() + ", the model's is " +
                    v.value().shape_str() + ": the checkpoint is of a different model");
  }
  if (weights.tensors.size() != params.size())
    throw IoError(path + ": holds " + std::to_string(weights.tensors.size()) + " tensors, the model has " +
                  std::to_string(params.size()) + ": the checkpoint is of a different model");
  NamedTensors optimizer_state;
  if (optimizer) {
    SafetensorsData state = read_checked(optimizer_path(stem), "optimizer");
    optimizer_state = std::move(state.tensors);
    // load_state validates every entry before changing anything; run it
    // before touching the model so a bad optimizer file changes nothing.
    optimizer->load_state(optimizer_state);
  }
  for (auto& [name, v] : params) v.value() = *weights.find(name);
  return weights.metadata;
}

}  // namespace attnlab
