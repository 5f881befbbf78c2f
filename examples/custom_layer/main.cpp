// A layer attnlab does not have, RMSNorm (Zhang & Sennrich 2019), written as a
// Module from existing ops, gradient-checked with attnlab::gradcheck, then
// trained inside a tiny classifier. Exits 0 only if the check passes and the
// classifier learns (held-out accuracy >= 90%).
#include <cstdio>
#include <memory>

#include "framework/gradcheck.h"
#include "framework/nn/linear.h"
#include "framework/ops/ops.h"
#include "framework/optim/optim.h"

using namespace attnlab;

// y = x / sqrt(mean(x^2 over the last axis) + eps) * gain. Built from ops that
// have their own backward, so it needs none: autograd composes them.
class RmsNorm : public Module {
 public:
  explicit RmsNorm(int64_t d) { gain = register_parameter("weight", Tensor({d}, 1)); }
  Var forward(const Var& x) const {
    Var rms = sqrt(add_scalar(mean(mul(x, x), -1, /*keepdim=*/true), Real(1e-6)));  // (..., 1)
    return mul(div(x, rms), gain);  // gain (d) broadcasts over the rows
  }
  Var gain;
};

// Tiny classifier: which of the 4 inputs is largest? 4 -> 32 -> RMSNorm -> GELU -> 4.
struct Classifier : Module {
  explicit Classifier(Rng& init)
      : fc1(register_module("fc1", std::make_shared<Linear>(4, 32, init))),
        norm(register_module("norm", std::make_shared<RmsNorm>(32))),
        fc2(register_module("fc2", std::make_shared<Linear>(32, 4, init))) {}
  Var forward(const Var& x) const { return fc2->forward(gelu(norm->forward(fc1->forward(x)))); }
  std::shared_ptr<Linear> fc1;
  std::shared_ptr<RmsNorm> norm;
  std::shared_ptr<Linear> fc2;
};

// n rows of 4 uniform numbers and the index of each row's largest.
void draw(Rng& rng, int64_t n, Tensor& x, IntTensor& y) {
  x = uniform_tensor({n, 4}, rng);
  y = IntTensor({n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 1; j < 4; ++j)
      if (x[i * 4 + j] > x[i * 4 + y.data[i]]) y.data[i] = static_cast<int32_t>(j);
}

int main() {
  // 1. The gradient of RMSNorm with respect to its input and its gain, in one call.
  Rng rng(7);
  RmsNorm probe(5);
  probe.gain.value() = uniform_tensor({5}, rng, 0.5, 1.5);
  Var x(uniform_tensor({3, 5}, rng), /*requires_grad=*/true);
  // probe.gain is passed as an input: a Var is a handle, so perturbing in[1] perturbs the layer's own gain.
  GradcheckResult check =
      gradcheck([&probe](const std::vector<Var>& in) { return probe.forward(in[0]); }, {x, probe.gain});
  std::printf("%s\n", check.message().c_str());
  if (!check.ok) return 1;

  // 2. Train it: AdamW on fresh batches, then accuracy on held-out rows.
  Rng init(1), data(2), heldout_rng(3);
  Classifier model(init);
  OptimizerConfig opt;
  opt.lr = 1e-2;
  auto optimizer = make_optimizer(opt, model.named_parameters());
  Tensor xb;
  IntTensor yb;
  for (int step = 1; step <= 400; ++step) {
    draw(data, 64, xb, yb);
    optimizer->zero_grad();
    Var loss = cross_entropy(model.forward(Var(xb)), yb);
    backward(loss);
    optimizer->step();
    if (step % 100 == 0) std::printf("step %d  loss %.4f\n", step, static_cast<double>(loss.item()));
  }
  draw(heldout_rng, 1000, xb, yb);
  NoGradGuard no_grad;
  Var logits = model.forward(Var(xb));  // (1000, 4)
  int64_t correct = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < 4; ++j)
      if (logits.value()[i * 4 + j] > logits.value()[i * 4 + best]) best = j;
    correct += best == yb.data[i];
  }
  std::printf("held-out accuracy %.3f (needs >= 0.900)\n", correct / 1000.0);
  return correct >= 900 ? 0 : 1;
}
