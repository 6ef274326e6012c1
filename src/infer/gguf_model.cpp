// GGUF <-> the engine's models of the families llama.cpp runs. Each family declares its
// llama.cpp architecture, tensor names and metadata (Family::gguf, src/models/families/), after
// llama.cpp's convert_hf_to_gguf.py; this file moves the tensors: Q/K rows permuted between
// Hugging Face's rotate-half order and llama.cpp's adjacent pairs, GPT-2's Conv1D (in, out)
// weights stored transposed as (out, in) like every other linear.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "infer/gguf_tokenizer.h"
#include "models/family.h"
#include "tfm/error.h"
#include "tfm/gguf_model.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

using json = nlohmann::json;

// Rows of a Q or K projection (n_heads * head_dim, ...) between Hugging Face's order, where
// RoPE pairs dimension i with i + head_dim/2, and llama.cpp's, where it pairs 2i with 2i+1.
// to_gguf: gguf row h*D + 2i + j  <-  hf row h*D + j*D/2 + i (convert_hf_to_gguf's permute);
// otherwise the inverse.
// Whole rows move, so it works on any dtype (block-quantized rows included) byte-wise.
Tensor permute_rope_rows(const Tensor& w_in, std::int64_t n_heads, bool to_gguf) {
  const std::int64_t rows = w_in.size(0), D = rows / n_heads;
  TFM_CHECK(rows % n_heads == 0 && D % 2 == 0, "gguf", "cannot permute ", shape_str(w_in.shape()), " for ", n_heads,
            " heads");
  const Tensor w = w_in.is_contiguous() ? w_in : w_in.clone();
  const std::size_t row_bytes = w.nbytes() / static_cast<std::size_t>(rows);
  const auto* in = static_cast<const unsigned char*>(w.raw_data());
  Tensor out = Tensor::empty(w.shape(), w.dtype());
  auto* o = static_cast<unsigned char*>(out.raw_data());
  for (std::int64_t h = 0; h < n_heads; ++h)
    for (std::int64_t i = 0; i < D / 2; ++i)
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::int64_t g = h * D + 2 * i + j, r = h * D + j * (D / 2) + i;
        const auto src = static_cast<std::size_t>(to_gguf ? r : g), dst = static_cast<std::size_t>(to_gguf ? g : r);
        std::memcpy(o + dst * row_bytes, in + src * row_bytes, row_bytes);
      }
  return out;
}

// A 2-D tensor stored in a type the engine holds natively (f16, bf16, q8_0, q4_0, q4_k,
// q6_k), copied out of the file in that type (or, `view`, viewing the file's mapping); f32 and
// other types come back as f32.
Tensor read_kept(const GgufFile& f, const GgufTensorInfo& t, bool view) {
  const auto d = dtype_of_ggml(t.type);
  if (!d || *d == DType::f32 || t.ne.size() != 2) return f.to_f32(t);
  TFM_CHECK(tensor_bytes(t.shape(), *d) == t.nbytes, f.path, "tensor '", t.name, "': ", t.nbytes, " bytes for ",
            shape_str(t.shape()), " of ", dtype_name(*d));
  if (view && f.mapped) {
    const std::shared_ptr<void> mapping = std::const_pointer_cast<unsigned char>(f.bytes);
    auto storage = std::make_shared<Storage>(const_cast<unsigned char*>(f.raw(t)), t.nbytes, mapping, /*file_mapped=*/true);
    return Tensor::from_storage(std::move(storage), t.shape(), *d, 0);
  }
  Tensor out = Tensor::empty(t.shape(), *d);
  std::memcpy(out.raw_data(), f.raw(t), out.nbytes());
  return out;
}

// The family llama.cpp calls `arch`, or an error naming the ones it runs.
const Family& family_of_arch(const std::string& arch, const std::string& path) {
  if (const Family* f = gguf_family(arch)) return *f;
  std::string known;
  for (const Family& f : model_families())
    if (f.gguf) known += (known.empty() ? "" : ", ") + f.gguf->arch;
  fail(path, "key 'general.architecture': '", arch, "' is not supported (", known, ")");
}

}  // namespace

bool is_gguf_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".gguf" || ext == ".GGUF";
}

