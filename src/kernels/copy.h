// Strided copies and dtype conversion — what contiguous(), clone() and casts run on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tfm/dtype.h"

namespace tfm::kernels {

// Copy an n-d strided array of `elem_size`-byte elements into another n-d strided array of
// the same shape. Strides are in elements. Dimensions are merged where both sides allow it,
// so a contiguous-to-contiguous copy is one memcpy. Parallel over the outer dimension.
void copy_strided(const void* src, const std::int64_t* src_strides, void* dst,
                  const std::int64_t* dst_strides, const std::int64_t* shape, int ndim,
                  std::size_t elem_size);

// Convert n contiguous elements between any two dtypes (floats round to nearest even;
// float -> int truncates toward zero, as a C cast does).
void convert(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n);

}  // namespace tfm::kernels
