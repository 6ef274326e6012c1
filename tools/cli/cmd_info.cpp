// tfm info — what this build and this machine offer (CPU features, kernels, threads, BLAS).
#include <cstdio>

#include "commands.h"
#include "model_summary.h"
#include "tfm/model_config.h"
#include "kernels/gemm.h"
#include "tfm/runtime.h"

namespace tfm::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build and CPU, or a model's architecture and memory");
  static std::string config;
  cmd->add_option("config", config, "A model config.json, or a preset name (vaswani, gpt2, llama, bert, t5)");
  cmd->callback([] {
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
    std::printf("threads:  %d (set with -t N)\n", num_threads());
    std::printf("gemm:     %s\n", kernels::gemm_backend_name());
  });
}

}  // namespace tfm::cli
