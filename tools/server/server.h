// `tfm serve`: loads the model, prints the URL and memory plan, serves until SIGINT/SIGTERM.
#pragma once

#include "serve_options.h"
#include "tfm/model_dir.h"

namespace tfm::server {

class BatchMirror;  // lockstep.h

// Serves the loaded model (lm) of opt.model_dir. Blocks until SIGINT or SIGTERM (in-flight
// requests are cancelled with an error, the listener closed, threads joined), then returns 0.
// Errors at start throw tfm::Error. mirror: the other ranks of a model split over processes,
// told every batch operation (lockstep.h; null: none).
int serve(LoadedModel& lm, const ServeOptions& opt, BatchMirror* mirror = nullptr);

}  // namespace tfm::server
