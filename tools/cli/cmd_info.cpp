// tfm info — what this build and this machine offer (CPU features, kernels, threads, BLAS);
// tfm info CONFIG|PRESET — a model's architecture; tfm info -m DIR [--ctx-size C] [--batch B]
//   [--tensor-parallel N | --pipeline-parallel N]
// — the memory planner: weights, KV cache and activations, from DIR/config.json alone.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "gguf_info.h"
#include "model_summary.h"
#include "tfm/error.h"
#include "tfm/memory_plan.h"
#include "tfm/model.h"
#include "tfm/model_config.h"
#include "tfm/model_dir.h"
#include "kernels/gemm.h"
#include "tfm/runtime.h"

namespace tfm::cli {
namespace {

// The memory planner's lines (nothing is allocated: the figures come from the config).
void print_memory_plan(const ModelConfig& c, std::int64_t ctx, std::int64_t batch, std::int64_t tp = 1) {
  const MemoryPlan p = plan_memory(c, ctx, batch, static_cast<int>(tp));
  const auto line = [](const char* what, std::int64_t b, const std::string& how) {
    std::printf("  %-22s %12lld bytes  %10s  %s\n", what, static_cast<long long>(b),
                human_bytes(static_cast<double>(b)).c_str(), how.c_str());
  };
  std::printf("\nmemory plan: context %lld positions x %lld sequence(s) (--ctx-size, --batch)\n",
              static_cast<long long>(p.ctx_size), static_cast<long long>(p.batch));
  line("weights (f32)", p.weight_bytes, "");
  for (const auto& [part, b] : p.weights) line(("  " + part).c_str(), b, "");
  if (c.architecture != Architecture::encoder_only) {
    line("KV cache", p.kv_bytes, "KVCache::bytes_needed");
    line("  self-attention", p.kv_self_bytes,
         std::to_string(c.architecture == Architecture::encoder_decoder ? c.decoder_layers() : c.n_layers) +
             " layers x 2 x " + std::to_string(c.kv_heads()) + " kv heads x " + std::to_string(p.ctx_size) + " x " +
             std::to_string(c.dim_head()) + " x " + std::to_string(p.batch) + " x 4 B");
    if (p.kv_cross_bytes > 0)
      line("  cross-attention", p.kv_cross_bytes,
           std::to_string(p.batch) + " source(s) of " + std::to_string(p.source_len) + " tokens");
    line("activations, prefill", p.prefill_bytes, "estimate: one prompt of " + std::to_string(p.ctx_size) + " tokens");
    line("activations, decode", p.decode_bytes, "estimate: one step of " + std::to_string(p.batch) + " row(s)");
  } else {
    line("activations, forward", p.prefill_bytes, "estimate: " + std::to_string(p.batch) + " x " +
                                                      std::to_string(p.ctx_size) + " tokens");
  }
  line("total", p.total_bytes, "weights + KV cache + the larger activation figure");
  std::printf("(activations: the largest tensors live in one layer — hidden states, q/k/v, FFN hidden — plus\n"
              " the logits; allocator slack and kernel scratch are not counted)\n");
  const ActivationMemoryPlan t = plan_activation_memory(c, p.ctx_size, p.batch);
  const TrainingMemoryPlan step = plan_training_memory(c, p.batch, p.ctx_size, 2);
  std::printf("\ntraining: one step on %lld sequence(s) of %lld tokens\n", static_cast<long long>(t.batch),
              static_cast<long long>(t.seq_len));
  line("weights+grads+AdamW", step.weight_bytes + step.gradient_bytes + step.optimizer_bytes,
       "f32: 16 bytes a parameter");
  line("activations", t.activation_bytes, "estimate: what autograd keeps for the backward pass");
  line("  checkpointed", t.checkpointed_bytes(),
       "training.checkpoint_activations: layer inputs " + human_bytes(static_cast<double>(t.checkpoint_kept_bytes)) +
           " + one layer recomputed " + human_bytes(static_cast<double>(t.checkpoint_recompute_bytes)));
}

// The weights' storage types, read from the mapped files (nothing is converted).
void print_stored_tensor_types(const std::string& dir) {
  std::printf("tensor types (in the files; loaded as f32):\n");
  double elements = 0;
  for (const auto& [name, s] : stored_tensor_types(dir)) {
    std::printf("  %-6s %5lld tensors  %10s weights  %10s\n", name.c_str(), static_cast<long long>(s.tensors),
                human_count(static_cast<double>(s.elements)).c_str(), human_bytes(static_cast<double>(s.bytes)).c_str());
    elements += static_cast<double>(s.elements);
  }
  std::printf("weights after load (f32): %s\n", human_bytes(4.0 * elements).c_str());
}

}  // namespace

// The config whose plan one process of a model-parallel job holds (tfm/model.h): pipeline
// stage 0 (the first stages hold the most layers), and of it, or of the whole model, one
// tensor-parallel shard.
ModelConfig planned_part(const ModelConfig& c, std::int64_t tp, std::int64_t pp) {
  ModelConfig part = c;
  if (pp > 1) {
    const bool seq2seq = c.architecture == Architecture::encoder_decoder;
    TFM_CHECK(c.n_layers >= pp && (!seq2seq || c.decoder_layers() >= pp), "--pipeline-parallel",
              "splits the layers of models with at least ", pp, " layers (in each stack)");
    part = pipeline_config(c, 0, static_cast<int>(pp));
  }
  if (tp > 1) {
    TFM_CHECK(c.n_heads % tp == 0 && c.kv_heads() % tp == 0 && c.d_ff % tp == 0, "--tensor-parallel", "the model's ",
              c.n_heads, " attention heads, ", c.kv_heads(), " key/value heads and FFN width ", c.d_ff,
              " must divide by ", tp);
    part = tensor_parallel_config(part, static_cast<int>(tp));
  }
  if (tp > 1 && pp > 1)
    std::printf("\n(the plan of one shard of pipeline stage 0: --tensor-parallel %lld --pipeline-parallel %lld)",
                static_cast<long long>(tp), static_cast<long long>(pp));
  else if (tp > 1)
    std::printf("\n(the plan of one rank's shard: --tensor-parallel %lld)", static_cast<long long>(tp));
  else if (pp > 1)
    std::printf("\n(the plan of pipeline stage 0, which holds the most layers: --pipeline-parallel %lld)",
                static_cast<long long>(pp));
  return part;
}

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build and CPU, or a model's architecture and memory");
  static std::string config, dir;
  static std::int64_t ctx = 0, batch = 1, tp = 1, pp = 1;
  cmd->add_option("config", config, "A model config.json, a preset name (vaswani, gpt2, llama, bert, t5, vit-b16, deit-b16-distilled), a model directory or a .gguf file");
  cmd->add_option("-m,--model", dir, "A model directory or .gguf file: its architecture, tensor types and the memory plan");
  cmd->add_option("-c,--ctx-size", ctx, "Memory plan: positions per sequence (0: the model's max_positions)");
  cmd->add_option("-b,--batch", batch, "Memory plan: sequences decoded together");
  cmd->add_option("--tensor-parallel", tp, "Memory plan: of one rank's shard of N (mpirun -np N tfm generate ... --tensor-parallel N)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--pipeline-parallel", pp, "Memory plan: of one pipeline stage of N")->check(CLI::Range(1, 1024));
  cmd->callback([] {
    // `tfm info MODEL_DIR` and `tfm info FILE.gguf` mean -m; a name that is neither a preset
    // nor a file is an error listing the presets.
    if (dir.empty() && !config.empty()) {
      const std::filesystem::path p(config);
      if (std::filesystem::is_directory(p) || (std::filesystem::is_regular_file(p) && p.extension() == ".gguf")) {
        dir = config;
        config.clear();
      } else if (!std::filesystem::exists(p)) {
        const std::vector<std::string> presets = model_preset_names();
        std::string all;
        for (const auto& n : presets) all += (all.empty() ? "" : ", ") + n;
        const std::string near = closest_name(config, presets);
        TFM_CHECK(std::find(presets.begin(), presets.end(), config) != presets.end(), "info", "'", config,
                  "' is neither a file nor a preset", near.empty() ? "" : " (did you mean '" + near + "'?)",
                  "; presets: ", all);
      }
    }
    if (!dir.empty() && std::filesystem::is_regular_file(dir)) {  // -m FILE.gguf
      const ModelConfig c = print_gguf_info(dir);
      print_model_summary(c, dir);
      print_memory_plan(planned_part(c, tp, pp), ctx, batch, tp);
      return;
    }
    if (!dir.empty()) {
      TFM_CHECK(std::filesystem::is_directory(dir), "info", "no model directory '", dir, "'");
      const std::string path = (std::filesystem::path(dir) / "config.json").string();
      TFM_CHECK(std::filesystem::exists(path), "info", "'", dir, "' has no config.json (not a model directory)");
      const ModelConfig c = load_model_config(path);
      print_model_summary(c, dir);
      print_stored_tensor_types(dir);
      print_memory_plan(planned_part(c, tp, pp), ctx, batch, tp);
      return;
    }
    if (ctx != 0 || batch != 1) {
      bool preset = false;
      for (const auto& n : model_preset_names()) preset = preset || n == config;
      TFM_CHECK(!config.empty(), "info", "--ctx-size/--batch plan a model's memory: give -m DIR or a config");
      const ModelConfig c = preset ? model_preset(config) : load_model_config(config);
      print_model_summary(c, config);
      print_memory_plan(c, ctx, batch);
      return;
    }
    if (!config.empty()) {
      bool preset = false;
      for (const auto& n : model_preset_names()) preset = preset || n == config;
      print_model_summary(preset ? model_preset(config) : load_model_config(config), config);
      return;
    }
    const CpuInfo& c = cpu_info();
    std::printf("tfm %s\n", version_string());
    std::printf("cpu:      %s (%d logical cores)\n", c.brand.c_str(), c.logical_cores);
    std::printf("features: avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d avx512dq=%d "
                "avx512_vnni=%d avx512_bf16=%d\n",
                c.avx2, c.fma, c.f16c, c.avx512f, c.avx512bw, c.avx512vl, c.avx512dq, c.avx512_vnni,
                c.avx512_bf16);
    std::printf("kernels:  %s (best on this CPU: %s; override with TFM_ISA=generic|avx2|avx512)\n",
                isa_name(active_isa()), isa_name(cpu_best_isa()));
    std::printf("threads:  %d (set with -t N); idle threads %s\n", num_threads(), omp_waiting_description());
    std::printf("gemm:     %s\n", kernels::gemm_backend_name());
    std::printf("bf16:     %s (training \"precision\": \"bf16\"; override with TFM_BF16=native|onednn|emulated)\n",
                bf16_path_description());
  });
}

}  // namespace tfm::cli
