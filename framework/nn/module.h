#pragma once
// Module: named parameters and child modules, train/eval mode.
//
// Every parameter has a dotted path such as `blocks.0.attn.q_proj.weight`
// (PyTorch's convention), so a checkpoint maps one-to-one onto the
// equivalent torch model. Order is registration order, children after the
// module's own parameters, as in torch's named_parameters().
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  std::vector<std::pair<std::string, Var>> named_parameters() const;
  std::vector<Var> parameters() const;
  int64_t parameter_count() const;
  // The parameter at a dotted path; throws ValueError naming the path if absent.
  Var parameter(const std::string& dotted_name) const;

  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  void zero_grad();

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 protected:
  // Registers a trainable parameter (requires_grad) initialised to `init`.
  Var register_parameter(const std::string& name, Tensor init);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    children_.emplace_back(name, child);
    return child;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Var>>& out) const;

  std::vector<std::pair<std::string, Var>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace attnlab
