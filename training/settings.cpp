#include "training/settings.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "framework/error.h"
#include "framework/optim/optim_rules.h"
#include "models/batch.h"
#include "models/init.h"
#include "models/model_rules.h"
#include "training/induction_probe.h"
#include "training/settings_options.h"

namespace attnlab {

const ChoiceNames<OnNan>& choice_names(OnNan) {
  static const ChoiceNames<OnNan> names = {{OnNan::stop, "stop", "keep the last checkpoint"},
                                           {OnNan::skip, "skip", "the step"}};
  return names;
}

TrainSettings default_settings() {
  TrainSettings s;
  s.task.name = "reverse";
  s.task.vocab = 10;
  s.task.min_len = s.task.max_len = 8;
  s.model.arch = Arch::encoder;
  s.model.d_model = 64;
  s.model.n_heads = 4;
  s.model.n_layers = 2;
  s.model.d_ff = 256;
  s.optim.lr = 1e-3;
  return s;
}

int64_t needed_positions(const Task& task, const TransformerConfig& model) {
  if (task.language_model()) return task.max_input_len();  // a window, no specials
  const Arch arch = model.arch;
  int64_t in = task.max_input_len(), out = task.max_output_len();
  if (batch_format(model, false) == BatchFormat::bare) return in + out - 1;  // src tgt, the last token only a target
  if (arch == Arch::decoder) return in + out + 2;  // [bos] src [sep] tgt (eos is only a target)
  if (arch == Arch::seq2seq) return std::max(in, out + 1);
  return in;
}

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw ValueError(message);
}
template <class T>
std::string str(T v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// --random-positions P: the table is [0, P) (--positions P or unset), and
// holds the longest training sequence.
void check_random_positions(TrainSettings& s, int64_t needed) {
  check_random_positions_kind(s.model, Naming::flag);
  const int64_t p = s.model.random_positions;
  if (p == 0) return;
  require(s.positions == 0 || s.positions == p, "--random-positions " + str(p) + " draws from the whole table, but "
                                                    "--positions is " + str(s.positions) + ": give the same P or leave --positions out");
  require(p >= needed, "--random-positions " + str(p) + " is smaller than the longest training sequence (" +
                           str(needed) + " positions)");
  s.model.max_len = p;
}
// The two bounds most flags have, each with one message.
void require_at_least(const char* flag, int64_t value, int64_t min) {
  require(value >= min, std::string(flag) + " must be >= " + str(min) + ", got " + str(value));
}
void require_fraction(const char* flag, double value) {  // a probability-like value in [0, 1)
  require(value >= 0 && value < 1, std::string(flag) + " must be in [0, 1), got " + str(value));
}

// The least values of the table (training/settings_options.h): of the task's
// options (`task`), or of all the others.
void check_least_values(TrainSettings& s, bool task) {
  for (const TrainOption& o : train_options()) {
    if (!o.at_least || (o.group == OptionGroup::task) != task) continue;
    const std::string flag = "--" + std::string(o.flag);
    require_at_least(flag.c_str(), *std::get<int64_t*>(o.field(s)), *o.at_least);
  }
}

// --layout bare: a decoder's (input, answer) pairs with an input to predict from.
void check_layout(const TransformerConfig& m, const Task& task, const std::string& name) {
  check_layout_arch(m, Naming::flag);
  if (m.layout != Layout::bare) return;
  if (task.language_model())
    throw ValueError("--layout bare lays out (input, answer) pairs, but task '" + name +
                     "' is a language model (its windows have no special tokens already)");
  if (task.min_input_len() < 1)
    throw ValueError("--layout bare predicts the answer from the input's last token, but task '" + name +
                     "' has inputs of length " + str(task.min_input_len()));
}

// Options that would be silently ignored are refused when set away from their default.
void check_optimization_flags(const TrainSettings& s) {
  const OptimizerConfig& o = s.optim;
  const TrainSettings defaults = default_settings();
  const OptimizerConfig& d = defaults.optim;
  require(std::isfinite(o.lr) && o.lr > 0, "--lr must be > 0, got " + str(o.lr));
  require_fraction("--beta1", o.beta1);
  require_fraction("--beta2", o.beta2);
  require(std::isfinite(o.eps) && o.eps > 0, "--eps must be > 0, got " + str(o.eps));
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be >= 0, got " + str(o.weight_decay));
  require_fraction("--momentum", o.momentum);  // 1 or more never forgets a gradient: the steps grow without bound
  if (o.kind == OptimizerKind::sgd) {
    require(o.beta1 == d.beta1 && o.beta2 == d.beta2 && o.eps == d.eps,
            "--beta1, --beta2 and --eps apply to --optimizer adam and adamw, not sgd");
    check_nesterov(o, Naming::flag);
  } else {
    require(o.momentum == d.momentum && o.nesterov == d.nesterov,
            "--momentum and --nesterov apply to --optimizer sgd, not " + name_of(o.kind));
  }
  require(!o.decay_all || o.weight_decay > 0, "--decay-all has no effect with --weight-decay 0");

  const ScheduleConfig& c = s.schedule;
  // A warmup that outlasts the run never reaches --lr (noam: its peak).
  require(c.warmup < s.steps || c.warmup == 0, "--warmup " + str(c.warmup) + " must be below --steps " + str(s.steps) +
                                                   " for --schedule " + name_of(c.kind));
  if (c.kind != ScheduleKind::linear && c.kind != ScheduleKind::cosine)
    require(c.min_lr == defaults.schedule.min_lr, "--min-lr applies to --schedule linear and cosine, not " + name_of(c.kind));
  check_schedule_fields(c, o.lr, Naming::flag);  // --min-lr in [0, --lr], noam's --warmup
}

// A pairs task's share held out of its file: some, and at most half (as --heldout of a generated task).
void check_pairs_heldout(const TrainSettings& s, const Task& task) {
  if (s.task.name != "pairs" || !s.task.heldout_file.empty() || task.own_heldout() == nullptr) return;
  const double f = s.task.heldout_fraction;
  require(f > 0, "--heldout-fraction must be in (0, 1), got " + str(f) +
                     ": nothing would be held out to evaluate on (or give --heldout-file)");
  const auto held = static_cast<int64_t>(task.own_heldout()->size()), left = task.input_space_size();
  if (held > left)
    throw ValueError("--heldout-fraction " + str(f) + " holds out " + str(held) + " of the " + str(held + left) +
                     " distinct inputs of " + s.task.file + ", more than half, leaving " + str(left) +
                     " to train on; lower --heldout-fraction to at most 0.5");
}

// A task's own fixed training set (modular): a batch takes each example at most once.
void check_fixed_batch(const TrainSettings& s, const Task& task) {
  const std::vector<Example>* fixed = task.own_train();
  if (!fixed) return;
  const auto n = static_cast<int64_t>(fixed->size());
  require(s.batch_size <= n, "--batch-size " + str(s.batch_size) + " is larger than the " + str(n) +
                                 " training pairs of task '" + s.task.name + "' (--train-fraction " +
                                 str(s.task.train_fraction) + "); use at most " + str(n) + " (that: the whole set every step)");
}

// modular holds out every pair it does not train on: --heldout, which sizes a drawn set, would be ignored.
void check_modular_heldout(const TrainSettings& s, const Task& task) {
  if (!task.own_train() || s.heldout == default_settings().heldout) return;
  throw ValueError("--heldout " + str(s.heldout) + " does not apply to task '" + s.task.name + "': it holds out every pair " +
                   "not in its training set (" + str(task.own_heldout()->size()) + " pairs); leave --heldout out");
}

}  // namespace

