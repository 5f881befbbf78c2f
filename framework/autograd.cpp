#include "framework/autograd.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

namespace attnlab {
namespace {
thread_local bool g_grad_enabled = true;
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
    node->value_read_later = reads.output;
    node->inputs.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      Node* in = inputs[i].node();
      ++in->graph_uses;
      if (i >= 32 || (reads.inputs >> i) & 1u) in->value_read_later = true;
      node->inputs.push_back(inputs[i].node_ptr());
    }
  }
  return Var(std::move(node));
}

void backward(const Var& root, Real seed) {
  if (!root.defined()) throw ValueError("backward: the root is undefined");
  if (root.numel() != 1)
    throw ShapeError("backward: the root must hold one value, got shape " + root.value().shape_str());
  if (!root.requires_grad()) throw ValueError("backward: the root does not require a gradient");

  // Collect the recorded graph below the root (iteratively: graphs can be
  // deep). Holding shared pointers keeps every node alive until the end, even
  // as the edges are released one node at a time.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen{root.node()};
  std::vector<std::shared_ptr<Node>> stack{root.node_ptr()};
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (auto& in : n->inputs)
      if (in->requires_grad && seen.insert(in.get()).second) stack.push_back(in);
    order.push_back(std::move(n));
  }
  // Inputs are always created before the ops that use them.
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a->id > b->id; });

  root.node()->grad_buffer()[0] += seed;
  for (auto& n : order) {
    if (n->backward && !n->grad.empty()) n->backward(*n);
    bool is_leaf = !n->backward;
    n->backward = nullptr;
    n->release_inputs();
    if (!is_leaf && !n->retain_grad) n->grad = Tensor();
  }
}

}  // namespace attnlab
