// tfm quantize -m IN -o OUT --type q8_0|q4_0|q4_k|q6_k|bf16|f16 [--recipe q4_k_m] [--no-fallback]
// Converts a model's weight matrices (linear layers, token embedding, output head) to a
// compact type; norms, biases and position tables stay f32. IN: a model directory (the
// engine's or a hub one) or a .gguf file. OUT: a .gguf file (decoder-only GPT-2/Llama
// families) or a model directory whose model.safetensors holds the compact weights in the
// layout of docs/formats.md ("Quantized weights").
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli_common.h"
#include "commands.h"
#include "tfm/chunk_database.h"
#include "tfm/error.h"
#include "tfm/gguf_model.h"
#include "tfm/quantize.h"

namespace tfm::cli {

void add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "Store a model's weight matrices as bf16, f16, q8_0, q4_0, q4_k or q6_k");
  struct Args {
    std::string in, out, type, recipe;
    bool no_fallback = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->in, "Input: a model directory or a .gguf file")->required();
  cmd->add_option("-o,--output", a->out, "Output: a .gguf file or a directory")->required();
  cmd->add_option("--type", a->type, "Weight type: q8_0, q4_0, q4_k, q6_k, bf16, f16 (or f32)")->required();
  cmd->add_option("--recipe", a->recipe, "q4_k_m: llama.cpp's Q4_K_M mix (q6_k output head and some V/down projections)");
  cmd->add_flag("--no-fallback", a->no_fallback,
                "Fail on a matrix whose rows do not fit the block size (default: q8_0, else f16, as llama.cpp does)");
  cmd->callback([a] {
    QuantizeOptions q;
    q.type = parse_weight_type(a->type, "--type");
    q.recipe = a->recipe;
    q.fallback = !a->no_fallback;
    GgufModelInfo info;
    LoadedModel m = is_gguf_path(a->in) ? load_gguf_model(a->in, &info) : load_model_dir(a->in);
    TFM_CHECK(!m.model.has_lora(), "quantize", a->in, " carries LoRA factors: merge them first (tfm merge)");
    const auto notes = quantize_model(m.model, q);
    print_fallbacks(notes);
    std::map<std::string, std::int64_t> count;
    for (const auto& [name, t] : m.model.parameters()) count[dtype_name(t.dtype())] += 1;
    TFM_CHECK(!m.config.retrieval.enabled() || !is_gguf_path(a->out), "quantize", a->in,
              " is a RETRO model: a GGUF file has no place for its chunk database; write a directory");
    if (is_gguf_path(a->out)) {
      GgufSaveOptions o;
      o.type = GgmlType::f32;  // the compact matrices keep their own types
      o.name = info.name;
      o.chat_template = info.chat_template;
      save_gguf_model(a->out, m.model, m.tokenizer, o);
    } else {
      save_model_dir(a->out, m.model, m.tokenizer);
      if (m.config.retrieval.enabled())  // RETRO reads neighbours from the database it was trained with
        std::filesystem::copy_file(std::filesystem::path(a->in) / kRetrievalDbFile, std::filesystem::path(a->out) / kRetrievalDbFile,
                                   std::filesystem::copy_options::overwrite_existing);
    }
    std::printf("wrote %s:", a->out.c_str());
    for (const auto& [type, n] : count) std::printf(" %lld %s", static_cast<long long>(n), type.c_str());
    std::printf(" tensors%s\n", notes.empty() ? "" : " (fallbacks on stderr)");
  });
}

}  // namespace tfm::cli
