// tfm bench decode — inference speed with the KV cache: decode tokens/s at batch 1 and 8 and
// prefill tokens/s at prompts of 128 and 512 tokens, ours beside the same model in PyTorch 1.13
// with its own KV cache (bench/peers/torch/bench_torch_decode.py), and decode against the
// memory-bandwidth roofline.
//
//   tfm bench decode [-m DIR] [--long]
//
// Models: the trained model directory given with -m (a decoder-only LM, e.g. from
// `tfm train configs/shakespeare-gpt.json`; PyTorch loads the same model.safetensors) and a
// GPT-2-small-sized decoder (model_preset("gpt2"): 12 layers, d 768, 12 heads, vocab 50257)
// with random weights on both sides.
//
// Protocol (identical in both engines):
//   decode B:  B sequences of kPromptLen random tokens, each prefilled alone (untimed, as
//              Generator does), then `steps` greedy steps of all B rows together (one
//              decode_cached call of B rows per step, argmax of each row's logits feeds the
//              next step). tokens/s = B * steps / time. steps = 32 (128 with --long), fewer
//              when the model's context is shorter.
//   prefill P: one prompt of P random tokens in one call, logits of the last position only.
//              tokens/s = P / time. P is capped at the model's context.
// Every figure is the best of >= min_reps runs after a warm-up run.
//
// Roofline: a decode step must read every weight of the decoder layers, the final norm and
// the lm head once (f32; the tied embedding counts as the lm head; the embedding rows of the
// B new tokens are negligible), shared by the B rows of the step. So decode tokens/s cannot
// exceed  B * read bandwidth / weight bytes  when the weights stream from memory; the
// bandwidth is the probe of `tfm bench machine` (256 MiB read on the engine's threads). A
// model whose weights fit in the caches (the small Shakespeare model) can exceed it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_probe.h"
#include "bench_util.h"
#include "cli_common.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/model_dir.h"
#include "tfm/quantize.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {
namespace {

constexpr std::int64_t kPromptLen = 8;  // decode cases: tokens prefilled before the timed steps

struct Case {
  std::string name;      // "decode b=1", "prefill 128"
  bool decode = false;
  std::int64_t batch = 1, prompt = 0, steps = 0;
  double tokens() const { return static_cast<double>(decode ? batch * steps : prompt); }
};

std::vector<Case> cases_for(const ModelConfig& c, bool long_run) {
  std::vector<Case> out;
  const std::int64_t ctx = c.max_positions;
  const std::int64_t steps = std::min<std::int64_t>(long_run ? 128 : 32, ctx - kPromptLen);
  for (std::int64_t b : {1, 8}) out.push_back({"decode b=" + std::to_string(b), true, b, kPromptLen, steps});
  for (std::int64_t p : {128, 512}) {
    const std::int64_t eff = std::min(p, ctx);
    const std::string name = "prefill " + std::to_string(eff);
    if (std::none_of(out.begin(), out.end(), [&](const Case& k) { return k.name == name; }))
      out.push_back({name, false, 1, eff, 0});
  }
  return out;
}

// (n) token ids in [0, V), reproducible from seed.
std::vector<std::int64_t> random_tokens(std::int64_t n, std::int64_t V, std::uint64_t seed) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  for (auto& id : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(V));
  }
  return v;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds of the timed part of one case (see the protocol above), best of the runs.
