// Small checks shared by the nn ops (src/ops/{softmax,norm,embedding,dropout,cross_entropy,
// concat}.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/error.h"
#include "tfm/tensor.h"

namespace tfm::nn_util {

inline std::int64_t wrap_dim(std::int64_t d, std::int64_t ndim, const char* op) {
  TFM_CHECK(d >= -ndim && d < ndim, op, "dim ", d, " out of range for a ", ndim, "-d tensor");
  return d < 0 ? d + ndim : d;
}

inline void check_f32(const Tensor& t, const char* op, const char* what) {
  TFM_CHECK(t.defined(), op, what, " is undefined");
  TFM_CHECK(t.dtype() == DType::f32, op, what, " must be f32, got ", dtype_name(t.dtype()), " ", shape_str(t.shape()),
            " (cast it first)");
}

// Values of an integer index tensor (i32 or i64, any strides) as int64.
inline std::vector<std::int64_t> index_values(const Tensor& t, const char* op, const char* what) {
  TFM_CHECK(t.defined(), op, what, " is undefined");
  TFM_CHECK(t.dtype() == DType::i32 || t.dtype() == DType::i64, op, what, " must be i32 or i64, got ",
            dtype_name(t.dtype()));
  return t.to_ints();
}

// The multi-index "(i,j,k)" of flat row-major position `pos` in `shape`, for error messages.
inline std::string position_str(std::int64_t pos, const Shape& shape) {
  Shape idx(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? pos % shape[i] : 0;
    pos = shape[i] ? pos / shape[i] : 0;
  }
  return shape_str(idx);
}

}  // namespace tfm::nn_util
