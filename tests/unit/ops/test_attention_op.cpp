// scaled_dot_product_attention as an op: finite-difference gradients, thread-count
// invariance, strided views, the captured weights, fully masked rows, dropout and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

struct ThreadGuard {
  int saved = num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

AttentionOptions all_masks(std::int64_t B, std::int64_t Hq, std::int64_t Tq, float dropout) {
  AttentionOptions o;
  o.causal = true;
  o.window = 3;
  std::vector<std::int64_t> lens;
  for (std::int64_t i = 0; i < B * Tq; ++i) lens.push_back(i % 3 == 1 ? 1 : 4);
  o.valid_lens = Tensor::from_ints(lens, {B, Tq});
  o.alibi_slopes = alibi_slopes(Hq);
  o.dropout_p = dropout;
  o.dropout_seed = 11;
  return o;
}

}  // namespace

TEST(AttentionOp, GradcheckBothPaths) {
  // Tiny GQA case with every mask, a learned bias broadcast over the batch and dropout.
  const std::int64_t B = 2, Hq = 2, Hkv = 1, Tq = 3, Tk = 4, D = 4;
  for (bool flash : {true, false}) {
    for (float dropout : {0.0f, 0.4f}) {
      auto fn = [&](const std::vector<Tensor>& in) {
        AttentionOptions o = all_masks(B, Hq, Tq, dropout);
        o.bias = in[3];
        o.use_flash = flash;
        return scaled_dot_product_attention(in[0], in[1], in[2], o);
      };
      EXPECT_TRUE(test::gradcheck(fn,
                                  {test::random_tensor({B, Hq, Tq, D}, 1), test::random_tensor({B, Hkv, Tk, D}, 2),
                                   test::random_tensor({B, Hkv, Tk, D}, 3), test::random_tensor({Hq, Tq, Tk}, 4)},
                                  1e-2, 2e-2, 2e-3, std::string(flash ? "flash" : "plain") + " dropout " +
                                  std::to_string(dropout)));
    }
  }
  // No masks at all, plain softmax attention.
  auto plain = [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); };
  EXPECT_TRUE(test::gradcheck(plain, {test::random_tensor({1, 2, 5, 3}, 5), test::random_tensor({1, 2, 6, 3}, 6),
                                      test::random_tensor({1, 2, 6, 3}, 7)}));
}

TEST(AttentionOp, ResultsIdenticalAcrossThreadCounts) {
  ThreadGuard guard;
  const std::int64_t B = 2, Hq = 4, Hkv = 2, Tq = 130, Tk = 150, D = 32;
  const Tensor q0 = test::random_tensor({B, Hq, Tq, D}, 1), k0 = test::random_tensor({B, Hkv, Tk, D}, 2),
               v0 = test::random_tensor({B, Hkv, Tk, D}, 3), b0 = test::random_tensor({Hq, Tq, Tk}, 4),
               w = test::random_tensor({B, Hq, Tq, D}, 5);
  for (bool flash : {true, false}) {
    std::vector<Tensor> results[2];
    for (int t : {1, 2}) {
      set_num_threads(t);
      Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_(),
             bias = b0.clone().requires_grad_();
      AttentionOptions o;
      o.causal = true;
      o.bias = bias;
      o.dropout_p = 0.1f;
      o.dropout_seed = 3;
      o.use_flash = flash;
      Tensor out = scaled_dot_product_attention(q, k, v, o);
      backward(out, w);
      results[t - 1] = {out, q.grad(), k.grad(), v.grad(), bias.grad()};
    }
    const char* names[] = {"out", "dq", "dk", "dv", "dbias"};
    for (std::size_t i = 0; i < 5; ++i)
      test::expect_bitwise_equal(results[0][i], results[1][i], std::string(flash ? "flash " : "plain ") + names[i]);
  }
}

TEST(AttentionOp, StridedViewsGiveTheSameResultAndGradients) {
  // The usual layout: a (B, T, H, D) projection viewed as (B, H, T, D) by a transpose (no
  // copy), k as a strided slice, and v with a non-unit stride along D (copied inside).
  const std::int64_t B = 2, H = 3, T = 20, D = 8;
  const Tensor xq = test::random_tensor({B, T, H, D}, 1), xk = test::random_tensor({B, H, 2 * T, D}, 2),
               xv = test::random_tensor({B, H, D, T}, 3), w = test::random_tensor({B, H, T, D}, 4);
  for (bool flash : {true, false}) {
    AttentionOptions o;
    o.causal = true;
    o.use_flash = flash;
    Tensor aq = xq.clone().requires_grad_(), ak = xk.clone().requires_grad_(), av = xv.clone().requires_grad_();
    Tensor out = scaled_dot_product_attention(transpose(aq, 1, 2), slice(ak, 2, 0, 2 * T, 2), transpose(av, 2, 3), o);
    backward(out, w);
    // The same values, made contiguous up front.
    Tensor cq = contiguous(transpose(xq, 1, 2)).clone().requires_grad_();
    Tensor ck = contiguous(slice(xk, 2, 0, 2 * T, 2)).clone().requires_grad_();
    Tensor cv = contiguous(transpose(xv, 2, 3)).clone().requires_grad_();
    Tensor want = scaled_dot_product_attention(cq, ck, cv, o);
    backward(want, w);
    test::expect_bitwise_equal(out, want, "out");
    test::expect_bitwise_equal(contiguous(transpose(aq.grad(), 1, 2)), cq.grad(), "dq");
    test::expect_bitwise_equal(contiguous(slice(ak.grad(), 2, 0, 2 * T, 2)), ck.grad(), "dk");
    for (float g : slice(ak.grad(), 2, 1, 2 * T, 2).to_floats()) ASSERT_EQ(g, 0.0f);  // rows not read
    test::expect_bitwise_equal(contiguous(transpose(av.grad(), 2, 3)), cv.grad(), "dv");
  }
}

