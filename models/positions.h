#pragma once
// Position ids for randomised positional encodings (Ruoss et al. 2023,
// "Randomized Positional Encodings Boost Length Generalization of
// Transformers"): in training, the n tokens of a sequence read a sorted random
// subset of the positions [0, P) instead of 0..n-1, so a table row beyond the
// longest trained sequence is not left unseen and the model can rely on the
// order of positions only. In evaluation the n positions are spread evenly over
// [0, P), the typical subset of training (every gap P / n).
#include <cstdint>
#include <vector>

#include "framework/random.h"
#include "framework/tensor.h"
#include "models/config.h"

namespace attnlab {

// The real length of every row of a right-padded (B, T) batch: its count of
// non-padding positions (pad (B, T), 1 = pad); all T when pad is empty.
std::vector<int64_t> row_lengths(const Tensor& pad, int64_t batch, int64_t t_len);

// A sorted subset of n distinct positions of [0, range), uniform over all such
// subsets (selection sampling, Knuth's algorithm S: one rng.integer draw per
// position examined until n are taken). n > range or n < 0: ValueError naming both.
std::vector<int32_t> random_subset(int64_t n, int64_t range, Rng& rng);

// Position i of n: floor(i * range / n), distinct and increasing for n <= range
// (ValueError otherwise).
std::vector<int32_t> spread_positions(int64_t n, int64_t range);

// (B, T) position ids: row b's first lengths[b] entries are random_subset (or
// spread_positions) of [0, range); its padding repeats the last real position
// (padding is masked, so what it reads does not matter). Rows are drawn in
// order, so the same rng state gives the same ids.
IntTensor random_position_ids(const std::vector<int64_t>& lengths, int64_t t_len, int64_t range, Rng& rng);
IntTensor spread_position_ids(const std::vector<int64_t>& lengths, int64_t t_len, int64_t range);

// The positions one greedy decoding reads, decided here for every command
// (eval, predict, predict --logits and --json, attention; and
// scripts/pytorch/attnlab_torch.py's decoding_positions mirrors it): a decoding that
// reads `prompt` tokens ([bos] input [sep] for a decoder, [bos] for seq2seq's
// decoder) and then at most `answer` answer tokens (it emits at most
// answer + 1: the last, or <eos>, from the last position) reads
// n = min(prompt + answer, max_len) positions. Off: 0, 1, ..., n-1. With
// random positions P: spread_positions(n, P), the positions evaluation gives a
// teacher-forced sequence of n tokens, so a decoding planned on the expected
// answer reads what training read, and a teacher-forced pass over its answer
// reads the same rows. The encoder's positions do not depend on decoding.
std::vector<int32_t> decoding_positions(const TransformerConfig& config, int64_t prompt, int64_t answer);

// Decoding reads per-sequence position tables (one per sequence, as long as it
// may grow). step_position_ids: (rows, 1), entry a = tables[rows[a]][pos].
// prefix_position_ids: (rows, t_len), row a = tables[rows[a]][0..t_len), its last
// entry repeated past its end (padding).
IntTensor step_position_ids(const std::vector<std::vector<int32_t>>& tables, const std::vector<int64_t>& rows,
                            int64_t pos);
IntTensor prefix_position_ids(const std::vector<std::vector<int32_t>>& tables, const std::vector<int64_t>& rows,
                              int64_t t_len);

}  // namespace attnlab
