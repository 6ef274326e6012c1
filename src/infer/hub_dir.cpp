// Reading a directory of config.json + safetensors weights: the engine's own layout and
// Hugging Face hub directories (single or sharded weights, generation_config.json).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "infer/model_source.h"
#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace infer_detail {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string join(const std::string& dir, const std::string& file) { return (fs::path(dir) / file).string(); }

// Pickle checkpoints run code when unpickled, so they are never read; say how to convert.
[[noreturn]] void refuse_pickle(const std::string& dir, const std::string& file) {
  fail(join(dir, file), "is a PyTorch pickle checkpoint, which is refused (unpickling can run arbitrary code); "
       "convert it to model.safetensors, e.g. in Python: model.save_pretrained(dir, safe_serialization=True)");
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {"tensor": "shard file"}}.
// Every shard is a plain file name in the directory; every tensor of a shard must be listed
// for that shard, and every listed tensor must be in its shard.
void read_sharded(const std::string& dir, const std::string& index_path, ModelSource& src) {
  for (const auto& [file, listed] : read_safetensors_index(index_path)) {
    const std::set<std::string> names(listed.begin(), listed.end());
    const std::string path = join(dir, file);
    SafetensorsFile sf = load_safetensors(path);
    for (auto& [name, t] : sf.tensors) {
      TFM_CHECK(names.count(name), path, "holds tensor '", name, "' that ", index_path, " does not assign to it");
      src.tensors.emplace(name, std::move(t));
    }
    for (const auto& name : names)
      TFM_CHECK(sf.tensors.count(name), path, "lacks tensor '", name, "' that ", index_path, " assigns to it");
  }
  src.weights_where = index_path;
}

std::optional<std::int64_t> opt_int(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  TFM_CHECK(j[key].is_number_integer(), where, "key '", key, "' must be an integer, got ", j[key].dump());
  return j[key].get<std::int64_t>();
}
std::optional<double> opt_double(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  TFM_CHECK(j[key].is_number(), where, "key '", key, "' must be a number, got ", j[key].dump());
  return j[key].get<double>();
}

}  // namespace

// docs/formats.md, "Quantized weights": a compact tensor is stored as a U8 tensor of its
// raw bytes, (rows, row_bytes), and __metadata__ "tfm.dtype.<name>" = "<dtype>:<rows>,<cols>".
bool decode_compact_tensors(SafetensorsFile& sf, const std::string& where) {
  const std::string tag = "tfm.dtype.";
  bool any = false;
  for (const auto& [key, value] : sf.metadata) {
    if (key.rfind(tag, 0) != 0) continue;
    const std::string name = key.substr(tag.size());
    auto it = sf.tensors.find(name);
    TFM_CHECK(it != sf.tensors.end(), where, "metadata '", key, "' names a tensor the file does not hold");
    const std::size_t colon = value.find(':'), comma = value.find(',');
    TFM_CHECK(colon != std::string::npos && comma != std::string::npos && comma > colon, where, "metadata '", key,
              "' = '", value, "' is not <dtype>:<rows>,<cols>");
    const DType d = dtype_from_name(value.substr(0, colon));
    std::int64_t rows = 0, cols = 0;
    try {
      rows = std::stoll(value.substr(colon + 1, comma - colon - 1));
      cols = std::stoll(value.substr(comma + 1));
    } catch (const std::exception&) {
      fail(where, "metadata '", key, "' = '", value, "' is not <dtype>:<rows>,<cols>");
    }
    TFM_CHECK(d == DType::bf16 || d == DType::f16 || dtype_is_block(d), where, "metadata '", key, "': ",
              dtype_name(d), " is not a compact weight type");
    TFM_CHECK(rows > 0 && cols > 0 && cols % dtype_block_elems(d) == 0, where, "metadata '", key, "' = '", value,
              "': bad shape for ", dtype_name(d));
    const Tensor& raw = it->second;
    const Shape want{rows, static_cast<std::int64_t>(dtype_row_bytes(d, cols))};
    TFM_CHECK(raw.dtype() == DType::u8 && raw.shape() == want, where, "tensor '", name, "' must be u8 ",
              shape_str(want), " for ", value, ", got ", raw.str());
    const Tensor c = raw.clone();  // owned, aligned bytes (the mapping's offset may not be)
    it->second = Tensor::from_storage(c.storage(), {rows, cols}, d);
    any = true;
  }
  return any;
}

