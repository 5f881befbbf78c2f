#pragma once
// Learning-rate schedules: a pure function of the (1-based) step, so saving
// and restoring a schedule is saving and restoring the step count.
//
// Step k is the k-th optimizer update; the lr returned is the one that update
// uses. With w = warmup, N = total_steps, base = base_lr:
//   warmup (constant, linear, cosine; when w > 0): k <= w -> base * k / w
//     (the first update already moves: base / w, not 0)
//   constant: base after warmup.
//   linear:   progress q = clamp((k - w) / (N - w), 0, 1);
//             min_lr + (base - min_lr) * (1 - q)       -> base at k = w, min_lr from k = N on
//   cosine:   min_lr + (base - min_lr) * (1 + cos(pi * q)) / 2, same q
//   noam:     base * d_model^-0.5 * min(k^-0.5, k * w^-1.5)
//             ("Attention Is All You Need", eq. 3). Here base_lr is a
//             dimensionless multiplier (lr_scale; the paper uses 1), not
//             the peak lr: the peak, at k = w, is base / sqrt(d_model * w).
//             min_lr and total_steps are not used.
#include <cstdint>
#include <string>

#include "framework/choices.h"

namespace attnlab {

// The schedule's shape (framework/choices.h), as above.
enum class ScheduleKind { constant, linear, cosine, noam };
const ChoiceNames<ScheduleKind>& choice_names(ScheduleKind);

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::constant;
  int64_t warmup = 0;
  int64_t total_steps = 0;  // linear, cosine: the step at which min_lr is reached
  double min_lr = 0;        // linear, cosine
  int64_t d_model = 0;      // noam
};

// ValueError naming the value: negative warmup, base_lr <= 0, linear/cosine with total_steps <= warmup or
// min_lr outside [0, base_lr], noam without warmup > 0 and d_model > 0.
void validate(const ScheduleConfig& config, double base_lr);

// The lr for update `step` (>= 1; ValueError otherwise). Validates the config.
double scheduled_lr(const ScheduleConfig& config, double base_lr, int64_t step);

}  // namespace attnlab
