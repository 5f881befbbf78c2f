#pragma once
// Activation patching (causal tracing, Meng et al. 2022; how to read it:
// Heimersheim & Nanda 2024): a clean and a corrupted input are run, then one
// activation of the clean run is copied into the corrupted run at a time, and
// what comes back of the clean answer is measured (docs/interventions.md,
// "Activation patching").
//
// At an answer position a (a row of the logits) where the clean answer's token
// c_a and the corrupted input's answer token r_a differ, a run's logit
// difference is
//   LD_a = logit_a(c_a) − logit_a(r_a),
// and a patch restores the fraction
//   (LD_patched − LD_corrupt) / (LD_clean − LD_corrupt)
// (0: nothing, 1: all of it; NaN where LD_clean = LD_corrupt). Positions where
// the answers agree have no LD (both tokens are the same) and are left out.
// Over several answer positions and pairs the LDs are summed per pair,
// averaged over the pairs, and the ratio is taken of the averages (not the
// average of per-pair ratios, which a near-zero denominator would dominate).
//
// Decoders and seq2seq are teacher-forced on the CLEAN answer: both runs read
// it as the decoder input, so the corrupted run differs only by its input. A
// language model (the lm format) has one answer position, after its text: its
// next token.
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/task.h"
#include "models/batch.h"

namespace attnlab {

// One answer position where the clean and corrupted answers differ.
struct AnswerSlot {
  int64_t row = 0;         // its row in the logits (B, T, V)
  size_t index = 0;        // its index in the answer (0 = the first answer token)
  int32_t clean = 0;       // the clean answer's token there
  int32_t corrupt = 0;     // the corrupted input's answer's token there
};

// A clean and a corrupted input of equal length, what both runs read as the
// answer (the clean one), and the answer positions where the answers differ.
struct PatchingPair {
  std::vector<int32_t> clean, corrupt;
  std::vector<int32_t> answer;  // the decoder's teacher-forced answer (lm: the clean text, unused)
  std::vector<AnswerSlot> answers;
};

// ValueError naming both lengths unless they are equal.
void check_patching_lengths(size_t clean, size_t corrupt);
// The pair of clean and corrupt (each input with its own right answer; a
// language model's answer: its one next token) as a model of `format` reads
// them. ValueError for inputs of different lengths (naming both) and for
// answers that agree at every position (nothing to restore).
PatchingPair patching_pair(BatchFormat format, const Example& clean, const Example& corrupt);

// What a patch copies from the clean run into the corrupted one: at hook
// point `point`, position `position` (-1: every position), columns [begin,
// begin + width) (width 0: every column).
struct PatchRegion {
  std::string point;
  int64_t position = -1;
  int64_t begin = 0, width = 0;
};

enum class PatchKind { residual, head, head_position };

struct Patch {
  PatchKind kind = PatchKind::residual;
  std::string name;       // the residual stream's hook point, or the head's component name
  std::string stack;      // "", "encoder." or "decoder.": whose positions `position` counts
  int64_t position = -1;  // -1: every position
  std::vector<PatchRegion> regions;  // none: the corrupted run itself
};

// The residual stream's hook points that are patched, for the stack "",
// "encoder." or "decoder.": each block's resid_pre, then the last block's
// resid_post (after its last norm in a post-LN model).
std::vector<std::string> patched_residual_points(const TransformerConfig& config, const std::string& stack);
// The stacks of a model ("" or "encoder." and "decoder.") and how many
// positions each reads for `pair` in `format`.
std::vector<std::pair<std::string, int64_t>> stack_positions(const TransformerConfig& config, BatchFormat format,
                                                             const PatchingPair& pair);
// Every (residual point, position) of every stack, stack by stack, point by point.
std::vector<Patch> residual_patches(const TransformerConfig& config, BatchFormat format, const PatchingPair& pair);
// Every head's columns of its attention's z at every position (per_position:
// one patch per head and query position, head by head).
std::vector<Patch> head_patches(const TransformerConfig& config, BatchFormat format, const PatchingPair& pair,
                                bool per_position);

// The logit differences of one answer position: the clean run's, the
// corrupted run's, and the corrupted run's with each patch.
struct SlotLd {
  double clean = 0, corrupt = 0;
  std::vector<double> patched;  // one per patch
};

struct PatchingRun {
  std::vector<std::vector<SlotLd>> pairs;  // [pair][answer slot]
  // keep_logits: the logits (T, V) of the clean and corrupted run of each pair, and of
  // each patched run, [patch * pairs + pair].
  std::vector<Tensor> clean_logits, corrupt_logits, patched_logits;
};

struct PatchingOptions {
  int64_t rows_per_forward = 64;  // patched runs stacked into one forward
  bool keep_logits = false;
};

// The clean and corrupted runs of every pair in one batch, then every
// (patch, pair) as one row of batched forwards, each row with its own patch
// (forward only). Its hooks are removed after; observers set before stay, but
// a replacement set before on a patched point is dropped (one per point).
// ValueError for no pair, pairs of different lengths, or a patch region
// naming an unknown point or lying outside its activation.
PatchingRun run_patching(SequenceModel& model, BatchFormat format, const std::vector<PatchingPair>& pairs,
                         const std::vector<Patch>& patches, const PatchingOptions& options = {});

// LD at `slot` of batch row b of logits (B, T, V): logit(slot.clean) − logit(slot.corrupt).
double logit_difference(const Tensor& logits, int64_t b, const AnswerSlot& slot);
// (patched − corrupt) / (clean − corrupt); NaN when clean == corrupt.
double fraction_restored(double patched, double clean, double corrupt);

// The LDs summed over each pair's answer positions and averaged over the
// pairs (pair < 0: every pair), or of one answer position (slot >= 0).
struct LdSums {
  double clean = 0, corrupt = 0;
  std::vector<double> patched;  // one per patch
};
LdSums ld_sums(const PatchingRun& run, int64_t pair = -1, int64_t slot = -1);
// The fraction restored by each patch, from LdSums.
std::vector<double> fractions_restored(const LdSums& sums);

}  // namespace attnlab
