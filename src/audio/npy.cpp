// NumPy's .npy format, version 1.0: the magic, a little-endian header length, a Python dict
// literal padded with spaces to a multiple of 64 bytes and ending in a newline, then the data.
#include <cstring>

#include "tfm/audio.h"
#include "tfm/error.h"
#include "tfm/ops.h"
#include "tfm/safetensors.h"

namespace tfm {

void write_npy(const std::string& path, const Tensor& t) {
  TFM_CHECK(t.defined() && dtype_is_float(t.dtype()), path, "write_npy needs a float tensor");
  const Tensor x = contiguous(cast(t, DType::f32));
  std::string shape;  // a Python tuple: "(2, 3)", "(5,)", "()"
  for (std::int64_t d : x.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  shape = "(" + shape + (x.dim() == 1 ? ",)" : ")");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const auto len = static_cast<std::uint16_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += header;
  const std::size_t at = out.size(), bytes = static_cast<std::size_t>(x.numel()) * sizeof(float);
  out.resize(at + bytes);
  std::memcpy(out.data() + at, x.data<float>(), bytes);
  write_file_atomic(path, out);
}

}  // namespace tfm
