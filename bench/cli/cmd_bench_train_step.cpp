// tfm bench train-step — one training step (forward, cross-entropy on the model's head,
// backward; no optimizer) of each preset family at a small size, ours beside the same model
// written in PyTorch 1.13 (bench/peers/torch/bench_torch_train_step.py builds it from the same
// config, sent as JSON).
//
// Sizes: d_model 256, 4 layers (and 4 decoder layers), 4 heads of 64, d_ff 1024, vocab 4096,
// B=8, T=128 (encoder-decoder: source and target both T); dropout off in both engines so the
// work is the same. tokens/s = B*T / step time (target tokens for encoder-decoder).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "tfm/autograd.h"
#include "tfm/model.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {

std::int64_t param_count(const ModelConfig& c) {
  std::int64_t n = 0;
  for (const auto& s : parameter_specs(c)) {
    std::int64_t k = 1;
    for (auto d : s.shape) k *= d;
    n += k;
  }
  return n;
}

// What bench_torch_train_step.py needs to build the same model.
nlohmann::json config_json(const std::string& preset, const ModelConfig& c) {
  return {{"name", preset},
          {"model_type", c.model_type},
          {"arch", to_string(c.architecture)},
          {"V", c.vocab_size},
          {"C", c.d_model},
          {"H", c.n_heads},
          {"KV", c.kv_heads()},
          {"Dh", c.dim_head()},
          {"L", c.n_layers},
          {"Ld", c.decoder_layers()},
          {"FF", c.d_ff},
          {"max_positions", c.max_positions},
          {"type_vocab", c.type_vocab_size},
          {"norm", to_string(c.norm)},
          {"placement", to_string(c.norm_placement)},
          {"eps", c.norm_eps},
          {"final_norm", c.final_norm},
          {"embedding_norm", c.embedding_norm},
          {"activation", to_string(c.activation)},
          {"bias", c.bias},
          {"position", to_string(c.position)},
          {"rope_base", c.rope_base},
          {"buckets", c.relative_buckets},
          {"max_distance", c.relative_max_distance},
          {"scale_embeddings", c.scale_embeddings},
          {"scale_scores", c.scale_attention_scores},
          {"tie", c.tie_embeddings},
          {"head", to_string(c.head)},
          {"num_labels", c.num_labels},
          {"params", param_count(c)}};
}

namespace {

constexpr std::int64_t kB = 8, kT = 128;

ModelConfig small_config(const std::string& preset) {
  ModelConfig c = model_preset(preset);
  c.vocab_size = 4096;
  c.d_model = 256;
  c.n_heads = 4;
  c.n_kv_heads = 0;
  c.head_dim = 0;
  c.n_layers = 4;
  c.n_decoder_layers = c.architecture == Architecture::encoder_decoder ? 4 : 0;
  c.d_ff = 1024;
  c.max_positions = std::max<std::int64_t>(c.max_positions, kT);
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  validate_model_config(c, "bench train-step");
  return c;
}

// (shape) i64 ids in [0, hi), reproducible from seed.
Tensor random_ids(const Shape& shape, std::int64_t hi, std::uint64_t seed) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& id : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(hi));
  }
  return Tensor::from_ints(v, shape, DType::i64);
}

struct StepFigure {
  double seconds = 0;
  std::int64_t params = 0;
};

// A step takes ~0.1-1 s: outside --long, best of 2 steps (after the warm-up) keeps the
// section near a minute.
BenchOptions step_options(const BenchOptions& o) {
  BenchOptions s = o;
  if (!o.long_run) s.min_reps = std::min(o.min_reps, 2);
  return s;
}

