// transformer.cpp — the public API in one include.
//
//   #include <tfm/tfm.h>
//   using namespace tfm;
//   Tensor w = Tensor::randn({4, 3}, /*seed=*/0).requires_grad_();
//   Tensor y = reshape(w, {3, 4});
//   backward(y);                       // w.grad() is all ones
#pragma once

#include "tfm/audio.h"
#include "tfm/autograd.h"
#include "tfm/chunk_database.h"
#include "tfm/contrastive.h"
#include "tfm/dtype.h"
#include "tfm/error.h"
#include "tfm/generate.h"
#include "tfm/gguf.h"
#include "tfm/gguf_model.h"
#include "tfm/kv_cache.h"
#include "tfm/memory_plan.h"
#include "tfm/metrics.h"
#include "tfm/model.h"
#include "tfm/model_config.h"
#include "tfm/model_dir.h"
#include "tfm/perplexity.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/session.h"
#include "tfm/tensor.h"
