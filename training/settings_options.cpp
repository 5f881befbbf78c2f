#include "training/settings_options.h"

#include "models/model_options.h"

namespace attnlab {

namespace {

using S = TrainSettings;
using Binder = std::function<FieldRef(TrainSettings&)>;

// A field of TrainSettings, or a field of one of its parts (s.optim.lr).
template <class T>
Binder at(T S::*field) {
  return [field](S& s) -> FieldRef { return &(s.*field); };
}
template <class Part, class T>
Binder at(Part S::*part, T Part::*field) {
  return [part, field](S& s) -> FieldRef { return &((s.*part).*field); };
}

const bool may_change = true, fixed = false;  // by --resume

std::vector<TrainOption> task_group() {
  const OptionGroup g = OptionGroup::task;
  return {
      {g, "task", at(&S::task, &TaskConfig::name),
       "copy | reverse | sort | add | duplicate | induction | recall | repeat | modular (attnlab tasks lists them) | "
       "pairs | text (from --file)"},
      {g, "vocab", at(&S::task, &TaskConfig::vocab), "number of task symbols (the model's V adds 4 specials)",
       fixed, 2},
      {g, "min-len", at(&S::task, &TaskConfig::min_len), "shortest input sequence (repeat: of the sequence repeated)", fixed, 1},
      {g, "max-len", at(&S::task, &TaskConfig::max_len), "longest input sequence (repeat: of the sequence repeated)"},
      {g, "digits", at(&S::task, &TaskConfig::digits), "add: digits per operand", fixed, 1},
      {g, "span", at(&S::task, &TaskConfig::span), "induction: symbols to continue after the cue"},
      {g, "file", at(&S::task, &TaskConfig::file),
       "pairs: input<TAB>output lines; text: any text (character-level LM)"},
      {g, "heldout-file", at(&S::task, &TaskConfig::heldout_file),
       "pairs: held-out input<TAB>output lines (default: --heldout-fraction of --file)"},
      {g, "heldout-fraction", at(&S::task, &TaskConfig::heldout_fraction),
       "pairs: share of the distinct inputs held out (by --seed); text: share of the file held out at its end"},
      {g, "tokenize", at(&S::task, &TaskConfig::tokenize),
       "pairs: {}"},
      {g, "seq-len", at(&S::task, &TaskConfig::seq_len), "text: characters per training window (the model's context)"},
      {g, "operation", at(&S::task, &TaskConfig::operation), "modular: c = a op b mod --modulus; op: {}"},
      {g, "modulus", at(&S::task, &TaskConfig::modulus),
       "modular: the modulus p, 2..1000 (prime for div); one token per residue 0..p-1"},
      {g, "train-fraction", at(&S::task, &TaskConfig::train_fraction),
       "modular: share of all p² pairs (div: p(p-1)) in the fixed training set, drawn by --seed; the held-out set "
       "is exactly the rest (--heldout and --train-size do not apply; docs/data.md)"},
  };
}

// The model's options with a flag (models/model_options.h), and the
// positional table's size, which the run derives max_len from, after --positional.
std::vector<TrainOption> model_group() {
  std::vector<TrainOption> out;
  for (const ModelOption& o : model_options()) {
    if (o.flag[0] == '\0') continue;
    const auto field = o.field;
    out.push_back({OptionGroup::model, o.flag,
                   [field](S& s) { return std::visit([&](auto m) -> FieldRef { return &(s.model.*m); }, field); },
                   o.help});
    if (std::string(o.flag) == "positional")
      out.push_back({OptionGroup::model, "positions", at(&S::positions),
                     "positional table size (longest sequence); 0 = max(64, 2 x the longest training sequence)", fixed, 0});
  }
  return out;
}

std::vector<TrainOption> optimization_group() {
  const OptionGroup g = OptionGroup::optimization;
  return {
      {g, "optimizer", at(&S::optim, &OptimizerConfig::kind), "{}"},
      {g, "lr", at(&S::optim, &OptimizerConfig::lr), "learning rate (noam: a multiplier of d^-0.5 min(k^-0.5, k w^-1.5))"},
      {g, "momentum", at(&S::optim, &OptimizerConfig::momentum), "sgd momentum"},
      {g, "nesterov", at(&S::optim, &OptimizerConfig::nesterov), "sgd: Nesterov momentum"},
      {g, "beta1", at(&S::optim, &OptimizerConfig::beta1), "adam/adamw first-moment decay"},
      {g, "beta2", at(&S::optim, &OptimizerConfig::beta2), "adam/adamw second-moment decay"},
      {g, "eps", at(&S::optim, &OptimizerConfig::eps), "adam/adamw epsilon"},
      {g, "weight-decay", at(&S::optim, &OptimizerConfig::weight_decay),
       "adamw: decoupled decay; sgd/adam: L2 (not on biases, LayerNorm, embeddings)"},
      {g, "decay-all", at(&S::optim, &OptimizerConfig::decay_all), "apply weight decay to every parameter"},
      {g, "schedule", at(&S::schedule, &ScheduleConfig::kind), "{}"},
      {g, "warmup", at(&S::schedule, &ScheduleConfig::warmup), "linear warmup steps", fixed, 0},
      {g, "min-lr", at(&S::schedule, &ScheduleConfig::min_lr), "linear/cosine: final learning rate"},
      {g, "clip", at(&S::clip), "clip the global gradient norm to this; 0 = off"},
      {g, "label-smoothing", at(&S::label_smoothing), "label smoothing of the cross-entropy, in [0, 1)"},
  };
}

// The training group's last options: what a run records beside metrics.csv.
std::vector<TrainOption> recording_options();

std::vector<TrainOption> training_group() {
  const OptionGroup g = OptionGroup::training;
  std::vector<TrainOption> out = {
      {g, "steps", at(&S::steps), "optimizer steps (the last step when resuming)", may_change, 1},
      {g, "batch-size", at(&S::batch_size), "sequences per step", fixed, 1},
      {g, "train-size", at(&S::train_size),
       "generated tasks but modular (its set is --train-fraction): train on a fixed set of this many distinct "
       "examples (none held out), in batches of "
       "--batch-size reshuffled every epoch; --batch-size equal to it: the whole set in one order every step "
       "(full-batch gradient descent); 0 = a fresh stream of examples (docs/data.md)",
       fixed, 0},
      {g, "grad-accum", at(&S::grad_accum),
       "micro-batches per step (and process): --batch-size is split into this many, their gradients summed", may_change,
       1},
      {g, "reduction", at(&S::reduction),
       "under mpirun, how the processes sum their gradients, in micro-batch order either way (the same bits): "
       "{} (docs/distributed.md)",
       may_change},
      {g, "shard-optimizer", at(&S::shard_optimizer),
       "under mpirun, each process keeps the optimizer state of its slice of the parameters only and updates that "
       "slice, and the slices are gathered (ZeRO-1: the same bits, 1/N of the state; docs/distributed.md)",
       may_change},
      {g, "eval-every", at(&S::eval_every), "held-out evaluation and checkpoint every this many steps", may_change,
       1},
      {g, "heldout", at(&S::heldout), "held-out examples (disjoint from training)", fixed, 1},
      {g, "target", at(&S::target), "stop once held-out exact match reaches this fraction; 0 = run every step", may_change},
      {g, "target-patience", at(&S::target_patience),
       "the target must hold at this many consecutive evaluations (the run is solved at the first of them)", may_change,
       1},
      {g, "log-every", at(&S::log_every), "metrics row (and plain progress line) every this many steps", may_change, 1},
      {g, "keep", at(&S::keep), "checkpoints kept in the run directory", may_change, 1},
      {g, "on-nan", at(&S::on_nan),
       "a non-finite loss or gradient: {}; a non-finite weight always stops",
       may_change},
      {g, "seed", at(&S::seed), "seed of initialisation, data and dropout"},
      {g, "threads", at(&S::threads),
       "OpenMP threads: each runs whole slices of the batch (N threads give the bits of --grad-accum N on one "
       "thread) where the batch splits evenly among them and no probe records the step, else every op is split "
       "among them; bitwise reproducible for a fixed seed and thread count",
       may_change},
      {g, "precision", at(&S::precision),
       "of the matrix products: {}"},
  };
  for (TrainOption& o : recording_options()) out.push_back(std::move(o));
  return out;
}

std::vector<TrainOption> recording_options() {
  const OptionGroup g = OptionGroup::training;
  return {
      {g, "probe-every", at(&S::probe_every),
       "log gradient-flow and attention instruments (probe_*.csv in the run) at step 1 and every this many steps; 0 = off",
       may_change},
      {g, "noise-scale", at(&S::noise_scale),
       "record the gradient noise scale B_simple = tr(Sigma)/|G|^2 from the micro-batches' gradients, no extra pass "
       "(metrics.csv's noise_* columns; needs 2 or more micro-batches a step: --grad-accum or mpirun; "
       "docs/watching.md)",
       may_change},
      {g, "probe-sharpness", at(&S::probe_sharpness),
       "log the largest Hessian eigenvalue of the training loss (with adam/adamw also of the preconditioned "
       "Hessian) on step 1's batch to probe_sharpness.csv at step 1 and every this many steps; 0 = off",
       may_change, 0},
      {g, "sharpness-tol", at(&S::sharpness_tol),
       "--probe-sharpness: relative tolerance of the eigenvalue (Lanczos residual / eigenvalue)", may_change},
      {g, "sharpness-iters", at(&S::sharpness_iters),
       "--probe-sharpness: Hessian-vector products per eigenvalue at most (docs/curvature.md gives their cost)",
       may_change, 1},
      {g, "probe-induction", at(&S::probe_induction),
       "decoder: log each head's prefix-matching and previous-token scores on a fixed batch of repeated random "
       "sequences to probe_induction.csv at step 1 and every this many steps; 0 = off (docs/watching.md)",
       may_change, 0},
      {g, "tensorboard", at(&S::tensorboard),
       "also write metrics.csv's values (and with --probe-every the instruments) as TensorBoard event files in the run",
       may_change},
      {g, "report", at(&S::report),
       "write RUN/report.html when the run ends or is interrupted: attnlab report's page of it (curves, gradient "
       "flow, attention, answers)",
       may_change},
  };
}

}  // namespace

const ChoiceNames<OptionGroup>& choice_names(OptionGroup) {
  static const ChoiceNames<OptionGroup> names = {{OptionGroup::task, "Task"},
                                                 {OptionGroup::model, "Model"},
                                                 {OptionGroup::optimization, "Optimization"},
                                                 {OptionGroup::training, "Training"}};
  return names;
}

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> options = [] {
    std::vector<TrainOption> all;
    for (auto group : {task_group(), model_group(), optimization_group(), training_group()})
      all.insert(all.end(), group.begin(), group.end());
    return all;
  }();
  return options;
}

bool resume_may_change(const std::string& flag) {
  for (const TrainOption& o : train_options())
    if (flag == o.flag) return o.resume_may_change;
  return false;
}

}  // namespace attnlab
