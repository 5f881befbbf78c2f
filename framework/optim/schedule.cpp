#include "framework/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "framework/error.h"
#include "framework/optim/optim_rules.h"

namespace attnlab {

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

const ChoiceNames<ScheduleKind>& choice_names(ScheduleKind) {
  static const ChoiceNames<ScheduleKind> names = {{ScheduleKind::constant, "constant"},
                                                  {ScheduleKind::linear, "linear"},
                                                  {ScheduleKind::cosine, "cosine"},
                                                  {ScheduleKind::noam, "noam"}};
  return names;
}

void validate(const ScheduleConfig& c, double base_lr) {
  const bool decays = c.kind == ScheduleKind::linear || c.kind == ScheduleKind::cosine;
  if (!(base_lr > 0) || !std::isfinite(base_lr))
    throw ValueError("lr schedule: base lr must be > 0 and finite, got " + exact_text(base_lr));
  if (c.warmup < 0) throw ValueError("lr schedule: warmup must be >= 0, got " + std::to_string(c.warmup));
  if (decays && c.total_steps <= c.warmup)
    throw ValueError("lr schedule '" + name_of(c.kind) + "': total_steps must exceed warmup, got total_steps " +
                     std::to_string(c.total_steps) + " and warmup " + std::to_string(c.warmup));
  check_schedule_fields(c, base_lr, Naming::json);
  if (c.kind == ScheduleKind::noam && c.d_model <= 0)
    throw ValueError("lr schedule 'noam' needs d_model > 0, got " + std::to_string(c.d_model));
}

double scheduled_lr(const ScheduleConfig& c, double base_lr, int64_t step) {
  validate(c, base_lr);
  if (step < 1) throw ValueError("lr schedule: step is 1-based, got " + std::to_string(step));
  const double k = static_cast<double>(step), w = static_cast<double>(c.warmup);
  if (c.kind == ScheduleKind::noam) return base_lr / std::sqrt(static_cast<double>(c.d_model)) * std::min(1 / std::sqrt(k), k * std::pow(w, -1.5));
  if (step <= c.warmup) return base_lr * k / w;
  if (c.kind == ScheduleKind::constant) return base_lr;
  const double q = std::clamp((k - w) / (static_cast<double>(c.total_steps) - w), 0.0, 1.0);
  const double shape = c.kind == ScheduleKind::linear ? 1 - q : 0.5 * (1 + std::cos(kPi * q));
  return c.min_lr + (base_lr - c.min_lr) * shape;
}

}  // namespace attnlab
