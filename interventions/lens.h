#pragma once
// The logit lens (nostalgebraist 2020) and direct logit attribution (Elhage et
// al. 2021) of a batch, from one forward pass that observes the hook points
// they need (docs/interventions.md, "The logit lens and direct logit attribution").
//
// The lens decodes the residual stream after the embedding and after each
// block (SequenceModel::residual_stream_points; seq2seq: the decoder's) as the
// model decodes its last one: through the final norm ln_f and the output head
// for a pre-LN model, through the head alone for a post-LN one (whose blocks
// end in a norm, so the stream they leave is already normalised) and for one
// without norms (norm none).
//
// Direct logit attribution splits the right answer's logit at each answer
// position into what each part of the model writes into the stream, each
// passed through ln_f with its scale 1/σ frozen at the run's own value (the
// centering is linear), plus the constant ln_f.bias·W_y + head.bias_y:
//   logit_y = Σ_c W_y·(γ ⊙ (c − mean(c)))/σ + W_y·β + b_y
// over c = the embedding (token + position), each head (its columns of z
// through its columns of out_proj), each attention's out_proj bias and each
// MLP's output. Without norms (norm none) the same sum without the norm:
//   logit_y = Σ_c W_y·c + b_y
// (σ = 1; no_bias drops the out_proj biases and b_y). Exact for pre-LN and
// norm none only: a post-LN stream is renormalised in every block, so no such
// sum exists; it is refused (LensReading::refused).
#include <cstdint>
#include <string>
#include <vector>

#include "models/batch.h"

namespace attnlab {

// What the lens reads at one position of one point.
struct LensCell {
  int32_t top = 0;                 // the most likely token (the first on ties, as greedy's argmax)
  double top_probability = 0;
  // The right token's probability and rank (1 = top; ties ordered by id, so
  // rank 1 is `top`); 0 and 0 where the position has no right answer.
  double answer_probability = 0;
  int64_t answer_rank = 0;
};

// One part of an answer's logit.
struct LogitPart {
  std::string component;  // "embed", "blocks.0.attn.h1", "blocks.0.attn.out_proj.bias", "blocks.0.mlp", "constant"
  double logit = 0;
};

// The attribution at one answer position.
struct Attribution {
  int64_t example = 0, position = 0;
  int32_t answer = 0;
  double logit = 0;                // the model's own logit of the answer
  double inverse_scale = 0;        // 1/σ of the final stream at this position (frozen)
  std::vector<LogitPart> parts;    // forward order, the constant last; they sum to `logit`
};

struct LensReading {
  std::vector<std::string> points;   // the decoded points, forward order
  std::vector<int64_t> lengths;      // each example's real output positions (B)
  IntTensor answers;                 // (B, T) the right token, -100 where none (the batch's targets)
  Tensor logits;                     // (P, B, T, V) the lens's logits; the last point's are the model's
  std::vector<std::vector<LensCell>> cells;  // [point][b·T + t]
  std::vector<Attribution> attribution;      // each answer position, example by example
  std::string refused;               // why there is no attribution ("" when there is)
};

// Both, from one forward in inference mode (the model's hooks are restored).
LensReading read_lens(SequenceModel& model, const FormattedBatch& batch);

// The batch the lens reads: each (input, right answer) laid out as the model
// trains (format_batch). A language model reads each input as text, the right
// answer at each position the next character (none at the last).
FormattedBatch lens_batch(const TransformerConfig& config, bool language_model, const TokenPairs& pairs);

}  // namespace attnlab
