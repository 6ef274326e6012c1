// tfm classify -m DIR [TEXT] — label<TAB>probability for TEXT or for each line of stdin
// (batched 32 lines at a time with padding masks; one flushed output line per input line).
// tfm classify -m DIR --image FILE... — an image classifier's label<TAB>id<TAB>probability per
// image (FILE<TAB> first when there are several), through the directory's preprocessor.
// tfm classify -m CLIP_DIR --image FILE... --labels "a photo of a cat,a photo of a dog" — CLIP's
// zero-shot classification: the same lines, each label text named by itself.
// --top-k K prints the K most probable labels; --json one object per input instead.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli_common.h"
#include "commands.h"
#include "line_batches.h"
#include "tfm/contrastive.h"
#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"

namespace tfm::cli {
namespace {

// The k most probable labels, most probable first (ties: the lower id).
std::vector<std::int64_t> top_labels(const Classification& c, std::size_t k) {
  std::vector<std::int64_t> ids(c.probabilities.size());
  std::iota(ids.begin(), ids.end(), std::int64_t{0});
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](std::int64_t a, std::int64_t b) {
    const float pa = c.probabilities[static_cast<std::size_t>(a)], pb = c.probabilities[static_cast<std::size_t>(b)];
    return pa != pb ? pa > pb : a < b;
  });
  ids.resize(k);
  return ids;
}

// A label's name: the label text of a zero-shot classification, else config.json's id2label.
std::string name_of(const ModelConfig& mc, const std::vector<std::string>& labels, std::int64_t id) {
  return labels.empty() ? label_name(mc, id) : labels.at(static_cast<std::size_t>(id));
}

nlohmann::json predictions_json(const ModelConfig& mc, const std::vector<std::string>& labels, const Classification& c,
                                std::size_t k) {
  nlohmann::json list = nlohmann::json::array();
  for (std::int64_t id : top_labels(c, k))
    list.push_back({{"label", name_of(mc, labels, id)}, {"id", id},
                    {"probability", static_cast<double>(c.probabilities[static_cast<std::size_t>(id)])}});
  return list;
}

}  // namespace

void add_classify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("classify", "Classify TEXT, each line of stdin, or images with a classifier model");
  struct Args {
    std::string model, adapter, text;
    std::vector<std::string> images, labels;
    WeightOptions weights;
    std::size_t batch = 32, top_k = 1;
    std::string max_memory;
    bool verbose = false, json = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("-m,--model", args->model, "Model directory")->required();
  add_adapter_option(cmd, args->adapter);
  add_weight_options(cmd, args->weights);
  cmd->add_option("text", args->text, "Text to classify (default: each line of stdin)");
  cmd->add_option("--image", args->images, "PNG or JPEG files for an image classifier (ViT)");
  cmd->add_option("--labels", args->labels, "CLIP zero-shot: the label texts, comma-separated (repeatable)")
      ->delimiter(',');
  cmd->add_option("--top-k", args->top_k, "Print the K most probable labels")->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", args->json, "One JSON object per input: {input, predictions: [{label, id, probability}]}");
  cmd->add_option("--batch", args->batch, "Lines or images per forward pass")->check(CLI::Range(1, 4096));
  add_max_memory_option(cmd, args->max_memory);
  cmd->add_flag("-v,--verbose", args->verbose, "Print tokens/s to stderr at the end");
  cmd->callback([cmd, args] {
    LoadedModel m = load_model(args->model, args->adapter, args->weights, args->max_memory, 0, static_cast<std::int64_t>(args->batch));
    if (!args->images.empty()) {
      TFM_CHECK(cmd->count("text") == 0, "classify", "give either TEXT or --image, not both");
      TextEmbeddingCache label_cache;  // the labels' embeddings, computed once for every batch
      for_each_image_batch(args->images, args->batch, [&](const std::vector<Image>& batch, std::size_t first) {
        const auto rs = args->labels.empty() ? classify_images(m, batch)
                                             : zero_shot_classify(m, batch, args->labels, &label_cache);
        for (std::size_t i = 0; i < rs.size(); ++i) {
          const std::string& file = args->images[first + i];
          if (args->json) {
            std::printf("%s\n", nlohmann::json{{"image", file}, {"predictions", predictions_json(m.config, args->labels, rs[i], args->top_k)}}
                                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                    .c_str());
            continue;
          }
          for (std::int64_t id : top_labels(rs[i], args->top_k))
            std::printf("%s%s\t%lld\t%.4f\n", args->images.size() > 1 ? (file + "\t").c_str() : "",
                        name_of(m.config, args->labels, id).c_str(), static_cast<long long>(id),
                        static_cast<double>(rs[i].probabilities[static_cast<std::size_t>(id)]));
        }
      });
      return;
    }
    TFM_CHECK(args->labels.empty(), "classify", "--labels classifies pictures: give them with --image");
    Timings timings;
    auto print = [&](const std::vector<std::string>& texts) {
      const auto rs = timed_prefill(m.tokenizer, texts, timings, [&] { return classify(m, texts); });
      for (std::size_t i = 0; i < rs.size(); ++i) {
        const auto& r = rs[i];
        if (args->json) {
          std::printf("%s\n", nlohmann::json{{"text", texts[i]}, {"predictions", predictions_json(m.config, {}, r, args->top_k)}}
                                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                  .c_str());
        } else if (args->top_k == 1) {
          std::printf("%s\t%.4f\n", r.name.c_str(), static_cast<double>(r.probability));
        } else {
          std::string line;
          for (std::int64_t id : top_labels(r, args->top_k)) {
            char p[32];
            std::snprintf(p, sizeof p, "%.4f", static_cast<double>(r.probabilities[static_cast<std::size_t>(id)]));
            line += (line.empty() ? "" : "\t") + label_name(m.config, id) + "\t" + p;
          }
          std::printf("%s\n", line.c_str());
        }
      }
      std::fflush(stdout);
    };
    for_each_input_batch(cmd->count("text") > 0 ? &args->text : nullptr, args->batch, print);
    if (args->verbose) report_timings(timings);
  });
}

}  // namespace tfm::cli
