// Helpers shared by the commands that run a model directory.
#pragma once

#include <string>
#include <vector>

#include "tfm/kv_cache.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"

namespace tfm::cli {

// Lines of a file ("-": stdin), each checked for valid UTF-8 (errors name file:line). A
// trailing '\r' is dropped.
std::vector<std::string> read_input_lines(const std::string& path);
// One line on stderr before work starts: the model, the context and the KV cache's memory;
// with verbose, the parameter and weight figures too.
void report_model(const std::string& dir, const LoadedModel& lm, const KVCache& cache, bool verbose);
// Prefill and decode tokens/s on stderr.
void report_timings(const Timings& t);

}  // namespace tfm::cli
