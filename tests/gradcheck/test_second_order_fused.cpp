// layer_norm's fused second derivative (framework/ops/norm.cpp, layer_norm_graph_grads, and
// framework/ops/norm_grad.cpp) against independent computations, in the float64 engine:
// layer_norm_input_grad's value against layer_norm's first-order gradient, its backward by
// gradcheck, and Hessian-vector products through the fused graph backward against those through
// layer_norm's composed form (framework/ops/composed.h, differentiated op by op), for the op and
// the linear maps and for the three model kinds, to 1e-12 relative.
#include <cstring>
#include <unordered_set>

#include "framework/hessian.h"
#include "framework/ops/composed.h"
#include "framework/ops/loss.h"
#include "models/batch.h"
#include "models/sequence_model.h"
#include "tests/fixtures.h"
#include "tests/gradcheck/gradcheck.h"

using namespace attnlab;
using attnlab::testing::random_tensor;

namespace {

Tensor rand(Shape s, uint64_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  return random_tensor(std::move(s), rng, lo, hi);
}

// Gives every layer_norm node below root its composed form's graph backward (the path before the
// fused one); returns how many. The models' layer norms have both affine terms and eps 1e-5.
int use_composed_layer_norms(const Var& root, Real eps) {
  int replaced = 0;
  std::vector<Node*> stack{root.node()};
  std::unordered_set<Node*> seen{root.node()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& in : n->inputs)
      if (seen.insert(in.get()).second) stack.push_back(in.get());
    if (std::strcmp(n->op, "layer_norm") != 0) continue;
    REQUIRE((n->inputs.size() == 1 || n->inputs.size() == 3));
    const bool affine = n->inputs.size() == 3;
    n->graph_backward = composed_graph_backward([affine, eps](const std::vector<Var>& in) {
      return composed_layer_norm(in[0], affine ? in[1] : Var(), affine ? in[2] : Var(), eps);
    });
    ++replaced;
  }
  return replaced;
}

// Hv of loss() along v, with layer_norm's fused or composed graph backward.
std::vector<Tensor> hessian_times(const std::function<Var()>& loss, std::vector<Var> params,
                                  const std::vector<Tensor>& v, bool composed, Real eps = 1e-5) {
  SecondOrderGuard second_order;
  const Var l = loss();
  if (composed) REQUIRE(use_composed_layer_norms(l, eps) > 0);
  const std::vector<Var> g = grad_graph({l}, {Var(Tensor::from({}, {Real(1)}))}, params);
  Var s;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].requires_grad()) continue;
    const Var part = sum(mul(g[i], Var(v[i])));
    s = s.defined() ? add(s, part) : part;
  }
  for (Var& p : params) p.grad() = Tensor();
  backward(s);
  std::vector<Tensor> hv;
  for (Var& p : params) hv.push_back(p.has_grad() ? p.grad() : Tensor(p.shape()));
  return hv;
}

// max |a - b| over max |b|, over all tensors.
double relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (int64_t j = 0; j < a[i].numel(); ++j) {
      diff = std::max(diff, std::abs(double(a[i][j]) - double(b[i][j])));
      scale = std::max(scale, std::abs(double(b[i][j])));
    }
  REQUIRE(scale > 0);
  return diff / scale;
}

std::vector<Tensor> directions(const std::vector<Var>& params, uint64_t seed) {
  std::vector<Tensor> v;
  for (const Var& p : params) v.push_back(rand(p.shape(), seed++));
  return v;
}

void require_fused_matches_composed(const std::function<Var()>& loss, const std::vector<Var>& params, Real eps) {
  const std::vector<Tensor> v = directions(params, 60);
  const double rel = relative_difference(hessian_times(loss, params, v, false, eps),
                                         hessian_times(loss, params, v, true, eps));
  INFO("fused against composed: " << rel);
  CHECK(rel <= 1e-12);
}

}  // namespace

