// Every differentiable op of the engine, by family.
#pragma once

#include "tfm/ops/activation.h"
#include "tfm/ops/arith.h"
#include "tfm/ops/attention.h"
#include "tfm/ops/matmul.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/position.h"
#include "tfm/ops/reduce.h"
#include "tfm/ops/shape.h"
