// Parity with PyTorch for a chain of views (expand, permute, strided slice, reshape).
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

TEST(ParityShape, ViewChainForwardAndGradient) {
  const SafetensorsFile f = test::load_fixture("shape_views");
  Tensor x = test::fixture_tensor(f, "x").requires_grad_();
  Tensor y = reshape(contiguous(slice(slice(permute(expand(x, {4, 3, 6, 5}), {3, 1, 0, 2}), 0, 1, 5, 2), 2, 1, 4)),
                     {2, 3, -1});
  test::expect_close(y, test::fixture_tensor(f, "y"), 0, 0, "y");
  backward(y, test::fixture_tensor(f, "w"));
  test::expect_close(x.grad(), test::fixture_tensor(f, "grad.x"), 1e-6, 1e-6, "grad.x");
}