StepFigure run_ours(const BenchOptions& o, const ModelConfig& cfg) {
  // Parameters must require grad before the model wires its layout (copies of the handles).
  std::map<std::string, Tensor> params = Model::create(cfg, 1234).parameters();
  for (auto& [name, t] : params) t.requires_grad_();
  Model model = Model::from_parameters(cfg, std::move(params));
  const std::int64_t V = cfg.vocab_size;
  ModelInputs in;
  in.input_ids = random_ids({kB, kT}, V, 5);  // (B, T)
  if (cfg.architecture == Architecture::encoder_decoder) in.decoder_input_ids = random_ids({kB, kT}, V, 6);
  const bool classifier = cfg.head == HeadKind::classifier;
  const Tensor targets = classifier ? random_ids({kB}, cfg.num_labels, 7)  // (B) labels
                                    : random_ids({kB * kT}, V, 7);         // (B*T) next tokens
  StepFigure f;
  f.params = model.parameter_count();
  f.seconds = best_seconds(o, [&] {
    for (auto& [name, t] : model.parameters()) t.zero_grad();
    const Tensor logits = model.forward(in).logits;  // (B, T, V) or (B, labels)
    const Tensor loss = classifier ? cross_entropy(logits, targets) : cross_entropy(reshape(logits, {-1, V}), targets);
    backward(loss);
  });
  return f;
}

}  // namespace

void run_bench_train_step(const BenchOptions& options, int threads) {
  const BenchOptions o = step_options(options);
  std::vector<std::string> presets;  // the text presets: their PyTorch twin reads token ids
  for (const auto& p : model_preset_names())
    if (!model_preset(p).reads_images()) presets.push_back(p);
  std::vector<ModelConfig> cfgs;
  nlohmann::json spec = nlohmann::json::array();
  for (const auto& p : presets) {
    cfgs.push_back(small_config(p));
    spec.push_back(config_json(p, cfgs.back()));
  }
  std::map<std::string, double> torch;
  std::string note, why;
  if (o.torch) {
    const auto j = run_torch_script("bench_torch_train_step.py", "--configs '" + spec.dump() + "' --B " +
                                    std::to_string(kB) + " --T " + std::to_string(kT) + " --threads " +
                                    std::to_string(threads) + " --min-time " + std::to_string(o.min_time) +
                                    " --min-reps " + std::to_string(o.min_reps), why);
    try {
      for (const auto& r : j.at("results")) torch[r.at("name").get<std::string>()] = r.at("seconds").get<double>();
      note = "torch = PyTorch " + j.at("torch").get<std::string>() +
             ", same model hand-written (bench/peers/torch/bench_torch_train_step.py), param counts " +
             (j.at("params_match").get<bool>() ? "match" : "DIFFER");
    } catch (const std::exception&) {
      torch.clear();
      note = "PyTorch columns skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
    }
  } else {
    note = "PyTorch columns skipped (--no-torch)";
  }

  std::printf("\n== train-step: forward + cross-entropy + backward (no optimizer), %d threads, fp32\n", threads);
  std::printf("d_model 256, 4 layers (+4 decoder), 4 heads x 64, d_ff 1024, vocab 4096, B=%lld T=%lld, dropout 0\n",
              static_cast<long long>(kB), static_cast<long long>(kT));
  std::printf("best of >= %d steps, >= %.2fs; tokens/s = B*T / step\n%s\n\n", o.min_reps, o.min_time, note.c_str());
  std::printf("%-8s %-16s %8s %10s %10s %10s %10s %12s\n", "preset", "architecture", "params", "ours ms", "torch ms",
              "ours tok/s", "torch tok/s", "torch/ours");
  set_num_threads(threads);
  for (std::size_t i = 0; i < presets.size(); ++i) {
    const StepFigure f = run_ours(o, cfgs[i]);
    const double tokens = static_cast<double>(kB * kT);
    std::printf("%-8s %-16s %7.1fM %10.1f", presets[i].c_str(), to_string(cfgs[i].architecture),
                static_cast<double>(f.params) * 1e-6, f.seconds * 1e3);
    const auto it = torch.find(presets[i]);
    if (it == torch.end()) {
      std::printf(" %10s %10.0f %10s %12s\n", "-", tokens / f.seconds, "-", "-");
    } else {
      std::printf(" %10.1f %10.0f %10.0f %12.2f\n", it->second * 1e3, tokens / f.seconds, tokens / it->second,
                  it->second / f.seconds);
    }
    std::fflush(stdout);
  }
  std::printf("(torch/ours > 1: ours is faster)\n");
}

}  // namespace tfm::cli
