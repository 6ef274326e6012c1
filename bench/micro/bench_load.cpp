// Load time and memory of a hub directory: memory-mapped (the loader) vs copied (the previous
// loader: the file read into memory, its data section copied into one buffer, every tensor
// cloned). One measurement per process, so peak RSS is that load's own.
//
//   bench_load write DIR gpt2|llama1b     a hub-layout directory with random f32 weights
//   bench_load load DIR mmap|copy cold|warm
//
// cold: the files' pages are dropped from the page cache first (posix_fadvise DONTNEED; the
// files were fsynced, so their pages are clean). Prints one JSON line: load seconds, first
// forward (one token) seconds, peak RSS and RSS after load.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tfm/tfm.h"

using namespace tfm;
namespace fs = std::filesystem;

namespace {

const char* kGpt2 = R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257,
  "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_ctx": 1024, "torch_dtype": "float32"})";
// TinyLlama-1.1B's shape.
const char* kLlama1b = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000,
  "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
  "num_key_value_heads": 4, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
  "torch_dtype": "float32"})";

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}
double rss_mib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

void drop_cache(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

void write_dir(const std::string& dir, const std::string& which) {
  const std::string cfg_text = which == "gpt2" ? kGpt2 : kLlama1b;
  const ModelConfig cfg = parse_model_config(cfg_text, which);
  fs::create_directories(dir);
  write_file_atomic(dir + "/config.json", cfg_text);
  std::map<std::string, Tensor> t;
  std::uint64_t seed = 1;
  for (const auto& s : parameter_specs(cfg)) t[s.name] = Tensor::randn(s.shape, seed++, 0.0f, 0.02f);
  save_safetensors(dir + "/model.safetensors", t, {{"format", "pt"}});
}

Model load_copy(const std::string& dir) {  // the previous loader
  const ModelConfig cfg = load_model_config(dir + "/config.json");
  const SafetensorsFile f = parse_safetensors(read_file(dir + "/model.safetensors"), dir);
  std::map<std::string, Tensor> params;
  for (const auto& [k, v] : f.tensors) params[k] = v.clone();
  return Model::from_parameters(cfg, hub_checkpoint_names(cfg, std::move(params)));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "write" && argc == 4) {
      write_dir(argv[2], argv[3]);
      return 0;
    }
    if (cmd != "load" || argc != 5) {
      std::fprintf(stderr, "usage: bench_load write DIR gpt2|llama1b | load DIR mmap|copy cold|warm\n");
      return 2;
    }
    const std::string dir = argv[2], mode = argv[3], cache = argv[4];
    if (cache == "cold") drop_cache(dir);
    const double t0 = now();
    Model m = mode == "mmap" ? std::move(load_model_weights(dir).model) : load_copy(dir);
    const double t1 = now();
    const double rss_after = rss_mib(), peak_after = peak_rss_mib();
    ModelInputs in;
    in.input_ids = Tensor::from_ints({1}, {1, 1});
    m.set_training(false);
    (void)m.forward(in);
    const double t2 = now();
    std::printf("{\"dir\": \"%s\", \"mode\": \"%s\", \"cache\": \"%s\", \"params\": %lld, \"load_s\": %.3f, "
                "\"first_forward_s\": %.3f, \"rss_after_load_mib\": %.0f, \"peak_rss_after_load_mib\": %.0f, "
                "\"peak_rss_after_forward_mib\": %.0f}\n",
                dir.c_str(), mode.c_str(), cache.c_str(), static_cast<long long>(m.parameter_count()), t1 - t0, t2 - t1,
                rss_after, peak_after, peak_rss_mib());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_load: %s\n", e.what());
    return 1;
  }
}
