#pragma once
// format_batch: (input, output) token pairs -> the tensors each architecture
// trains on, with padding masks and targets (-100 = ignored by the loss).
#include <string>
#include <utility>
#include <vector>

#include "models/sequence_model.h"

namespace attnlab {

using TokenPairs = std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>;

struct FormattedBatch {
  ModelInput input;
  IntTensor targets;  // (B, T_out), -100 = ignore
};

constexpr int32_t kIgnoreTarget = -100;

// How a batch is laid out: as each architecture reads it, (bare) as a decoder
// with --layout bare reads it, or (lm) as a decoder reads windows of text.
enum class BatchFormat { encoder, decoder, seq2seq, lm, bare };
const ChoiceNames<BatchFormat>& choice_names(BatchFormat);

// The layout of the batches of a model with `config`; lm for a language
// model's (a decoder on text).
BatchFormat batch_format(const TransformerConfig& config, bool language_model);

// How many tokens a decoder reads before the first answer token's prediction:
// [bos] input [sep] (decoder), input (bare), [bos] (seq2seq); 0 for the
// aligned formats (encoder, lm).
int64_t prompt_length(BatchFormat format, size_t input_tokens);

// Whether an answer is trained and decoded with a closing [eos] (decoder,
// seq2seq); bare answers have none and are decoded to their known length.
bool answers_end_with_eos(BatchFormat format);

// encoder: src = input padded with pad; targets = output aligned with the
//          input (ignored where the output is shorter, and on padding); an
//          output longer than its input throws ValueError.
// decoder: tokens = [bos] src [sep] tgt [eos]; tgt_in = tokens[:-1],
//          targets = tokens[1:] with the prompt positions ignored (the loss
//          covers tgt and eos only).
// bare:    tokens = src tgt (no specials); tgt_in = tokens[:-1], targets =
//          tokens[1:] with the first |src| - 1 ignored (the loss covers tgt
//          only); an empty src or tgt throws ValueError.
// seq2seq: src = input; tgt_in = [bos] tgt; targets = tgt [eos].
// lm:      (decoder-only language model) tgt_in = input, targets = output,
//          no specials: input is a window of text, output the same window
//          shifted by one; they must have the same length (ValueError).
// All sequences are right-padded to the longest in the batch. An empty batch
// or a negative token id throws ValueError.
FormattedBatch format_batch(BatchFormat format, const TokenPairs& pairs);

// Right-pads token sequences into (B, max(1, longest)) ids and a pad mask
// (1 = pad). A length-0 sequence gets one pad position so shapes stay valid.
void pad_sequences(const std::vector<std::vector<int32_t>>& seqs, IntTensor& ids, Tensor& pad);

}  // namespace attnlab