ModelSource read_safetensors_dir(const std::string& dir) {
  ModelSource src;
  src.config = load_model_config(join(dir, "config.json"));
  const std::string single = join(dir, "model.safetensors"), index = join(dir, "model.safetensors.index.json");
  if (fs::exists(single)) {
    SafetensorsFile sf = load_safetensors(single);
    src.compact = decode_compact_tensors(sf, single);
    src.tensors = std::move(sf.tensors);
    src.weights_where = single;
  } else if (fs::exists(index)) {
    read_sharded(dir, index, src);
  } else {
    for (const char* f : {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth"})
      if (fs::exists(join(dir, f))) refuse_pickle(dir, f);
    fail(dir, "has neither model.safetensors nor model.safetensors.index.json");
  }
  const std::string gen = join(dir, "generation_config.json");
  if (fs::exists(gen)) src.generation = parse_generation_config(read_file(gen), gen);
  return src;
}

}  // namespace infer_detail

namespace {

void read_token_rules(const nlohmann::json& j, const std::string& where, GenerationDefaults& g) {
  using json = nlohmann::json;
  const auto ids = [&](const char* key, std::vector<std::int64_t>& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    TFM_CHECK(j[key].is_array(), where, "key '", key, "' must be a list of token ids");
    out.clear();
    for (const json& id : j[key]) {
      TFM_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0, where, "key '", key, "': bad id ", id.dump());
      out.push_back(id.get<std::int64_t>());
    }
  };
  ids("suppress_tokens", g.suppress_tokens);
  ids("begin_suppress_tokens", g.begin_suppress_tokens);
  if (j.contains("forced_decoder_ids") && !j["forced_decoder_ids"].is_null()) {
    const json& f = j["forced_decoder_ids"];
    TFM_CHECK(f.is_array(), where, "key 'forced_decoder_ids' must be a list of [position, id] pairs");
    g.forced_decoder_ids.clear();
    for (const json& p : f) {
      TFM_CHECK(p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[0].get<std::int64_t>() >= 1 &&
                    (p[1].is_null() || (p[1].is_number_integer() && p[1].get<std::int64_t>() >= 0)),
                where, "key 'forced_decoder_ids': bad pair ", p.dump(), " (want [position >= 1, id])");
      if (!p[1].is_null()) g.forced_decoder_ids.emplace_back(p[0].get<std::int64_t>(), p[1].get<std::int64_t>());
    }
  }
  if (auto v = infer_detail::opt_int(j, "no_timestamps_token_id", where)) g.no_timestamps_token_id = v;
  if (j.contains("alignment_heads")) {
    const json& a = j["alignment_heads"];
    TFM_CHECK(a.is_array(), where, "key 'alignment_heads' must be a list of [layer, head] pairs");
    for (const json& p : a) {
      TFM_CHECK(p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number_integer() &&
                    p[0].get<std::int64_t>() >= 0 && p[1].get<std::int64_t>() >= 0,
                where, "key 'alignment_heads': bad pair ", p.dump(), " (want [layer >= 0, head >= 0])");
      g.alignment_heads.emplace_back(p[0].get<std::int64_t>(), p[1].get<std::int64_t>());
    }
  }
  if (auto v = infer_detail::opt_int(j, "max_initial_timestamp_index", where)) g.max_initial_timestamp_index = v;
  if (j.contains("is_multilingual")) {
    TFM_CHECK(j["is_multilingual"].is_boolean(), where, "key 'is_multilingual' must be true or false");
    g.is_multilingual = j["is_multilingual"].get<bool>();
  }
  const auto table = [&](const char* key, std::map<std::string, std::int64_t>& out) {
    if (!j.contains(key)) return;
    TFM_CHECK(j[key].is_object(), where, "key '", key, "' must map names to token ids");
    for (const auto& [name, id] : j[key].items()) {
      TFM_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0, where, "key '", key, "': bad id for '", name, "'");
      out[name] = id.get<std::int64_t>();
    }
  };
  table("lang_to_id", g.lang_to_id);
  table("task_to_id", g.task_to_id);
}

}  // namespace

GenerationDefaults parse_generation_config(const std::string& text, const std::string& where) {
  using json = nlohmann::json;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, "not valid JSON: ", e.what());
  }
  TFM_CHECK(j.is_object(), where, "must be a JSON object");
  GenerationDefaults g;
  g.from_file = true;
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    TFM_CHECK(e.is_number_integer() || e.is_array(), where, "key 'eos_token_id' must be an id or a list of ids");
    for (const json& id : e.is_array() ? e : json::array({e})) {
      TFM_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0, where, "key 'eos_token_id': bad id ", id.dump());
      g.eos_token_ids.push_back(id.get<std::int64_t>());
    }
  }
  g.max_length = infer_detail::opt_int(j, "max_length", where);
  g.max_new_tokens = infer_detail::opt_int(j, "max_new_tokens", where);
  g.top_k = infer_detail::opt_int(j, "top_k", where);
  g.num_beams = infer_detail::opt_int(j, "num_beams", where);
  g.decoder_start_token_id = infer_detail::opt_int(j, "decoder_start_token_id", where);
  g.pad_token_id = infer_detail::opt_int(j, "pad_token_id", where);
  g.bos_token_id = infer_detail::opt_int(j, "bos_token_id", where);
  g.temperature = infer_detail::opt_double(j, "temperature", where);
  g.top_p = infer_detail::opt_double(j, "top_p", where);
  g.repetition_penalty = infer_detail::opt_double(j, "repetition_penalty", where);
  g.length_penalty = infer_detail::opt_double(j, "length_penalty", where);
  if (j.contains("do_sample")) {
    TFM_CHECK(j["do_sample"].is_boolean(), where, "key 'do_sample' must be true or false");
    g.do_sample = j["do_sample"].get<bool>();
  }
  if (j.contains("early_stopping")) {  // true, false or "never" (HF): only true stops early
    TFM_CHECK(j["early_stopping"].is_boolean() || j["early_stopping"] == "never", where,
              "key 'early_stopping' must be true, false or \"never\"");
    g.early_stopping = j["early_stopping"] == true;
  }
  read_token_rules(j, where, g);
  for (const std::optional<std::int64_t>* v : {&g.max_length, &g.max_new_tokens, &g.num_beams})
    TFM_CHECK(!*v || **v >= 1, where, "max_length, max_new_tokens and num_beams must be >= 1");
  return g;
}

}  // namespace tfm
