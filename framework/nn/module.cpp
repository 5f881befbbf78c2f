#include "framework/nn/module.h"

namespace attnlab {

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Var>>& out) const {
  for (const auto& [name, var] : params_) out.emplace_back(prefix + name, var);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Var>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Var>> out;
  collect("", out);
  return out;
}

std::vector<Var> Module::parameters() const {
  std::vector<Var> out;
  for (auto& [name, var] : named_parameters()) out.push_back(var);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (auto& [name, var] : named_parameters()) n += var.numel();
  return n;
}

Var Module::parameter(const std::string& dotted_name) const {
  for (auto& [name, var] : named_parameters())
    if (name == dotted_name) return var;
  throw ValueError("no parameter named '" + dotted_name + "'");
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [name, var] : named_parameters()) var.zero_grad();
}

Var Module::register_parameter(const std::string& name, Tensor init) {
  Var v(std::move(init), /*requires_grad=*/true);
  params_.emplace_back(name, v);
  return v;
}

}  // namespace attnlab
