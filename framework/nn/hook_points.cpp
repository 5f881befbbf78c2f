#include "framework/nn/hook_points.h"

#include "framework/error.h"

namespace attnlab {

void HookTable::declare(const std::string& name, const std::string& layout) {
  if (!layouts_.emplace(name, layout).second) throw ValueError("hook point '" + name + "' declared twice");
  names_.push_back(name);
}

void HookTable::check_known(const std::string& name) const {
  if (!layouts_.count(name))
    throw ValueError("no hook point named '" + name + "' (attnlab hooks --run DIR lists the model's " +
                     std::to_string(names_.size()) + ")");
}

const std::string& HookTable::layout(const std::string& name) const {
  check_known(name);
  return layouts_.at(name);
}

int64_t HookTable::observe(const std::string& name, HookObserver observer) {
  check_known(name);
  hooks_[name].observers.emplace_back(next_id_, std::move(observer));
  return next_id_++;
}

int64_t HookTable::replace(const std::string& name, HookReplacer replacer) {
  check_known(name);
  Hooks& h = hooks_[name];
  h.replacer = std::move(replacer);
  h.replacer_id = next_id_;
  return next_id_++;
}

void HookTable::remove(int64_t id) {
  for (auto it = hooks_.begin(); it != hooks_.end(); ++it) {
    Hooks& h = it->second;
    if (h.replacer_id == id) {
      h.replacer = nullptr;
      h.replacer_id = -1;
    }
    for (size_t i = 0; i < h.observers.size(); ++i)
      if (h.observers[i].first == id) h.observers.erase(h.observers.begin() + static_cast<std::ptrdiff_t>(i));
    if (!h.replacer && h.observers.empty()) {
      hooks_.erase(it);  // an empty table is the unhooked fast path
      return;
    }
  }
}

void HookTable::clear() { hooks_.clear(); }

bool HookTable::observed(const std::string& name) const {
  const auto it = hooks_.find(name);
  return it != hooks_.end() && !it->second.observers.empty();
}

bool HookTable::replaced(const std::string& name) const {
  const auto it = hooks_.find(name);
  return it != hooks_.end() && it->second.replacer;
}

void HookTable::pass(const std::string& name, Var& value) const {
  const auto it = hooks_.find(name);
  if (it == hooks_.end()) return;
  const Hooks& h = it->second;
  if (h.replacer) {
    Var replaced = h.replacer(name, value);
    if (!replaced.defined() || replaced.value().shape() != value.value().shape())
      throw ShapeError("hook on '" + name + "' returned " +
                       (replaced.defined() ? replaced.value().shape_str() : std::string("no value")) +
                       " for an activation of shape " + value.value().shape_str());
    value = std::move(replaced);
  }
  for (const auto& [id, observer] : h.observers) observer(name, value);
}

void HookSite::declare(const std::string& point, const std::string& layout) const {
  if (!table_) throw ValueError("HookSite: declare '" + point + "' before attach");
  table_->declare(prefix_ + point, layout);
}

}  // namespace attnlab
