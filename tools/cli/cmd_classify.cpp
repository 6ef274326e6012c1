// tfm classify -m DIR [TEXT] — label<TAB>probability for TEXT or for each line of stdin
// (batched 32 lines at a time with padding masks; one flushed output line per input line).
#include <cstdio>

#include "cli_common.h"
#include "commands.h"
#include "line_batches.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"

namespace tfm::cli {

void add_classify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("classify", "Classify TEXT, or each line of stdin, with a classifier model");
  struct Args {
    std::string model, adapter, text;
    WeightOptions weights;
    std::size_t batch = 32;
    std::string max_memory;
    bool verbose = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("-m,--model", args->model, "Model directory")->required();
  add_adapter_option(cmd, args->adapter);
  add_weight_options(cmd, args->weights);
  cmd->add_option("text", args->text, "Text to classify (default: each line of stdin)");
  cmd->add_option("--batch", args->batch, "Lines per forward pass")->check(CLI::Range(1, 4096));
  add_max_memory_option(cmd, args->max_memory);
  cmd->add_flag("-v,--verbose", args->verbose, "Print tokens/s to stderr at the end");
  cmd->callback([cmd, args] {
    LoadedModel m = load_model(args->model, args->adapter, args->weights, args->max_memory, 0, static_cast<std::int64_t>(args->batch));
    Timings timings;
    auto print = [&](const std::vector<std::string>& texts) {
      const auto rs = timed_prefill(m.tokenizer, texts, timings, [&] { return classify(m, texts); });
      for (const auto& r : rs) std::printf("%s\t%.4f\n", r.name.c_str(), static_cast<double>(r.probability));
      std::fflush(stdout);
    };
    for_each_input_batch(cmd->count("text") > 0 ? &args->text : nullptr, args->batch, print);
    if (args->verbose) report_timings(timings);
  });
}

}  // namespace tfm::cli
