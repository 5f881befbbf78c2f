#pragma once
// The feed-forward block's nonlinearity (framework/nn/feed_forward.h), a
// choice among names (framework/choices.h): "relu" | "gelu".
#include "framework/choices.h"

namespace attnlab {

enum class Activation { relu, gelu };  // gelu is the exact x·Φ(x), as torch.nn.GELU()
const ChoiceNames<Activation>& choice_names(Activation);

}  // namespace attnlab
