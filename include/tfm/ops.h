// Every differentiable op of the engine, by family.
#pragma once

#include "tfm/ops/attention.h"
#include "tfm/ops/shape.h"
