#pragma once
// Hook points: the one seam through which a forward pass shows or changes its
// activations (TransformerLens's HookPoint). A model owns one HookTable and
// declares on it, in forward order, the name of every activation it passes
// ("blocks.1.attn.pattern"; docs/hooks.md lists them). Instruments observe a
// name (record the value) or replace it (the forward goes on with what the
// hook returns). With nothing hooked a pass is one emptiness check: no copy,
// no changed bit.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

// Sees the value an activation point passes (after any replacement).
using HookObserver = std::function<void(const std::string& name, const Var& value)>;
// Returns the value the forward pass goes on with; it must keep the shape.
using HookReplacer = std::function<Var(const std::string& name, const Var& value)>;

class HookTable {
 public:
  // The model's construction: `name` is passed by its forward, `layout` says
  // its shape in dimension letters ("B, T, d"). Declared in forward order.
  void declare(const std::string& name, const std::string& layout);
  const std::vector<std::string>& names() const { return names_; }
  const std::string& layout(const std::string& name) const;  // ValueError for an unknown name

  // Adds an observer of `name` (ValueError naming it when no point has that
  // name); returns its id for remove(). Observers run in the order added.
  int64_t observe(const std::string& name, HookObserver observer);
  // Sets the replacement of `name` (one per name; a second replaces the
  // first); returns its id. ValueError for an unknown name.
  int64_t replace(const std::string& name, HookReplacer replacer);
  void remove(int64_t id);  // an id already removed is ignored
  void clear();             // every hook
  bool empty() const { return hooks_.empty(); }
  bool observed(const std::string& name) const;
  bool replaced(const std::string& name) const;

  // The value the forward goes on with: the replacer's result (ShapeError
  // when its shape differs), shown to the observers.
  void pass(const std::string& name, Var& value) const;

 private:
  struct Hooks {
    std::vector<std::pair<int64_t, HookObserver>> observers;
    int64_t replacer_id = -1;
    HookReplacer replacer;
  };
  void check_known(const std::string& name) const;

  std::vector<std::string> names_;
  std::map<std::string, std::string> layouts_;  // name -> layout
  std::map<std::string, Hooks> hooks_;          // only names with a hook
  int64_t next_id_ = 0;
};

// One module's place on the seam: the model's table and the module's prefix
// ("blocks.1.attn."). A module that was never attached passes nothing.
class HookSite {
 public:
  void attach(HookTable& table, std::string prefix) {
    table_ = &table;
    prefix_ = std::move(prefix);
  }
  // Declares prefix + point on the table (attach first).
  void declare(const std::string& point, const std::string& layout) const;
  // v as the forward goes on with it: unchanged when nothing is hooked.
  Var pass(const char* point, Var v) const {
    if (table_ && !table_->empty()) table_->pass(prefix_ + point, v);
    return v;
  }
  bool active() const { return table_ && !table_->empty(); }
  bool observed(const char* point) const { return active() && table_->observed(prefix_ + point); }
  bool replaced(const char* point) const { return active() && table_->replaced(prefix_ + point); }

 private:
  HookTable* table_ = nullptr;
  std::string prefix_;
};

}  // namespace attnlab
