// GGUF, llama.cpp's model file (versions 2 and 3; the spec is ggml/docs/gguf.md):
//
//   "GGUF" u32 version  u64 n_tensors  u64 n_kv
//   n_kv x      { string key, u32 value_type, value }          metadata
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment (default 32), then the tensor data, each tensor at its
//   offset (a multiple of the alignment) from the start of that section.
//
// Strings are u64 length + bytes (no NUL); everything is little-endian. ne[0] is the
// innermost (contiguous) dimension, so a PyTorch (out, in) weight has ne = [in, out];
// GgufTensorInfo::shape() gives the PyTorch order.
//
// The reader checks every count, length, offset and product with overflow-checked
// arithmetic before it allocates or reads (docs/formats.md lists the rules); a defect is
// one tfm::Error naming the file, the key or tensor, and the rule. The file is memory-mapped.
#pragma once

#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

enum class GgufValueType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars use the field of their kind; arrays (of one element type,
// never nested here) use strings, ints (integers and bools) or floats.
struct GgufValue {
  GgufValueType type = GgufValueType::u32;
  GgufValueType array_type = GgufValueType::u8;  // element type when type == array
  std::int64_t i = 0;                  // integer and bool scalars
  double f = 0.0;                      // f32 / f64 scalars
  std::string s;                       // string scalar
  std::vector<std::string> strings;    // array of string
  std::vector<std::int64_t> ints;      // array of integers or bools
  std::vector<double> floats;          // array of f32 / f64

  static GgufValue u32(std::uint32_t v);
  static GgufValue i32(std::int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue i32_array(std::vector<std::int64_t> v);
  static GgufValue f32_array(std::vector<double> v);
  std::string str() const;  // short printable form ("[32000 strings]" for big arrays)
};

// GGML element types. The engine reads those named here: f32, f16, bf16, q8_0, q4_0, q4_k
// and q6_k weight matrices stay in their type at load (docs/quantization.md); q4_1, q5_0
// and q5_k are dequantized to f32. It writes f32, f16, bf16, q8_0, q4_0, q4_k and q6_k.
enum class GgmlType : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15, bf16 = 30,
};
// "Q4_K", ... or "type N" for ids the engine does not know.
std::string ggml_type_name(std::uint32_t type);
GgmlType ggml_type_from_name(const std::string& name);  // "f32", "f16", "bf16", "q8_0" (any case)
// The GGML type of an engine dtype (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k) and back; the
// reverse is empty for GGML types the engine does not hold natively (q4_1, q5_k, ...).
GgmlType ggml_type_of(DType t);
std::optional<DType> dtype_of_ggml(std::uint32_t type);

struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> ne;  // GGML order: ne[0] innermost
  std::uint32_t type = 0;        // a GgmlType value
  std::uint64_t offset = 0;      // from the start of the data section
  std::uint64_t nbytes = 0;
  Shape shape() const;           // outermost first: ne reversed
  std::int64_t numel() const;
};

class GgufFile {
 public:
  std::string path;
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;  // where the data section starts in the file
  std::uint64_t file_size = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                      // in file order

  const GgufValue* find(const std::string& key) const;  // nullptr when absent
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Typed look-ups: absent keys give the default (or throw naming the key when there is
  // none); a value of the wrong type throws naming the key and both types.
  std::int64_t get_int(const std::string& key) const;
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  // The tensor's raw bytes (inside the mapping) and its values as a fresh f32 tensor of
  // shape() (every supported type dequantized).
  const unsigned char* raw(const GgufTensorInfo& t) const;
  Tensor to_f32(const GgufTensorInfo& t) const;
  // Hands the tensor's pages of a memory-mapped file back to the kernel (they are read again
  // if used later), so loading a model does not hold the file and the f32 copy at once.
  void release(const GgufTensorInfo& t) const;

  std::shared_ptr<const unsigned char> bytes;  // the whole file (mapping or buffer)
  bool mapped = false;                         // bytes is an mmap of the file
};

GgufFile read_gguf(const std::string& path);
// Parse from memory (`where` names the source in errors); the GgufFile keeps the buffer.
GgufFile parse_gguf(std::string bytes, const std::string& where);

// One tensor to write: `data` holds the values (any float dtype, PyTorch order); `type` is
// the encoding in the file. Block types need the innermost dimension to be a multiple of
// their block (32; 256 for q4_k/q6_k). A block-quantized `data` is written as it is (its
// type must be `type`).
struct GgufTensorOut {
  std::string name;
  Tensor data;
  GgmlType type = GgmlType::f32;
};

// Writes a GGUF v3 file atomically (temp file, fsync, rename), streaming tensor by tensor.
// general.alignment is written when `alignment` is not the default 32.
void write_gguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                const std::vector<GgufTensorOut>& tensors, std::uint64_t alignment = 32);

}  // namespace tfm