TEST(AttentionOp, CapturedWeightsAreTheSoftmaxRows) {
  const std::int64_t B = 2, H = 2, Tq = 5, Tk = 7, D = 4;
  const Tensor q = test::random_tensor({B, H, Tq, D}, 1), k = test::random_tensor({B, H, Tk, D}, 2),
               v = test::random_tensor({B, H, Tk, D}, 3);
  AttentionOptions o;
  o.valid_lens = Tensor::from_ints({0, 4}, {B});  // batch 0: every row fully masked
  const AttentionWithWeights r = scaled_dot_product_attention_with_weights(q, k, v, o);
  ASSERT_EQ(r.weights.shape(), (Shape{B, H, Tq, Tk}));
  const std::vector<float> a = r.weights.to_floats(), out = r.out.to_floats(), vv = v.to_floats(),
                           qq = q.to_floats(), kk = k.to_floats();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Tq; ++i) {
        const std::size_t row = static_cast<std::size_t>(((b * H + h) * Tq + i) * Tk);
        // Expected weights from the definition, in double.
        std::vector<double> s(static_cast<std::size_t>(Tk));
        double mx = -1e300, sum = 0;
        for (std::int64_t j = 0; j < 4; ++j) {
          double d = 0;
          for (std::int64_t c = 0; c < D; ++c)
            d += static_cast<double>(qq[static_cast<std::size_t>(((b * H + h) * Tq + i) * D + c)]) *
                 kk[static_cast<std::size_t>(((b * H + h) * Tk + j) * D + c)];
          s[static_cast<std::size_t>(j)] = d / 2.0;  // scale 1/sqrt(4)
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        for (std::int64_t j = 0; j < 4; ++j) sum += std::exp(s[static_cast<std::size_t>(j)] - mx);
        for (std::int64_t j = 0; j < Tk; ++j) {
          const double want = b == 0 || j >= 4 ? 0.0 : std::exp(s[static_cast<std::size_t>(j)] - mx) / sum;
          EXPECT_NEAR(a[row + static_cast<std::size_t>(j)], want, 1e-6);
        }
        for (std::int64_t c = 0; c < D; ++c) {
          double want = 0;
          for (std::int64_t j = 0; j < Tk; ++j)
            want += a[row + static_cast<std::size_t>(j)] * vv[static_cast<std::size_t>(((b * H + h) * Tk + j) * D + c)];
          EXPECT_NEAR(out[static_cast<std::size_t>(((b * H + h) * Tq + i) * D + c)], want, 1e-5);
        }
      }
}

TEST(AttentionOp, FullyMaskedRowsGiveZerosAndZeroGradients) {
  // Tq > Tk with causal alignment to the end: the first Tq - Tk queries see no key; valid
  // length 0 hides everything; a -inf bias row does too.
  const std::int64_t B = 2, H = 2, Tq = 6, Tk = 3, D = 4;
  std::vector<float> bias(static_cast<std::size_t>(Tq * Tk), 0.5f);
  for (std::int64_t j = 0; j < Tk; ++j) bias[static_cast<std::size_t>(5 * Tk + j)] = -INFINITY;  // row 5
  for (bool flash : {true, false}) {
    Tensor q = test::random_tensor({B, H, Tq, D}, 1).requires_grad_(), k = test::random_tensor({B, H, Tk, D}, 2).requires_grad_(),
           v = test::random_tensor({B, H, Tk, D}, 3).requires_grad_();
    AttentionOptions o;
    o.causal = true;
    o.valid_lens = Tensor::from_ints({0, 3}, {B});
    o.bias = Tensor::from_floats(bias, {Tq, Tk});
    o.use_flash = flash;
    Tensor out = scaled_dot_product_attention(q, k, v, o);
    backward(out, test::random_tensor(out.shape(), 9));
    const std::vector<float> y = out.to_floats(), gq = q.grad().to_floats();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < Tq; ++i) {
          const bool masked = b == 0 || i < Tq - Tk || i == 5;
          for (std::int64_t c = 0; c < D; ++c) {
            const std::size_t at = static_cast<std::size_t>(((b * H + h) * Tq + i) * D + c);
            ASSERT_FALSE(std::isnan(y[at]) || std::isnan(gq[at]));
            if (masked) {
              EXPECT_EQ(y[at], 0.0f);
              EXPECT_EQ(gq[at], 0.0f);
            }
          }
        }
    for (float g : k.grad().to_floats()) ASSERT_FALSE(std::isnan(g));
    for (float g : slice(k.grad(), 0, 0, 1).to_floats()) EXPECT_EQ(g, 0.0f);  // batch 0 sees nothing
  }
}

