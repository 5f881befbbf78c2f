#pragma once
// --reduction: the way the processes of a run sum their gradients (the same
// bits either way; training/distributed/ordered_sum.h describes both), parsed
// from its text where the flag or config.ini gives it and an enum inside.
#include <string>
#include <utility>
#include <vector>

namespace attnlab {

enum class Reduction { automatic, gather, reduce_scatter };  // automatic is written "auto"

// The values and their text, in declaration order (models/config.h's name_of and choice_named read them).
const std::vector<std::pair<Reduction, std::string>>& choice_names(Reduction);

}  // namespace attnlab
