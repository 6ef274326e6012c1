// tfm bench attention — plain vs fused (FlashAttention-2 style) scaled-dot-product attention,
// forward and forward+backward, time and peak memory, beside PyTorch 1.13's
// softmax(q k^T / sqrt(d)) v composition on the same shapes (1.13 has no fused SDPA).
//
// q, k, v: (B=1, H=4, T, D=64), no mask. Memory is the engine allocator's high-water mark
// above the live inputs (tfm::reset_peak_memory / memory_stats), i.e. tensor bytes only; the
// forward+backward figure includes the three input gradients. PyTorch's figure comes from
// the process's peak RSS (bench/peers/torch/bench_torch_attention.py explains how).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tfm/autograd.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {
namespace {

constexpr std::int64_t kB = 1, kH = 4, kD = 64;

struct Figure {
  double seconds = -1;  // < 0: not measured
  double peak_bytes = -1;
};

// One measured case: time (best of) and the peak tensor bytes above what was live before.
// Each run frees the previous run's results first, so the peak over all runs is one run's.
template <class Fn>
Figure measure(const BenchOptions& o, Fn&& fn) {
  Figure f;
  const std::size_t base = memory_stats().current_bytes;
  reset_peak_memory();
  f.seconds = best_seconds(o, fn);
  f.peak_bytes = static_cast<double>(memory_stats().peak_bytes - base);
  return f;
}

Figure run_ours(const BenchOptions& o, std::int64_t T, bool flash, bool backward_too) {
  Tensor q = Tensor::randn({kB, kH, T, kD}, 1), k = Tensor::randn({kB, kH, T, kD}, 2),
         v = Tensor::randn({kB, kH, T, kD}, 3);
  AttentionOptions opt;
  opt.use_flash = flash;
  if (!backward_too) {
    NoGradGuard no_grad;
    return measure(o, [&] { (void)scaled_dot_product_attention(q, k, v, opt); });
  }
  const Tensor g = Tensor::randn({kB, kH, T, kD}, 4);  // d loss / d out
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
  return measure(o, [&] {
    for (Tensor* t : {&q, &k, &v}) t->zero_grad();  // the previous run's gradients are freed first
    backward(scaled_dot_product_attention(q, k, v, opt), g);
  });
}

// PyTorch figures keyed by (T, "fwd"|"fwdbwd"); `note` says what they are or why missing.
std::map<std::pair<std::int64_t, std::string>, Figure> torch_attention(const std::vector<std::int64_t>& Ts, int threads,
                                                                       const BenchOptions& o, std::string& note) {
  std::map<std::pair<std::int64_t, std::string>, Figure> out;
  if (!o.torch) {
    note = "PyTorch columns skipped (--no-torch)";
    return out;
  }
  std::string ts, why;
  for (auto T : Ts) ts += (ts.empty() ? "" : ",") + std::to_string(T);
  const std::string common = "--T " + ts + " --B " + std::to_string(kB) + " --H " + std::to_string(kH) + " --D " +
                             std::to_string(kD) + " --threads " + std::to_string(threads);
  try {
    const auto time = run_torch_script("bench_torch_attention.py", common + " --what time --min-time " +
                                       std::to_string(o.min_time) + " --min-reps " + std::to_string(o.min_reps), why);
    for (const auto& r : time.at("results"))
      out[{r.at("T").get<std::int64_t>(), r.at("mode").get<std::string>()}].seconds = r.at("seconds").get<double>();
    const auto mem = run_torch_script("bench_torch_attention.py", common + " --what memory", why);
    for (const auto& r : mem.at("results"))
      out[{r.at("T").get<std::int64_t>(), r.at("mode").get<std::string>()}].peak_bytes = r.at("peak_bytes").get<double>();
    note = "torch = PyTorch " + time.at("torch").get<std::string>() + " softmax(q k^T/sqrt(d)) v, memory = " +
           mem.at("method").get<std::string>();
  } catch (const std::exception&) {
    out.clear();
    note = "PyTorch columns skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
  }
  return out;
}

void print_cell_ms(const Figure& f) {
  if (f.seconds < 0) std::printf(" %10s", "skip");
  else std::printf(" %10.2f", f.seconds * 1e3);
}

void print_cell_mib(const Figure& f) {
  if (f.peak_bytes < 0) std::printf(" %10s", "skip");
  else std::printf(" %10.1f", f.peak_bytes / (1024.0 * 1024.0));
}

}  // namespace