TEST(AttentionOp, DropoutIsSeededAndScalesKeptWeights) {
  const Tensor q = Tensor::zeros({1, 1, 4, 8}), k = test::random_tensor({1, 1, 64, 8}, 2),
               v = Tensor::ones({1, 1, 64, 8});
  AttentionOptions o;
  o.dropout_p = 0.5f;
  o.dropout_seed = 1;
  const Tensor a = scaled_dot_product_attention(q, k, v, o);
  test::expect_bitwise_equal(a, scaled_dot_product_attention(q, k, v, o), "same seed");
  // q = 0: uniform weights 1/64; v = 1: out = (kept count) * 2 / 64 per row, never 1 exactly
  // for all rows unless nothing is dropped.
  const std::vector<float> y = a.to_floats();
  bool any_changed = false;
  for (float x : y) {
    const float kept = x * 64.0f / 2.0f;
    EXPECT_NEAR(kept, std::round(kept), 1e-4);
    any_changed |= std::fabs(x - 1.0f) > 1e-3f;
  }
  EXPECT_TRUE(any_changed);
  o.dropout_seed = 2;
  EXPECT_NE(scaled_dot_product_attention(q, k, v, o).to_floats(), y);
}

TEST(AttentionOp, BadInputsAreErrors) {
  const Tensor q = Tensor::zeros({2, 4, 5, 8}), k = Tensor::zeros({2, 2, 6, 8}), v = Tensor::zeros({2, 2, 6, 8});
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one mentioning " << needle;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("scaled_dot_product_attention"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  };
  auto sdpa = [&](const Tensor& a, const Tensor& b, const Tensor& c, const AttentionOptions& o) {
    return [=] { scaled_dot_product_attention(a, b, c, o); };
  };
  expect_error(sdpa(Tensor::zeros({4, 5, 8}), k, v, {}), "(B, H, T, D)");
  expect_error(sdpa(q, Tensor::zeros({2, 3, 6, 8}), Tensor::zeros({2, 3, 6, 8}), {}), "multiple of kv heads");
  expect_error(sdpa(q, k, Tensor::zeros({2, 2, 7, 8}), {}), "same shape");
  expect_error(sdpa(q, Tensor::zeros({3, 2, 6, 8}), Tensor::zeros({3, 2, 6, 8}), {}), "batch");
  expect_error(sdpa(q, Tensor::zeros({2, 2, 6, 4}), Tensor::zeros({2, 2, 6, 4}), {}), "head dim");
  expect_error(sdpa(Tensor::zeros({2, 4, 5, 8}, DType::bf16), k, v, {}), "f32");
  AttentionOptions o;
  o.valid_lens = Tensor::from_ints({1, 2, 3}, {3});
  expect_error(sdpa(q, k, v, o), "valid_lens");
  o = {};
  o.valid_lens = Tensor::from_ints({1, -2}, {2});
  expect_error(sdpa(q, k, v, o), "valid_lens");
  o = {};
  o.bias = Tensor::zeros({4, 5, 7});
  expect_error(sdpa(q, k, v, o), "broadcast");
  o = {};
  o.alibi_slopes = Tensor::zeros({2});
  expect_error(sdpa(q, k, v, o), "alibi_slopes");
  o = {};
  o.dropout_p = 1.0f;
  expect_error(sdpa(q, k, v, o), "dropout_p");
  o = {};
  o.window = -1;
  expect_error(sdpa(q, k, v, o), "window");
}

TEST(AttentionOp, EmptyKeysOrQueries) {
  for (bool flash : {true, false}) {
    AttentionOptions o;
    o.use_flash = flash;
    Tensor q = test::random_tensor({1, 2, 3, 4}, 1).requires_grad_();
    Tensor k = Tensor::zeros({1, 1, 0, 4}).requires_grad_(), v = Tensor::zeros({1, 1, 0, 4}).requires_grad_();
    Tensor out = scaled_dot_product_attention(q, k, v, o);  // no key to attend to: zeros
    backward(out, test::random_tensor(out.shape(), 2));
    for (float x : out.to_floats()) EXPECT_EQ(x, 0.0f);
    for (float g : q.grad().to_floats()) EXPECT_EQ(g, 0.0f);
    EXPECT_EQ(scaled_dot_product_attention(Tensor::zeros({1, 2, 0, 4}), test::random_tensor({1, 1, 5, 4}, 3),
                                           test::random_tensor({1, 1, 5, 4}, 4), o).shape(),
              (Shape{1, 2, 0, 4}));
  }
}
