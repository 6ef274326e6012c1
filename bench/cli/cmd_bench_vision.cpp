// tfm bench vision — inference throughput of a ViT-B/16-sized image classifier (the vit-b16
// preset: 86.6M parameters, 224 x 224 pictures, 197 tokens, random weights), images/s at
// batch 1 and 32 on 1 and all threads, with its weight matrices in f32, bf16 and q8_0, beside
// torchvision's vit_b_16 in PyTorch (bench/peers/torch/bench_torch_vision.py, f32, the same
// shapes: 12 layers of width 768, 12 heads, MLP 3072). Preprocessing is not timed (bench/micro's
// image decode and resize, docs/benchmarks.md "Images", measure it).
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "tfm/autograd.h"
#include "tfm/dtype.h"
#include "tfm/model.h"
#include "tfm/runtime.h"

namespace tfm::cli {
namespace {

using Key = std::tuple<std::int64_t, int>;  // batch, threads

std::map<Key, double> torch_vision_figures(const std::vector<std::int64_t>& batches, const std::vector<int>& tcs,
                                           const BenchOptions& o, std::string& note) {
  std::map<Key, double> out;
  if (!o.torch) {
    note = "PyTorch column skipped (--no-torch)";
    return out;
  }
  std::string bs, tc, why;
  for (auto b : batches) bs += (bs.empty() ? "" : ",") + std::to_string(b);
  for (int t : tcs) tc += (tc.empty() ? "" : ",") + std::to_string(t);
  const auto j = run_torch_script("bench_torch_vision.py", "--batches " + bs + " --threads " + tc + " --min-time " +
                                  std::to_string(o.min_time) + " --min-reps " + std::to_string(o.min_reps), why);
  try {
    for (const auto& r : j.at("results"))
      out[{r.at("batch").get<std::int64_t>(), r.at("threads").get<int>()}] = r.at("images_per_s").get<double>();
    note = "torch = torchvision " + j.at("torchvision").get<std::string>() + " vit_b_16 on PyTorch " +
           j.at("torch").get<std::string>() + ", f32, " + std::to_string(j.at("params").get<std::int64_t>()) + " parameters";
  } catch (const std::exception&) {
    out.clear();
    note = "PyTorch column skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
  }
  return out;
}

}  // namespace

void run_bench_vision(const BenchOptions& o, int threads) {
  std::vector<int> tcs = {1};
  if (threads > 1) tcs.push_back(threads);
  const std::vector<std::int64_t> batches = {1, 32};
  // One forward at batch 32 takes seconds: outside --long, the best of 2 after the warm-up.
  BenchOptions bo = o;
  if (!o.long_run) bo.min_reps = std::min(o.min_reps, 2);
  std::string note;
  const auto torch = torch_vision_figures(batches, tcs, bo, note);

  ModelConfig cfg = model_preset("vit-b16");
  cfg.dropout = cfg.attention_dropout = cfg.embedding_dropout = 0.0;
  Model model = Model::create(cfg, 1234);
  model.set_training(false);
  std::printf("\n== vision: ViT-B/16 (vit-b16 preset, %lld parameters, random weights) forward, images/s "
              "(best of >= %d runs)\n%s\n\n",
              static_cast<long long>(model.parameter_count()), bo.min_reps, note.c_str());
  std::printf("%-6s %6s %8s", "dtype", "batch", "threads");
  std::printf(" %10s %10s %10s\n", "ours", "torch f32", "ours/torch");
  NoGradGuard no_grad;
  for (const char* dtype : {"f32", "bf16", "q8_0"}) {
    std::map<std::string, DType> types;
    for (const auto& w : model.weight_matrices()) types[w.name] = dtype_from_name(dtype);
    model.convert_weights(types);
    for (std::int64_t b : batches) {
      const Tensor pixels = Tensor::randn({b, 3, 224, 224}, 11);
      ModelInputs in;
      in.pixel_values = pixels;
      for (int t : tcs) {
        set_num_threads(t);
        const double ours = static_cast<double>(b) / best_seconds(bo, [&] { (void)model.forward(in); });
        const auto it = torch.find({b, t});
        std::printf("%-6s %6lld %8d %10.2f", dtype, static_cast<long long>(b), t, ours);
        if (it == torch.end()) std::printf(" %10s %10s\n", "-", "-");
        else std::printf(" %10.2f %10.2f\n", it->second, ours / it->second);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace tfm::cli
