#pragma once
// What a language model's held-out bits per character are measured against
// in `attnlab report`: a unigram and a bigram model of the run's characters,
// counted on its training text and scored on its held-out text.
#include <cstdint>
#include <vector>

namespace attnlab {

struct TextBaselines {
  double unigram_bits_per_char = 0;  // -mean log2 P(c), P(c) = (n(c) + 1) / (N + V)
  double bigram_bits_per_char = 0;   // -mean log2 P(c | b), P(c | b) = (n(b c) + 1) / (n(b .) + V)
  int64_t heldout_chars = 0;
};

// Both models fit on `train` (token ids) with add-one smoothing over `vocab`
// symbols (ids in [0, vocab)), then scored on every token of `heldout`, the
// first one after the last training token (as the run's held-out windows
// predict it). ValueError for an empty part or an id outside [0, vocab).
TextBaselines text_baselines(const std::vector<int32_t>& train, const std::vector<int32_t>& heldout, int64_t vocab);

}  // namespace attnlab
