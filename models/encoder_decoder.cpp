#include "models/encoder_decoder.h"

#include "models/batch.h"

namespace attnlab {

EncoderDecoder::EncoderDecoder(const TransformerConfig& config, uint64_t seed) : SequenceModel(config, seed) {
  if (config_.arch != Arch::seq2seq)
    throw ValueError("EncoderDecoder needs arch 'seq2seq', got '" + name_of(config_.arch) + "'");
  build_embeddings();
  const bool pre = config_.norm == Norm::pre;

  auto encoder = register_module("encoder", std::make_shared<ModuleList>());
  auto enc_list = encoder->add("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    encoder_blocks_.push_back(
        enc_list->add(std::to_string(i), std::make_shared<EncoderBlock>(config_, init_rng_, dropout_rng_)));
  }
  if (pre) encoder_ln_f_ = encoder->add("ln_f", std::make_shared<LayerNorm>(config_.d_model));

  auto decoder = register_module("decoder", std::make_shared<ModuleList>());
  auto dec_list = decoder->add("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    decoder_blocks_.push_back(
        dec_list->add(std::to_string(i), std::make_shared<DecoderBlock>(config_, true, init_rng_, dropout_rng_)));
  }
  if (pre) decoder_ln_f_ = decoder->add("ln_f", std::make_shared<LayerNorm>(config_.d_model));
  build_head();
  declare_stack_hooks("encoder.", encoder_blocks_, false);
  declare_stack_hooks("decoder.", decoder_blocks_, true);
}

Var EncoderDecoder::encode(const IntTensor& src, const Tensor& src_pad, const IntTensor& src_pos) {
  check_sequence(src, src_pad, "encoder input src");
  return encode_from(0, hooked("encoder.embed", embed_at(src, positions_for(src, src_pad, src_pos))), src_pad);
}

Var EncoderDecoder::encode_from(size_t first, Var h, const Tensor& src_pad) const {
  const Tensor* pad = pad_or_null(src_pad);
  for (size_t i = first; i < encoder_blocks_.size(); ++i) h = encoder_blocks_[i]->forward(h, pad);  // (B, T_src, d)
  return hooked("encoder.ln_final", norm_or_identity(encoder_ln_f_.get(), h));
}

Var EncoderDecoder::decode(const IntTensor& tgt_in, const Tensor& tgt_pad, const Var& memory, const Tensor& src_pad,
                           const IntTensor& tgt_pos) {
  check_sequence(tgt_in, tgt_pad, "decoder input tgt_in");
  if (memory.dim() != 3 || memory.size(0) != tgt_in.shape[0])
    throw ShapeError("EncoderDecoder: memory " + memory.value().shape_str() + " does not fit tgt_in " +
                     shape_str(tgt_in.shape) + " (batch sizes differ)");
  Var h = hooked("decoder.embed", embed_at(tgt_in, positions_for(tgt_in, tgt_pad, tgt_pos)));  // (B, T_tgt, d)
  return decode_from(0, std::move(h), tgt_pad, memory, src_pad);
}

Var EncoderDecoder::decode_from(size_t first, Var h, const Tensor& tgt_pad, const Var& memory,
                                const Tensor& src_pad) const {
  const Tensor* self_pad = pad_or_null(tgt_pad);
  const Tensor* mem_pad = pad_or_null(src_pad);
  for (size_t i = first; i < decoder_blocks_.size(); ++i) h = decoder_blocks_[i]->forward(h, self_pad, memory, mem_pad);
  h = norm_or_identity(decoder_ln_f_.get(), h);
  return hooked("logits", head_logits(hooked("decoder.ln_final", std::move(h))));  // (B, T_tgt, V)
}

Var EncoderDecoder::forward(const ModelInput& input) {
  Var memory = encode(input.src, input.src_pad, input.src_pos);
  return decode(input.tgt_in, input.tgt_pad, memory, input.src_pad, input.tgt_pos);
}

Var EncoderDecoder::forward_from(const ModelInput& input, const std::string& stack, int64_t block, const Var& resid_pre,
                                 const Var& memory) {
  check_start(stack, block, {"encoder.", "decoder."});
  if (stack == "encoder.") {
    check_sequence(input.src, input.src_pad, "encoder input src");
    return decode(input.tgt_in, input.tgt_pad, encode_from(static_cast<size_t>(block), resid_pre, input.src_pad),
                  input.src_pad, input.tgt_pos);
  }
  check_sequence(input.tgt_in, input.tgt_pad, "decoder input tgt_in");
  if (memory.dim() != 3 || memory.size(0) != input.tgt_in.shape[0])
    throw ShapeError("EncoderDecoder: memory " + memory.value().shape_str() + " does not fit tgt_in " +
                     shape_str(input.tgt_in.shape) + " (batch sizes differ)");
  return decode_from(static_cast<size_t>(block), resid_pre, input.tgt_pad, memory, input.src_pad);
}

std::vector<std::vector<int32_t>> EncoderDecoder::decoding_prompts(
    const std::vector<std::vector<int32_t>>& sources) const {
  for (size_t i = 0; i < sources.size(); ++i) check_length(sources[i].size(), ("source " + std::to_string(i)).c_str());
  return std::vector<std::vector<int32_t>>(sources.size(), {SpecialTokens::bos});
}

Var EncoderDecoder::decoding_memory(const std::vector<std::vector<int32_t>>& sources, Tensor& src_pad) {
  IntTensor src;
  pad_sequences(sources, src, src_pad);
  return encode(src, src_pad);  // (B, T_src, d)
}

}  // namespace attnlab
