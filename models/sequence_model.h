#pragma once
// SequenceModel: what the CLI, the trainer and the instruments see of a model.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "framework/nn/hook_points.h"
#include "framework/nn/module.h"
#include "framework/random.h"
#include "models/config.h"

namespace attnlab {

class DecoderBlock;
class LayerNorm;
class Embedding;
class LearnedPositional;
class SinusoidalPositional;
class Dropout;
class TokenHead;

// Token ids the models rely on (the same as datasets/vocab.h; models do not
// depend on datasets, so they name them here).
struct SpecialTokens {
  static constexpr int32_t pad = 0;
  static constexpr int32_t bos = 1;
  static constexpr int32_t eos = 2;
  static constexpr int32_t sep = 3;
  static constexpr int32_t count = 4;  // the first id of a task symbol
};

// One batch as the models read it. Pads are (B, T) with 1 = padding; a field
// the architecture does not use stays empty.
struct ModelInput {
  IntTensor src;     // (B, T_src): encoder input (encoder, seq2seq)
  Tensor src_pad;    // (B, T_src)
  IntTensor tgt_in;  // (B, T_tgt): decoder input (decoder, seq2seq)
  Tensor tgt_pad;    // (B, T_tgt)
  // Position ids of the tokens, (B, T_src) and (B, T_tgt), each in [0, max_len).
  // Empty (the default): 0..T-1, or with config.random_positions = P a sorted
  // random subset of [0, P) per sequence in training and an even spread over
  // [0, P) in evaluation (models/positions.h).
  IntTensor src_pos;
  IntTensor tgt_pos;
};

// The logits row (V) behind each token decoding chose, eos included, per
// sequence: the tests compare the cached and the uncached path by it.
using DecodeLogits = std::vector<std::vector<std::vector<Real>>>;

// Picks the next token from its logits row (V); it is called once per token
// chosen (so it may also draw from a generator, or print), a sequence's
// tokens in order. Across a batch, cached steps go by position and uncached
// ones by token, so with prompts of different lengths the calls interleave
// differently.
using TokenChooser = std::function<int32_t(const Real* logits, int64_t V)>;

struct DecodeOptions {
  // true: one position per step for every sequence, prompt included, over
  // cached keys and values (models/kv_cache.h); false: a full forward over
  // the whole prefix for every token, the reference the cached path is
  // tested against. With any hook set, decoding is uncached (forwards only
  // pass the hook points).
  bool cached = true;
  TokenChooser choose;             // null: the argmax (the first on ties)
  DecodeLogits* logits = nullptr;  // receives each chosen token's logits row
  // false: the model's prompt of each source (greedy's); true: the decoder
  // reads each source as it is, the text a language model continues.
  bool raw_prompts = false;
};

class SequenceModel : public Module {
 public:
  // Logits (B, T_out, V): T_out = T_src for the encoder, T_tgt otherwise.
  // Throws ShapeError for inconsistent inputs and ValueError for a sequence
  // longer than max_len.
  virtual Var forward(const ModelInput& input) = 0;

  // forward(input) from the input of one block on, the blocks before it not
  // run (ablation reuses them: interventions/ablation.h). resid_pre (B, T, d)
  // is that block's input as forward(input) computes it (the hook point
  // <stack>blocks.<block>.resid_pre); the rest of its stack, the stack's
  // final norm and the head run as forward runs them (after a seq2seq
  // encoder stack: the whole decoder), so the logits are forward(input)'s
  // bitwise. stack: "" (encoder, decoder), "encoder." or "decoder."
  // (seq2seq), whose blocks read `memory` (B, T_src, d), the encoder's
  // output (encoder.ln_final), in place of encoding input.src. The hook
  // points before the block are not passed. ValueError for a block the model
  // does not have.
  virtual Var forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                           const Var& memory = Var()) = 0;

