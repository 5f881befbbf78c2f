#pragma once
// The rules between an optimizer's or a schedule's fields, each written once
// and worded in the configs' field names (make_optimizer, scheduled_lr: "min_lr")
// or in the flags of attnlab train (training/settings.cpp: "--min-lr").
#include "framework/choices.h"
#include "framework/optim/optimizer.h"
#include "framework/optim/schedule.h"

namespace attnlab {

// ValueError for Nesterov momentum without momentum > 0 (sgd).
void check_nesterov(const OptimizerConfig& c, Naming naming);

// ValueError for a linear or cosine schedule whose min_lr is outside
// [0, base_lr], or noam without warmup > 0.
void check_schedule_fields(const ScheduleConfig& c, double base_lr, Naming naming);

}  // namespace attnlab
