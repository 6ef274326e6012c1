// tfm convert -m IN -o OUT [--to gguf|hf] [--type f32|f16|bf16|q8_0] — between a model
// directory (config.json + model.safetensors + tokenizer.json) and one GGUF file.
#include <cstdio>

#include "commands.h"
#include "tfm/error.h"
#include "tfm/gguf_model.h"
#include "tfm/quantize.h"

namespace tfm::cli {

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a model between a directory (Hugging Face layout) and GGUF");
  struct Args {
    std::string in, out, to, type = "f32", name;
  };
  static Args a;
  cmd->add_option("-m,--model", a.in, "Input: a model directory or a .gguf file")->required();
  cmd->add_option("-o,--output", a.out, "Output: a .gguf file or a directory")->required();
  cmd->add_option("--to", a.to, "gguf or hf (default: gguf when OUT ends in .gguf)")->check(CLI::IsMember({"gguf", "hf"}));
  cmd->add_option("--type", a.type, "GGUF matrix type: f32, f16, bf16 or q8_0 (norms and biases stay f32)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  cmd->add_option("--name", a.name, "general.name written into the GGUF file");
  cmd->callback([] {
    const std::string to = !a.to.empty() ? a.to : is_gguf_path(a.out) ? "gguf" : "hf";
    GgufModelInfo info;  // a GGUF input keeps its name and chat template
    LoadedModel m = is_gguf_path(a.in) ? load_gguf_model(a.in, &info) : load_model_dir(a.in);
    if (to == "gguf") {
      save_gguf_model(a.out, m.model, m.tokenizer,
                      {ggml_type_from_name(a.type), a.name.empty() ? info.name : a.name, info.chat_template});
    } else {
      TFM_CHECK(a.type == "f32", "convert", "--to hf writes f32 safetensors; --type ", a.type, " applies to GGUF only");
      dequantize_model(m.model);  // a quantized GGUF's weights as f32 (tfm quantize keeps them compact)
      save_model_dir(a.out, m.model, m.tokenizer);
    }
    std::printf("wrote %s (%s, %s)\n", a.out.c_str(), to.c_str(), to == "gguf" ? a.type.c_str() : "f32");
  });
}

}  // namespace tfm::cli