void finalize(TrainSettings& s) {
  // The common mistakes in the user's words first; TaskConfig::validate has the full rules.
  check_least_values(s, true);  // --vocab, --min-len, --digits
  require(s.task.min_len <= s.task.max_len,
          "--min-len " + str(s.task.min_len) + " is greater than --max-len " + str(s.task.max_len));
  s.task.validate();
  finalize(s, *make_task(s.task));
}

void finalize(TrainSettings& s, const Task& task_ref) {
  const Task* task = &task_ref;
  s.model.vocab_size = task->vocab_size();
  if (task->language_model() && s.model.arch != Arch::decoder)
    throw ValueError("task '" + s.task.name + "' is a language model: use --model decoder, not " + name_of(s.model.arch));
  if (s.model.arch == Arch::encoder && !task->outputs_fit_inputs())
    throw ValueError("the encoder tagger gives one output per input position, but task '" + s.task.name + "' has " +
                     (task->min_input_len() == task->max_input_len()
                          ? "outputs of up to " + str(task->max_output_len()) + " tokens for inputs of " +
                                str(task->min_input_len())
                          : "outputs longer than their inputs (up to " + str(task->max_output_len()) +
                                " tokens, inputs of " + str(task->min_input_len()) + " to " + str(task->max_input_len()) + ")") +
                     "; use --model decoder or --model seq2seq");
  check_layout(s.model, *task, s.task.name);
  int64_t needed = needed_positions(*task, s.model);
  check_least_values(s, false);  // --positions, --steps, --batch-size, ... (training/settings_options.h)
  s.model.max_len = s.positions > 0 ? s.positions : std::max<int64_t>(64, 2 * needed);
  check_random_positions(s, needed);
  const std::string source = task->longest_source();
  require(needed <= s.model.max_len, "the task needs sequences of " + str(needed) + " positions but --positions is " +
                                         str(s.model.max_len) + " (the positional table); raise --positions" +
                                         (source.empty() ? "" : " (" + source + ")"));
  // A file task's lengths follow its file, which may change: config.ini keeps
  // the table size so that the run's checkpoints always load.
  if (!task->saved_vocab().empty()) s.positions = s.model.max_len;
  // The model's rules in the flags' words first; validate() below is the backstop.
  check_model_rules(s.model, Naming::flag);
  s.model.init = resolved_init(s.model);  // config.ini and the checkpoints name the scheme, not "auto"
  s.model.validate();
  check_fixed_batch(s, *task);
  require(s.train_size == 0 || s.batch_size <= s.train_size,
          "--batch-size " + str(s.batch_size) + " is larger than --train-size " + str(s.train_size) +
              ": a batch would hold an example twice; use at most " + str(s.train_size) + " (that: the whole set every step)");
  require(s.batch_size % s.grad_accum == 0, "--batch-size " + str(s.batch_size) + " is not divisible by --grad-accum " +
                                                str(s.grad_accum) + " (micro-batches of equal size)");
  require(s.grad_accum == 1 || s.probe_every == 0,
          "--probe-every records one micro-batch per step: not with --grad-accum " + str(s.grad_accum));
  require(s.threads >= 1 && s.threads <= 1024, "--threads must be in [1, 1024], got " + str(s.threads));
  require(std::isfinite(s.clip) && s.clip >= 0, "--clip must be >= 0, got " + str(s.clip));
  require(std::isfinite(s.target) && s.target >= 0 && s.target <= 1, "--target must be in [0, 1], got " + str(s.target));
  require_fraction("--label-smoothing", s.label_smoothing);
  require(s.probe_every >= 0, "--probe-every must be >= 0 (0 = off), got " + str(s.probe_every));
  require(std::isfinite(s.sharpness_tol) && s.sharpness_tol > 0 && s.sharpness_tol < 1,
          "--sharpness-tol must be in (0, 1), got " + str(s.sharpness_tol));
  const TrainSettings defaults = default_settings();
  require(s.probe_sharpness > 0 || (s.sharpness_tol == defaults.sharpness_tol &&
                                    s.sharpness_iters == defaults.sharpness_iters),
          "--sharpness-tol and --sharpness-iters apply to --probe-sharpness N, which is 0 (off)");
  if (s.probe_induction > 0) induction_layout(*task, s.model);  // a decoder, with room for a repeat
  check_optimization_flags(s);
  validate(s.optim);
  if (s.schedule.total_steps <= 0) s.schedule.total_steps = s.steps;
  if (s.schedule.d_model <= 0) s.schedule.d_model = s.model.d_model;
  validate(s.schedule, s.optim.lr);
  s.task.seed = s.seed;
}

