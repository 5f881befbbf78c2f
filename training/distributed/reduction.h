#pragma once
// --reduction: the way the processes of a run sum their gradients (the same
// bits either way; training/distributed/ordered_sum.h describes both), parsed
// from its text where the flag or config.ini gives it and an enum inside.
#include "framework/choices.h"

namespace attnlab {

enum class Reduction { automatic, gather, reduce_scatter };  // automatic is written "auto"

const ChoiceNames<Reduction>& choice_names(Reduction);  // framework/choices.h

}  // namespace attnlab
