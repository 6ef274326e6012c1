// Every differentiable op of the engine, by family.
#pragma once

#include "tfm/ops/shape.h"
#include "tfm/ops/matmul.h"
