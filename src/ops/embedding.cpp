// embedding: row gather with a deterministic scatter-add backward.
#include <memory>

#include "kernels/embedding.h"
#include "kernels/qgemm.h"
#include "kernels/quant_repack.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {

namespace {
// A table in a compact type (bf16, f16, q8_0, ...): each looked-up row dequantized to f32.
// Inference only.
Tensor embedding_compact(const Tensor& ids, const Tensor& table, const std::vector<std::int64_t>& idx) {
  TFM_CHECK(table.is_contiguous(), "embedding", "a ", dtype_name(table.dtype()), " table must be contiguous");
  const std::int64_t C = table.size(1);
  Shape shape = ids.shape();
  shape.push_back(C);
  Tensor out = Tensor::empty(shape);  // (..., C)
  const std::size_t row_bytes = dtype_row_bytes(table.dtype(), C);
  const auto* base = static_cast<const unsigned char*>(table.raw_data());
  float* o = out.data<float>();
  for (std::size_t i = 0; i < idx.size(); ++i) {
    float* dst = o + static_cast<std::int64_t>(i) * C;
    if (kernels::dtype_is_x16(table.dtype()))  // a tied LM head repacked for decoding: rows interleaved in groups
      kernels::dequantize_x16_row(table.dtype(), base, table.size(0), idx[i], C, dst);
    else
      kernels::dequantize_rows(table.dtype(), base + static_cast<std::size_t>(idx[i]) * row_bytes, dst, 1, C);
  }
  return out;
}
}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& table_in, std::optional<std::int64_t> padding_idx) {
  TFM_CHECK(table_in.defined(), "embedding", "table is undefined");
  const bool compact = table_in.dtype() == DType::bf16 || table_in.dtype() == DType::f16 || dtype_is_block(table_in.dtype());
  if (!compact) nn_util::check_f32(table_in, "embedding", "table");
  TFM_CHECK(table_in.dim() == 2, "embedding", "table must be (V, C), got ", shape_str(table_in.shape()));
  const std::int64_t V = table_in.size(0), C = table_in.size(1);
  auto idx = std::make_shared<std::vector<std::int64_t>>(nn_util::index_values(ids, "embedding", "ids"));  // (n)
  for (std::size_t i = 0; i < idx->size(); ++i) {
    const std::int64_t id = (*idx)[i];
    TFM_CHECK(id >= 0 && id < V, "embedding", "id ", id, " at position ", i, " ",
              nn_util::position_str(static_cast<std::int64_t>(i), ids.shape()), " of ids ", shape_str(ids.shape()),
              " is out of range for vocab size ", V);
  }
  std::int64_t pad = -1;
  if (padding_idx) {
    pad = *padding_idx < 0 ? *padding_idx + V : *padding_idx;
    TFM_CHECK(pad >= 0 && pad < V, "embedding", "padding_idx ", *padding_idx, " out of range for vocab size ", V);
  }
  if (compact) {
    TFM_CHECK(!autograd::needs_grad({&table_in}), "embedding", "a ", dtype_name(table_in.dtype()),
              " table is for inference only");
    return embedding_compact(ids, table_in, *idx);
  }
  const Tensor table = contiguous(table_in);
  Shape shape = ids.shape();
  shape.push_back(C);
  Tensor out = Tensor::empty(shape);  // (..., C)
  const std::int64_t n = static_cast<std::int64_t>(idx->size());
  kernels::embedding_forward(idx->data(), table.data<float>(), out.data<float>(), n, C);
  if (autograd::needs_grad({&table})) {
    autograd::record("embedding", out, [table, idx, pad, n, V, C](const Tensor& g) {
      Tensor dtable = Tensor::empty({V, C});
      kernels::embedding_backward(idx->data(), g.data<float>(), dtable.data<float>(), n, V, C, pad);
      autograd::accumulate(table, dtable);
    });
  }
  return out;
}

}  // namespace tfm
