#include "framework/nn/feed_forward.h"

#include "framework/ops/elementwise.h"

namespace attnlab {

const ChoiceNames<Activation>& choice_names(Activation) {
  static const ChoiceNames<Activation> names = {{Activation::relu, "relu"}, {Activation::gelu, "gelu"}};
  return names;
}

FeedForward::FeedForward(int64_t d, int64_t d_ff, Activation act, Real dropout_p, Rng& init, Rng& dropout_rng,
                         bool bias)
    : act_(act) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d, d_ff, init, bias));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_ff, d, init, bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p, dropout_rng));
}

Var FeedForward::forward(const Var& x) const {
  Var h = hooks_.pass("hidden", act_ == Activation::relu ? fc1->forward_relu(x) : gelu(fc1->forward(x)));  // (..., d_ff)
  return hooks_.pass("out", fc2->forward(dropout->forward(h)));
}

void FeedForward::attach_hooks(HookTable& table, const std::string& prefix) {
  hooks_.attach(table, prefix);
  hooks_.declare("hidden", "B, T, d_ff");
  hooks_.declare("out", "B, T, d");
}

}  // namespace attnlab
