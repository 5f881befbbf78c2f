#include "models/sequence_model.h"

#include "framework/nn/nn.h"
#include "framework/ops/elementwise.h"
#include "models/blocks.h"
#include "models/decoder_lm.h"
#include "models/encoder_decoder.h"
#include "models/encoder_tagger.h"
#include "models/init.h"

namespace attnlab {

namespace {

const TransformerConfig& validated(const TransformerConfig& c) {
  c.validate();
  return c;
}

// Dropout masks come from their own stream, so turning dropout on or off
// never changes the initial weights.
constexpr uint64_t kDropoutStream = 0x9E3779B97F4A7C15ull;
// The GPT-2 scheme redraws the built model from a stream of its own.
constexpr uint64_t kGpt2InitStream = 0xC2B2AE3D27D4EB4Full;

}  // namespace

SequenceModel::SequenceModel(const TransformerConfig& config, uint64_t seed)
    : config_(validated(config)), init_rng_(seed), dropout_rng_(seed ^ kDropoutStream) {}

void SequenceModel::build_embeddings() {
  const TransformerConfig& c = config_;
  tok_emb_ = register_module("tok_emb", std::make_shared<Embedding>(c.vocab_size, c.d_model, init_rng_));
  if (c.positional == Positional::learned)
    learned_pos_ = register_module("pos_emb", std::make_shared<LearnedPositional>(c.max_len, c.d_model, init_rng_));
  else if (c.positional == Positional::sinusoidal)
    sin_pos_ = std::make_shared<SinusoidalPositional>(c.max_len, c.d_model);  // a constant, not a parameter
  emb_dropout_ = register_module("emb_dropout", std::make_shared<Dropout>(static_cast<Real>(c.dropout), dropout_rng_));
}

void SequenceModel::build_head() {
  head_ = register_module("head",
                          std::make_shared<TokenHead>(config_.d_model, config_.vocab_size, config_.tie_embeddings,
                                                      init_rng_, !config_.no_bias));
}

Var SequenceModel::embed(const IntTensor& ids, int64_t offset) const {
  const int64_t t = ids.shape[1];
  Var h = tok_emb_->forward(ids);                                 // (B, T, d)
  if (learned_pos_) h = h + learned_pos_->forward(t, offset);     // + (T, d), broadcast over B
  else if (sin_pos_) h = h + sin_pos_->forward(t, offset);
  return emb_dropout_->forward(h);
}

std::vector<std::string> SequenceModel::residual_stream_points() const {
  std::vector<std::string> points;
  const std::string post = ".resid_post";
  for (const std::string& name : hooks_.names()) {
    const bool embed = name == "embed" || name == "encoder.embed" || name == "decoder.embed";
    const bool block_out = name.size() > post.size() && name.compare(name.size() - post.size(), post.size(), post) == 0;
    if (embed || block_out) points.push_back(name);
  }
  return points;
}

Var SequenceModel::head_logits(const Var& h) const { return head_->forward(h, tok_emb_->weight); }

void SequenceModel::check_length(size_t length, const char* what) const {
  if (static_cast<int64_t>(length) > config_.max_len)
    throw ValueError(std::string(what) + " has length " + std::to_string(length) + ", longer than max_len = " +
                     std::to_string(config_.max_len));
}

void SequenceModel::check_start(const std::string& stack, int64_t block, const std::vector<std::string>& stacks) const {
  if (std::find(stacks.begin(), stacks.end(), stack) == stacks.end() || block < 0 || block >= config_.n_layers)
    throw ValueError("forward_from: this model has no block '" + stack + "blocks." + std::to_string(block) +
                     "' (blocks 0-" + std::to_string(config_.n_layers - 1) + ")");
}

void SequenceModel::check_sequence(const IntTensor& ids, const Tensor& pad, const char* what) const {
  if (ids.shape.size() != 2 || ids.shape[0] < 1 || ids.shape[1] < 1)
    throw ShapeError(std::string(what) + ": expected token ids of shape (B, T) with B, T >= 1, got " +
                     shape_str(ids.shape));
  check_length(static_cast<size_t>(ids.shape[1]), what);
  if (pad.numel() > 0) check_shape(pad.shape(), ids.shape, std::string(what) + " padding mask");
}

std::unique_ptr<SequenceModel> make_model(const TransformerConfig& requested, uint64_t seed) {
  requested.validate();
  TransformerConfig config = requested;  // the model (and so its checkpoints) records the scheme it was built with
  config.init = resolved_init(requested);
  std::unique_ptr<SequenceModel> model;
  if (config.arch == Arch::encoder) model = std::make_unique<EncoderTagger>(config, seed);
  else if (config.arch == Arch::decoder) model = std::make_unique<DecoderLM>(config, seed);
  else model = std::make_unique<EncoderDecoder>(config, seed);
  if (config.init == InitScheme::gpt2) {
    Rng rng(seed ^ kGpt2InitStream);
    apply_gpt2_init(*model, config, rng);
  }
  return model;
}

}  // namespace attnlab
