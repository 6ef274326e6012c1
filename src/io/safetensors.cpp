// safetensors reader/writer (format summary in include/tfm/safetensors.h).
#include "tfm/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "tfm/error.h"

namespace tfm {
namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;  // the reference implementation's cap (100 MB)

std::uint64_t read_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& where) {
  const std::string ctx = "safetensors " + where;
  TFM_CHECK(bytes.size() >= 8, ctx, "file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  const std::uint64_t n = read_le64(reinterpret_cast<const unsigned char*>(bytes.data()));
  TFM_CHECK(n <= kMaxHeader, ctx, "header length ", n, " exceeds the 100 MB limit");
  TFM_CHECK(n <= bytes.size() - 8, ctx, "header length ", n, " runs past the end of the file (",
            bytes.size(), " bytes)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    fail(ctx, "header is not valid JSON: ", e.what());
  }
  TFM_CHECK(header.is_object(), ctx, "header is not a JSON object");
  const std::size_t data_begin = 8 + static_cast<std::size_t>(n);
  const std::size_t data_size = bytes.size() - data_begin;
  // One buffer for all tensors; each tensor is a view into it.
  auto storage = std::make_shared<Storage>(data_size);
  if (data_size) std::memcpy(storage->data(), bytes.data() + data_begin, data_size);

  SafetensorsFile out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      TFM_CHECK(v.is_object(), ctx, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        TFM_CHECK(m.value().is_string(), ctx, "metadata value for '", m.key(), "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tctx = ctx + " tensor '" + name + "'";
    TFM_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"), tctx,
              "entry needs dtype, shape and data_offsets");
    TFM_CHECK(v["dtype"].is_string(), tctx, "dtype is not a string");
    const DType dt = dtype_from_name(v["dtype"].get<std::string>());
    Shape shape;
    TFM_CHECK(v["shape"].is_array(), tctx, "shape is not an array");
    std::uint64_t count = 1;
    for (const auto& s : v["shape"]) {
      TFM_CHECK(s.is_number_unsigned(), tctx, "shape entry ", s.dump(), " is not a non-negative integer");
      const std::uint64_t d = s.get<std::uint64_t>();
      TFM_CHECK(d < (1ull << 40) && (d == 0 || count <= (1ull << 62) / d), tctx, "shape is too large");
      count *= d;
      shape.push_back(static_cast<std::int64_t>(d));
    }
    const auto& off = v["data_offsets"];
    TFM_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
              tctx, "data_offsets must be [begin, end]");
    const std::uint64_t b = off[0].get<std::uint64_t>(), e = off[1].get<std::uint64_t>();
    TFM_CHECK(b <= e && e <= data_size, tctx, "data_offsets [", b, ", ", e, "] outside the ", data_size,
              "-byte data section");
    TFM_CHECK(e - b == count * dtype_size(dt), tctx, "shape ", shape_str(shape), " of ", dtype_name(dt),
              " needs ", count * dtype_size(dt), " bytes, data_offsets give ", e - b);
    const std::size_t esz = dtype_size(dt);
    if (b % esz == 0) {
      out.tensors[name] = Tensor::from_storage(storage, shape, dt, static_cast<std::int64_t>(b / esz));
    } else {  // unaligned for its dtype: copy out
      Tensor t = Tensor::empty(shape, dt);
      if (count) std::memcpy(t.raw_data(), static_cast<const char*>(storage->data()) + b, e - b);
      out.tensors[name] = t;
    }
  }
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TFM_CHECK(t.defined(), "safetensors", "tensor '", name, "' is undefined");
    TFM_CHECK(name != "__metadata__", "safetensors", "'__metadata__' is reserved");
    header[name] = {{"dtype", dtype_safetensors_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string h = header.dump();
  h.append((8 - (h.size() % 8)) % 8, ' ');  // pad so the data section starts 8-aligned
  std::string out;
  out.reserve(8 + h.size() + offset);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((h.size() >> (8 * i)) & 0xff));
  out += h;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.is_contiguous() ? t : t.clone();
    out.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace tfm