double run_ours(Model& model, const Case& k, const BenchOptions& o) {
  const ModelConfig& c = model.config();
  const std::int64_t V = c.vocab_size;
  // As many positions as the case writes (llama.cpp's peer sizes its context alike): a cache of
  // the model's whole context for 8 rows was most of the peak RSS column (740 MiB of f32 at
  // TinyLlama's shape).
  KVCache cache(c, k.batch, std::min(c.max_positions, k.prompt + k.steps + 1));
  auto once = [&]() -> double {
    std::vector<std::int64_t> slots;
    for (std::int64_t r = 0; r < k.batch; ++r) {
      cache.reset(r);
      slots.push_back(r);
    }
    if (!k.decode) {
      const Tensor ids = Tensor::from_ints(random_tokens(k.prompt, V, 11), {1, k.prompt});
      const double t0 = now_seconds();
      const Tensor logits = model.decode_cached(ids, {0}, cache);  // (1, V)
      (void)logits.to_floats();
      return now_seconds() - t0;
    }
    // Prefill each row alone, then greedy steps over all rows together.
    std::vector<std::int64_t> next(static_cast<std::size_t>(k.batch));
    auto pick = [&](const Tensor& logits) {  // logits (R, V): argmax of each row
      const std::vector<float> f = logits.to_floats();
      for (std::int64_t r = 0; r < k.batch; ++r) {
        const float* row = f.data() + r * V;
        next[static_cast<std::size_t>(r)] = std::max_element(row, row + V) - row;
      }
    };
    std::vector<float> first;
    for (std::int64_t r = 0; r < k.batch; ++r) {
      const Tensor ids = Tensor::from_ints(random_tokens(k.prompt, V, 100 + static_cast<std::uint64_t>(r)), {1, k.prompt});
      const std::vector<float> row = model.decode_cached(ids, {r}, cache).to_floats();
      first.insert(first.end(), row.begin(), row.end());
    }
    pick(Tensor::from_floats(first, {k.batch, V}));
    const double t0 = now_seconds();
    for (std::int64_t s = 0; s < k.steps; ++s) pick(model.decode_cached(Tensor::from_ints(next, {k.batch, 1}), slots, cache));
    return now_seconds() - t0;
  };
  once();  // warm-up
  double best = 1e30, spent = 0;
  for (int reps = 0; reps < o.min_reps || spent < o.min_time; ++reps) {
    const double dt = once();
    best = std::min(best, dt);
    spent += dt;
  }
  return best;
}

// f32 bytes a decode step reads: decoder layers, final norm, lm head (the tied embedding).
double weight_bytes_per_step(const Model& model) {
  const ModelConfig& c = model.config();
  double n = 0;
  for (const auto& [name, t] : model.parameters()) {
    const bool token_embedding = t.dim() == 2 && t.size(0) == c.vocab_size && t.size(1) == c.d_model;
    const bool positions = name.find("embed_positions") != std::string::npos || name.find("wpe.") != std::string::npos;
    if (positions || (token_embedding && !c.tie_embeddings && name.find("lm_head") == std::string::npos)) continue;
    n += static_cast<double>(t.nbytes());  // the tied token embedding is the lm head's weight
  }
  return n;
}

// What bench_torch_decode.py needs: the sizes and switches of a decoder-only model.
nlohmann::json config_json(const ModelConfig& c) {
  return {{"model_type", c.model_type},   {"V", c.vocab_size},
          {"C", c.d_model},               {"H", c.n_heads},
          {"KV", c.kv_heads()},           {"Dh", c.dim_head()},
          {"L", c.n_layers},              {"FF", c.d_ff},
          {"max_positions", c.max_positions}, {"norm", to_string(c.norm)},
          {"placement", to_string(c.norm_placement)}, {"eps", c.norm_eps},
          {"final_norm", c.final_norm},   {"activation", to_string(c.activation)},
          {"bias", c.bias},               {"position", to_string(c.position)},
          {"scale_embeddings", c.scale_embeddings}, {"scale_scores", c.scale_attention_scores},
          {"tie", c.tie_embeddings}};
}

nlohmann::json cases_json(const std::vector<Case>& cases) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& k : cases)
    j.push_back({{"name", k.name}, {"decode", k.decode}, {"batch", k.batch}, {"prompt", k.prompt}, {"steps", k.steps}});
  return j;
}

struct Subject {
  std::string label;  // "shakespeare (DIR)" / "gpt2-size (random)"
  std::string dir;    // the model directory; empty: random weights
};

