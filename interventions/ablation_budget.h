#pragma once
// How many examples an ablation of every component can afford: the report's
// view (cli/report_ablation.cpp) ablates fewer examples of a large model, so
// that `attnlab report` stays quick.
#include <cstddef>
#include <vector>

#include "datasets/task.h"
#include "models/sequence_model.h"

namespace attnlab {

// The forward FLOPs per token of `model`: 2 per parameter (attention's T²
// terms left out).
double forward_flops_per_token(const SequenceModel& model);

// The number of the first examples whose (components + 1) passes, one per
// component of model_components and the intact one, cost at most `flops`, an
// example's pass reading its input, its answer and two special tokens; at
// least `minimum` (and at most examples.size()).
size_t examples_within(const SequenceModel& model, const std::vector<Example>& examples, double flops,
                       size_t minimum);

}  // namespace attnlab
