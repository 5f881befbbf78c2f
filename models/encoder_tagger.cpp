#include "models/encoder_tagger.h"

#include <utility>

#include "models/batch.h"

namespace attnlab {

EncoderTagger::EncoderTagger(const TransformerConfig& config, uint64_t seed) : SequenceModel(config, seed) {
  if (config_.arch != Arch::encoder)
    throw ValueError("EncoderTagger needs arch 'encoder', got '" + name_of(config_.arch) + "'");
  build_embeddings();
  auto list = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    blocks_.push_back(list->add(std::to_string(i), std::make_shared<EncoderBlock>(config_, init_rng_, dropout_rng_)));
  }
  if (config_.norm == Norm::pre) ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config_.d_model));
  build_head();
  declare_stack_hooks("", blocks_, true);
}

Var EncoderTagger::forward(const ModelInput& input) {
  check_sequence(input.src, input.src_pad, "encoder input src");
  return run_blocks(input, 0, hooked("embed", embed_at(input.src, positions_for(input.src, input.src_pad, input.src_pos))));
}

Var EncoderTagger::forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                       const Var&) {
  check_start(stack, block, {""});
  check_sequence(input.src, input.src_pad, "encoder input src");
  return run_blocks(input, static_cast<size_t>(block), resid_pre);
}

Var EncoderTagger::run_blocks(const ModelInput& input, size_t first, Var h) const {
  const Tensor* pad = pad_or_null(input.src_pad);
  for (size_t i = first; i < blocks_.size(); ++i) h = blocks_[i]->forward(h, pad);  // (B, T, d)
  h = norm_or_identity(ln_f_.get(), h);
  return hooked("logits", head_logits(hooked("ln_final", std::move(h))));  // (B, T, V)
}

std::vector<std::vector<int32_t>> EncoderTagger::greedy(const std::vector<std::vector<int32_t>>& sources,
                                                        const std::vector<int64_t>& max_new_tokens) {
  check_budgets(sources.size(), max_new_tokens);
  std::vector<std::vector<int32_t>> out(sources.size());
  if (sources.empty()) return out;
  for (size_t i = 0; i < sources.size(); ++i) check_length(sources[i].size(), ("source " + std::to_string(i)).c_str());
  InferenceGuard guard(*this);
  ModelInput in;
  pad_sequences(sources, in.src, in.src_pad);
  Var logits = forward(in);  // (B, T, V)
  const int64_t t_len = logits.size(1);
  ConstMatMap rows = std::as_const(logits).value().matrix();  // (B·T, V)
  for (size_t i = 0; i < sources.size(); ++i)
    for (size_t t = 0; t < sources[i].size(); ++t) {
      Eigen::Index best = 0;
      rows.row(static_cast<int64_t>(i) * t_len + static_cast<int64_t>(t)).maxCoeff(&best);
      out[i].push_back(static_cast<int32_t>(best));
    }
  return out;
}

}  // namespace attnlab