void check_train_size(const TrainSettings& s, const Task& task) {
  const int64_t n = s.train_size;
  if (n == 0) return;
  if (task.own_train())
    throw ValueError("--train-size " + str(n) + " does not apply to task '" + s.task.name + "': its training set is " +
                     "--train-fraction " + str(s.task.train_fraction) + " of all pairs (" +
                     str(task.own_train()->size()) + " pairs); set --train-fraction instead");
  if (task.own_heldout())
    throw ValueError("--train-size " + str(n) + " applies to generated tasks: task '" + s.task.name +
                     "' trains on the fixed set its --file holds (less the held-out part)");
  const int64_t inputs = task.input_space_size(), left = inputs - s.heldout;
  if (n > left)
    throw ValueError("--train-size " + str(n) + " is more than the " + str(left) + " distinct inputs of task '" +
                     s.task.name + "' left after the " + str(s.heldout) + " held out (of " + str(inputs) +
                     "); lower --train-size to at most " + str(left) + " or widen the task");
}


void check_heldout(const TrainSettings& s) { check_heldout(s, *make_task(s.task)); }

void check_heldout(const TrainSettings& s, const Task& task_ref) {
  const Task* task = &task_ref;
  // Held-out inputs never occur in training: past half of the inputs, a model
  // is scored on more than it can learn from.
  const int64_t inputs = task->input_space_size();
  if (!task->own_heldout() && s.heldout >= inputs)
    throw ValueError("--heldout " + str(s.heldout) + " leaves nothing to train on: task '" + s.task.name + "' has only " +
                     str(inputs) + " distinct inputs; lower --heldout to at most " + str(inputs / 2) + " or widen the task");
  if (!task->own_heldout() && s.heldout > inputs / 2)
    throw ValueError("--heldout " + str(s.heldout) + " is more than half of the " + str(inputs) +
                     " distinct inputs of task '" + s.task.name + "', leaving " + str(inputs - s.heldout) +
                     " to train on; lower --heldout to at most " + str(inputs / 2) + " or widen the task");
  check_pairs_heldout(s, *task);
  check_modular_heldout(s, *task);
  check_train_size(s, *task);
}

}  // namespace attnlab
