// The smallest complete training program: reverse 8 symbols with a small
// transformer encoder, trained by the library's Trainer. Exits 0 only if
// held-out exact match (greedy decoding, inputs never trained on) reaches 90%.
#include <cstdio>

#include "training/trainer.h"

int main() {
  attnlab::TrainSettings s = attnlab::default_settings();  // reverse, 10 symbols, length 8, encoder
  s.model.d_model = 32;
  s.model.n_heads = 2;
  s.model.d_ff = 64;
  s.steps = 600;
  s.heldout = 200;
  s.target = 0.95;  // stop once held-out exact match reaches it
  s.optim.lr = 3e-3;
  attnlab::finalize(s);

  attnlab::TrainState state(s);
  attnlab::TrainerOptions options;
  options.on_step = [](const attnlab::ProgressStats& p) {
    if (p.step % 100 == 0) std::printf("step %lld  loss %.4f\n", static_cast<long long>(p.step), p.loss);
  };
  attnlab::TrainOutcome out = attnlab::Trainer(state, options).run();

  double exact = out.heldout.accuracy.exact;
  std::printf("%lld steps, held-out exact match %.3f (needs >= 0.900)\n", static_cast<long long>(out.last_step), exact);
  return out.end == attnlab::TrainEnd::finished && exact >= 0.9 ? 0 : 1;
}
