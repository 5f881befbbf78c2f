#include "models/decoder_lm.h"


namespace attnlab {

DecoderLM::DecoderLM(const TransformerConfig& config, uint64_t seed) : SequenceModel(config, seed) {
  if (config_.arch != Arch::decoder) throw ValueError("DecoderLM needs arch 'decoder', got '" + name_of(config_.arch) + "'");
  build_embeddings();
  auto list = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    blocks_.push_back(list->add(std::to_string(i), std::make_shared<DecoderBlock>(config_, false, init_rng_,
                                                                                  dropout_rng_)));
  }
  if (config_.norm == Norm::pre) ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config_.d_model));
  build_head();
  declare_stack_hooks("", blocks_, true);
}

Var DecoderLM::forward(const ModelInput& input) {
  check_sequence(input.tgt_in, input.tgt_pad, "decoder input tgt_in");
  return run_blocks(input, 0, hooked("embed", embed_at(input.tgt_in, positions_for(input.tgt_in, input.tgt_pad, input.tgt_pos))));
}

Var DecoderLM::forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                       const Var&) {
  check_start(stack, block, {""});
  check_sequence(input.tgt_in, input.tgt_pad, "decoder input tgt_in");
  return run_blocks(input, static_cast<size_t>(block), resid_pre);
}

Var DecoderLM::run_blocks(const ModelInput& input, size_t first, Var h) const {
  const Tensor* pad = pad_or_null(input.tgt_pad);
  for (size_t i = first; i < blocks_.size(); ++i) h = blocks_[i]->forward(h, pad);  // (B, T, d)
  h = norm_or_identity(ln_f_.get(), h);
  return hooked("logits", head_logits(hooked("ln_final", std::move(h))));  // (B, T, V)
}

std::vector<std::vector<int32_t>> DecoderLM::decoding_prompts(const std::vector<std::vector<int32_t>>& sources) const {
  const bool bare = config_.layout == Layout::bare;
  std::vector<std::vector<int32_t>> seqs(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    if (bare && sources[i].empty())
      throw ValueError("source " + std::to_string(i) +
                       " is empty: a decoder with layout 'bare' predicts the answer from the input's last token");
    if (!bare) seqs[i].push_back(SpecialTokens::bos);
    seqs[i].insert(seqs[i].end(), sources[i].begin(), sources[i].end());
    if (!bare) seqs[i].push_back(SpecialTokens::sep);
    check_length(seqs[i].size(), ((bare ? "prompt src of source " : "prompt [bos] src [sep] of source ") +
                                  std::to_string(i)).c_str());
  }
  return seqs;
}

}  // namespace attnlab
