#pragma once
// metrics.csv: one row every --log-every steps with the training figures
// averaged over the steps since the last row (held-out columns filled at
// evaluations), and the figures a progress display shows.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/io/csv.h"
#include "framework/io/tfevents.h"
#include "training/evaluate.h"
#include "training/noise_scale.h"
#include "training/step.h"

namespace attnlab {

// What a progress display shows after a step.
struct ProgressStats {
  int64_t step = 0;
  double loss = 0, token_acc = 0, exact_acc = 0;  // train batch, teacher-forced
  double tokens_per_s = 0;
  double heldout_exact = -1;  // < 0: not evaluated yet (or a language model, which has no exact match)
};

// The L2 norm of every parameter of `model` together (the weight_norm
// column), summed in registration order in double.
double weight_norm(const Module& model);

class MetricsLog {
 public:
  // heldout_*: at evaluations; in_context_loss: language models (repeat,
  // text) only; noise_*: --noise-scale only; weight_norm: every row
  static const std::vector<std::string>& columns();

  // Writes to `path` (nothing when empty): a new file, or with resume_step >= 0
  // the existing one cut back to the rows up to resume_step (a resumed run
  // redoes later steps; an unterminated row from a kill goes too), appended to.
  MetricsLog(const std::string& path, int64_t resume_step);

  // Every value of every later row also goes to `events` as a TensorBoard
  // scalar tagged with its column, the value read back from the row's text so
  // that both files say the same (null: none). It must outlive the log.
  void set_events(TfEventsWriter* events) { events_ = events; }

  void start_interval();                // the clock of tokens_per_s starts (again)
  void add(const StepResult& step);     // a step that made an update
  void exclude(double seconds);         // time of the interval not spent training (evaluation, checkpoints)
  int64_t interval_steps() const { return steps_; }
  // The training figures summed since the last row, as exact text: a
  // checkpoint between rows records them, so that the first row of the
  // resumed run averages the same steps, to the bit, as the run without the
  // stop. set_interval_state: IoError naming `source` when the text is malformed.
  std::string interval_state() const;
  void set_interval_state(const std::string& text, const std::string& source);

  // The row of `step` (held-out columns from `heldout`, when it was
  // evaluated; the noise_* columns from `noise`, --noise-scale's averages at
  // this step; weight_norm, the L2 norm of every parameter after the step),
  // averaged over the interval, which then starts again. Returns the
  // averages for display.
  ProgressStats write_row(int64_t step, double lr, const HeldoutScore* heldout, double elapsed_s,
                          const NoiseScaleEma* noise, double weight_norm);

 private:
  void write_events(int64_t step, const std::vector<std::string>& row);

  std::unique_ptr<CsvWriter> csv_;
  TfEventsWriter* events_ = nullptr;
  double sum_loss_ = 0, sum_token_ = 0, sum_exact_ = 0, sum_norm_ = 0;
  int64_t steps_ = 0, tokens_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double excluded_s_ = 0;
};

}  // namespace attnlab
