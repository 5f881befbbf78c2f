#pragma once
// Checkpoints: a model's weights and an optimizer's state as two safetensors
// files, <stem>.safetensors (weights under their dotted names, loadable by
// any safetensors reader) and <stem>.optim.safetensors.
//
// Each file's metadata carries "format" = "attnlab-checkpoint",
// "format_version", "kind" (model | optimizer), a checksum of the tensor data
// (FNV-1a 64 over names, shapes and float32 values), whatever the caller
// adds (config, step, generator states), and "metadata_checksum" over all of
// that (version 2; version 1 files had none and are refused). Files are written atomically,
// optimizer first, so a model file always has its optimizer state beside it.
#include <map>
#include <string>

#include "framework/nn/module.h"
#include "framework/optim/optimizer.h"

namespace attnlab {

using Metadata = std::map<std::string, std::string>;
constexpr const char* kCheckpointFormat = "attnlab-checkpoint";
constexpr int kCheckpointVersion = 2;

std::string model_path(const std::string& stem);      // <stem>.safetensors
std::string optimizer_path(const std::string& stem);  // <stem>.optim.safetensors

// Writes both files (the optimizer's only when one is given).
void save_checkpoint(const std::string& stem, const Module& model, const Optimizer* optimizer, const Metadata& metadata);
// The same with an optimizer's state given (a sharded optimizer's, gathered).
void save_checkpoint(const std::string& stem, const Module& model, const NamedTensors& optimizer_state,
                     const Metadata& metadata);

// Loads the weights into `model` (and the state into `optimizer` if given)
// and returns the model file's metadata. Everything is read and checked
// before anything is changed: on any problem (missing, truncated or corrupt
// file, wrong format or version, checksum mismatch, a missing, extra or
// differently shaped tensor) IoError or ValueError names the file and what is
// wrong, and model and optimizer are left as they were.
Metadata load_checkpoint(const std::string& stem, Module& model, Optimizer* optimizer);

// Reads only the model file's metadata (validated format and version).
Metadata read_checkpoint_metadata(const std::string& stem);

}  // namespace attnlab
