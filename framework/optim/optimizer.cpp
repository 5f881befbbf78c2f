#include "framework/optim/optimizer.h"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "framework/optim/adam.h"
#include "framework/optim/chunks.h"
#include "framework/optim/optim_rules.h"
#include "framework/optim/sgd.h"

namespace attnlab {

namespace {

std::vector<std::string> split_dots(const std::string& name) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(name);
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

bool is_layer_norm_segment(const std::string& s) {
  if (s.rfind("ln", 0) != 0) return false;
  if (s.size() == 2) return true;
  if (s[2] == '_') return true;
  for (size_t i = 2; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// A count saved as Real: must be a non-negative integer.
int64_t count_from(const Tensor& t, const std::string& entry) {
  if (t.numel() != 1)
    throw ValueError("optimizer state entry '" + entry + "' must hold one value, got shape " + t.shape_str());
  const double v = static_cast<double>(t[0]);
  if (!(v >= 0) || std::floor(v) != v)
    throw ValueError("optimizer state entry '" + entry + "' must be a non-negative integer count, got " + exact_text(v));
  return static_cast<int64_t>(v);
}

Tensor count_tensor(int64_t n) { return Tensor::from({1}, {static_cast<Real>(n)}); }

// Elements r of `full`: `full` itself when r covers it, else one row.
Tensor owned_part(const Tensor& full, const ElementRange& r) {
  if (r.begin == 0 && r.end == full.numel()) return full;
  Tensor out({r.size()}, Real(0));
  std::copy(full.data() + r.begin, full.data() + r.end, out.data());
  return out;
}

}  // namespace

const ChoiceNames<OptimizerKind>& choice_names(OptimizerKind) {
  static const ChoiceNames<OptimizerKind> names = {
      {OptimizerKind::sgd, "sgd"}, {OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}};
  return names;
}

void validate(const OptimizerConfig& c) {
  if (!(c.lr > 0) || !std::isfinite(c.lr)) throw ValueError("optimizer lr must be > 0 and finite, got " + exact_text(c.lr));
  if (!(c.beta1 >= 0 && c.beta1 < 1)) throw ValueError("optimizer beta1 must be in [0, 1), got " + exact_text(c.beta1));
  if (!(c.beta2 >= 0 && c.beta2 < 1)) throw ValueError("optimizer beta2 must be in [0, 1), got " + exact_text(c.beta2));
  if (!(c.eps > 0) || !std::isfinite(c.eps)) throw ValueError("optimizer eps must be > 0 and finite, got " + exact_text(c.eps));
  if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay))
    throw ValueError("optimizer weight_decay must be >= 0 and finite, got " + exact_text(c.weight_decay));
  if (!(c.momentum >= 0) || !std::isfinite(c.momentum))
    throw ValueError("optimizer momentum must be >= 0 and finite, got " + exact_text(c.momentum));
  check_nesterov(c, Naming::json);
}

bool default_no_decay(const std::string& dotted_name) {
  const std::vector<std::string> parts = split_dots(dotted_name);
  if (!parts.empty() && parts.back() == "bias") return true;
  for (const std::string& s : parts)
    if (is_layer_norm_segment(s) || s.find("emb") != std::string::npos) return true;
  return false;
}

Optimizer::Optimizer(const NamedParams& params, const OptimizerConfig& config) : params_(params), lr_(config.lr) {
  validate(config);
  if (params_.empty()) throw ValueError("optimizer got an empty parameter list");
  std::set<std::string> seen;
  for (const auto& [name, var] : params_) {
    if (!var.defined()) throw ValueError("optimizer parameter '" + name + "' is an undefined Var");
    if (!seen.insert(name).second) throw ValueError("optimizer parameter name '" + name + "' appears twice");
    decay_.push_back(config.decay_all || !default_no_decay(name) ? config.weight_decay : 0.0);
  }
  param_steps_.assign(params_.size(), 0);
  for (const auto& p : params_) owned_.push_back({0, p.second.numel()});
}

size_t Optimizer::add_buffer(const std::string& kind) {
  Buffer b{kind, {}};
  b.tensors.reserve(params_.size());
  for (const auto& p : params_) b.tensors.emplace_back(p.second.shape(), Real(0));
  buffers_.push_back(std::move(b));
  return buffers_.size() - 1;
}

void Optimizer::step() {
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Var& p = params_[i].second;
    if (!p.has_grad()) continue;
    check_shape(p.grad().shape(), p.shape(), "gradient of parameter '" + params_[i].first + "'");
    ++param_steps_[i];
    const ElementRange& o = owned_[i];
    if (o.size() > 0) update(i, p.value().data() + o.begin, p.grad().data() + o.begin, o.size(), decay_[i]);
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.second.zero_grad();
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr)) throw ValueError("learning rate must be >= 0 and finite, got " + exact_text(lr));
  lr_ = lr;
}

