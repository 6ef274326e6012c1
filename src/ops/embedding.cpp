// embedding: row gather with a deterministic scatter-add backward.
#include <memory>

#include "kernels/embedding.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {

Tensor embedding(const Tensor& ids, const Tensor& table_in, std::optional<std::int64_t> padding_idx) {
  nn_util::check_f32(table_in, "embedding", "table");
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
