// tfm::Tensor — an n-dimensional strided view over reference-counted storage.
//
//   Tensor x = Tensor::randn({B, T, C}, /*seed=*/1);   // (B, T, C) f32, contiguous
//   Tensor y = tfm::transpose(x, 1, 2);                 // (B, C, T) view, no copy
//   Tensor z = tfm::contiguous(y);                      // copy into row-major order
//
// A Tensor is a cheap handle (copying it shares the data). Shape-changing views that must
// take part in autograd are free functions in ops.h; the members here never record
// anything on the autograd tape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/dtype.h"

namespace tfm {

using Shape = std::vector<std::int64_t>;  // sizes (or strides, in elements), outermost first

std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);       // "(2,3,4)"
Shape contiguous_strides(const Shape& shape);    // row-major strides in elements
// Bytes of a contiguous tensor: numel * dtype_size, or for a block-quantized dtype
// (q8_0, q4_k, ...) rows of the last dimension times dtype_row_bytes(dtype, last).
std::size_t tensor_bytes(const Shape& shape, DType dtype);

// A block of memory from the engine's counted, 64-byte aligned allocator. A Storage may
// also wrap memory it does not own (e.g. a memory-mapped checkpoint): `owner` keeps that
// memory alive and nothing is freed by the Storage itself.
class Storage {
 public:
  explicit Storage(std::size_t bytes);
  // External memory kept alive by `owner`; file_mapped: a private (copy-on-write) mapping of a
  // file (safetensors loading), whose pages release_file_pages may drop.
  Storage(void* external, std::size_t bytes, std::shared_ptr<void> owner, bool file_mapped = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // Drops from memory the pages wholly inside this storage of a file mapping (they are read
  // from the file again if touched): a loader that has copied what it needs out of a tensor
  // keeps its peak memory down. Only for pages nothing has written (a written page would come
  // back as the file has it). Nothing for other storage.
  void release_file_pages() const;

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::shared_ptr<void> owner_;  // set for external memory
  bool file_mapped_ = false;
};

struct AutogradMeta;  // autograd.h

class Tensor {
 public:
  Tensor() = default;

  // ---- factories (all contiguous, freshly allocated) --------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32) { return full(shape, 1.0f, dtype); }
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape);
  static Tensor from_ints(const std::vector<std::int64_t>& values, const Shape& shape,
                          DType dtype = DType::i64);
  // Deterministic random tensors from a counter-based generator: the same seed gives the
  // same values whatever the thread count.
  static Tensor randn(const Shape& shape, std::uint64_t seed, float mean = 0.0f, float std = 1.0f);
  static Tensor uniform(const Shape& shape, std::uint64_t seed, float lo = 0.0f, float hi = 1.0f);
  // Wrap existing storage (no copy); used by loaders.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                             std::int64_t offset = 0);

  // ---- queries -----------------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  std::int64_t offset() const { return offset_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size(std::int64_t d) const;  // negative d counts from the end
  std::int64_t numel() const { return shape_numel(shape_); }
  // Block-quantized tensors (dtype_is_block) are whole contiguous rows: no element views
  // (as_strided fails), no element access; to_floats/clone/copy_ work a row at a time.
  std::size_t nbytes() const { return tensor_bytes(shape_, dtype_); }
  bool is_contiguous() const;
  std::string str() const;  // "Tensor(f32, (2,3))"

  // ---- data --------------------------------------------------------------------------
  // Pointer to the first element of the view. data<T>() checks that T matches dtype().
  void* raw_data() const;
  template <class T>
  T* data() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Element values as float (any float dtype, any strides) — for tests and printing.
  std::vector<float> to_floats() const;
  std::vector<std::int64_t> to_ints() const;  // any integer dtype, any strides
  float item() const;                          // a one-element tensor's value as float

  // ---- raw views and copies (never recorded for autograd) -----------------------------
  Tensor as_strided(const Shape& shape, const Shape& strides, std::int64_t offset) const;
  Tensor clone() const;  // contiguous copy, same dtype, no autograd history
  // Copy src's values into this tensor (same shape; dtypes converted). Not differentiable:
  // for no-grad updates such as optimizer steps and caches.
  void copy_(const Tensor& src);
  void fill_(float value);
  Tensor clone_as_f32() const;  // contiguous f32 copy (dequantizes block types)

  // ---- autograd ------------------------------------------------------------------------
  bool requires_grad() const;
  // Mark a leaf (a parameter or input) as needing gradients; returns *this.
  Tensor& requires_grad_(bool on = true);
  // The accumulated gradient of a leaf after backward(); undefined when none.
  Tensor grad() const;
  void zero_grad();  // drop the accumulated gradient
  AutogradMeta* autograd_meta() const { return meta_.get(); }
  const std::shared_ptr<AutogradMeta>& autograd_meta_ptr() const { return meta_; }
  void set_autograd_meta(std::shared_ptr<AutogradMeta> meta) { meta_ = std::move(meta); }

 private:
  void copy_blocks(const Tensor& src);
  std::shared_ptr<Storage> storage_;
  std::int64_t offset_ = 0;  // in elements
  Shape shape_, strides_;    // strides in elements
  DType dtype_ = DType::f32;
  std::shared_ptr<AutogradMeta> meta_;
};

// dtype <-> C++ type mapping for Tensor::data<T>().
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }

}  // namespace tfm
