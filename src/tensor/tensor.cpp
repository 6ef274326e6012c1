// Tensor: storage, factories, views, copies and element access.
#include "tfm/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "base/memory.h"
#include "kernels/copy.h"
#include "kernels/qgemm.h"
#include "kernels/random.h"
#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm {

// ---- shapes --------------------------------------------------------------------------

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ')';
  return os.str();
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

// ---- storage -------------------------------------------------------------------------

Storage::Storage(std::size_t bytes) : data_(base::allocate(bytes)), bytes_(bytes) {}

Storage::Storage(void* external, std::size_t bytes, std::shared_ptr<void> owner, bool file_mapped)
    : data_(external), bytes_(bytes), owner_(std::move(owner)), file_mapped_(file_mapped) {}

void Storage::release_file_pages() const {
  if (!file_mapped_ || bytes_ == 0) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data_), end = begin + bytes_;
  const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages only
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

Storage::~Storage() {
  if (!owner_) base::release(data_, bytes_);
}

// ---- factories -----------------------------------------------------------------------

namespace {
void check_shape(const Shape& shape, const char* where) {
  for (std::int64_t s : shape)
    TFM_CHECK(s >= 0, where, "negative size in shape ", shape_str(shape));
}
// A block-quantized tensor is rows of its last dimension, each a whole number of blocks.
void check_block_shape(const Shape& shape, DType dtype, const char* where) {
  if (!dtype_is_block(dtype)) return;
  const std::int64_t be = dtype_block_elems(dtype);
  TFM_CHECK(!shape.empty() && shape.back() % be == 0, where, "a ", dtype_name(dtype), " tensor stores rows in blocks of ",
            be, " elements; shape ", shape_str(shape), " does not fit");
}
}  // namespace

std::size_t tensor_bytes(const Shape& shape, DType dtype) {
  if (!dtype_is_block(dtype)) return static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (shape.empty()) return dtype_row_bytes(dtype, 1);  // fails: a scalar is not a row of blocks
  const std::int64_t K = shape.back();
  return static_cast<std::size_t>(K == 0 ? 0 : shape_numel(shape) / K) * dtype_row_bytes(dtype, K);
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  check_shape(shape, "empty");
  Tensor t;
  check_block_shape(shape, dtype, "empty");
  t.storage_ = std::make_shared<Storage>(tensor_bytes(shape, dtype));
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.nbytes());  // all-zero bits is 0 in every dtype
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape) {
  TFM_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_floats",
            values.size(), " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, DType::f32);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_ints(const std::vector<std::int64_t>& values, const Shape& shape, DType dtype) {
  TFM_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_ints",
            values.size(), " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, dtype);
  kernels::convert(values.data(), DType::i64, t.raw_data(), dtype, t.numel());
  return t;
}

Tensor Tensor::randn(const Shape& shape, std::uint64_t seed, float mean, float std) {
  Tensor t = empty(shape, DType::f32);
  kernels::fill_normal(t.data<float>(), t.numel(), seed, 0, mean, std);
  return t;
}

Tensor Tensor::uniform(const Shape& shape, std::uint64_t seed, float lo, float hi) {
  Tensor t = empty(shape, DType::f32);
  kernels::fill_uniform(t.data<float>(), t.numel(), seed, 0, lo, hi);
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                            std::int64_t offset) {
  check_shape(shape, "from_storage");
  TFM_CHECK(storage != nullptr, "from_storage", "null storage");
  check_block_shape(shape, dtype, "from_storage");
  TFM_CHECK(!dtype_is_block(dtype) || offset == 0, "from_storage", "a ", dtype_name(dtype),
            " tensor must start at the storage's first byte (offset ", offset, ")");
  const std::size_t need = dtype_is_block(dtype) ? tensor_bytes(shape, dtype)
                                                 : static_cast<std::size_t>(offset + shape_numel(shape)) * dtype_size(dtype);
  TFM_CHECK(offset >= 0 && need <= storage->bytes(), "from_storage", "shape ", shape_str(shape), " of ",
            dtype_name(dtype), " at offset ", offset, " needs ", need, " bytes, storage has ",
            storage->bytes());
  Tensor t;
  t.storage_ = std::move(storage);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.offset_ = offset;
  return t;
}

