#pragma once
// Optimizer: the base of SGD, Adam and AdamW over named parameters.
//
// An optimizer holds Var handles to the parameters and updates Var::value()
// in place from Var::grad() on step(). A parameter without a gradient buffer
// (never reached by backward) is skipped, as torch skips `p.grad is None`.
//
// Weight decay by name. Unless OptimizerConfig::decay_all is set, no weight
// decay is applied to a parameter whose dotted name
//   - ends in "bias" as its last segment                 ("fc1.bias", "bias"),
//   - has a LayerNorm segment: "ln", "ln" + digits, or "ln_" + anything
//                                                     ("ln1.weight", "ln_f.weight"),
//   - has a segment containing "emb"                  ("tok_emb.weight", "pos_emb.weight").
// Decaying these pulls LayerNorm gains towards 0 and embeddings of rare tokens
// towards the origin, which hurts and is not what the decay is for (GPT-2 and
// nanoGPT exclude them too). default_no_decay() below is the rule.
//
// State. state() returns named tensors: the per-parameter buffers as
// "<kind>.<param>" (e.g. "momentum.fc1.weight", "exp_avg.fc1.weight",
// "exp_avg_sq.fc1.weight"), for Adam/AdamW the number of updates each
// parameter received as "step.<param>" (torch counts per parameter, which
// matters for bias correction when a parameter gets its first gradient late),
// and the number of step() calls as a 1-element tensor "step". Counts are
// stored in Real, exact up to 2^24 steps in float32. load_state() restores
// exactly what state() returned, so save -> load -> step is bitwise the same
// as an uninterrupted run. Buffers are allocated at construction (zeros),
// so the set of entries never depends on how far training got.
//
// Sharding (ZeRO-1, shard()): the optimizer keeps the buffers of, and
// updates, only an owned range of each parameter's elements; the caller
// brings the other elements' new values from their owners. Owned ranges start
// at a multiple of kOptimChunk (framework/optim/chunks.h), so the update runs
// over the same chunks, from equally aligned buffers, and gives the bits of
// the unsharded update.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/autograd.h"
#include "framework/choices.h"

namespace attnlab {

using NamedParams = std::vector<std::pair<std::string, Var>>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Elements [begin, end) of a parameter (in its row-major order).
struct ElementRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Which update rule (framework/choices.h): sgd, adam (L2 decay), adamw (decoupled decay).
enum class OptimizerKind { sgd, adam, adamw };
const ChoiceNames<OptimizerKind>& choice_names(OptimizerKind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 1e-3;
  double momentum = 0;  // SGD only
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam/AdamW only
  double weight_decay = 0.01;  // SGD and Adam: L2 added to the gradient; AdamW: decoupled
  bool nesterov = false;       // SGD only; needs momentum > 0
  bool decay_all = false;      // true: decay every parameter, names notwithstanding
};

// Throws ValueError naming the offending value: lr <= 0, betas outside [0, 1), eps <= 0, negative weight decay
// or momentum, nesterov without momentum. Non-finite values are rejected too.
void validate(const OptimizerConfig& config);

// The default rule above: true when a parameter of this name gets no decay.
bool default_no_decay(const std::string& dotted_name);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  void step();
  void zero_grad();

  // The learning rate of the next step (schedules set it before each step).
  void set_lr(double lr);  // ValueError unless lr >= 0 and finite
  double lr() const { return lr_; }
  int64_t steps() const { return steps_; }

  // Per-parameter weight decay actually applied (0 for excluded names).
  double weight_decay_of(const std::string& param_name) const;
  const NamedParams& params() const { return params_; }

  // Sharded: each buffer entry holds the owned elements only, as one row
  // (shape {size}) unless the whole parameter is owned.
  NamedTensors state() const;
  // Entries of full shape, also when sharded (which keeps the owned part).
  // ValueError naming the entry when one is missing, unexpected, of the
  // wrong shape, or (for counts) not a non-negative integer. Nothing is
  // changed unless every entry is valid.
  void load_state(const NamedTensors& state);

  // Keeps the buffers of, and updates, only owned[i] of parameter i from now
  // on (the rest of each buffer is dropped); once. ValueError unless there is one
  // range per parameter, inside it, starting at 0 or a multiple of kOptimChunk.
  void shard(const std::vector<ElementRange>& owned);
  bool sharded() const { return sharded_; }
  const std::vector<ElementRange>& owned() const { return owned_; }
  // The kinds of per-element buffers, in state() order ("exp_avg", "exp_avg_sq"; "momentum").
  std::vector<std::string> buffer_kinds() const;
  // Bytes of the per-element buffers this optimizer holds.
  int64_t state_bytes() const;

 protected:
  Optimizer(const NamedParams& params, const OptimizerConfig& config);

  // Adds a buffer of each parameter's shape, zero, saved as "<kind>.<param>";
  // returns its index for buffer().
  size_t add_buffer(const std::string& kind);
  Tensor& buffer(size_t kind, size_t param) { return buffers_[kind].tensors[param]; }
  // Subclasses that need per-parameter update counts (Adam) turn them on.
  void count_param_steps() { count_param_steps_ = true; }
  int64_t param_steps(size_t param) const { return param_steps_[param]; }

  // Update n elements of parameter i (value in place) from their gradient:
  // the owned ones, whose buffer(kind, i) elements start at buffer's data().
  // `weight_decay` is the coefficient for this parameter (0 when excluded).
  // param_steps(i) already includes this update.
  virtual void update(size_t i, Real* value, const Real* grad, int64_t n, double weight_decay) = 0;

 private:
  struct Buffer {
    std::string kind;
    std::vector<Tensor> tensors;  // one per parameter
  };
  NamedParams params_;
  std::vector<double> decay_;  // per parameter
  std::vector<Buffer> buffers_;
  std::vector<int64_t> param_steps_;
  bool count_param_steps_ = false;
  std::vector<ElementRange> owned_;  // per parameter; all of it unless sharded
  bool sharded_ = false;
  double lr_;
  int64_t steps_ = 0;
};

// sgd -> Sgd, adam -> Adam (L2), adamw -> Adam (decoupled). Validates first.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const NamedParams& named_params);

}  // namespace attnlab
