#include "models/decoder_lm.h"

#include <utility>

#include "models/batch.h"

namespace attnlab {

DecoderLM::DecoderLM(const TransformerConfig& config, uint64_t seed) : SequenceModel(config, seed) {
  if (config_.arch != "decoder") throw ValueError("DecoderLM needs arch 'decoder', got '" + config_.arch + "'");
  build_embeddings();
  auto list = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    blocks_.push_back(list->add(std::to_string(i), std::make_shared<DecoderBlock>(config_, false, init_rng_,
                                                                                  dropout_rng_)));
    attention_layers_.push_back(blocks_.back()->self_attn.get());
  }
  if (config_.norm == "pre") ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(config_.d_model));
  build_head();
}

Var DecoderLM::forward(const ModelInput& input) {
  check_sequence(input.tgt_in, input.tgt_pad, "decoder input tgt_in");
  const Tensor* pad = pad_or_null(input.tgt_pad);
  Var h = observed(embed(input.tgt_in));  // (B, T, d)
  for (auto& block : blocks_) h = observed(block->forward(h, pad));
  if (ln_f_) h = ln_f_->forward(h);
  return head_logits(h);  // (B, T, V)
}

std::vector<std::vector<int32_t>> DecoderLM::greedy(const std::vector<std::vector<int32_t>>& sources,
                                                    int64_t max_new_tokens) {
  const size_t n = sources.size();
  std::vector<std::vector<int32_t>> out(n);
  std::vector<std::vector<int32_t>> seqs(n);  // what the model reads: [bos] src [sep] generated...
  for (size_t i = 0; i < n; ++i) {
    seqs[i].push_back(SpecialTokens::bos);
    seqs[i].insert(seqs[i].end(), sources[i].begin(), sources[i].end());
    seqs[i].push_back(SpecialTokens::sep);
    check_length(seqs[i].size(), ("prompt [bos] src [sep] of source " + std::to_string(i)).c_str());
  }
  InferenceGuard guard(*this);
  std::vector<bool> done(n, max_new_tokens <= 0);
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    // Every unfinished sequence, right-padded: causal attention keeps a
    // position blind to the padding after it, so the batch changes nothing.
    std::vector<size_t> active;
    std::vector<std::vector<int32_t>> batch;
    for (size_t i = 0; i < n; ++i)
      if (!done[i]) {
        active.push_back(i);
        batch.push_back(seqs[i]);
      }
    if (active.empty()) break;
    ModelInput in;
    pad_sequences(batch, in.tgt_in, in.tgt_pad);
    Var logits = forward(in);  // (B', T, V)
    const int64_t t_len = logits.size(1);
    ConstMatMap rows = std::as_const(logits).value().matrix();
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      Eigen::Index best = 0;
      rows.row(static_cast<int64_t>(a) * t_len + static_cast<int64_t>(seqs[i].size()) - 1).maxCoeff(&best);
      const int32_t token = static_cast<int32_t>(best);
      if (token == SpecialTokens::eos) {
        done[i] = true;
        continue;
      }
      out[i].push_back(token);
      seqs[i].push_back(token);
      // The next step would read more positions than the model has.
      if (static_cast<int64_t>(out[i].size()) >= max_new_tokens ||
          static_cast<int64_t>(seqs[i].size()) > config_.max_len)
        done[i] = true;
    }
  }
  return out;
}

}  // namespace attnlab
