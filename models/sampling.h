#pragma once
// Drawing the next token from a language model's logits: the TokenChooser
// that `attnlab sample` gives SequenceModel::generate.
#include <cstdint>

#include "framework/random.h"
#include "models/sequence_model.h"

namespace attnlab {

// The next token from a logits row (V): special tokens are never drawn;
// temperature 0 takes the most likely token (ties: the lower id), otherwise
// the top_k most likely (all when top_k = 0) are drawn in proportion to
// exp(logit / temperature), one rng.uniform() per token. `rng` must outlive
// the chooser.
TokenChooser token_sampler(double temperature, int64_t top_k, Rng& rng);

}  // namespace attnlab
