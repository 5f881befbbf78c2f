#pragma once
// Reverse-mode autodiff over whole tensors.
//
// A Var is a cheap handle to a Node. An op computes its value, and - only when
// some input needs a gradient and no NoGradGuard is active - records its inputs
// and a backward closure. backward(root) runs the closures of the nodes
// reachable from the scalar root in decreasing creation id (each node's id is
// larger than its inputs'), then releases the graph. A value that no recorded
// backward reads is freed as soon as the forward pass lets go of it
// (ValueReads below), so a step's peak memory holds only what backward needs.
//
// The gradient contract: a backward closure adds (+=) its contribution to each
// input's gradient, for an input may feed several ops. It gets the buffer from
// grad_target(i), the one place that hands out gradient buffers:
// - fresh == false: the buffer already holds earlier contributions: add to it;
// - fresh == true: nothing has been added yet, and "+= x" into zeros is "= x",
//   so the buffer is left uninitialised and the writer must write (=) every
//   element of it once (a product does so with beta = 0, skipping a zero-fill).
// A writer that only knows how to add calls input_grad(i), which zero-fills a
// fresh buffer. Ask again before a second write into the same input: an op
// whose inputs are one and the same node sees the buffer fresh only once.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "framework/tensor.h"

namespace attnlab {

struct Node;
class Var;
using BackwardFn = std::function<void(Node& self)>;
// Second order: an op's backward written in differentiable ops, so that the
// gradient is itself a graph (grad_graph below). Given the op's inputs, its
// output and dL/d(output), it returns dL/d(input) for each input (undefined
// for one that needs no gradient).
using GraphBackwardFn =
    std::function<std::vector<Var>(const std::vector<Var>& inputs, const Var& output, const Var& grad)>;

// An input's gradient buffer, and whether its first writer must overwrite it.
struct GradTarget {
  Tensor* grad;
  bool fresh;  // uninitialised: the writer must write every element (no +=)
};

// Which values an op's backward closure reads: its own output, and the inputs
// whose bits in `inputs` are set. A value that no recorded backward reads is
// freed (its shape kept) once the forward pass no longer holds it, i.e. when
// the last Var of it goes while only graph edges remain: a linear layer under
// bf16 reads its bf16 copies, an add reads no value at all.
struct ValueReads {
  bool output = true;
  uint32_t inputs = ~0u;  // bit i: input i
  static ValueReads none() { return {false, 0}; }
};

struct Node {
  Tensor value;
  Tensor grad;  // empty until something accumulates into it
  bool requires_grad = false;
  bool retain_grad = false;  // keep the gradient of a non-leaf after backward
  uint64_t id = 0;
  const char* op = "leaf";
  std::vector<std::shared_ptr<Node>> inputs;
  BackwardFn backward;
  GraphBackwardFn graph_backward;  // recorded only under a SecondOrderGuard
  int graph_uses = 0;              // recorded nodes whose inputs hold this one
  bool value_read_later = false;   // some recorded backward reads the value

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node() { release_inputs(); }
  // Drop the edges to the inputs (after backward, or when the node goes).
  void release_inputs();

  // This node's gradient buffer for a writer (see the contract above).
  GradTarget grad_target();
  // The gradient buffer, zeros of the value's shape on first use: add into it.
  Tensor& grad_buffer();
  // Whether input i wants a gradient (checked by backward closures).
  bool input_needs_grad(size_t i) const { return inputs[i]->requires_grad; }
  GradTarget input_grad_target(size_t i) { return inputs[i]->grad_target(); }
  Tensor& input_grad(size_t i) { return inputs[i]->grad_buffer(); }
  const Tensor& input_value(size_t i) const { return inputs[i]->value; }
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = false);
  explicit Var(std::shared_ptr<Node> node) : node_(std::move(node)) {}
  Var(const Var&) = default;
  Var(Var&&) noexcept = default;
  Var& operator=(const Var& other);
  Var& operator=(Var&& other) noexcept;
  ~Var() { let_go(); }

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const { return node_->value; }
  Tensor& value() { return node_->value; }  // optimizers update parameters in place
  const Tensor& grad() const { return node_->grad; }
  Tensor& grad() { return node_->grad; }
  bool has_grad() const { return !node_->grad.empty(); }
  const Shape& shape() const { return node_->value.shape(); }
  int dim() const { return node_->value.dim(); }
  int64_t size(int axis) const { return node_->value.size(axis); }
  int64_t numel() const { return node_->value.numel(); }
  Real item() const { return node_->value.item(); }

  bool requires_grad() const { return node_->requires_grad; }
  void set_requires_grad(bool on) { node_->requires_grad = on; }
  void retain_grad() { node_->retain_grad = true; }
  void zero_grad();  // zero the gradient buffer if it exists

  Node* node() const { return node_.get(); }
  const std::shared_ptr<Node>& node_ptr() const { return node_; }

 private:
  // Before this handle lets go of its node: if it is the last handle and no
  // backward reads the value, free the value (see ValueReads).
  void let_go() noexcept;
  std::shared_ptr<Node> node_;
};

// Backpropagate from a one-element root (seeded with 1, or with `seed`).
// Leaves and retain_grad nodes keep their gradients; the graph is released,
// unless keep_graph is set (then it can be backpropagated again: a Hessian
// applied to many vectors).
void backward(const Var& root, Real seed = 1, bool keep_graph = false);

// While one is alive on this thread (and gradients are recorded), every op
// also records its differentiable backward, and no value of the graph is
// freed early: what grad_graph needs.
class SecondOrderGuard {
 public:
  SecondOrderGuard();
  ~SecondOrderGuard();
  SecondOrderGuard(const SecondOrderGuard&) = delete;
  SecondOrderGuard& operator=(const SecondOrderGuard&) = delete;

 private:
  bool previous_;
};
bool second_order_enabled();
// Whether op result r was recorded under a SecondOrderGuard: then the op
// attaches its graph backward (r.node()->graph_backward = ...).
bool records_second_order(const Var& r);

// d(sum_k outputs[k] · seeds[k]) / d(wrt[i]) as Vars that are themselves
// differentiable (PyTorch's autograd.grad with create_graph=True). The graph
// below the outputs must have been recorded under a SecondOrderGuard; an op
// recorded without a graph backward throws ValueError naming it. A wrt that
// the outputs do not depend on gets a constant zero. Nothing is released.
std::vector<Var> grad_graph(const std::vector<Var>& outputs, const std::vector<Var>& seeds,
                            const std::vector<Var>& wrt);

// While one is alive on this thread, ops record nothing.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
bool grad_enabled();

// For op implementations: wrap a computed value as the result of an op. Records
// inputs and the backward closure only when recording is on and some input
// requires a gradient; otherwise the result is a constant. `reads` says which
// values the closure reads (all by default).
Var make_result(Tensor value, std::vector<Var> inputs, const char* op, BackwardFn backward,
                ValueReads reads = {});
bool any_requires_grad(const std::vector<Var>& inputs);

// Number of nodes created so far on this thread (tests use it to see that
// NoGradGuard records nothing and that graphs are released).
uint64_t nodes_created();

}  // namespace attnlab