// ---- queries -------------------------------------------------------------------------

std::int64_t Tensor::size(std::int64_t d) const {
  const std::int64_t nd = dim();
  TFM_CHECK(d >= -nd && d < nd, "size", "dim ", d, " out of range for shape ", shape_str(shape_));
  return shape_[static_cast<std::size_t>(d < 0 ? d + nd : d)];
}

bool Tensor::is_contiguous() const {
  std::int64_t expect = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return std::string("Tensor(") + dtype_name(dtype_) + ", " + shape_str(shape_) + ")";
}

void* Tensor::raw_data() const {
  TFM_CHECK(defined(), "tensor", "use of an undefined tensor");
  if (dtype_is_block(dtype_)) return storage_->data();  // block tensors are whole, unviewed rows
  return static_cast<unsigned char*>(storage_->data()) + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

template <class T>
T* Tensor::data() const {
  constexpr bool half = std::is_same_v<T, std::uint16_t>;
  if constexpr (half) {
    TFM_CHECK(dtype_ == DType::bf16 || dtype_ == DType::f16, "data", "tensor is ", dtype_name(dtype_),
              ", not a 16-bit float");
  } else {
    TFM_CHECK(dtype_ == dtype_of<T>(), "data", "tensor is ", dtype_name(dtype_), ", asked for ",
              dtype_name(dtype_of<T>()));
  }
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template std::uint16_t* Tensor::data<std::uint16_t>() const;
template std::int32_t* Tensor::data<std::int32_t>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;
template std::int8_t* Tensor::data<std::int8_t>() const;
template std::uint8_t* Tensor::data<std::uint8_t>() const;

std::vector<float> Tensor::to_floats() const {
  if (dtype_is_block(dtype_)) {  // whole rows, dequantized
    std::vector<float> out(static_cast<std::size_t>(numel()));
    const std::int64_t K = shape_.back();
    if (K > 0) kernels::dequantize_rows(dtype_, raw_data(), out.data(), numel() / K, K);
    return out;
  }
  Tensor c = clone();
  std::vector<float> out(static_cast<std::size_t>(c.numel()));
  kernels::convert(c.raw_data(), c.dtype_, out.data(), DType::f32, c.numel());
  return out;
}

std::vector<std::int64_t> Tensor::to_ints() const {
  TFM_CHECK(!dtype_is_float(dtype_), "to_ints", "tensor is ", dtype_name(dtype_));
  Tensor c = clone();
  std::vector<std::int64_t> out(static_cast<std::size_t>(c.numel()));
  kernels::convert(c.raw_data(), c.dtype_, out.data(), DType::i64, c.numel());
  return out;
}

float Tensor::item() const {
  TFM_CHECK(numel() == 1, "item", "tensor of shape ", shape_str(shape_), " has ", numel(), " elements, not 1");
  return to_floats()[0];
}

// ---- views and copies ----------------------------------------------------------------

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, std::int64_t offset) const {
  TFM_CHECK(defined(), "as_strided", "undefined tensor");
  TFM_CHECK(!dtype_is_block(dtype_), "as_strided", "a ", dtype_name(dtype_), " tensor ", shape_str(shape_),
            " has no element views (block-quantized rows; dequantize it first)");
  TFM_CHECK(shape.size() == strides.size(), "as_strided", "shape ", shape_str(shape), " and strides ",
            shape_str(strides), " differ in rank");
  check_shape(shape, "as_strided");
  // Bounds: the lowest and highest element addressed must lie inside the storage.
  std::int64_t lo = offset, hi = offset;
  bool empty_view = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty_view = true;
    const std::int64_t span = (shape[i] - 1) * strides[i];
    (span < 0 ? lo : hi) += span;
  }
  const auto capacity = static_cast<std::int64_t>(storage_->bytes() / dtype_size(dtype_));
  TFM_CHECK(empty_view || (lo >= 0 && hi < capacity), "as_strided", "view ", shape_str(shape), " strides ",
            shape_str(strides), " offset ", offset, " exceeds storage of ", capacity, " elements");
  Tensor t;
  t.storage_ = storage_;
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = offset;
  t.dtype_ = dtype_;
  return t;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  TFM_CHECK(defined() && src.defined(), "copy_", "undefined tensor");
  TFM_CHECK(shape_ == src.shape_, "copy_", "shape ", shape_str(src.shape_), " into ", shape_str(shape_));
  if (dtype_is_block(dtype_) || dtype_is_block(src.dtype_)) {
    copy_blocks(src);
    return;
  }
  if (dtype_ == src.dtype_) {
    kernels::copy_strided(src.raw_data(), src.strides_.data(), raw_data(), strides_.data(), shape_.data(),
                          static_cast<int>(dim()), dtype_size(dtype_));
    return;
  }
  const Tensor s = src.is_contiguous() ? src : src.clone();
  if (is_contiguous()) {
    kernels::convert(s.raw_data(), s.dtype_, raw_data(), dtype_, numel());
  } else {
    Tensor tmp = empty(shape_, dtype_);
    kernels::convert(s.raw_data(), s.dtype_, tmp.raw_data(), dtype_, numel());
    copy_(tmp);
  }
}

