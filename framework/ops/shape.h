#pragma once
// Ops that move values without arithmetic.
#include <vector>

#include "framework/autograd.h"

namespace attnlab {

Var reshape(const Var& a, Shape shape);  // same numel; one -1 is inferred
Var transpose(const Var& a, int axis0, int axis1);  // swap two axes (negative ok), copies
// Split along `axis` into pieces of the given sizes (must sum to the axis size).
std::vector<Var> split(const Var& a, int axis, const std::vector<int64_t>& sizes);
// Concatenate along `axis`; all other dims must match.
Var concat(const std::vector<Var>& parts, int axis);

}  // namespace attnlab
