#pragma once
// How `attnlab attention` runs a trained model on one input and describes its
// attention layers (cli/attention_maps.cpp), shared with `attnlab report`.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/load_run.h"
#include "framework/nn/multi_head_attention.h"
#include "models/batch.h"

namespace attnlab::cli {

using OutputFiles = std::vector<std::pair<std::string, std::string>>;  // (name, content)

// The tokens of `ids` as the task writes each one.
std::vector<std::string> token_texts(const Task& task, const IntTensor& ids);

// What the model reads for the maps, and its answer.
struct Reading {
  std::vector<int32_t> input, output;
  FormattedBatch batch;
};

// Sequence tasks: the input, teacher-forced on the model's greedy answer.
Reading read_sequence_task(const LoadedRun& loaded, const std::string& text);
// Language models: the input text (at most the training context); the answer
// is the most likely next character.
Reading read_text(const LoadedRun& loaded, const std::string& text);

// The model's attention layers (dotted names) in forward order, each with its
// weights (1, h, T_q, T_k) for `batch` (its hook point NAME.pattern), read in
// inference mode.
std::vector<std::pair<std::string, Tensor>> capture_attention(SequenceModel& model, const FormattedBatch& batch);

// One layer's description (name, heads, queries, keys, causal, files) from its
// weights w (1, h, T_q, T_k); one CSV matrix per head into `files`.
nlohmann::json layer_maps(const std::string& name, const Tensor& w, BatchFormat format,
                          const std::vector<std::string>& src, const std::vector<std::string>& tgt, OutputFiles& files);

}  // namespace attnlab::cli
