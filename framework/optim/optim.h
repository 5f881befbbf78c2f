#pragma once
// Everything of framework/optim: optimizers, clipping, lr schedules.
#include "framework/optim/adam.h"
#include "framework/optim/clip.h"
#include "framework/optim/optimizer.h"
#include "framework/optim/schedule.h"
#include "framework/optim/sgd.h"
