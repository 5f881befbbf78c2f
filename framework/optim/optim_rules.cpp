#include "framework/optim/optim_rules.h"

#include <charconv>

#include "framework/error.h"

namespace attnlab {

namespace {

// A field as `naming` names it: "min_lr", or its flag "--min-lr".
std::string named(std::string key, Naming naming) {
  if (naming == Naming::json) return key;
  for (char& c : key)
    if (c == '_') c = '-';
  return "--" + key;
}

// The shortest text that reads back as `v` ("0.1", "1e-05").
std::string text(double v) {
  char buf[64];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace

void check_nesterov(const OptimizerConfig& c, Naming n) {
  if (c.kind == OptimizerKind::sgd && c.nesterov && !(c.momentum > 0))
    throw ValueError(named("nesterov", n) + " needs " + named("momentum", n) + " > 0");
}

void check_schedule_fields(const ScheduleConfig& c, double base_lr, Naming n) {
  const bool decays = c.kind == ScheduleKind::linear || c.kind == ScheduleKind::cosine;
  if (decays && !(c.min_lr >= 0 && c.min_lr <= base_lr))
    throw ValueError(named("min_lr", n) + " must be in [0, " + named("lr", n) + " " + text(base_lr) + "], got " +
                     text(c.min_lr));
  if (c.kind == ScheduleKind::noam && c.warmup <= 0)
    throw ValueError(named("schedule", n) + " noam needs " + named("warmup", n) + " > 0");
}

}  // namespace attnlab
