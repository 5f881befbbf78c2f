#include "cli/train_settings.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "framework/error.h"

namespace attnlab::cli {

TrainSettings default_settings() {
  TrainSettings s;
  s.task.name = "reverse";
  s.task.vocab = 10;
  s.task.min_len = s.task.max_len = 8;
  s.model.arch = "encoder";
  s.model.d_model = 64;
  s.model.n_heads = 4;
  s.model.n_layers = 2;
  s.model.d_ff = 256;
  s.optim.lr = 1e-3;
  return s;
}

OptionSet task_options(TaskConfig& t) {
  OptionSet o("Task");
  o.add("task", &t.name, "copy | reverse | sort | add | duplicate (attnlab tasks lists them)")
      .add("vocab", &t.vocab, "number of task symbols (the model's V adds 4 specials)")
      .add("min-len", &t.min_len, "shortest input sequence")
      .add("max-len", &t.max_len, "longest input sequence")
      .add("digits", &t.digits, "add: digits per operand");
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
      .add("norm", &m.norm, "pre (pre-LN) | post (post-LN, as in Vaswani et al.)")
      .add("attn-scale", &m.attn_scale, "attention logit scale: sqrt (1/sqrt(d_k)) | none | linear (1/d_k) | a number")
      .add("activation", &m.activation, "feed-forward activation: relu | gelu")
      .add("dropout", &m.dropout, "dropout on embeddings, sublayer outputs and inside the feed-forward")
      .add("attn-dropout", &m.attn_dropout, "dropout on attention weights")
      .flag("tie-embeddings", &m.tie_embeddings, "output projection shares the input embedding")
      .flag("parameter-free-attention", &m.parameter_free_attention,
            "attention without Q/K/V/O projections (softmax(x_i . x_j) weights over the inputs)");
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
      .add("eval-every", &s.eval_every, "held-out evaluation and checkpoint every this many steps")
      .add("heldout", &s.heldout, "held-out examples (disjoint from training)")
      .add("target", &s.target, "stop once held-out exact match reaches this fraction; 0 = run every step")
      .add("log-every", &s.log_every, "metrics row (and plain progress line) every this many steps")
      .add("keep", &s.keep, "checkpoints kept in the run directory")
      .add("on-nan", &s.on_nan, "a non-finite loss or gradient: stop (keep the last checkpoint) | skip (the step)")
      .add("seed", &s.seed, "seed of initialisation, data and dropout")
      .add("threads", &s.threads, "OpenMP threads (results are bitwise reproducible for a fixed seed and thread count)")
      .add("probe-every", &s.probe_every,
           "log gradient-flow and attention instruments (probe_*.csv in the run) at step 1 and every this many steps; 0 = off");
  return o;
}

OptionSet all_train_options(TrainSettings& s) {
  OptionSet o("");
  o.add(task_options(s.task)).add(model_options(s)).add(optimization_options(s)).add(training_options(s));
  return o;
}

int64_t needed_positions(const Task& task, const std::string& arch) {
  int64_t in = task.max_input_len(), out = task.max_output_len();
  if (arch == "decoder") return in + out + 2;  // [bos] src [sep] tgt (eos is only a target)
  if (arch == "seq2seq") return std::max(in, out + 1);
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
}  // namespace

void finalize(TrainSettings& s) {
  s.task.validate();
  auto task = make_task(s.task);
  s.model.vocab_size = task->vocab_size();
  require(s.model.arch == "encoder" || s.model.arch == "decoder" || s.model.arch == "seq2seq",
          "--model must be encoder, decoder or seq2seq, got '" + s.model.arch + "'");
  if (s.model.arch == "encoder" && task->max_output_len() > task->min_input_len())
    throw ValueError("the encoder tagger gives one output per input position, but task '" + s.task.name +
                     "' has outputs of up to " + str(task->max_output_len()) + " tokens for inputs of " +
                     str(task->min_input_len()) + "; use --model decoder or --model seq2seq");
  int64_t needed = needed_positions(*task, s.model.arch);
  require(s.positions >= 0, "--positions must be >= 0, got " + str(s.positions));
  s.model.max_len = s.positions > 0 ? s.positions : std::max<int64_t>(64, 2 * needed);
  require(needed <= s.model.max_len, "the task needs sequences of " + str(needed) + " positions but --positions is " +
                                         str(s.model.max_len) + " (the positional table); raise --positions");
  s.model.validate();
  require(s.steps >= 1, "--steps must be >= 1, got " + str(s.steps));
  require(s.batch_size >= 1, "--batch-size must be >= 1, got " + str(s.batch_size));
  require(s.eval_every >= 1, "--eval-every must be >= 1, got " + str(s.eval_every));
  require(s.heldout >= 1, "--heldout must be >= 1, got " + str(s.heldout));
  require(s.log_every >= 1, "--log-every must be >= 1, got " + str(s.log_every));
  require(s.keep >= 1, "--keep must be >= 1, got " + str(s.keep));
  require(s.threads >= 1 && s.threads <= 1024, "--threads must be in [1, 1024], got " + str(s.threads));
  require(std::isfinite(s.clip) && s.clip >= 0, "--clip must be >= 0, got " + str(s.clip));
  require(std::isfinite(s.target) && s.target >= 0 && s.target <= 1, "--target must be in [0, 1], got " + str(s.target));
  require(s.label_smoothing >= 0 && s.label_smoothing < 1,
          "--label-smoothing must be in [0, 1), got " + str(s.label_smoothing));
  require(s.on_nan == "stop" || s.on_nan == "skip", "--on-nan must be stop or skip, got '" + s.on_nan + "'");
  require(s.probe_every >= 0, "--probe-every must be >= 0 (0 = off), got " + str(s.probe_every));
  validate(s.optim);
  if (s.schedule.total_steps <= 0) s.schedule.total_steps = s.steps;
  if (s.schedule.d_model <= 0) s.schedule.d_model = s.model.d_model;
  validate(s.schedule, s.optim.lr);
  s.task.seed = s.seed;
}

}  // namespace attnlab::cli
