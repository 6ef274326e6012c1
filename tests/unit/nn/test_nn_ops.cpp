// nn ops: finite-difference gradients, non-contiguous inputs, thread-count invariance,
// dropout mask statistics, embedding padding, cross-entropy edge cases, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor ids_tensor(const std::vector<std::int64_t>& v, const Shape& shape, DType dt = DType::i64) {
  return Tensor::from_ints(v, shape, dt);
}

// Runs fn's forward and backward (with a fixed random upstream gradient) at 1 and at 2
// threads and expects the output and every input gradient to be bitwise equal.
void expect_thread_invariant(const Fn& fn, const std::vector<Tensor>& inputs, const std::string& what) {
  const int saved = num_threads();
  std::vector<Tensor> results[2];
  for (int t = 1; t <= 2; ++t) {
    set_num_threads(t);
    std::vector<Tensor> xs;
    for (const Tensor& x : inputs) xs.push_back(x.clone().requires_grad_());
    Tensor y = fn(xs);
    backward(y, test::random_tensor(y.shape(), 99));
    auto& r = results[t - 1];
    r.push_back(y.clone());
    for (const Tensor& x : xs) r.push_back(x.grad());
  }
  set_num_threads(saved);
  for (std::size_t i = 0; i < results[0].size(); ++i)
    test::expect_bitwise_equal(results[0][i], results[1][i], what + (i == 0 ? " output" : " grad " + std::to_string(i - 1)));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// ---- gradcheck --------------------------------------------------------------------------

TEST(NnOps, GradcheckSoftmaxFamily) {
  const Tensor x = test::random_tensor({3, 4, 5}, 1, -2.0f, 2.0f);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0]); }, {x}, 1e-2, 2e-2, 1e-3,
                              "softmax last"));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], 1); }, {x}, 1e-2, 2e-2, 1e-3,
                              "softmax dim 1"));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, {x}, 1e-2, 2e-2,
                              1e-3, "log_softmax dim 0"));
  // Non-contiguous input: a transposed view.
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return log_softmax(transpose(in[0], 1, 2)); }, {x},
                              1e-2, 2e-2, 1e-3, "log_softmax of transpose"));
}

TEST(NnOps, GradcheckNorms) {
  const Tensor x = test::random_tensor({2, 3, 7}, 2, -2.0f, 2.0f);
  const Tensor w = test::random_tensor({7}, 3, 0.5f, 1.5f), b = test::random_tensor({7}, 4);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
                              {x, w, b}, 1e-2, 2e-2, 2e-3, "layer_norm"));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0]); }, {x}, 1e-2, 2e-2, 2e-3,
                              "layer_norm no affine"));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1]); }, {x, w}, 1e-2,
                              2e-2, 2e-3, "rms_norm"));
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return rms_norm(slice(in[0], 2, 0, 7, 2), slice(in[1], 0, 1, 5)); },
                              {x, w}, 1e-2, 2e-2, 2e-3, "rms_norm strided"));
}

TEST(NnOps, GradcheckEmbeddingDropoutConcatSplit) {
  const Tensor ids = ids_tensor({1, 4, 1, 0, 4, 2}, {2, 3}, DType::i32);
  const Tensor table = test::random_tensor({5, 3}, 5);
  // (No padding_idx here: that row is used forward but gets no gradient by design.)
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return embedding(ids, in[0]); }, {table}, 1e-2,
                              1e-3, 1e-4, "embedding"));
  const Tensor x = test::random_tensor({4, 9}, 6);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return dropout(in[0], 0.4f, true, 11, 5); }, {x},
                              1e-2, 1e-3, 1e-4, "dropout"));
  const Tensor a = test::random_tensor({2, 3}, 7), c = test::random_tensor({4, 2}, 8);
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& in) { return concat({in[0], transpose(in[1], 0, 1)}, 1); },
                              {a, c}, 1e-2, 1e-3, 1e-4, "concat"));
  EXPECT_TRUE(test::gradcheck(
      [](const std::vector<Tensor>& in) {
        auto parts = split(in[0], {1, 3, 5}, 1);
        return concat({parts[2], parts[0]}, 1);
      },
      {x}, 1e-2, 1e-3, 1e-4, "split"));
}

