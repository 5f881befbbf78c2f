#include "framework/autograd.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "framework/ops/elementwise.h"

namespace attnlab {
namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_second_order = false;
std::atomic<uint64_t> g_next_id{1};

std::shared_ptr<Node> new_node(Tensor value) {
  auto node = std::make_shared<Node>();
  node->value = std::move(value);
  node->id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  return node;
}
}  // namespace

GradTarget Node::grad_target() {
  const bool fresh = grad.empty() || grad.shape() != value.shape();
  if (fresh) grad = Tensor::uninitialized(value.shape());
  return {&grad, fresh};
}

Tensor& Node::grad_buffer() {
  const GradTarget target = grad_target();
  if (target.fresh) target.grad->zero_();
  return grad;
}

void Node::release_inputs() {
  for (auto& in : inputs) --in->graph_uses;
  inputs.clear();
}

Var& Var::operator=(const Var& other) {
  if (node_ != other.node_) {
    let_go();
    node_ = other.node_;
  }
  return *this;
}

Var& Var::operator=(Var&& other) noexcept {
  if (this != &other) {
    let_go();
    node_ = std::move(other.node_);
  }
  return *this;
}

void Var::let_go() noexcept {
  // A leaf (no backward) is never freed, and its counts are not read: a
  // parameter's Vars may go on another thread than the one recording ops on it.
  Node* n = node_.get();
  if (n && n->backward && !n->value_read_later && node_.use_count() == n->graph_uses + 1)
    n->value.release_storage();
}

Var::Var(Tensor value, bool requires_grad) : node_(new_node(std::move(value))) {
  node_->requires_grad = requires_grad;
}

void Var::zero_grad() {
  if (node_ && !node_->grad.empty()) node_->grad.zero_();
}

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }
bool grad_enabled() { return g_grad_enabled; }

SecondOrderGuard::SecondOrderGuard() : previous_(g_second_order) { g_second_order = true; }
SecondOrderGuard::~SecondOrderGuard() { g_second_order = previous_; }
bool second_order_enabled() { return g_second_order; }
bool records_second_order(const Var& r) { return g_second_order && r.node()->backward; }

uint64_t nodes_created() { return g_next_id.load() - 1; }

bool any_requires_grad(const std::vector<Var>& inputs) {
  for (const Var& v : inputs)
    if (v.defined() && v.requires_grad()) return true;
  return false;
}

Var make_result(Tensor value, std::vector<Var> inputs, const char* op, BackwardFn backward, ValueReads reads) {
  auto node = new_node(std::move(value));
  node->op = op;
  if (g_grad_enabled && any_requires_grad(inputs)) {
    node->requires_grad = true;
    node->backward = std::move(backward);
    // A second-order graph reads every value again (graph backwards, and the
    // backward through them).
    node->value_read_later = reads.output || g_second_order;
    node->inputs.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      Node* in = inputs[i].node();
      ++in->graph_uses;
      if (i >= 32 || (reads.inputs >> i) & 1u || g_second_order) in->value_read_later = true;
      node->inputs.push_back(inputs[i].node_ptr());
    }
  }
  return Var(std::move(node));
}

namespace {

// The recorded nodes below `roots` (through inputs that need a gradient) whose
// id is at least min_id, in decreasing id: each node before its inputs.
// Iterative, as graphs can be deep.
std::vector<std::shared_ptr<Node>> nodes_below(const std::vector<Var>& roots, uint64_t min_id = 0) {
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::shared_ptr<Node>> stack;
  for (const Var& r : roots)
    if (r.requires_grad() && seen.insert(r.node()).second) stack.push_back(r.node_ptr());
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (auto& in : n->inputs)
      if (in->requires_grad && in->id >= min_id && seen.insert(in.get()).second) stack.push_back(in);
    order.push_back(std::move(n));
  }
  // Inputs are always created before the ops that use them.
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a->id > b->id; });
  return order;
}

}  // namespace

void backward(const Var& root, Real seed, bool keep_graph) {
  if (!root.defined()) throw ValueError("backward: the root is undefined");
  if (root.numel() != 1)
    throw ShapeError("backward: the root must hold one value, got shape " + root.value().shape_str());
  if (!root.requires_grad()) throw ValueError("backward: the root does not require a gradient");

  // Holding shared pointers keeps every node alive until the end, even as the
  // edges are released one node at a time.
  std::vector<std::shared_ptr<Node>> order = nodes_below({root});
  root.node()->grad_buffer()[0] += seed;
  for (auto& n : order) {
    if (n->backward && !n->grad.empty()) n->backward(*n);
    const bool is_leaf = !n->backward;
    if (!keep_graph) {
      n->backward = nullptr;
      n->graph_backward = nullptr;
      n->release_inputs();
    }
    if (!is_leaf && !n->retain_grad) n->grad = Tensor();
  }
}

std::vector<Var> grad_graph(const std::vector<Var>& outputs, const std::vector<Var>& seeds,
                            const std::vector<Var>& wrt) {
  if (outputs.size() != seeds.size())
    throw ValueError("grad_graph: " + std::to_string(outputs.size()) + " outputs but " +
                     std::to_string(seeds.size()) + " seeds");
  SecondOrderGuard second_order;  // fused ops' composed backwards nest grad_graph
  std::unordered_map<Node*, Var> grads;  // dL/d(node) so far
  auto accumulate = [&grads](Node* n, const Var& g) {
    auto it = grads.find(n);
    if (it == grads.end()) grads.emplace(n, g);
    else it->second = add(it->second, g);
  };
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (seeds[k].shape() != outputs[k].shape())
      throw ShapeError("grad_graph: seed " + seeds[k].value().shape_str() + " for an output of shape " +
                       outputs[k].value().shape_str());
    if (outputs[k].requires_grad()) accumulate(outputs[k].node(), seeds[k]);
  }
  // Nothing created before the earliest wrt can depend on one: the walk stops
  // there (a fused op's composed backward asks for its inputs' copies only,
  // and must not differentiate the whole graph below them).
  uint64_t min_id = UINT64_MAX;
  for (const Var& w : wrt) min_id = std::min(min_id, w.node()->id);
  for (const std::shared_ptr<Node>& n : nodes_below(outputs, min_id)) {
    auto it = grads.find(n.get());
    if (!n->backward || it == grads.end()) continue;
    if (!n->graph_backward)
      throw ValueError(std::string("second derivatives: the op '") + n->op +
                       "' was recorded without its differentiable backward (outside a SecondOrderGuard, "
                       "or it has none)");
    std::vector<Var> inputs;
    for (const auto& in : n->inputs) inputs.emplace_back(in);
    const Var grad = it->second;
    const std::vector<Var> input_grads = n->graph_backward(inputs, Var(n), grad);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (i < input_grads.size() && input_grads[i].defined() && inputs[i].requires_grad())
        accumulate(inputs[i].node(), input_grads[i]);
  }
  std::vector<Var> result;
  for (const Var& w : wrt) {
    auto it = grads.find(w.node());
    result.push_back(it != grads.end() ? it->second : Var(Tensor(w.shape())));
  }
  return result;
}

}  // namespace attnlab
