#pragma once
// Every layer of the framework.
#include "framework/nn/multi_head_attention.h"
#include "framework/nn/dropout.h"
#include "framework/nn/embedding.h"
#include "framework/nn/feed_forward.h"
#include "framework/nn/layer_norm.h"
#include "framework/nn/linear.h"
#include "framework/nn/module.h"
#include "framework/nn/positional.h"