void run_bench_attention(const BenchOptions& o, int threads) {
  std::vector<std::int64_t> Ts = {256, 512, 1024, 2048, 4096};
  if (o.long_run) Ts.push_back(8192);
  std::string note;
  const auto torch = torch_attention(Ts, threads, o, note);

  // rows[T] = {plain fwd, fused fwd, torch fwd, plain f+b, fused f+b, torch f+b}
  std::map<std::int64_t, std::vector<Figure>> rows;
  set_num_threads(threads);
  for (auto T : Ts) {
    auto& r = rows[T];
    const bool plain = T <= o.plain_max_t;
    const auto tf = [&](const char* mode) {
      const auto it = torch.find({T, mode});
      return it == torch.end() ? Figure{} : it->second;
    };
    r.push_back(plain ? run_ours(o, T, false, false) : Figure{});
    r.push_back(run_ours(o, T, true, false));
    r.push_back(tf("fwd"));
    r.push_back(plain ? run_ours(o, T, false, true) : Figure{});
    r.push_back(run_ours(o, T, true, true));
    r.push_back(tf("fwdbwd"));
  }

  std::printf("\n== attention: B=%lld H=%lld D=%lld, no mask, fp32, %d threads (best of >= %d runs, >= %.2fs)\n",
              static_cast<long long>(kB), static_cast<long long>(kH), static_cast<long long>(kD), threads, o.min_reps,
              o.min_time);
  std::printf("plain = materialised (B,H,T,T) weights; fused = FlashAttention-2 style tiles, O(T) memory\n");
  std::printf("plain skipped above T=%lld (O(T^2) memory and time; --plain-max-t N to include)\n",
              static_cast<long long>(o.plain_max_t));
  std::printf("%s\n", note.c_str());
  const char* heads[] = {"plain", "fused", "torch", "plain", "fused", "torch"};
  std::printf("\n%6s %-32s  %-32s  %s\n", "", "forward, ms", "forward+backward, ms", "torch/fused");
  std::printf("%6s", "T");
  for (const char* h : heads) std::printf(" %10s", h);
  std::printf(" %6s %6s\n", "fwd", "f+b");
  for (const auto& [T, r] : rows) {
    std::printf("%6lld", static_cast<long long>(T));
    for (const Figure& f : r) print_cell_ms(f);
    // fused speedup over torch's composition (the baseline present at every T)
    const auto ratio = [](const Figure& base, const Figure& f) {
      return base.seconds > 0 && f.seconds > 0 ? base.seconds / f.seconds : 0.0;
    };
    for (const double x : {ratio(r[2], r[1]), ratio(r[5], r[4])}) {
      if (x > 0) std::printf(" %6.2f", x);
      else std::printf(" %6s", "-");
    }
    std::printf("\n");
  }
  std::printf("\n%6s %-32s  %-32s\n", "", "forward, peak MiB above inputs", "forward+backward, peak MiB");
  std::printf("%6s", "T");
  for (const char* h : heads) std::printf(" %10s", h);
  std::printf("\n");
  for (const auto& [T, r] : rows) {
    std::printf("%6lld", static_cast<long long>(T));
    for (const Figure& f : r) print_cell_mib(f);
    std::printf("\n");
  }
  std::printf("(torch/fused = torch time / fused time; q, k, v: %.1f MiB each at the largest T)\n",
              static_cast<double>(kB * kH * Ts.back() * kD * 4) / (1024.0 * 1024.0));
}

}  // namespace tfm::cli