TEST(NnOps, GradcheckCrossEntropy) {
  const Tensor logits = test::random_tensor({5, 7}, 9, -2.0f, 2.0f);
  const Tensor t = ids_tensor({3, -100, 0, 6, 2}, {5});
  for (float eps : {0.0f, 0.2f}) {
    for (LossReduction red : {LossReduction::mean, LossReduction::sum, LossReduction::none}) {
      EXPECT_TRUE(test::gradcheck(
          [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, -100, eps, red); }, {logits}, 1e-2, 2e-2,
          1e-3, "cross_entropy eps=" + std::to_string(eps) + " red=" + std::to_string(static_cast<int>(red))));
    }
  }
  // (B, T, V) logits with a transposed (non-contiguous) view.
  const Tensor l3 = test::random_tensor({3, 2, 4}, 10);
  const Tensor t3 = ids_tensor({1, 3, 0, 2, 2, 1}, {2, 3});
  EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(transpose(in[0], 0, 1), t3); },
                              {l3}, 1e-2, 2e-2, 1e-3, "cross_entropy 3-d transposed"));
}

TEST(NnOps, GradcheckCtcLoss) {
  // Through log_softmax, as training uses it; a repeated label, an empty target, a short row.
  const Tensor logits = test::random_tensor({3, 6, 4}, 11, -2.0f, 2.0f);
  const Tensor targets = ids_tensor({1, 1, 2, 3, 0, 0, 0, 0, 0}, {3, 3});
  const Tensor in_len = ids_tensor({6, 4, 5}, {3}), tgt_len = ids_tensor({3, 1, 0}, {3});
  for (LossReduction red : {LossReduction::mean, LossReduction::sum, LossReduction::none})
    EXPECT_TRUE(test::gradcheck(
        [&](const std::vector<Tensor>& in) { return ctc_loss(log_softmax(in[0], -1), in_len, targets, tgt_len, 0, red); },
        {logits}, 1e-2, 2e-2, 1e-3, "ctc_loss red=" + std::to_string(static_cast<int>(red))));
  // With the blank last and every label the same: alignments must put blanks between them.
  const Tensor same = ids_tensor({2, 2, 2, 2, 2, 2, 2, 2, 2}, {3, 3});
  EXPECT_TRUE(test::gradcheck(
      [&](const std::vector<Tensor>& in) { return ctc_loss(log_softmax(in[0], -1), in_len, same, tgt_len, 3); }, {logits},
      1e-2, 2e-2, 1e-3, "ctc_loss repeated labels"));
}

TEST(NnOps, CtcLossOfAFullyDeterminedAlignment) {
  // Two frames and two different labels: the only alignment is (a, b), so the loss is
  // -(log p0[a] + log p1[b]); one frame too few makes it impossible (inf, or 0 with zero_infinity).
  const Tensor lp = log_softmax(test::random_tensor({1, 2, 3}, 5), -1);
  const Tensor y = ids_tensor({1, 2}, {1, 2}), two = ids_tensor({2}, {1}), one = ids_tensor({1}, {1});
  const float expected = -(lp.data<float>()[1] + lp.data<float>()[5]);
  EXPECT_NEAR(ctc_loss(lp, two, y, two, 0, LossReduction::sum).item(), expected, 1e-5);
  EXPECT_TRUE(std::isinf(ctc_loss(lp, one, y, two, 0, LossReduction::sum).item()));
  Tensor x = lp.clone().requires_grad_();
  Tensor loss = ctc_loss(x, one, y, two, 0, LossReduction::mean, true);
  EXPECT_EQ(loss.item(), 0.0f);
  backward(loss);
  for (float g : x.grad().to_floats()) EXPECT_EQ(g, 0.0f);
}

// ---- values -----------------------------------------------------------------------------

TEST(NnOps, SoftmaxOfNonContiguousViewEqualsSoftmaxOfCopy) {
  const Tensor x = test::random_tensor({6, 5, 4}, 12, -3.0f, 3.0f);
  const Tensor v = slice(transpose(x, 0, 2), 1, 0, 5, 2);  // (4, 3, 6), strided
  test::expect_bitwise_equal(softmax(v, 1), softmax(v.clone(), 1), "softmax(view) vs softmax(copy)");
  test::expect_bitwise_equal(layer_norm(v), layer_norm(v.clone()), "layer_norm(view) vs layer_norm(copy)");
  // Rows sum to one.
  const std::vector<float> p = softmax(x).to_floats();
  for (std::size_t r = 0; r < p.size() / 4; ++r) {
    double s = 0;
    for (std::size_t c = 0; c < 4; ++c) s += p[r * 4 + c];
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
}

TEST(NnOps, DropoutMaskStatisticsAndScaling) {
  const std::int64_t n = 200000;
  const Tensor x = Tensor::full({n}, 2.0f);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    const std::vector<float> y = dropout(x, p, true, 1234, 0).to_floats();
    std::int64_t zeros = 0;
    for (float v : y) {
      if (v == 0.0f) ++zeros;
      else EXPECT_EQ(v, 2.0f * (1.0f / (1.0f - p)));
    }
    const double frac = static_cast<double>(zeros) / n, sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(frac, p, 5 * sigma) << "p=" << p;
  }
  // Different seeds / offsets give different masks; offset shifts the stream.
  const std::vector<float> a = dropout(x, 0.5f, true, 1, 0).to_floats(), b = dropout(x, 0.5f, true, 2, 0).to_floats();
  EXPECT_NE(a, b);
  const std::vector<float> shifted = dropout(slice(x, 0, 0, n - 10), 0.5f, true, 1, 10).to_floats();
  EXPECT_TRUE(std::equal(shifted.begin(), shifted.end(), a.begin() + 10));
  // Identity cases return the input itself.
  EXPECT_EQ(dropout(x, 0.5f, false, 1).storage(), x.storage());
  EXPECT_EQ(dropout(x, 0.0f, true, 1).storage(), x.storage());
  for (float v : dropout(x, 1.0f, true, 1).to_floats()) EXPECT_EQ(v, 0.0f);
}

