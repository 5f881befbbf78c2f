#pragma once
// A whole model's analytic gradients against central
// finite differences of its loss on one random batch.
//
// The engine here is float32, so the check is built to see a wrong gradient
// through float32 noise:
//   - the loss for the differences is recomputed from the logits in double
//     (log-softmax and the mean over targets), so only the forward pass's own
//     rounding is left, about 1e-7 of each logit;
//   - the step is large (eps = 1e-2 by default): the rounding noise in the
//     difference quotient shrinks like 1/eps, the truncation error of the
//     central difference grows like eps² · f''' — for these smooth, O(1)-scaled
//     functions 1e-2 keeps both near 1e-5 of the loss scale (ReLU kinks crossed
//     by a step add a small error of the same order);
//   - the divisor is the step actually taken ((w+eps) − (w−eps) in float32);
//   - each tensor is checked at a random subset of its elements (--samples),
//     so every tensor is covered at a few seconds' cost;
//   - an element's error is the part of |a − n| above the float32 noise of
//     the quotient (2^-24 |L| / h), relative to max(|a|, |n|, atol), with atol
//     a fraction (--atol-frac, 1e-2) of the largest gradient in the model, so
//     elements whose true gradient is ~0 are judged on an absolute scale
//     rather than dividing noise by noise;
//   - ReLU kinks: a step that crosses a kink averages two slopes and misses
//     the analytic gradient (the slope on the weight's side) by up to one
//     token's whole contribution. Such an element shows one-sided differences
//     that disagree with each other beyond curvature and noise; it is retried
//     with the step divided by 4 (twice at most), which a kink at a fixed
//     distance eventually leaves, and counted in the "kinks" column.
// A factor-of-1.1 error in one tensor's gradient gives errors near 0.09 on
// every element above atol; the default tolerance is 1e-2.
//
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/random.h"
#include "models/batch.h"
#include "models/sequence_model.h"

namespace attnlab {

struct ModelGradcheckOptions {
  int64_t samples = 16;     // elements checked per parameter tensor (all when the tensor is smaller)
  double eps = 1e-2;        // finite-difference step (absolute)
  double tol = 1e-2;        // an element fails above this relative error
  double atol_frac = 1e-2;  // floor of the relative error's denominator, as a fraction of the largest gradient
  // Called after backward, before the comparison: tests break a gradient here.
  std::function<void(Module& model)> after_backward;
};

struct TensorGradcheck {
  std::string name;
  int64_t checked = 0;
  int64_t kinks = 0;        // elements retried with a shorter step (a kink inside the first)
  double max_abs_grad = 0;  // over the checked elements, analytic
  double max_abs_err = 0;
  double max_rel_err = 0;   // the part above float32 noise, relative
  bool ok = true;
};

struct ModelGradcheck {
  std::vector<TensorGradcheck> tensors;  // in the model's parameter order
  double atol = 0;                       // the absolute floor used
  bool ok = true;
};

// Checks every parameter tensor of `model` (put in eval mode first: dropout
// off) on `batch`, sampling elements with `rng`.
// (The CLI runs it on one thread.)
ModelGradcheck check_model_gradients(SequenceModel& model, const FormattedBatch& batch,
                                     const ModelGradcheckOptions& options, Rng& rng);

}  // namespace attnlab
