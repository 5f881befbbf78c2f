#pragma once
// Ablation: each component (interventions/components.h) knocked out in turn,
// or groups of components knocked out at the same time, and the set scored
// again (docs/interventions.md, "Ablation"). Forward only, batched as the set
// is: one pass for the intact model (which also records what mean and
// resample put in), then one pass per row, whose replacement hooks
// (model.hooks().replace) change only the row's outputs: a head's columns of
// z, an MLP's mlp.out, a layer's attention outs and mlp.out.
//
// A row's pass starts at its earliest block (reuse_prefix): the blocks
// before it compute what the intact pass computed, so the pass runs
// SequenceModel::forward_from that block's input, resid_pre, as the intact
// pass recorded it (a seq2seq decoder component: the decoder's block from
// the recorded encoder output too; an encoder one: the rest of the encoder,
// then the whole decoder). The logits are the full pass's bitwise. Memory:
// the intact pass keeps every batch's resid_pre (B, T, d) of each block a
// row starts at (not block 0 of the first stack, an encoder's, a decoder
// LM's or a seq2seq encoder's: those rows run the full forward), and for
// seq2seq decoder rows (block 0 too) the encoder output
// (B, T_src, d): N·T·d reals per block kept, for N examples of T positions
// (docs/benchmark.md's L, N = 500: 500·64·256·4 bytes = 33 MB a block).
//
// A group has one replacer per hook point, changing the union of its
// components' columns there: several heads of one attention share its z; a
// layer replaces its attentions' out (downstream of their z) and its
// mlp.out whole, so a head or the MLP of a layer in the same group changes
// nothing more (the group is the layer alone); a component named twice is
// knocked out once.
//
// A point's positions are those of its stream: the source for an encoder
// and a seq2seq model's encoder. points, the decoder input otherwise.
//   zero      the output is 0 at every position.
//   mean      the output at position t is its mean over the set's sequences
//             that reach t (padding is left out of the mean); every position
//             of a batch, padding too, gets the mean at its index.
//   resample  the output of example i is that of its donor, donors[i]
//             (resample_donors); a position past the donor's end (or
//             padding of the donor) gets the mean at that position.
#include <cstdint>
#include <functional>
#include <vector>

#include "framework/choices.h"
#include "interventions/components.h"
#include "interventions/teacher_forced.h"

namespace attnlab {

enum class AblationMode { zero, mean, resample };
const ChoiceNames<AblationMode>& choice_names(AblationMode);

// One row: the components knocked out at the same time (ablate: one).
struct AblationRow {
  std::vector<Component> components;
  SetScore score;
  std::string name() const;  // the components' names joined by " + "
};

struct AblationResult {
  SetScore intact;
  std::vector<AblationRow> rows;  // in the order the components (groups) were given
};

// Sees each batch's logits (B, T, V) of every pass: row -1 the intact pass,
// else the index of the row; batch the index in the set.
using AblationLogits = std::function<void(int64_t row, size_t batch, const Tensor& logits)>;

// The intact set's score, then each component's knocked out by `mode`. Every
// hook the model had is cleared. Deterministic for a fixed seed and thread
// count; `seed` only chooses resample's donors. ValueError for resample on a
// set of one example. reuse_prefix false: every pass is a full forward (the
// reference the reuse is tested and timed against).
AblationResult ablate(SequenceModel& model, const TeacherForcedSet& set, const std::vector<Component>& components,
                      AblationMode mode, uint64_t seed, const AblationLogits& logits = nullptr, bool reuse_prefix = true);
// The same with each group's components knocked out together: one row per
// group (ablate is this with one group per component).
AblationResult ablate_groups(SequenceModel& model, const TeacherForcedSet& set,
                             const std::vector<std::vector<Component>>& groups, AblationMode mode, uint64_t seed,
                             const AblationLogits& logits = nullptr, bool reuse_prefix = true);

// The donor of each example for resample: the examples in a seeded random
// order (Fisher-Yates with Rng(seed)); among those whose streams have the
// same lengths (source and decoder input, padding left out), each takes the
// next one in that order, the last the first (a cycle: nobody is its own
// donor); an example whose lengths no other has takes the next example in
// the whole order. ValueError for fewer than two examples.
std::vector<size_t> resample_donors(const TeacherForcedSet& set, uint64_t seed);

// The unpadded length of each example's source and decoder input (0 where
// the layout has no such stream), in the set's order.
struct StreamLengths {
  int64_t src = 0, tgt = 0;
  bool operator==(const StreamLengths& o) const { return src == o.src && tgt == o.tgt; }
  bool operator<(const StreamLengths& o) const { return src != o.src ? src < o.src : tgt < o.tgt; }
};
std::vector<StreamLengths> stream_lengths(const TeacherForcedSet& set);

}  // namespace attnlab
