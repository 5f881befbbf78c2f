// Each fused kernel against the same math built from primitive ops (float64):
// values and the gradient of every input must agree.
//
// Tolerance: |fused - composed| <= 1e-10 * max(1, |fused|, |composed|). Both
// sides are exact formulas evaluated in float64 (rounding ~1e-16 per op, a few
// dozen ops deep), so a correct pair agrees to ~1e-14; any wrong term is O(1)
// relative and fails by many orders of magnitude.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "framework/ops/ops.h"
#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::random_tensor;

namespace {

constexpr double kTol = 1e-10;

using Fn = std::function<Var(const std::vector<Var>&)>;

struct Mismatch {
  double max_err = 0;  // max |a - b| / max(1, |a|, |b|)
  std::string where;
};

void compare(const Tensor& a, const Tensor& b, const std::string& what, Mismatch& m) {
  REQUIRE(a.shape() == b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a[i], y = b[i];
    const double err = std::abs(x - y) / std::max({1.0, std::abs(x), std::abs(y)});
    if (!(err <= m.max_err)) {  // also catches NaN on either side
      m.max_err = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
      m.where = what + " [" + std::to_string(i) + "]: fused " + std::to_string(x) + ", composed " + std::to_string(y);
    }
  }
}

// Runs both functions on fresh copies of the inputs, backpropagates the same
// random projection of their outputs, and compares outputs and every gradient.
void require_same(const Fn& fused, const Fn& composed, const std::vector<Tensor>& values, uint64_t seed = 99) {
  std::vector<Var> in_f, in_c;
  for (const Tensor& t : values) {
    in_f.emplace_back(t, true);
    in_c.emplace_back(t, true);
  }
  Var out_f = fused(in_f);
  Var out_c = composed(in_c);
  REQUIRE(out_f.shape() == out_c.shape());
  Rng rng(seed);
  Var projection(random_tensor(out_f.shape(), rng));
  backward(sum(mul(out_f, projection)));
  backward(sum(mul(out_c, projection)));

  Mismatch m;
  compare(out_f.value(), out_c.value(), "output", m);
  for (size_t k = 0; k < values.size(); ++k) {
    Tensor gf = in_f[k].has_grad() ? in_f[k].grad() : Tensor(values[k].shape());
    Tensor gc = in_c[k].has_grad() ? in_c[k].grad() : Tensor(values[k].shape());
    compare(gf, gc, "grad of input " + std::to_string(k), m);
  }
  INFO("max error " << m.max_err << " at " << m.where);
  REQUIRE(m.max_err <= kTol);
}

// Row maxima (..., 1) as a constant: subtracting any per-row constant leaves
// softmax unchanged, so no gradient needs to flow through it.
Var row_max(const Var& x) {
  Shape s = x.shape();
  const int64_t n = s.back();
  s.back() = 1;
  Tensor m(s);
  for (int64_t r = 0; r < m.numel(); ++r) {
    Real best = -std::numeric_limits<Real>::infinity();
    for (int64_t j = 0; j < n; ++j) best = std::max(best, x.value()[r * n + j]);
    m[r] = best;
  }
  return Var(m);
}

Var composed_softmax(const Var& x) {
  Var e = exp(sub(x, row_max(x)));
  return div(e, sum(e, -1, true));
}

Var composed_log_softmax(const Var& x) {
  Var shifted = sub(x, row_max(x));
  return sub(shifted, log(sum(exp(shifted), -1, true)));
}

}  // namespace

TEST_CASE("fused softmax equals exp(x - max) / sum, values and gradient", "[fused][softmax]") {
  Rng rng(1);
  for (const Shape& shape : std::vector<Shape>{{7}, {1, 1}, {4, 9}, {2, 3, 5}, {3, 2, 1}}) {
    INFO("shape " << shape_str(shape));
    // Wide range: exercises the max subtraction (exp(40) alone would be large).
    std::vector<Tensor> x{random_tensor(shape, rng, -40, 40)};
    require_same([](const std::vector<Var>& in) { return softmax(in[0]); },
                 [](const std::vector<Var>& in) { return composed_softmax(in[0]); }, x);
  }
}

TEST_CASE("fused log_softmax equals x - max - log(sum(exp(x - max))), values and gradient",
          "[fused][softmax]") {
  Rng rng(2);
  for (const Shape& shape : std::vector<Shape>{{7}, {1, 1}, {4, 9}, {2, 3, 5}, {3, 2, 1}}) {
    INFO("shape " << shape_str(shape));
    std::vector<Tensor> x{random_tensor(shape, rng, -40, 40)};
    require_same([](const std::vector<Var>& in) { return log_softmax(in[0]); },
                 [](const std::vector<Var>& in) { return composed_log_softmax(in[0]); }, x);
  }
}

