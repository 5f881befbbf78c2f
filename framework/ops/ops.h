#pragma once
// Every op of the engine.
#include "framework/ops/attention.h"
#include "framework/ops/dropout.h"
#include "framework/ops/elementwise.h"
#include "framework/ops/embedding.h"
#include "framework/ops/loss.h"
#include "framework/ops/matmul.h"
#include "framework/ops/norm.h"
#include "framework/ops/reduce.h"
#include "framework/ops/rotary.h"
#include "framework/ops/shape.h"
#include "framework/ops/softmax.h"
