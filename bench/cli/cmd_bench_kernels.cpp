// tfm bench kernels — forward throughput of the row and elementwise kernels (softmax,
// LayerNorm, RMSNorm, GELU erf/tanh) in GB/s = (bytes read + bytes written) / best time,
// beside the machine's read bandwidth and PyTorch's figure for the same op and shape.
//
// These ops do a handful of flops per byte, so on shapes larger than the caches their ceiling
// is memory bandwidth: "ours/bw" near 1 means the kernel streams at the speed of a plain read
// loop (it can exceed 1 because the probe is a read-only stream and the ops also write).
// The cache-resident shape shows the compute side (exp/erf/tanh cost) instead.
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench_probe.h"
#include "bench_util.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {
namespace {

struct KernelOp {
  const char* name;  // also the key of bench_torch_kernels.py's "op"
  std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)> fn;
};

const std::vector<KernelOp>& kernel_ops() {
  static const std::vector<KernelOp> ops = {
      {"softmax", [](const Tensor& x, const Tensor&, const Tensor&) { return softmax(x); }},
      {"layer_norm", [](const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, w, b); }},
      {"rms_norm", [](const Tensor& x, const Tensor& w, const Tensor&) { return rms_norm(x, w); }},
      {"gelu_erf", [](const Tensor& x, const Tensor&, const Tensor&) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x, const Tensor&, const Tensor&) { return gelu(x, GeluApprox::tanh); }},
  };
  return ops;
}

using TorchKey = std::tuple<std::string, std::int64_t, std::int64_t, int>;  // op, rows, cols, threads

std::map<TorchKey, double> torch_kernel_figures(const std::vector<std::pair<std::int64_t, std::int64_t>>& shapes,
                                                const std::vector<int>& tcs, const BenchOptions& o, std::string& note) {
  std::map<TorchKey, double> out;
  if (!o.torch) {
    note = "PyTorch columns skipped (--no-torch)";
    return out;
  }
  std::string spec, tc, why;
  for (const auto& [r, c] : shapes) spec += std::to_string(r) + "," + std::to_string(c) + ";";
  for (int t : tcs) tc += (tc.empty() ? "" : ",") + std::to_string(t);
  const auto j = run_torch_script("bench_torch_kernels.py", "--shapes '" + spec + "' --threads " + tc + " --min-time " +
                                  std::to_string(o.min_time) + " --min-reps " + std::to_string(o.min_reps), why);
  try {
    for (const auto& r : j.at("results"))
      out[{r.at("op").get<std::string>(), r.at("rows").get<std::int64_t>(), r.at("cols").get<std::int64_t>(),
           r.at("threads").get<int>()}] = r.at("gbs").get<double>();
    note = "torch = PyTorch " + j.at("torch").get<std::string>() +
           " (softmax, F.layer_norm, F.gelu; RMSNorm composed: 1.13 has none)";
  } catch (const std::exception&) {
    out.clear();
    note = "PyTorch columns skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
  }
  return out;
}

}  // namespace

void run_bench_kernels(const BenchOptions& o, int threads) {
  std::vector<int> tcs = {1};
  if (threads > 1) tcs.push_back(threads);
  // (rows, C): one shape that fits in L2 (1 MiB in + out), one far beyond the caches.
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{128, 1024}, {8192, 1024}};
  if (o.long_run) shapes.insert(shapes.end(), {{1024, 768}, {16384, 4096}});

  std::vector<double> bw;
  for (int t : tcs) bw.push_back(read_bandwidth_gbs(std::int64_t{256} << 20, t, o.min_reps));
  std::string note;
  const auto torch = torch_kernel_figures(shapes, tcs, o, note);

  std::printf("\n== kernels: forward GB/s = (bytes read + written) / best time, fp32 (best of >= %d runs, >= %.2fs)\n",
              o.min_reps, o.min_time);
  std::printf("bw = read bandwidth of a 256 MiB sum (machine section):");
  for (std::size_t i = 0; i < tcs.size(); ++i) std::printf(" %.1f GB/s @%dt", bw[i], tcs[i]);
  std::printf("\n%s\n\n", note.c_str());
  std::printf("%-11s %-12s %9s", "op", "rows x C", "size");
  for (const char* who : {"ours", "torch"})
    for (int t : tcs) std::printf(" %8s", (std::string(who) + "@" + std::to_string(t) + "t").c_str());
  for (int t : tcs) std::printf(" %8s", ("/bw@" + std::to_string(t) + "t").c_str());
  std::printf(" %11s\n", ("ours/torch@" + std::to_string(tcs.back()) + "t").c_str());

  for (const auto& [rows, cols] : shapes) {
    const Tensor x = Tensor::randn({rows, cols}, 7), w = Tensor::randn({cols}, 8), b = Tensor::randn({cols}, 9);
    const double bytes = 2.0 * 4.0 * static_cast<double>(rows * cols);
    for (const auto& op : kernel_ops()) {
      std::vector<double> ours;
      for (int t : tcs) {
        set_num_threads(t);
        ours.push_back(bytes / best_seconds(o, [&] { (void)op.fn(x, w, b); }) * 1e-9);
      }
      char dims[32];
      std::snprintf(dims, sizeof dims, "%lldx%lld", static_cast<long long>(rows), static_cast<long long>(cols));
      std::printf("%-11s %-12s %9s", op.name, dims, format_bytes(bytes / 2).c_str());
      for (double g : ours) std::printf(" %8.1f", g);
      double last_torch = 0;
      for (int t : tcs) {
        const auto it = torch.find({op.name, rows, cols, t});
        last_torch = it == torch.end() ? 0 : it->second;
        if (it == torch.end()) std::printf(" %8s", "-");
        else std::printf(" %8.1f", it->second);
      }
      for (std::size_t i = 0; i < tcs.size(); ++i) std::printf(" %8.2f", ours[i] / bw[i]);
      if (last_torch > 0) std::printf(" %11.2f\n", ours.back() / last_torch);
      else std::printf(" %11s\n", "-");
      std::fflush(stdout);
    }
  }
}

}  // namespace tfm::cli