void bench_model(Model& model, const Subject& s, const BenchOptions& o, int threads, double bandwidth_gbs) {
  const ModelConfig& c = model.config();
  model.set_training(false);
  const std::vector<Case> cases = cases_for(c, o.long_run);
  std::map<std::string, double> torch;
  std::string note, why;
  const bool compact = model.has_compact_weights();
  // PyTorch has CPU kernels for bf16 (not for the block types): a model whose every weight
  // matrix is bf16 is compared with the same model cast to torch.bfloat16.
  bool all_bf16 = compact;
  for (const WeightMatrix& w : model.weight_matrices())
    all_bf16 = all_bf16 && model.parameters().at(w.name).dtype() == DType::bf16;
  if (o.torch && (!compact || all_bf16)) {
    std::string args = "--config '" + config_json(c).dump() + "' --cases '" + cases_json(cases).dump() +
                       "' --threads " + std::to_string(threads) + " --min-time " + std::to_string(o.min_time) +
                       " --min-reps " + std::to_string(o.min_reps) + " --params " +
                       std::to_string(model.parameter_count()) + (all_bf16 ? " --dtype bf16" : "");
    if (!s.dir.empty()) args += " --model-dir '" + s.dir + "'";
    const auto j = run_torch_script("bench_torch_decode.py", args, why);
    try {
      for (const auto& r : j.at("results")) torch[r.at("name").get<std::string>()] = r.at("seconds").get<double>();
      note = "torch = PyTorch " + j.at("torch").get<std::string>() + (all_bf16 ? " in bfloat16" : "") +
             " with its own KV cache (" +
             (s.dir.empty() ? std::string("random weights") : std::string("the same model.safetensors")) +
             "), param count " + (j.at("params_match").get<bool>() ? "matches" : "DIFFERS");
    } catch (const std::exception&) {
      torch.clear();
      note = "PyTorch column skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
    }
  } else {
    note = compact && !all_bf16 ? "PyTorch column skipped (its CPU build has no kernels for these weight types)"
                   : "PyTorch column skipped (--no-torch)";
  }
  const double wbytes = weight_bytes_per_step(model);
  std::printf("\n-- %s: %s, %lld layers, d %lld, %lld heads, vocab %lld, context %lld, %.1fM params\n", s.label.c_str(),
              c.model_type.c_str(), static_cast<long long>(c.n_layers), static_cast<long long>(c.d_model),
              static_cast<long long>(c.n_heads), static_cast<long long>(c.vocab_size),
              static_cast<long long>(c.max_positions), static_cast<double>(model.parameter_count()) * 1e-6);
  std::printf("%s\nweights read per decode step: %s (decoder layers + final norm + lm head, as stored)\n\n", note.c_str(),
              format_bytes(wbytes).c_str());
  std::printf("%-14s %7s %11s %11s %11s %13s %11s\n", "case", "tokens", "ours tok/s", "torch tok/s", "ours/torch",
              "roofline tok/s", "% roofline");
  set_num_threads(threads);
  for (const Case& k : cases) {
    const double secs = run_ours(model, k, o);
    const double ours = k.tokens() / secs;
    std::printf("%-14s %7.0f %11.1f", k.name.c_str(), k.tokens(), ours);
    const auto it = torch.find(k.name);
    if (it == torch.end()) std::printf(" %11s %11s", "-", "-");
    else std::printf(" %11.1f %11.2f", k.tokens() / it->second, it->second / secs);
    if (k.decode && bandwidth_gbs > 0) {
      const double roof = static_cast<double>(k.batch) * bandwidth_gbs * 1e9 / wbytes;
      std::printf(" %13.1f %10.0f%%", roof, 100.0 * ours / roof);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}

}  // namespace

void run_bench_decode(const BenchOptions& o, int threads) {
  std::printf("\n== decode: KV-cache inference, %d threads, weights %s, greedy\n", threads,
              o.dtype.empty() ? "as stored (f32 unless the file holds other types)"
                              : (o.dtype + (o.recipe.empty() ? "" : "/" + o.recipe)).c_str());
  std::printf("decode b=B: B rows of %lld-token prompts (prefill untimed), then greedy steps of all rows together;\n"
              "prefill P: one prompt of P tokens (capped at the model's context). best of >= %d runs, >= %.2fs\n",
              static_cast<long long>(kPromptLen), o.min_reps, o.min_time);
  const double bw = read_bandwidth_gbs(std::int64_t{256} << 20, threads, o.min_reps);
  std::printf("read bandwidth (256 MiB, %d threads): %.1f GB/s — the roofline's yardstick\n", threads, bw);
  if (o.model_dir.empty()) {
    std::printf("\n-- trained model: skipped (give a model directory with -m DIR, e.g. from "
                "`tfm train configs/shakespeare-gpt.json --out DIR`)\n");
  } else {
    LoadedModel lm = load_model_dir(o.model_dir);
    apply_weight_options(lm.model, {o.dtype, o.recipe});
    repack_for_decode(lm.model);
    bench_model(lm.model, {"trained model " + o.model_dir, o.model_dir}, o, threads, bw);
  }
  if (!o.model_only) {
    Model gpt2 = Model::create(model_preset("gpt2"), 1234);
    apply_weight_options(gpt2, {o.dtype, o.recipe});
    repack_for_decode(gpt2);
    bench_model(gpt2, {"GPT-2 small size (random weights)", ""}, o, threads, bw);
  }
  std::printf("(ours/torch > 1: ours is faster; roofline = batch x bandwidth / weight bytes per step)\n");
}

}  // namespace tfm::cli