TEST_CASE("layer_norm_input_grad is layer_norm's first-order input gradient", "[second_order][fused]") {
  for (Real eps : {Real(1e-5), Real(0), Real(0.5)}) {
    INFO("eps " << eps);
    const Tensor x = rand({2, 3, 6}, 50, -2, 2), g = rand({2, 3, 6}, 51);
    Var xv(x, true);
    backward(sum(mul(layer_norm(xv, Var(), Var(), eps), Var(g))));
    const Tensor fused = layer_norm_input_grad(Var(x), Var(g), eps).value();
    CHECK(relative_difference({fused}, {xv.grad()}) <= 1e-12);
  }
  CHECK_THROWS_AS(layer_norm_input_grad(Var(Tensor({2, 3})), Var(Tensor({2, 4})), 1e-5), ShapeError);
}

TEST_CASE("layer_norm_input_grad's backward against central differences", "[second_order][fused]") {
  for (Real eps : {Real(1e-5), Real(0.5)}) {
    INFO("eps " << eps);
    std::vector<Var> in{Var(rand({2, 3, 6}, 52, -2, 2), true), Var(rand({2, 3, 6}, 53), true)};
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([eps](const std::vector<Var>& i) { return layer_norm_input_grad(i[0], i[1], eps); }, in));
    in[1].set_requires_grad(false);  // x alone
    ATTNLAB_REQUIRE_GRADCHECK(
        gradcheck([eps](const std::vector<Var>& i) { return layer_norm_input_grad(i[0], i[1], eps); }, in));
  }
}

TEST_CASE("Hessian-vector products through layer_norm: fused as composed", "[second_order][fused]") {
  const Tensor p = rand({2, 3, 6}, 54);
  for (bool affine : {true, false}) {
    INFO("affine " << affine);
    Var x(rand({2, 3, 6}, 55, -2, 2), true), w(rand({6}, 56), true), b(rand({6}, 57), true);
    const Real eps = 0.01;
    auto loss = [&] {
      const Var y = affine ? layer_norm(tanh(x), w, b, eps) : layer_norm(tanh(x), Var(), Var(), eps);
      return sum(mul(Var(p), mul(y, y)));
    };
    require_fused_matches_composed(loss, affine ? std::vector<Var>{x, w, b} : std::vector<Var>{x}, eps);
  }
}

TEST_CASE("Hessian-vector products through linear and linear_relu on 3-d and 1-d inputs: as composed",
          "[second_order][fused]") {
  for (bool relu : {false, true})
    for (const Shape& xs : {Shape{2, 3, 4}, Shape{4}}) {
      INFO("relu " << relu << ", x " << shape_str(xs));
      Var x(rand(xs, 58), true), w(rand({5, 4}, 59), true), b(rand({5}, 61), true);
      const std::vector<Var> params{x, w, b};
      const std::vector<Tensor> v = directions(params, 62);
      auto fused = [&] {
        const Var y = relu ? linear_relu(x, w, b) : linear(x, w, b);
        return sum(mul(y, y));
      };
      auto composed = [&] {
        const Var x2 = reshape(x, {-1, 4});
        Var y = add(matmul(x2, w, false, true), b);
        if (relu) y = attnlab::relu(y);
        return sum(mul(y, y));
      };
      const double rel = relative_difference(hessian_times(fused, params, v, false),
                                             hessian_times(composed, params, v, false));
      INFO("fused against composed: " << rel);
      CHECK(rel <= 1e-12);
    }
}

TEST_CASE("model Hessian-vector products: fused layer norms as composed, each model kind", "[second_order][models]") {
  const std::vector<TokenPairs> pairs{{{{4, 5, 6, 4, 5}, {5, 4, 6, 5, 4}}, {{6, 4, 5}, {4, 5}}},
                                      {{{4, 5}, {5, 4}}, {{6}, {4}}},
                                      {{{4, 5, 6, 4}, {6, 5, 4}}, {{5, 6}, {4}}}};
  const std::vector<std::string> arches{"encoder", "decoder", "seq2seq"};
  for (size_t a = 0; a < arches.size(); ++a)
    for (Norm norm : {Norm::pre, Norm::post}) {
      TransformerConfig c = testing::model_config(arches[a], 7, 8, 8, 2, 2, 16);
      c.norm = norm;
      INFO("config " << c.to_json().dump());
      auto model = make_model(c, /*seed=*/11);
      const FormattedBatch batch = format_batch(batch_format(c, false), pairs[a]);
      auto loss = [&] { return cross_entropy(model->forward(batch.input), batch.targets, CrossEntropyOptions{}); };
      require_fused_matches_composed(loss, model->parameters(), 1e-5);
    }
}
