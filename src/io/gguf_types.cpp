// GGUF type tables, GgufValue helpers and GgufFile's typed metadata look-ups.
#include "io/gguf_types.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "tfm/error.h"

namespace tfm {
namespace {

void copy_f32(const void* src, float* out, std::int64_t n) {
  std::memcpy(out, src, static_cast<std::size_t>(n) * sizeof(float));
}

struct TypeEntry {
  std::uint32_t id;
  GgmlTypeTraits traits;
};
constexpr TypeEntry kTypes[] = {
    {0, {"F32", 1, 4, copy_f32}},
    {1, {"F16", 1, 2, kernels::dequantize_f16}},
    {30, {"BF16", 1, 2, kernels::dequantize_bf16}},
    {8, {"Q8_0", 32, 34, kernels::dequantize_q8_0}},
    {2, {"Q4_0", 32, 18, kernels::dequantize_q4_0}},
    {3, {"Q4_1", 32, 20, kernels::dequantize_q4_1}},
    {6, {"Q5_0", 32, 22, kernels::dequantize_q5_0}},
    {12, {"Q4_K", 256, 144, kernels::dequantize_q4_k}},
    {13, {"Q5_K", 256, 176, kernels::dequantize_q5_k}},
    {14, {"Q6_K", 256, 210, kernels::dequantize_q6_k}},
};

// Names of GGML types the engine refuses, so an error can say which one it met.
const char* other_type_name(std::uint32_t t) {
  switch (t) {
    case 7: return "Q5_1";
    case 9: return "Q8_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K";
    case 15: return "Q8_K";
    case 16: return "IQ2_XXS";
    case 17: return "IQ2_XS";
    case 18: return "IQ3_XXS";
    case 19: return "IQ1_S";
    case 20: return "IQ4_NL";
    case 21: return "IQ3_S";
    case 22: return "IQ2_S";
    case 23: return "IQ4_XS";
    case 24: return "I8";
    case 25: return "I16";
    case 26: return "I32";
    case 27: return "I64";
    case 28: return "F64";
    case 29: return "IQ1_M";
    case 34: return "TQ1_0";
    case 35: return "TQ2_0";
    default: return nullptr;
  }
}

const char* kind(GgufValueType t) { return gguf_value_type_name(t); }

}  // namespace

const GgmlTypeTraits* ggml_traits(std::uint32_t type) {
  for (const auto& e : kTypes)
    if (e.id == type) return &e.traits;
  return nullptr;
}

std::string ggml_type_name(std::uint32_t type) {
  if (const auto* t = ggml_traits(type)) return t->name;
  if (const char* n = other_type_name(type)) return n;
  return "type " + std::to_string(type);
}

GgmlType ggml_type_from_name(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (s == "f32") return GgmlType::f32;
  if (s == "f16") return GgmlType::f16;
  if (s == "bf16") return GgmlType::bf16;
  if (s == "q8_0") return GgmlType::q8_0;
  if (s == "q4_0") return GgmlType::q4_0;
  if (s == "q4_k") return GgmlType::q4_k;
  if (s == "q6_k") return GgmlType::q6_k;
  fail("gguf", "unknown output type '", name, "' (allowed: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)");
}

GgmlType ggml_type_of(DType t) {
  switch (t) {
    case DType::f32: return GgmlType::f32;
    case DType::f16: return GgmlType::f16;
    case DType::bf16: return GgmlType::bf16;
    case DType::q8_0: return GgmlType::q8_0;
    case DType::q4_0: return GgmlType::q4_0;
    case DType::q4_k: return GgmlType::q4_k;
    case DType::q6_k: return GgmlType::q6_k;
    default: fail("gguf", "dtype ", dtype_name(t), " has no GGML type");
  }
}

std::optional<DType> dtype_of_ggml(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32: return DType::f32;
    case GgmlType::f16: return DType::f16;
    case GgmlType::bf16: return DType::bf16;
    case GgmlType::q8_0: return DType::q8_0;
    case GgmlType::q4_0: return DType::q4_0;
    case GgmlType::q4_k: return DType::q4_k;
    case GgmlType::q6_k: return DType::q6_k;
    default: return std::nullopt;
  }
}

