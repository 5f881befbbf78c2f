#pragma once
// Accuracy of a model: teacher-forced on a training batch (from its logits)
// and by greedy decoding on held-out examples; the decoding limits.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "datasets/task.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "training/distributed/communicator.h"

namespace attnlab {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Accuracy {
  double token = 0;  // fraction of target tokens right
  double exact = 0;  // fraction of sequences entirely right
  int64_t sequences = 0;
};

// From logits (B, T, V) and targets (B, T) (-100 = ignored).
Accuracy teacher_forced_accuracy(const Tensor& logits, const IntTensor& targets);

// Asked before each batch of an evaluation; true abandons it by throwing
// EvaluationAbandoned (training polls its interrupt flag this way, so Ctrl-C
// does not wait for a long evaluation). Empty: never abandoned.
using StopCheck = std::function<bool()>;
struct EvaluationAbandoned : std::runtime_error {
  EvaluationAbandoned() : std::runtime_error("the evaluation was abandoned") {}
};

// Greedy decoding of every example's input, compared with its output
// position by position (a missing or extra token counts as wrong; the
// encoder tagger's outputs beyond the expected length are not targets).
// `predictions`, if given, receives the decoded outputs.
Accuracy greedy_accuracy(SequenceModel& model, const std::vector<Example>& examples, int64_t batch_size,
                         std::vector<std::vector<int32_t>>* predictions = nullptr, const StopCheck& stop = {});

// The plan of a decoding, the same for every command (eval, predict,
// attention; scripts/pytorch/attnlab_torch.py mirrors it): an input is decoded for at
// most its expected answer's tokens and one more (the answer's <eos>, or the
// first token too many; a decoder with --layout bare, whose answers have no
// <eos>, for exactly the expected answer's tokens), and with random positions its positions are spread
// over [bos] input [sep] answer, as training spread them (decoding_positions,
// models/positions.h). eval plans each held-out input on its own answer;
// predict and attention on the task's answer (Task::solve), or, for an input
// the task cannot answer, on the longest answer of training (max_output_len).
int64_t decoding_budget(size_t expected_answer_tokens, const TransformerConfig& config);
int64_t decoding_budget(const Task& task, const std::vector<int32_t>& input, const TransformerConfig& config);

// Decoding limits. Greedy decoding stops at <eos>, at its budget, or where the
// positional table (max_len = P positions, --positions at training) ends: a
// decoder reads [bos] input [sep] answer, so input + answer <= P - 1 tokens
// (the last answer token comes from position P), or with --layout bare input
// + answer <= P + 1 (input answer, the last answer token never read); seq2seq decodes at most P
// tokens; the encoder tagger emits one token per input position.
// True when `output`, decoded from `input`, was cut by the table rather than ended by <eos>.
bool answer_filled_table(const TransformerConfig& config, const std::vector<int32_t>& input,
                         const std::vector<int32_t>& output);
// True when `output` was cut by its budget (decoder, seq2seq) rather than ended by <eos>.
bool answer_spent_budget(const TransformerConfig& config, const std::vector<int32_t>& output, int64_t budget);
// The target of a teacher-forced pass over the greedy answer: the answer,
// less its last token when the answer was cut by the table or the budget (that
// token was never read; every distribution decoding saw is still there).
std::vector<int32_t> teacher_forced_target(const TransformerConfig& config, const std::vector<int32_t>& input,
                                           const std::vector<int32_t>& output, int64_t budget);
// The batch of that teacher-forced pass, at the positions the decoding read
// (decoding_positions for its budget): its distributions are the ones greedy
// decoding chose from (predict --logits and --json, attention).
FormattedBatch teacher_forced_batch(const TransformerConfig& config, const std::vector<int32_t>& input,
                                    const std::vector<int32_t>& output, int64_t budget);

// A language model's teacher-forced score on held-out windows (format "lm").
// The in-context loss (Olsson et al. 2022) is the mean loss of the windows'
// late targets minus that of their early ones, as the task splits a window
// (Task::in_context_split: halves, or for repeat the first copy against the
// repeat): negative when the context helps. NaN when no window has an early
// or a late target.
struct LmScore {
  double loss = 0;            // mean cross-entropy per predicted token, nats
  double bits_per_token = 0;  // loss / ln 2 (bits per character for the text task)
  double token = 0;           // fraction of next tokens predicted right (argmax)
  int64_t tokens = 0;         // tokens predicted
  double early_loss = kNaN, late_loss = kNaN;  // mean loss of the early and of the late targets
  double in_context_loss = kNaN;               // late_loss - early_loss
  double late_token = kNaN;                    // fraction of the late targets predicted right
};
LmScore lm_score(SequenceModel& model, const Task& task, const std::vector<Example>& windows, int64_t batch_size,
                 const StopCheck& stop = {});

// One batch's figures, examples [begin, end), as sums and counts: greedy
// decoding gives its right tokens, target tokens and exact answers; both
// kinds a teacher-forced pass's summed loss over its targets; a language
// model's pass also its right tokens and the in-context split's sums. The
// totals sum them in batch order, which is how greedy_accuracy and lm_score
// score a whole set, and how a data-parallel evaluation
// (training/trainer.cpp) combines the batches its processes scored into the
// same figures.
struct BatchFigures {
  double right = 0, tokens = 0;  // greedy: answer tokens right and expected; language model: next tokens
  double exact = 0;              // greedy: sequences entirely right
  double loss = 0, loss_tokens = 0;  // teacher-forced: summed cross-entropy (nats) and its targets
  double early_loss = 0, early_tokens = 0, late_loss = 0, late_tokens = 0, late_right = 0;  // language model
  static constexpr size_t kCount = 10;  // the fields, in the order above (a data-parallel gather sends them)
};
BatchFigures greedy_batch(SequenceModel& model, const std::vector<Example>& examples, size_t begin, size_t end,
                          std::vector<std::vector<int32_t>>* predictions = nullptr);
Accuracy greedy_totals(const std::vector<BatchFigures>& batches, int64_t sequences);
BatchFigures lm_batch(SequenceModel& model, const Task& task, const std::vector<Example>& windows, size_t begin,
                      size_t end);
LmScore lm_totals(const std::vector<BatchFigures>& batches);
// The mean teacher-forced loss per target of the batches; NaN without targets.
double teacher_forced_loss(const std::vector<BatchFigures>& batches);

// A held-out evaluation's figures: greedy accuracy (batches of 256), or a
// language model's teacher-forced score (batches of 64; accuracy.token is
// then its next-token accuracy, accuracy.exact 0); for both, the mean
// teacher-forced loss per target token (`loss`: a greedy task's answers as
// its training formats them, a language model's lm.loss). Empty when `stop`
// abandoned it.
struct HeldoutScore {
  Accuracy accuracy;
  LmScore lm;
  double loss = kNaN;
  bool language_model = false;
};
// With several processes (`comm`) the batches are shared out between them
// and combined into the figures one process gives.
std::optional<HeldoutScore> score_heldout(SequenceModel& model, const Task& task, const std::vector<Example>& examples,
                                          const StopCheck& stop = {}, const Communicator& comm = single_process());

}  // namespace attnlab