TEST(NnOps, DropoutBackwardUsesTheForwardMask) {
  Tensor x = test::random_tensor({37, 41}, 13, 0.5f, 1.0f).requires_grad_();  // no zeros in x
  Tensor y = dropout(transpose(x, 0, 1), 0.3f, true, 55, 7);
  const Tensor g = test::random_tensor(y.shape(), 14);
  backward(y, g);
  const std::vector<float> yv = y.to_floats(), gv = g.to_floats();
  const std::vector<float> dx = transpose(x.grad(), 0, 1).to_floats();  // in y's layout
  for (std::size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(dx[i], yv[i] == 0.0f ? 0.0f : gv[i] * (1.0f / 0.7f)) << i;
}

TEST(NnOps, EmbeddingForwardAndPadding) {
  const Tensor table = test::random_tensor({6, 4}, 15).requires_grad_();
  const Tensor ids = ids_tensor({5, 0, 2, 2, 5, 1}, {3, 2}, DType::i32);
  Tensor e = embedding(ids, table, -1);  // padding_idx -1 == row 5
  ASSERT_EQ(e.shape(), (Shape{3, 2, 4}));
  const std::vector<float> tv = table.to_floats(), ev = e.to_floats();
  const std::vector<std::int64_t> iv = ids.to_ints();
  for (std::size_t i = 0; i < iv.size(); ++i)
    for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(ev[i * 4 + c], tv[static_cast<std::size_t>(iv[i]) * 4 + c]);
  backward(e);
  const std::vector<float> gt = table.grad().to_floats();
  const float want_rows[6] = {1, 1, 2, 0, 0, 0};  // row 5 is padding: no gradient
  for (std::size_t v = 0; v < 6; ++v)
    for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(gt[v * 4 + c], want_rows[v]) << v;
}

TEST(NnOps, CrossEntropyIgnoredRowsAndAllIgnored) {
  Tensor logits = test::random_tensor({3, 5}, 16).requires_grad_();
  const Tensor t = ids_tensor({-1, 2, -1}, {3});
  Tensor none = cross_entropy(logits, t, -1, 0.1f, LossReduction::none);
  const std::vector<float> lv = none.to_floats();
  EXPECT_EQ(lv[0], 0.0f);
  EXPECT_EQ(lv[2], 0.0f);
  // mean == the one valid row's loss (denominator counts valid targets only).
  EXPECT_FLOAT_EQ(cross_entropy(logits, t, -1, 0.1f).item(), lv[1]);
  backward(cross_entropy(logits, t, -1, 0.1f));
  const std::vector<float> g = logits.grad().to_floats();
  for (std::size_t c = 0; c < 5; ++c) {
    EXPECT_EQ(g[c], 0.0f);
    EXPECT_EQ(g[10 + c], 0.0f);
  }
  EXPECT_TRUE(std::isnan(cross_entropy(logits, ids_tensor({-1, -1, -1}, {3}), -1).item()));
}

// ---- thread-count invariance --------------------------------------------------------------

TEST(NnOps, ThreadCountInvariance) {
  const Tensor x = test::random_tensor({300, 257}, 17, -3.0f, 3.0f);
  const Tensor w = test::random_tensor({257}, 18, 0.5f, 1.5f), b = test::random_tensor({257}, 19);
  expect_thread_invariant([](const std::vector<Tensor>& in) { return softmax(in[0]); }, {x}, "softmax");
  expect_thread_invariant([](const std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, {x}, "log_softmax dim 0");
  expect_thread_invariant([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b},
                          "layer_norm");
  expect_thread_invariant([](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1]); }, {x, w}, "rms_norm");
  expect_thread_invariant([](const std::vector<Tensor>& in) { return dropout(in[0], 0.25f, true, 3, 1); }, {x},
                          "dropout");
  std::vector<std::int64_t> tv(300);
  for (std::size_t i = 0; i < tv.size(); ++i) tv[i] = i % 7 == 0 ? -100 : static_cast<std::int64_t>((i * 31) % 257);
  const Tensor t = ids_tensor(tv, {300});
  expect_thread_invariant([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, -100, 0.1f); }, {x},
                          "cross_entropy");
  std::vector<std::int64_t> iv(4000);
  for (std::size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<std::int64_t>((i * i + 3 * i) % 1000);
  const Tensor ids = ids_tensor(iv, {40, 100});
  expect_thread_invariant([&](const std::vector<Tensor>& in) { return embedding(ids, in[0]); },
                          {test::random_tensor({1000, 64}, 20)}, "embedding");
}

