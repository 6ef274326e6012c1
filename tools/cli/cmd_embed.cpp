// tfm embed -m DIR [TEXT] [--input FILE] [--pooling auto|mean|first|last] [--normalize]
// [--dimensions N] [--prompt TEXT | --prompt-name NAME] — pooled hidden states as JSON lines
// {"text": ..., "embedding": [...]} for TEXT, each passage of --input (.txt lines or .jsonl
// "text"; the line's "id" added) or each line of stdin; a sentence-transformers directory
// embeds through its own modules.json pipeline (tfm/sentence_embed.h). --image FILE... for an
// image model: {"image": FILE, "embedding": [...]} per image.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "line_batches.h"
#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"
#include "tfm/retrieval.h"

namespace tfm::cli {

void add_embed_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("embed", "Pooled embeddings of TEXT, or each line of stdin, as JSON lines");
  struct Args {
    std::string model, adapter, text, pooling = "auto", input, prompt, prompt_name;
    std::int64_t dimensions = 0;
    std::vector<std::string> images;
    WeightOptions weights;
    bool normalize = false, verbose = false;
    std::size_t batch = 32;
    std::string max_memory;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("-m,--model", args->model, "Model directory")->required();
  add_adapter_option(cmd, args->adapter);
  add_weight_options(cmd, args->weights);
  cmd->add_option("text", args->text, "Text to embed (default: each line of stdin)");
  cmd->add_option("--image", args->images, "PNG or JPEG files for an image model (ViT)");
  cmd->add_option("--pooling", args->pooling,
                  "auto (encoders: the config's pooling; else mean) | mean (valid tokens) | first | last")
      ->check(CLI::IsMember({"auto", "mean", "first", "last"}));
  cmd->add_flag("--normalize", args->normalize, "Scale each vector to unit L2 norm");
  cmd->add_option("--input", args->input, "A corpus file: .jsonl (\"text\", \"id\") or one text a line");
  cmd->add_option("--dimensions", args->dimensions, "Keep the first N numbers (Matryoshka), renormalised when normalised")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prompt", args->prompt, "Text put before each input (e.g. \"query: \")");
  cmd->add_option("--prompt-name", args->prompt_name, "One of the model's config_sentence_transformers.json prompts");
  cmd->add_option("--batch", args->batch, "Lines per forward pass")->check(CLI::Range(1, 4096));
  add_max_memory_option(cmd, args->max_memory);
  cmd->add_flag("-v,--verbose", args->verbose, "Print tokens/s to stderr at the end");
  cmd->callback([cmd, args] {
    LoadedModel m = load_model(args->model, args->adapter, args->weights, args->max_memory, 0, static_cast<std::int64_t>(args->batch));
    const EmbedPooling pooling = embed_pooling_from_name(args->pooling);
    EmbedOptions eo;
    eo.pooling = pooling;
    eo.normalize = args->normalize;
    eo.dimensions = args->dimensions;
    eo.prompt = args->prompt;
    eo.prompt_name = args->prompt_name;
    auto print = [](const char* key, const std::string& input, const std::vector<float>& vec, const std::string* id = nullptr) {
      std::string line = "{";
      if (id) line += "\"id\": " + nlohmann::json(*id).dump() + ", ";
      line += "\"" + std::string(key) + "\": " +
              nlohmann::json(input).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ", \"embedding\": [";
      char buf[32];
      for (std::size_t k = 0; k < vec.size(); ++k) {
        std::snprintf(buf, sizeof buf, k ? ", %.6g" : "%.6g", static_cast<double>(vec[k]));
        line += buf;
      }
      std::printf("%s]}\n", line.c_str());
    };
    if (!args->images.empty()) {
      TFM_CHECK(cmd->count("text") == 0 && args->input.empty(), "embed", "give either TEXT, --input or --image");
      for_each_image_batch(args->images, args->batch, [&](const std::vector<Image>& batch, std::size_t first) {
        auto vecs = embed_images(m, batch, pooling, args->normalize);
        truncate_embeddings(vecs, args->dimensions, args->normalize);
        for (std::size_t i = 0; i < vecs.size(); ++i) print("image", args->images[first + i], vecs[i]);
      });
      return;
    }
    Timings timings;
    auto run = [&](const std::vector<std::string>& texts) {
      const auto vecs = timed_prefill(m.tokenizer, texts, timings, [&] { return embed(m, texts, eo); });
      for (std::size_t i = 0; i < texts.size(); ++i) print("text", texts[i], vecs[i]);
      std::fflush(stdout);
    };
    if (!args->input.empty()) {
      TFM_CHECK(cmd->count("text") == 0, "embed", "give either TEXT or --input, not both");
      const std::vector<Passage> passages = read_passages(args->input);
      for (std::size_t at = 0; at < passages.size(); at += args->batch) {
        std::vector<std::string> texts;
        for (std::size_t i = at; i < std::min(passages.size(), at + args->batch); ++i) texts.push_back(passages[i].text);
        const auto vecs = timed_prefill(m.tokenizer, texts, timings, [&] { return embed(m, texts, eo); });
        for (std::size_t i = 0; i < texts.size(); ++i) print("text", texts[i], vecs[i], &passages[at + i].id);
      }
      if (args->verbose) report_timings(timings);
      return;
    }
    for_each_input_batch(cmd->count("text") > 0 ? &args->text : nullptr, args->batch, run);
    if (args->verbose) report_timings(timings);
  });
}

}  // namespace tfm::cli