double Optimizer::weight_decay_of(const std::string& param_name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].first == param_name) return decay_[i];
  throw ValueError("optimizer has no parameter '" + param_name + "'");
}

NamedTensors Optimizer::state() const {
  NamedTensors out;
  out.emplace_back("step", count_tensor(steps_));
  if (count_param_steps_)
    for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("step." + params_[i].first, count_tensor(param_steps_[i]));
  for (const Buffer& b : buffers_)
    for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(b.kind + "." + params_[i].first, b.tensors[i]);
  return out;
}

void Optimizer::load_state(const NamedTensors& state) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state)
    if (!given.emplace(name, &t).second) throw ValueError("optimizer state entry '" + name + "' appears twice");
  std::set<std::string> expected;
  auto find = [&](const std::string& entry) -> const Tensor& {
    auto it = given.find(entry);
    if (it == given.end()) throw ValueError("optimizer state is missing entry '" + entry + "'");
    expected.insert(entry);
    return *it->second;
  };

  // Validate everything first, then assign, so a bad state changes nothing.
  const int64_t steps = count_from(find("step"), "step");
  std::vector<int64_t> param_steps(params_.size(), 0);
  if (count_param_steps_)
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string entry = "step." + params_[i].first;
      param_steps[i] = count_from(find(entry), entry);
    }
  std::vector<std::vector<const Tensor*>> sources(buffers_.size());
  for (size_t k = 0; k < buffers_.size(); ++k)
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string entry = buffers_[k].kind + "." + params_[i].first;
      const Tensor& t = find(entry);
      if (t.shape() != params_[i].second.shape())
        throw ValueError("optimizer state entry '" + entry + "' has shape " + t.shape_str() + ", expected " +
                         shape_str(params_[i].second.shape()));
      sources[k].push_back(&t);
    }
  for (const auto& entry : state)
    if (!expected.count(entry.first))
      throw ValueError("optimizer state has unexpected entry '" + entry.first + "'");

  steps_ = steps;
  param_steps_ = param_steps;
  for (size_t k = 0; k < buffers_.size(); ++k)
    for (size_t i = 0; i < params_.size(); ++i) buffers_[k].tensors[i] = owned_part(*sources[k][i], owned_[i]);
}

void Optimizer::shard(const std::vector<ElementRange>& owned) {
  if (sharded_) throw std::logic_error("optimizer shard: already sharded");
  if (owned.size() != params_.size())
    throw ValueError("optimizer shard: " + std::to_string(owned.size()) + " ranges for " +
                     std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < owned.size(); ++i) {
    const ElementRange& r = owned[i];
    if (r.begin < 0 || r.end < r.begin || r.end > params_[i].second.numel() || r.begin % kOptimChunk != 0)
      throw ValueError("optimizer shard: elements [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                       ") of parameter '" + params_[i].first + "' (" + std::to_string(params_[i].second.numel()) +
                       " elements) do not start at a multiple of " + std::to_string(kOptimChunk) + " inside it");
  }
  for (Buffer& b : buffers_)
    for (size_t i = 0; i < params_.size(); ++i) b.tensors[i] = owned_part(b.tensors[i], owned[i]);
  owned_ = owned;
  sharded_ = true;
}

std::vector<std::string> Optimizer::buffer_kinds() const {
  std::vector<std::string> out;
  for (const Buffer& b : buffers_) out.push_back(b.kind);
  return out;
}

int64_t Optimizer::state_bytes() const {
  int64_t n = 0;
  for (const Buffer& b : buffers_)
    for (const Tensor& t : b.tensors) n += t.numel();
  return n * static_cast<int64_t>(sizeof(Real));
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const NamedParams& named_params) {
  validate(config);
  if (config.kind == OptimizerKind::sgd) return std::make_unique<Sgd>(named_params, config);
  return std::make_unique<Adam>(named_params, config);
}

}  // namespace attnlab
