// tfm info -m FILE.gguf (see gguf_info.h). Reads the header only: no tensor is loaded.
#include "gguf_info.h"

#include <cstdio>
#include <map>

#include "model_summary.h"
#include "tfm/gguf_model.h"

namespace tfm::cli {

ModelConfig print_gguf_info(const std::string& path) {
  const GgufFile f = read_gguf(path);
  GgufModelInfo info;
  const ModelConfig c = gguf_model_config(f, &info);
  std::printf("%s: GGUF v%u, %s, %zu tensors, %zu metadata keys\n", path.c_str(), f.version,
              human_bytes(static_cast<double>(f.file_size)).c_str(), f.tensors.size(), f.metadata.size());
  std::printf("  architecture   %s%s%s\n", info.architecture.c_str(), info.name.empty() ? "" : "  name: ",
              info.name.c_str());
  std::printf("  tokenizer      %s%s%s\n", info.tokenizer_model.c_str(), info.tokenizer_pre.empty() ? "" : ", pre ",
              info.tokenizer_pre.c_str());
  std::printf("  chat template  %s\n", info.chat_template.empty()
                                          ? "none"
                                          : (std::to_string(info.chat_template.size()) + " bytes").c_str());
  struct Totals {
    std::size_t tensors = 0;
    double elements = 0, bytes = 0;
  };
  std::map<std::string, Totals> by_type;
  double elements = 0;
  for (const auto& t : f.tensors) {
    auto& s = by_type[ggml_type_name(t.type)];
    ++s.tensors;
    s.elements += static_cast<double>(t.numel());
    s.bytes += static_cast<double>(t.nbytes);
    elements += static_cast<double>(t.numel());
  }
  std::printf("  tensor types (in the file; loaded as f32):\n");
  for (const auto& [name, s] : by_type)
    std::printf("    %-6s %4zu tensors  %10s weights  %10s  (%.2f bits/weight)\n", name.c_str(), s.tensors,
                human_count(s.elements).c_str(), human_bytes(s.bytes).c_str(), 8.0 * s.bytes / s.elements);
  std::printf("  weights after load (f32): %s\n\n", human_bytes(4.0 * elements).c_str());
  return c;
}

}  // namespace tfm::cli