ModelConfig gguf_model_config(const GgufFile& f, GgufModelInfo* info) {
  const std::string arch = f.get_string("general.architecture");
  const Family& family = family_of_arch(arch, f.path);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  TFM_CHECK(embd != nullptr && embd->ne.size() == 2, f.path, "tensor 'token_embd.weight' (2-D) is missing");
  if (info) {
    info->architecture = arch;
    info->name = f.get_string("general.name", "");
    info->chat_template = f.get_string("tokenizer.chat_template", "");
    info->tokenizer_model = f.get_string("tokenizer.ggml.model", "");
    info->tokenizer_pre = f.get_string("tokenizer.ggml.pre", "");
  }
  auto need = [&](const std::string& key) {
    const std::int64_t v = f.get_int(arch + "." + key);
    TFM_CHECK(v > 0, f.path, "key '", arch, ".", key, "' = ", v, " must be positive");
    return v;
  };
  GgufSizes z;
  z.vocab = embd->ne[1];
  z.d_model = need("embedding_length");
  z.layers = need("block_count");
  z.heads = need("attention.head_count");
  z.d_ff = need("feed_forward_length");
  z.context = need("context_length");
  z.tied = f.find_tensor("output.weight") == nullptr;
  nlohmann::json j = family.gguf->config(f, z);
  j["model_type"] = family.model_type;
  const std::int64_t bos = f.get_int("tokenizer.ggml.bos_token_id", -1), eos = f.get_int("tokenizer.ggml.eos_token_id", -1);
  if (bos >= 0) j["bos_token_id"] = bos;
  if (eos >= 0) j["eos_token_id"] = eos;
  return parse_model_config(j.dump(), f.path);
}

LoadedModel gguf_to_model(const GgufFile& f, GgufModelInfo* info, bool map_weights) {
  ModelConfig cfg = gguf_model_config(f, info);
  const std::string arch = f.get_string("general.architecture");
  const bool tied = cfg.tie_embeddings;
  const auto table = model_family(cfg.model_type).gguf->tensors(cfg);
  std::map<std::string, const GgufTensorName*> by_gguf;
  for (const auto& n : table) by_gguf[n.gguf] = &n;
  std::map<std::string, Shape> expected;  // Hugging Face name -> shape the metadata implies
  for (const auto& spec : parameter_specs(cfg)) expected[spec.name] = spec.shape;
  for (const auto& n : table)
    TFM_CHECK(f.find_tensor(n.gguf) != nullptr, f.path, "tensor '", n.gguf, "' is missing (", arch, ", ",
              cfg.n_layers, " layers)");
  std::map<std::string, Tensor> params;
  for (const auto& t : f.tensors) {
    auto it = by_gguf.find(t.name);
    TFM_CHECK(it != by_gguf.end(), f.path, "tensor '", t.name, "' is not part of a ", arch, " model with ",
              cfg.n_layers, " layers", tied ? " (tied embeddings)" : "");
    const GgufTensorName& n = *it->second;
    Shape want = expected.at(n.hf);
    if (n.fix == GgufTensorName::transpose) std::reverse(want.begin(), want.end());
    TFM_CHECK(t.shape() == want, f.path, "tensor '", t.name, "' has shape ", shape_str(t.shape()),
              ", the metadata implies ", shape_str(want));
    // (Row permutations copy anyway; a view keeps its pages until the split lets them go.)
    const bool view = map_weights && n.fix != GgufTensorName::rope_q && n.fix != GgufTensorName::rope_k;
    Tensor w = read_kept(f, t, view);
    if (!view || w.dtype() == DType::f32) f.release(t);
    if (n.fix == GgufTensorName::rope_q) w = permute_rope_rows(w, cfg.n_heads, false);
    if (n.fix == GgufTensorName::rope_k) w = permute_rope_rows(w, cfg.kv_heads(), false);
    if (n.fix == GgufTensorName::transpose) {
      TFM_CHECK(w.dim() == 2, f.path, "tensor '", t.name, "' must be 2-D");
      // Compact types stay (out, in), the engine's orientation for them.
      if (w.dtype() == DType::f32) w = transpose_2d(w);
    }
    params[n.hf] = std::move(w);
  }
  Model model = [&] {
    try {
      return Model::from_parameters(cfg, std::move(params), /*keep_compact=*/true);
    } catch (const Error& e) {
      fail(f.path, "tensors do not match the metadata: ", e.what());
    }
  }();
  Tokenizer tok = [&] {
    try {
      return Tokenizer::from_json(gguf_tokenizer_json(f));
    } catch (const Error& e) {
      fail(f.path, "tokenizer from the tokenizer.ggml.* metadata: ", e.what());
    }
  }();
  TFM_CHECK(tok.vocab_size() <= cfg.vocab_size, f.path, "tokenizer has ", tok.vocab_size(),
            " tokens but token_embd has ", cfg.vocab_size, " rows");
  return {std::move(cfg), std::move(model), std::move(tok)};
}

LoadedModel load_gguf_model(const std::string& path, GgufModelInfo* info, bool map_weights) {
  return gguf_to_model(read_gguf(path), info, map_weights);
}