  // Greedy decoding in eval mode without recording a graph (the previous
  // train/eval mode is restored). encoder: the argmax at every input position;
  // decoder: continues [bos] src [sep]; seq2seq: decodes from [bos] given src.
  // Generation stops at eos (not included in the result), after
  // max_new_tokens[i] tokens for source i (its budget: one per source, or one
  // for all), or when the decoder input would exceed max_len. The budget is
  // also the plan the positions are decided on (decoding_positions in
  // models/positions.h: prompt + budget - 1 positions), so with random
  // positions a source's answer depends on its budget, never on the others'.
  // Decoders: generate(sources, max_new_tokens), KV-cached.
  virtual std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& sources,
                                                   const std::vector<int64_t>& max_new_tokens) {
    return generate(sources, max_new_tokens);
  }
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& sources, int64_t max_new_tokens) {
    return greedy(sources, std::vector<int64_t>(sources.size(), max_new_tokens));
  }

  // Decoding as greedy describes it, for the decoder and seq2seq (ValueError
  // for the encoder), each token chosen by options.choose (models/decoding.cpp).
  std::vector<std::vector<int32_t>> generate(const std::vector<std::vector<int32_t>>& sources,
                                             const std::vector<int64_t>& max_new_tokens,
                                             const DecodeOptions& options = {});
  // Greedy decoding by one path, with each chosen token's logits.
  std::vector<std::vector<int32_t>> greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                  const std::vector<int64_t>& max_new_tokens,
                                                  DecodeLogits* logits = nullptr);
  std::vector<std::vector<int32_t>> greedy_uncached(const std::vector<std::vector<int32_t>>& sources,
                                                    const std::vector<int64_t>& max_new_tokens,
                                                    DecodeLogits* logits = nullptr);
  // The same budget for every source.
  std::vector<std::vector<int32_t>> greedy_cached(const std::vector<std::vector<int32_t>>& sources,
                                                  int64_t max_new_tokens, DecodeLogits* logits = nullptr) {
    return greedy_cached(sources, std::vector<int64_t>(sources.size(), max_new_tokens), logits);
  }
  std::vector<std::vector<int32_t>> greedy_uncached(const std::vector<std::vector<int32_t>>& sources,
                                                    int64_t max_new_tokens, DecodeLogits* logits = nullptr) {
    return greedy_uncached(sources, std::vector<int64_t>(sources.size(), max_new_tokens), logits);
  }

  const TransformerConfig& config() const { return config_; }
  // The generator of every dropout mask (saved in checkpoints so a resumed run is bitwise the same).
  Rng& dropout_rng() { return dropout_rng_; }
  // The seam: every activation forward passes, by name in forward order
  // (docs/hooks.md), to observe or replace. Cached decoding steps pass none.
  HookTable& hooks() { return hooks_; }
  const HookTable& hooks() const { return hooks_; }
  // The residual stream's hook points: each stack's embed, then each of its
  // blocks' resid_post (encoder first).
  std::vector<std::string> residual_stream_points() const;

 protected:
  // Validates the config (ValueError) and seeds the generators: initial
  // weights from Rng(seed), dropout masks from a stream derived from it.
  SequenceModel(const TransformerConfig& config, uint64_t seed);

  // The shared front of every shape, registered first: tok_emb, pos_emb
  // (a parameter only when learned) and the embedding dropout.
  void build_embeddings();
  // Registers `head` (call last, so it comes last in the parameter order).
  void build_head();
  // ids (B, T) -> tok_emb(ids) + positions offset..offset+T-1, with dropout: (B, T, d).
  Var embed(const IntTensor& ids, int64_t offset = 0) const;
  // The same with the table rows `positions` (B, T); empty positions: embed(ids, 0).
  // (models/sequence_positions.cpp holds these position members.)
  Var embed_at(const IntTensor& ids, const IntTensor& positions) const;
  // The position ids a forward over ids (B, T) uses: `given` when not empty
  // (checked: (B, T), in [0, max_len)); else with random positions on, a random
  // subset per row drawn from dropout_rng_ in training and spread_position_ids
  // in evaluation, over each row's real length (pad); else empty (0..T-1).
  IntTensor positions_for(const IntTensor& ids, const Tensor& pad, const IntTensor& given);
  // Random positions on: each sequence's decoding_positions (models/positions.h)
  // for a prompt of lengths[i] tokens and budgets[i] - 1 answer tokens (the
  // last token emitted is never read). Off: empty (positions 0, 1, ...).
  std::vector<std::vector<int32_t>> decode_positions(const std::vector<size_t>& lengths,
                                                     const std::vector<int64_t>& budgets) const;
  // ValueError unless there is one budget per source.
  static void check_budgets(size_t sources, const std::vector<int64_t>& budgets);
  // config.random_positions (0 = off).
  int64_t random_positions() const;
  Var head_logits(const Var& h) const;  // (B, T, d) -> (B, T, V)
  // Checks ids (B, T) with 1 <= T <= max_len and pad empty or (B, T).
  void check_sequence(const IntTensor& ids, const Tensor& pad, const char* what) const;
  void check_length(size_t length, const char* what) const;  // length <= max_len
  // ValueError unless stack is one of `stacks` and 0 <= block < n_layers (forward_from).
  void check_start(const std::string& stack, int64_t block, const std::vector<std::string>& stacks) const;
  static const Tensor* pad_or_null(const Tensor& pad) { return pad.numel() > 0 ? &pad : nullptr; }
  // What a decoder supplies to generate(). The prompt of each source (checked
  // against max_len): decoder [bos] src [sep] (bare: src), seq2seq [bos].
  virtual std::vector<std::vector<int32_t>> decoding_prompts(const std::vector<std::vector<int32_t>>& sources) const;
  // The stack a cached step runs: its blocks and final norm (null: none).
  struct DecoderStack {
    const std::vector<std::shared_ptr<DecoderBlock>>* blocks = nullptr;
    LayerNorm* ln_f = nullptr;
  };
  virtual DecoderStack decoder_stack() const;
  // seq2seq: the encoder memory (B, T_src, d) of the sources, padded into
  // src_pad; others: undefined.
  virtual Var decoding_memory(const std::vector<std::vector<int32_t>>& sources, Tensor& src_pad) {
    (void)sources;
    (void)src_pad;
    return Var();
  }

  // v through the hook point `name` (a model-level point: embed, ln_final, logits).
  Var hooked(const char* name, Var v) const {
    if (!hooks_.empty()) hooks_.pass(name, v);
    return v;
  }
  // Declares the model-level points around a stack: prefix + "embed" before
  // its blocks' points (attach_hooks under prefix + "blocks.N."), prefix +
  // "ln_final" after them, and with logits "logits" last.
  template <class Block>
  void declare_stack_hooks(const std::string& prefix, const std::vector<std::shared_ptr<Block>>& blocks, bool logits) {
    hooks_.declare(prefix + "embed", "B, T, d");
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i]->attach_hooks(hooks_, prefix + "blocks." + std::to_string(i) + ".");
    hooks_.declare(prefix + "ln_final", "B, T, d");
    if (logits) hooks_.declare("logits", "B, T, V");
  }

  TransformerConfig config_;
  Rng init_rng_;     // draws every initial parameter, in registration order
  Rng dropout_rng_;  // shared by every Dropout of the model (its address must not change)
  std::shared_ptr<Embedding> tok_emb_;
  std::shared_ptr<LearnedPositional> learned_pos_;    // positional == "learned"
  std::shared_ptr<SinusoidalPositional> sin_pos_;     // positional == "sinusoidal"
  std::shared_ptr<Dropout> emb_dropout_;
  std::shared_ptr<TokenHead> head_;
  HookTable hooks_;

 private:
  struct Decoding;  // models/decoding.cpp
  void decode_cached(const std::vector<std::vector<int32_t>>& sources, Decoding& d);
  void decode_uncached(const std::vector<std::vector<int32_t>>& sources, Decoding& d);
};

// While alive: eval mode and no graph recording; restores the previous mode.
class InferenceGuard {
 public:
  explicit InferenceGuard(Module& m) : module_(m), was_training_(m.training()) { m.eval(); }
  ~InferenceGuard() { module_.train(was_training_); }
  InferenceGuard(const InferenceGuard&) = delete;
  InferenceGuard& operator=(const InferenceGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
  NoGradGuard no_grad_;
};

// Builds the model of config.arch; every parameter is drawn from one Rng(seed)
// in registration order. Throws ValueError for an invalid config.
std::unique_ptr<SequenceModel> make_model(const TransformerConfig& config, uint64_t seed);

}  // namespace attnlab