// Copies involving a block-quantized tensor go whole rows at a time: a block copy, a
// quantization of f32 rows or a dequantization into f32 (other float types via f32).
void Tensor::copy_blocks(const Tensor& src) {
  TFM_CHECK(is_contiguous() && src.is_contiguous(), "copy_", "a ", dtype_name(dtype_is_block(dtype_) ? dtype_ : src.dtype_),
            " copy needs contiguous tensors");
  const std::int64_t K = shape_.empty() ? 1 : shape_.back();
  const std::int64_t rows = K == 0 ? 0 : numel() / K;
  if (dtype_ == src.dtype_) {
    std::memcpy(raw_data(), src.raw_data(), nbytes());
  } else if (dtype_is_block(dtype_)) {
    const Tensor f = src.dtype_ == DType::f32 ? src : src.clone_as_f32();
    kernels::quantize_rows(dtype_, f.data<float>(), raw_data(), rows, K);
  } else if (dtype_ == DType::f32) {
    kernels::dequantize_rows(src.dtype_, src.raw_data(), data<float>(), rows, K);
  } else {
    copy_(src.clone_as_f32());
  }
}

Tensor Tensor::clone_as_f32() const {
  Tensor out = empty(shape_, DType::f32);
  out.copy_(*this);
  return out;
}

void Tensor::fill_(float value) {
  TFM_CHECK(!dtype_is_block(dtype_), "fill_", "a ", dtype_name(dtype_), " tensor has no per-element access");
  alignas(8) unsigned char elem[8];
  kernels::convert(&value, DType::f32, elem, dtype_, 1);
  const Shape zero_strides(shape_.size(), 0);  // broadcast the one element everywhere
  kernels::copy_strided(elem, zero_strides.data(), raw_data(), strides_.data(), shape_.data(),
                        static_cast<int>(dim()), dtype_size(dtype_));
}

// ---- autograd hooks ------------------------------------------------------------------

bool Tensor::requires_grad() const { return meta_ && meta_->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  TFM_CHECK(defined(), "requires_grad_", "undefined tensor");
  TFM_CHECK(!meta_ || meta_->is_leaf, "requires_grad_", "only leaf tensors can change requires_grad");
  TFM_CHECK(!on || dtype_is_float(dtype_), "requires_grad_", "a ", dtype_name(dtype_),
            " tensor cannot require gradients");
  if (!meta_) meta_ = std::make_shared<AutogradMeta>();
  meta_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return meta_ ? meta_->grad : Tensor(); }

void Tensor::zero_grad() {
  if (meta_) meta_->grad = Tensor();
}

}  // namespace tfm