// ---- writing ---------------------------------------------------------------------------------
void save_gguf_model(const std::string& path, const Model& model, const Tokenizer& tokenizer,
                     const GgufSaveOptions& opt) {
  ModelConfig c = model.config();
  TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, path,
            "only decoder-only language models can be written to GGUF");
  std::map<std::string, Tensor> renamed;  // engine-scheme models, under the family's names
  const Family* family = &model_family(c.model_type);
  if (family->exact_hub_names) {
    const Family* same = nullptr;
    for (const Family& f : model_families())
      if (same == nullptr && f.computes_as_engine && f.computes_as_engine(c)) same = &f;
    TFM_CHECK(same != nullptr, path,
              "this model's components match neither GPT-2 (pre-LayerNorm, learned positions, tanh GELU, biases) nor "
              "Llama (pre-RMSNorm, rotate-half RoPE, SwiGLU, no biases), the families llama.cpp runs");
    renamed = same->from_engine(c, model.parameters());
    c.model_type = same->model_type;
    family = same;
  }
  if (!family->gguf) {
    std::string known;
    for (const Family& f : model_families())
      if (f.gguf) known += (known.empty() ? "" : ", ") + f.model_type;
    fail(path, "model_type '", c.model_type, "' cannot be written to GGUF (", known,
         " and equivalent \"transformer\" models can)");
  }
  const std::string arch = family->gguf->arch;
  const std::string p = arch + ".";
  std::vector<std::pair<std::string, GgufValue>> meta;
  meta.emplace_back("general.architecture", GgufValue::string(arch));
  if (!opt.name.empty()) meta.emplace_back("general.name", GgufValue::string(opt.name));
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_Q6_K 18,
  // MOSTLY_Q4_K_M 15, MOSTLY_BF16 32.
  GgmlType ft = opt.type;
  {
    std::map<DType, int> compact;  // the model's compact matrices by type
    for (const auto& [name, t] : model.parameters())
      if (t.dtype() != DType::f32) ++compact[t.dtype()];
    int most = 0;
    for (const auto& [d, n] : compact)
      if (n > most) most = n, ft = ggml_type_of(d);
  }
  const std::uint32_t ftype = ft == GgmlType::f16 ? 1 : ft == GgmlType::q8_0 ? 7 : ft == GgmlType::bf16 ? 32
                              : ft == GgmlType::q4_0 ? 2 : ft == GgmlType::q4_k ? 15 : ft == GgmlType::q6_k ? 18 : 0;
  meta.emplace_back("general.file_type", GgufValue::u32(ftype));
  if (ft != GgmlType::f32 && ft != GgmlType::f16 && ft != GgmlType::bf16)
    meta.emplace_back("general.quantization_version", GgufValue::u32(2));
  auto u32 = [&](const std::string& k, std::int64_t v) { meta.emplace_back(p + k, GgufValue::u32(static_cast<std::uint32_t>(v))); };
  u32("context_length", c.max_positions);
  u32("embedding_length", c.d_model);
  u32("block_count", c.n_layers);
  u32("feed_forward_length", c.d_ff);
  u32("attention.head_count", c.n_heads);
  family->gguf->metadata(c, path, meta);
  tokenizer_to_gguf(tokenizer, meta, c.vocab_size);
  if (!opt.chat_template.empty()) meta.emplace_back("tokenizer.chat_template", GgufValue::string(opt.chat_template));

  const auto& params = renamed.empty() ? model.parameters() : renamed;
  std::vector<GgufTensorOut> out;
  for (const auto& n : family->gguf->tensors(c)) {
    auto it = params.find(n.hf);
    TFM_CHECK(it != params.end(), path, "model has no tensor '", n.hf, "'");
    Tensor w = it->second;
    if (n.fix == GgufTensorName::rope_q) w = permute_rope_rows(w, c.n_heads, true);
    if (n.fix == GgufTensorName::rope_k) w = permute_rope_rows(w, c.kv_heads(), true);
    // Compact weights are already (out, in); f32 Conv1D ones are (in, out).
    if (n.fix == GgufTensorName::transpose && w.dtype() == DType::f32) w = transpose_2d(w);
    GgmlType type = w.dim() >= 2 ? opt.type : GgmlType::f32;
    // A weight the model holds in a compact type is written in that type (tfm quantize's
    // per-tensor recipe); otherwise opt.type, falling back to F16 when a row does not fit
    // the block, like llama.cpp's converter.
    if (w.dtype() != DType::f32) type = ggml_type_of(w.dtype());
    if (type == GgmlType::q8_0 && w.size(-1) % 32 != 0) type = GgmlType::f16;
    out.push_back({n.gguf, w, type});
  }
  write_gguf(path, meta, out);
}

}  // namespace tfm