// ---- errors -------------------------------------------------------------------------------

TEST(NnOps, ErrorsNameTheOpAndTheValues) {
  const Tensor table = Tensor::zeros({10, 4});
  const std::string e1 = error_of([&] { embedding(ids_tensor({1, 2, 3, 12}, {2, 2}), table); });
  EXPECT_NE(e1.find("[embedding]"), std::string::npos) << e1;
  EXPECT_NE(e1.find("id 12"), std::string::npos) << e1;
  EXPECT_NE(e1.find("position 3 (1,1)"), std::string::npos) << e1;
  EXPECT_NE(e1.find("vocab size 10"), std::string::npos) << e1;
  EXPECT_NE(error_of([&] { embedding(ids_tensor({-1}, {1}), table); }).find("id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { embedding(Tensor::zeros({2}), table); }).find("i32 or i64"), std::string::npos);
  EXPECT_NE(error_of([&] { embedding(ids_tensor({0}, {1}), table, 10); }).find("padding_idx 10"), std::string::npos);

  const std::string e2 = error_of([] { cross_entropy(Tensor::zeros({2, 5}), ids_tensor({1, 5}, {2})); });
  EXPECT_NE(e2.find("[cross_entropy] target 5 at position 1"), std::string::npos) << e2;
  EXPECT_NE(e2.find("5 classes"), std::string::npos) << e2;
  EXPECT_NE(error_of([] { cross_entropy(Tensor::zeros({2, 5}), ids_tensor({1}, {1})); }).find("must have shape (2)"),
            std::string::npos);
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 5}), ids_tensor({1, 1}, {2}), -100, 1.5f), Error);

  const std::string e3 = error_of([] { layer_norm(Tensor::zeros({2, 5}), Tensor::ones({4})); });
  EXPECT_NE(e3.find("[layer_norm] weight has shape (4), expected (5)"), std::string::npos) << e3;
  EXPECT_NE(error_of([] { rms_norm(Tensor::zeros({2, 5}, DType::bf16)); }).find("must be f32, got bf16"),
            std::string::npos);
  EXPECT_NE(error_of([] { softmax(Tensor::zeros({2, 5}), 2); }).find("[softmax] dim 2 out of range"), std::string::npos);
  EXPECT_NE(error_of([] { dropout(Tensor::zeros({2}), 1.5f, true, 0); }).find("[dropout] p must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([] { concat({Tensor::zeros({2, 3}), Tensor::zeros({3, 3})}, 1); }).find("differ in dim 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { concat({Tensor::zeros({2, 3}), Tensor::zeros({2, 3}, DType::bf16)}, 0); }).find("bf16"),
            std::string::npos);
  EXPECT_NE(error_of([] { split(Tensor::zeros({2, 5}), {2, 2}, 1); }).find("sizes add up to 4"), std::string::npos);

  const Tensor lp = Tensor::zeros({2, 4, 5}), lens = ids_tensor({4, 4}, {2}), tl = ids_tensor({2, 1}, {2});
  const std::string e4 = error_of([&] { ctc_loss(lp, lens, ids_tensor({1, 2, 0, 9}, {2, 2}), tl); });
  EXPECT_NE(e4.find("[ctc_loss] targets[1, 0] = 0"), std::string::npos) << e4;  // 0 is the blank; 9 is padding
  EXPECT_NE(e4.find("other than the blank 0"), std::string::npos) << e4;
  EXPECT_NE(error_of([&] { ctc_loss(lp, ids_tensor({4, 5}, {2}), ids_tensor({1, 2, 3, 4}, {2, 2}), tl); })
                .find("input_lengths[1] = 5 is outside [0, 4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ctc_loss(lp, lens, ids_tensor({1, 2, 3, 4}, {2, 2}), ids_tensor({2, 3}, {2})); })
                .find("target_lengths[1] = 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ctc_loss(Tensor::zeros({4, 5}), lens, tl, tl); }).find("(batch, frames, classes)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ctc_loss(lp, lens, ids_tensor({1, 2, 3, 4}, {2, 2}), tl, 5); }).find("blank 5 is out of range"),
            std::string::npos);
}
