#include "cli/train_options.h"

#include <algorithm>
#include <vector>

#include "framework/error.h"

namespace attnlab::cli {

OptionSet task_options(TaskConfig& t) {
  OptionSet o("Task");
  o.add("task", &t.name,
        "copy | reverse | sort | add | duplicate | induction | recall (attnlab tasks lists them) | pairs | text (from --file)")
      .add("vocab", &t.vocab, "number of task symbols (the model's V adds 4 specials)")
      .add("min-len", &t.min_len, "shortest input sequence")
      .add("max-len", &t.max_len, "longest input sequence")
      .add("digits", &t.digits, "add: digits per operand")
      .add("span", &t.span, "induction: symbols to continue after the cue")
      .add("file", &t.file, "pairs: input<TAB>output lines; text: any text (character-level LM)")
      .add("heldout-file", &t.heldout_file, "pairs: held-out input<TAB>output lines (default: --heldout-fraction of --file)")
      .add("heldout-fraction", &t.heldout_fraction,
           "pairs: share of the distinct inputs held out (by --seed); text: share of the file held out at its end")
      .add("tokenize", &t.tokenize, "pairs: words (separated by spaces) | chars (every character a token)")
      .add("seq-len", &t.seq_len, "text: characters per training window (the model's context)");
  return o;
}

OptionSet model_options(TrainSettings& s) {
  TransformerConfig& m = s.model;
  OptionSet o("Model");
  o.add("model", &m.arch, "encoder (tagger, one output per input position) | decoder (causal LM) | seq2seq")
      .add("d-model", &m.d_model, "model width d")
      .add("heads", &m.n_heads, "attention heads h")
      .add("layers", &m.n_layers, "blocks L (per stack for seq2seq)")
      .add("d-ff", &m.d_ff, "feed-forward hidden width")
      .add("d-k", &m.d_k, "query/key width per head; 0 = d/h")
      .add("d-v", &m.d_v, "value width per head; 0 = d/h")
      .add("positional", &m.positional, "sinusoidal | learned | rope | none")
      .add("positions", &s.positions, "positional table size (longest sequence); 0 = max(64, 2 x the longest training sequence)")
      .add("random-positions", &m.random_positions,
           "P > 0: randomised positions (sinusoidal, learned): in training each sequence reads a sorted random "
           "subset of the positions [0, P), in evaluation an even spread over [0, P); the table has P rows "
           "(--positions P or unset); 0 = off (docs/length.md)")
      .add("norm", &m.norm, "pre (pre-LN) | post (post-LN, as in Vaswani et al.)")
      .add("attn-scale", &m.attn_scale, "attention logit scale: sqrt (1/sqrt(d_k)) | none | linear (1/d_k) | a number")
      .add("activation", &m.activation, "feed-forward activation: relu | gelu")
      .add("dropout", &m.dropout, "dropout on embeddings, sublayer outputs and inside the feed-forward")
      .add("attn-dropout", &m.attn_dropout, "dropout on attention weights")
      .add("init", &m.init,
           "initial weights: auto (gpt2 with --positional learned, torch otherwise; config.ini records which) | "
           "torch (each layer's PyTorch default: token embeddings N(0, 1), the scale of sinusoidal positions) | "
           "gpt2 (N(0, 0.02), residual output projections N(0, 0.02/sqrt(2 x layers)), biases 0: token embeddings "
           "at the scale of learned positions)")
      .flag("tie-embeddings", &m.tie_embeddings, "output projection shares the input embedding")
      .flag("parameter-free-attention", &m.parameter_free_attention,
            "attention without Q/K/V/O projections (softmax(x_i . x_j) weights over the inputs); its scores are "
            "symmetric and peak on the diagonal, so it cannot solve reverse with the encoder or copy with the decoder");
  return o;
}

OptionSet optimization_options(TrainSettings& s) {
  OptionSet o("Optimization");
  o.add("optimizer", &s.optim.name, "sgd | adam | adamw")
      .add("lr", &s.optim.lr, "learning rate (noam: a multiplier of d^-0.5 min(k^-0.5, k w^-1.5))")
      .add("momentum", &s.optim.momentum, "sgd momentum")
      .flag("nesterov", &s.optim.nesterov, "sgd: Nesterov momentum")
      .add("beta1", &s.optim.beta1, "adam/adamw first-moment decay")
      .add("beta2", &s.optim.beta2, "adam/adamw second-moment decay")
      .add("eps", &s.optim.eps, "adam/adamw epsilon")
      .add("weight-decay", &s.optim.weight_decay, "adamw: decoupled decay; sgd/adam: L2 (not on biases, LayerNorm, embeddings)")
      .flag("decay-all", &s.optim.decay_all, "apply weight decay to every parameter")
      .add("schedule", &s.schedule.name, "constant | linear | cosine | noam")
      .add("warmup", &s.schedule.warmup, "linear warmup steps")
      .add("min-lr", &s.schedule.min_lr, "linear/cosine: final learning rate")
      .add("clip", &s.clip, "clip the global gradient norm to this; 0 = off")
      .add("label-smoothing", &s.label_smoothing, "label smoothing of the cross-entropy, in [0, 1)");
  return o;
}

OptionSet training_options(TrainSettings& s) {
  OptionSet o("Training");
  o.add("steps", &s.steps, "optimizer steps (the last step when resuming)")
      .add("batch-size", &s.batch_size, "sequences per step")
      .add("grad-accum", &s.grad_accum,
           "micro-batches per step (and process): --batch-size is split into this many, their gradients summed")
      .add("eval-every", &s.eval_every, "held-out evaluation and checkpoint every this many steps")
      .add("heldout", &s.heldout, "held-out examples (disjoint from training)")
      .add("target", &s.target, "stop once held-out exact match reaches this fraction; 0 = run every step")
      .add("target-patience", &s.target_patience,
           "the target must hold at this many consecutive evaluations (the run is solved at the first of them)")
      .add("log-every", &s.log_every, "metrics row (and plain progress line) every this many steps")
      .add("keep", &s.keep, "checkpoints kept in the run directory")
      .add("on-nan", &s.on_nan, "a non-finite loss or gradient: stop (keep the last checkpoint) | skip (the step); a non-finite weight always stops")
      .add("seed", &s.seed, "seed of initialisation, data and dropout")
      .add("threads", &s.threads, "OpenMP threads (results are bitwise reproducible for a fixed seed and thread count)")
      .add("probe-every", &s.probe_every,
           "log gradient-flow and attention instruments (probe_*.csv in the run) at step 1 and every this many steps; 0 = off")
      .flag("tensorboard", &s.tensorboard,
            "also write metrics.csv's values (and with --probe-every the instruments) as TensorBoard event files in the run");
  return o;
}

OptionSet all_train_options(TrainSettings& s) {
  OptionSet o("");
  o.add(task_options(s.task)).add(model_options(s)).add(optimization_options(s)).add(training_options(s));
  return o;
}

namespace {

// Each task's own options, and the tasks they apply to (see datasets/task.h).
struct TaskOption {
  const char* name;
  std::vector<std::string> tasks;
};
const TaskOption kTaskOptions[] = {
    {"vocab", {"copy", "reverse", "sort", "duplicate", "induction", "recall"}},
    {"min-len", {"copy", "reverse", "sort", "duplicate", "induction", "recall"}},
    {"max-len", {"copy", "reverse", "sort", "duplicate", "induction", "recall"}},
    {"digits", {"add"}},
    {"span", {"induction"}},
    {"file", {"pairs", "text"}},
    {"heldout-file", {"pairs"}},
    {"heldout-fraction", {"pairs", "text"}},
    {"tokenize", {"pairs"}},
    {"seq-len", {"text"}},
};

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

// The optimizer's options are checked on their values (finalize), which a
// run's config.ini keeps at their defaults; the task's are not (config.ini
// holds --vocab of an add run), so only what the user wrote is checked here.

void check_given_flags(const TrainSettings& s, const std::set<std::string>& given_names) {
  auto given = [&](const std::string& name) { return given_names.count(name) > 0; };
  const std::string& task = s.task.name;
  for (const TaskOption& o : kTaskOptions)
    if (given(o.name) && std::find(o.tasks.begin(), o.tasks.end(), task) == o.tasks.end())
      throw ValueError("--" + std::string(o.name) + " applies to --task " + listed(o.tasks) + ", not " + task);
  const bool file_heldout = task == "pairs" || task == "text";
  if (given("heldout") && file_heldout)
    throw ValueError(std::string("--heldout applies to generated tasks, not ") + task + ": its held-out examples are " +
                     (s.task.heldout_file.empty() ? "--heldout-fraction of --file" : "the pairs of --heldout-file"));
  if (given("heldout-fraction") && !s.task.heldout_file.empty())
    throw ValueError("--heldout-fraction does not apply with --heldout-file: the held-out pairs are that file's");
  if (given("heads") && s.model.parameter_free_attention)
    throw ValueError("--heads does not apply to --parameter-free-attention (one head over the whole width)");
}

}  // namespace attnlab::cli