std::uint64_t gguf_scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::boolean: return 1;
    case GgufValueType::u16: case GgufValueType::i16: return 2;
    case GgufValueType::u32: case GgufValueType::i32: case GgufValueType::f32: return 4;
    case GgufValueType::u64: case GgufValueType::i64: case GgufValueType::f64: return 8;
    case GgufValueType::string: case GgufValueType::array: return 0;
  }
  return 0;
}

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8: return "u8";
    case GgufValueType::i8: return "i8";
    case GgufValueType::u16: return "u16";
    case GgufValueType::i16: return "i16";
    case GgufValueType::u32: return "u32";
    case GgufValueType::i32: return "i32";
    case GgufValueType::f32: return "f32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::u64: return "u64";
    case GgufValueType::i64: return "i64";
    case GgufValueType::f64: return "f64";
  }
  return "?";
}

// ---- GgufValue ------------------------------------------------------------------------------
GgufValue GgufValue::u32(std::uint32_t v) { GgufValue x; x.type = GgufValueType::u32; x.i = v; return x; }
GgufValue GgufValue::i32(std::int32_t v) { GgufValue x; x.type = GgufValueType::i32; x.i = v; return x; }
GgufValue GgufValue::f32(float v) { GgufValue x; x.type = GgufValueType::f32; x.f = v; return x; }
GgufValue GgufValue::boolean(bool v) { GgufValue x; x.type = GgufValueType::boolean; x.i = v; return x; }
GgufValue GgufValue::string(std::string v) { GgufValue x; x.type = GgufValueType::string; x.s = std::move(v); return x; }
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue x; x.type = GgufValueType::array; x.array_type = GgufValueType::string; x.strings = std::move(v); return x;
}
GgufValue GgufValue::i32_array(std::vector<std::int64_t> v) {
  GgufValue x; x.type = GgufValueType::array; x.array_type = GgufValueType::i32; x.ints = std::move(v); return x;
}
GgufValue GgufValue::f32_array(std::vector<double> v) {
  GgufValue x; x.type = GgufValueType::array; x.array_type = GgufValueType::f32; x.floats = std::move(v); return x;
}

std::string GgufValue::str() const {
  // Built by appending: GCC 12 warns (-Wrestrict, a false positive) on "literal" + string&&.
  std::string out;
  switch (type) {
    case GgufValueType::string:
      out.append("\"").append(s.size() > 60 ? s.substr(0, 57) + "..." : s).append("\"");
      if (s.size() > 60) out.append(" (").append(std::to_string(s.size())).append(" bytes)");
      return out;
    case GgufValueType::f32: case GgufValueType::f64: return std::to_string(f);
    case GgufValueType::boolean: return i ? "true" : "false";
    case GgufValueType::array: {
      const std::size_t n = array_type == GgufValueType::string ? strings.size()
                            : (array_type == GgufValueType::f32 || array_type == GgufValueType::f64) ? floats.size()
                                                                                                       : ints.size();
      out.append("[").append(std::to_string(n)).append(" x ").append(gguf_value_type_name(array_type)).append("]");
      return out;
    }
    default: return std::to_string(i);
  }
}

// ---- GgufTensorInfo / GgufFile --------------------------------------------------------------
Shape GgufTensorInfo::shape() const { return Shape(ne.rbegin(), ne.rend()); }
std::int64_t GgufTensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : ne) n *= d;  // bounded by 2^50 when read
  return n;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  TFM_CHECK(v != nullptr, path, "missing key '", key, "'");
  TFM_CHECK(v->type != GgufValueType::string && v->type != GgufValueType::array && v->type != GgufValueType::f32 &&
                v->type != GgufValueType::f64 && v->type != GgufValueType::boolean,
            path, "key '", key, "' must be an integer, got ", kind(v->type));
  return v->i;
}
std::int64_t GgufFile::get_int(const std::string& key, std::int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}
double GgufFile::get_float(const std::string& key, double fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  TFM_CHECK(v->type == GgufValueType::f32 || v->type == GgufValueType::f64, path, "key '", key,
            "' must be a float, got ", kind(v->type));
  return v->f;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  TFM_CHECK(v->type == GgufValueType::boolean, path, "key '", key, "' must be a bool, got ", kind(v->type));
  return v->i != 0;
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  TFM_CHECK(v != nullptr, path, "missing key '", key, "'");
  TFM_CHECK(v->type == GgufValueType::string, path, "key '", key, "' must be a string, got ", kind(v->type));
  return v->s;
}
std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}

}  // namespace tfm
