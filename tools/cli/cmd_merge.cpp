// tfm merge -m BASE --adapter ADAPTER -o OUT — a LoRA adapter merged into its base model's
// weights (W + alpha/r B A), written as a plain model directory that needs no adapter.
// Bottleneck adapters and prefixes are refused: a bottleneck's non-linear branch and a
// prefix's extra keys are no change of any weight, so they have no merged form.
#include <cstdio>
#include <filesystem>

#include "cli_common.h"
#include "commands.h"
#include "tfm/adapter.h"
#include "tfm/error.h"

namespace tfm::cli {

void add_merge_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("merge", "Merge a LoRA adapter into its base model's weights");
  struct Args {
    std::string model, adapter, out;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("-m,--model", args->model, "Base model directory")->required();
  cmd->add_option("--adapter", args->adapter, "LoRA adapter directory (adapter_config.json, adapter_model.safetensors)")
      ->required();
  cmd->add_option("-o,--out", args->out, "Model directory to write")->required();
  cmd->callback([args] {
    TFM_CHECK(std::filesystem::absolute(args->out) != std::filesystem::absolute(args->model), "merge",
              "-o must differ from -m (the base model is kept)");
    const std::string type = read_adapter_type(args->adapter);
    TFM_CHECK(type == "LORA", args->adapter, type == "BOTTLENECK"
              ? "is a bottleneck adapter: its non-linear branch cannot be folded into the weights; use it with --adapter"
              : "is a prefix-tuning adapter: its learned keys/values are no weight change and cannot be merged; use it "
                "with --adapter");
    LoadedModel lm = load_model(args->model, args->adapter);
    const std::size_t modules = lm.model.lora_parameters().size() / 2;
    lm.model.merge_lora();
    save_model_dir(args->out, lm.model, lm.tokenizer);
    std::fprintf(stderr, "merged %zu LoRA module(s) of %s into %s -> %s\n", modules, args->adapter.c_str(),
                 args->model.c_str(), args->out.c_str());
  });
}

}  // namespace tfm::cli
