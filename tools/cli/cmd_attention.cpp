// tfm attention -m DIR -p TEXT [--target TEXT] [--layer L] [--head H] [--kind self|cross]
//               [--stack encoder|decoder] -o FILE.svg — attention heat maps of one forward pass.
// tfm attention -m DIR --image FILE -o FILE.png — an image model's attention rollout laid
//               over the image it saw.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cli_common.h"
#include "commands.h"
#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"

namespace tfm::cli {

void add_attention_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("attention", "Draw attention weights of a forward pass as SVG heat maps");
  struct Args {
    std::string model, adapter, output, max_memory, image;
    std::int64_t min_side = 224;
    WeightOptions weights;
    AttentionQuery q;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("-m,--model", args->model, "Model directory (config.json, model.safetensors, tokenizer.json)")->required();
  add_adapter_option(cmd, args->adapter);
  add_weight_options(cmd, args->weights);
  cmd->add_option("-p,--prompt", args->q.prompt, "Text (the encoder's, or the decoder-only model's)");
  cmd->add_option("--image", args->image, "Image model: a PNG or JPEG whose attention rollout to draw (-o FILE.png)");
  cmd->add_option("--size", args->min_side, "--image: the picture's shorter side in pixels at least (default 224)")
      ->check(CLI::Range(1, 8192));
  cmd->add_option("--target", args->q.target, "Encoder-decoder: the decoder's text (starts with <bos>, as in training)");
  cmd->add_option("--layer", args->q.layer, "Layer (default: the last)");
  cmd->add_option("--head", args->q.head, "Head (default: a grid of every head)");
  cmd->add_option("--kind", args->q.kind, "self | cross (default: cross for encoder-decoder, else self)")
      ->check(CLI::IsMember({"self", "cross"}));
  cmd->add_option("--stack", args->q.stack, "encoder | decoder (default: the model's main stack)")
      ->check(CLI::IsMember({"encoder", "decoder"}));
  cmd->add_option("-o,--output", args->output, "SVG file to write (PNG with --image)")->required();
  add_max_memory_option(cmd, args->max_memory);
  cmd->callback([cmd, args] {
    LoadedModel m = load_model(args->model, args->adapter, args->weights, args->max_memory, 0, 1);
    if (!args->image.empty()) {
      TFM_CHECK(cmd->count("--prompt") == 0 && cmd->count("--layer") == 0 && cmd->count("--head") == 0, "attention",
                "--image draws the rollout through every layer and head; --prompt, --layer and --head are for text");
      const ImageAttention a = attention_rollout(m, read_image(args->image));
      write_png(args->output, attention_overlay(a, args->min_side));
      const auto top = std::max_element(a.rollout.begin(), a.rollout.end()) - a.rollout.begin();
      std::fprintf(stderr, "wrote %s: attention rollout of [CLS] over %lldx%lld patches (strongest: row %lld, column %lld)\n",
                   args->output.c_str(), static_cast<long long>(a.grid), static_cast<long long>(a.grid),
                   static_cast<long long>(top / a.grid), static_cast<long long>(top % a.grid));
      return;
    }
    TFM_CHECK(cmd->count("--prompt") > 0, "attention", "give --prompt TEXT (or --image FILE for an image model)");
    const AttentionFigure f = attention_figure(m, args->q);
    const std::string svg = heat_maps_svg(f.maps, f.style);
    std::ofstream out(args->output, std::ios::binary);
    TFM_CHECK(out.good(), "attention", "cannot write ", args->output);
    out << svg;
    out.close();
    TFM_CHECK(out.good(), "attention", "writing ", args->output, " failed");
    const HeatMap& h = f.maps.front();
    std::fprintf(stderr, "wrote %s: %s (%zu queries x %zu keys)\n", args->output.c_str(), f.style.title.c_str(),
                 h.row_labels.size(), h.col_labels.size());
  });
}

}  // namespace tfm::cli