TEST_CASE("fused cross_entropy equals log-softmax + one-hot NLL incl. ignore_index and label smoothing",
          "[fused][cross_entropy]") {
  Rng rng(3);
  struct Case {
    Shape logits;
    int32_t ignore;
    Real smoothing;
  };
  for (const Case& c : std::vector<Case>{{{6, 5}, -100, 0},
                                         {{6, 5}, -100, 0.1},
                                         {{2, 4, 7}, -100, 0.3},
                                         {{3, 3, 4}, 2, 0.2},  // ignore_index is a real class id
                                         {{5, 1}, -100, 0.15}}) {
    const int64_t V = c.logits.back();
    const Shape ts(c.logits.begin(), c.logits.end() - 1);
    IntTensor targets(ts);
    int64_t count = 0;
    for (auto& t : targets.data) {
      t = rng.uniform() < 0.25 ? c.ignore : static_cast<int32_t>(rng.integer(0, V - 1));
      count += t != c.ignore;
    }
    REQUIRE(count > 0);
    INFO("logits " << shape_str(c.logits) << " ignore " << c.ignore << " smoothing " << c.smoothing << " count "
                   << count);
    // The composed loss spells out torch's definition term by term:
    //   (1 - eps) * mean_n(-log p[n, t_n]) + eps * mean_n(mean_j(-log p[n, j])),
    // the means over the non-ignored positions n; the one-hot and the row
    // selection are constant masks multiplied in.
    const int64_t rows = targets.numel();
    Tensor onehot(c.logits), valid(c.logits);
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t t = targets.data[static_cast<size_t>(r)];
      if (t == c.ignore) continue;
      onehot[r * V + t] = 1;
      for (int64_t j = 0; j < V; ++j) valid[r * V + j] = 1;
    }
    const Real eps = c.smoothing;
    const Real n = static_cast<Real>(count);
    CrossEntropyOptions opt;
    opt.ignore_index = c.ignore;
    opt.label_smoothing = eps;
    require_same(
        [&targets, opt](const std::vector<Var>& in) { return cross_entropy(in[0], targets, opt); },
        [&, eps, n, V](const std::vector<Var>& in) {
          Var logp = composed_log_softmax(in[0]);
          Var nll = scale(sum(mul(logp, Var(onehot))), -1 / n);
          Var smooth = scale(sum(mul(logp, Var(valid))), -1 / (n * static_cast<Real>(V)));
          return add(scale(nll, 1 - eps), scale(smooth, eps));
        },
        {random_tensor(c.logits, rng, -4, 4)});
  }
}

TEST_CASE("fused layer_norm equals (x - mean) / sqrt(var + eps) * w + b, values and gradients",
          "[fused][layer_norm]") {
  Rng rng(4);
  for (const Shape& shape : std::vector<Shape>{{6}, {1, 4}, {3, 8}, {2, 3, 5}, {4, 1}}) {
    INFO("shape " << shape_str(shape));
    const int64_t d = shape.back();
    const Real eps = 1e-5;
    std::vector<Tensor> inputs{random_tensor(shape, rng, -3, 3), random_tensor({d}, rng, 0.5, 1.5),
                               random_tensor({d}, rng)};
    require_same([eps](const std::vector<Var>& in) { return layer_norm(in[0], in[1], in[2], eps); },
                 [eps](const std::vector<Var>& in) {
                   Var centred = sub(in[0], mean(in[0], -1, true));
                   Var var = mean(mul(centred, centred), -1, true);  // biased, as torch
                   Var normed = div(centred, sqrt(add_scalar(var, eps)));
                   return add(mul(normed, in[1]), in[2]);
                 },
                 inputs);
  }
}

TEST_CASE("fused attention equals matmul + scale + masked_fill + softmax + matmul, values and gradients",
          "[fused][attention]") {
  Rng rng(5);
  struct Case {
    int64_t B, h, T_q, T_k, d_k, d_v;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1, 1, 1, 1}, {2, 3, 4, 6, 5, 3}, {2, 2, 5, 3, 4, 2}, {1, 4, 6, 6, 8, 8}}) {
    for (int mask_kind = 0; mask_kind < 4; ++mask_kind) {
      for (Real s : {Real(1) / std::sqrt(static_cast<Real>(c.d_k)), Real(1), Real(0.2)}) {
        const bool causal = mask_kind & 1, padded = mask_kind & 2;
        INFO("B " << c.B << " h " << c.h << " T_q " << c.T_q << " T_k " << c.T_k << " d_k " << c.d_k << " d_v "
                  << c.d_v << " causal " << causal << " padding " << padded << " scale " << s);
        Tensor pad({c.B, c.T_k});
        for (int64_t i = 0; i < pad.numel(); ++i) pad[i] = rng.uniform() < 0.3 ? 1 : 0;
        // The composed mask (B, 1, T_q, T_k), broadcast over heads: causal OR padding.
        Tensor full({c.B, 1, c.T_q, c.T_k});
        Tensor cm = causal_mask(c.T_q, c.T_k);
        for (int64_t b = 0; b < c.B; ++b)
          for (int64_t i = 0; i < c.T_q; ++i)
            for (int64_t j = 0; j < c.T_k; ++j)
              full[(b * c.T_q + i) * c.T_k + j] =
                  (causal && cm[i * c.T_k + j] != 0) || (padded && pad[b * c.T_k + j] != 0) ? 1 : 0;
        AttentionMask mask;
        mask.causal = causal;
        mask.key_padding = padded ? &pad : nullptr;
        std::vector<Tensor> inputs{random_tensor({c.B, c.h, c.T_q, c.d_k}, rng),
                                   random_tensor({c.B, c.h, c.T_k, c.d_k}, rng),
                                   random_tensor({c.B, c.h, c.T_k, c.d_v}, rng)};
        Tensor weights;
        require_same(
            [s, mask, &weights](const std::vector<Var>& in) {
              return attention(in[0], in[1], in[2], s, mask, &weights);
            },
            [s, &full, mask_kind](const std::vector<Var>& in) {
              Var scores = scale(matmul(in[0], in[1], false, true), s);  // (B, h, T_q, T_k)
              if (mask_kind) scores = masked_fill(scores, full, -std::numeric_limits<Real>::infinity());
              return matmul(softmax(scores), in[2]);
            },
            inputs);
        // The weights handed out are the composed softmax too.
        Var p_ref = softmax(masked_fill(scale(matmul(Var(inputs[0]), Var(inputs[1]), false, true), s), full,
                                        -std::numeric_limits<Real>::infinity()));
        Mismatch m;
        compare(weights, p_ref.value(), "weights", m);
        INFO("weights max error " << m.max_err << " at " << m.where);
        REQUIRE(m.max_err <= kTol);
      }
    }
  }
}
