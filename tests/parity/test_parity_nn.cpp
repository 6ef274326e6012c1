// Parity with PyTorch (tools/reference/ref_nn.py) for the nn ops: forward and every input
// gradient, including strided (transposed / sliced) inputs, label smoothing and ignore_index.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

using Inputs = std::map<std::string, Tensor>;

// Loads fixture nn_<name>, marks `leaves` as requiring grad, runs fn, compares y, then
// back-propagates the fixture's w and compares grad.<leaf> for every leaf.
void check(const std::string& name, const std::vector<std::string>& leaves, const std::function<Tensor(Inputs&)>& fn,
           double rtol = 1e-5, double atol = 1e-6) {
  const SafetensorsFile f = test::load_fixture("nn_" + name);
  Inputs in;
  for (const auto& [key, t] : f.tensors) in[key] = t.clone();
  for (const auto& leaf : leaves) in[leaf].requires_grad_();
  Tensor y = fn(in);
  test::expect_close(y, in["y"], rtol, atol, name + " y");
  backward(y, in["w"]);
  for (const auto& leaf : leaves) test::expect_close(in[leaf].grad(), in["grad." + leaf], rtol, atol, name + " grad." + leaf);
}

}  // namespace

TEST(ParityNn, Softmax) {
  check("softmax_last", {"x"}, [](Inputs& in) { return softmax(in["x"]); });
  check("log_softmax_dim1", {"x"}, [](Inputs& in) { return log_softmax(in["x"], 1); });
  check("softmax_strided", {"x"}, [](Inputs& in) { return softmax(slice(transpose(in["x"], 1, 2), 1, 0, 33, 2)); });
  check("log_softmax_strided", {"x"}, [](Inputs& in) { return log_softmax(transpose(in["x"], 0, 2), 0); });
}

TEST(ParityNn, LayerNorm) {
  check("layer_norm", {"x", "weight", "bias"}, [](Inputs& in) { return layer_norm(in["x"], in["weight"], in["bias"], 1e-5f); },
        1e-5, 1e-5);
  check("layer_norm_strided", {"x", "weight", "bias"},
        [](Inputs& in) { return layer_norm(transpose(in["x"], 1, 2), in["weight"], in["bias"], 1e-5f); }, 1e-5, 1e-5);
}

TEST(ParityNn, RmsNorm) {
  check("rms_norm", {"x", "weight"}, [](Inputs& in) { return rms_norm(in["x"], in["weight"], 1e-6f); }, 1e-5, 1e-5);
  check("rms_norm_strided", {"x", "weight"}, [](Inputs& in) { return rms_norm(transpose(in["x"], 1, 2), in["weight"], 1e-6f); },
        1e-5, 1e-5);
}

TEST(ParityNn, EmbeddingWithPadding) {
  check("embedding", {"table"}, [](Inputs& in) { return embedding(in["ids"], in["table"], 2); }, 0, 0);
}

TEST(ParityNn, CrossEntropy) {
  const std::pair<const char*, LossReduction> reductions[] = {
      {"mean", LossReduction::mean}, {"sum", LossReduction::sum}, {"none", LossReduction::none}};
  for (const auto& [red_name, red] : reductions) {
    for (int eps10 : {0, 1}) {
      const std::string name = std::string("cross_entropy_") + red_name + "_" + std::to_string(eps10);
      check(name, {"logits"}, [red = red, eps10](Inputs& in) {
        return cross_entropy(in["logits"], in["targets"], -100, 0.1f * static_cast<float>(eps10), red);
      });
    }
  }
  check("cross_entropy_strided", {"logits_t"}, [](Inputs& in) {
    return cross_entropy(transpose(in["logits_t"], 0, 1), in["targets"], 3, 0.2f);
  });
}

TEST(ParityNn, CtcLoss) {
  const std::vector<std::pair<std::string, LossReduction>> reductions{
      {"mean", LossReduction::mean}, {"sum", LossReduction::sum}, {"none", LossReduction::none}};
  for (const auto& [red_name, red] : reductions)
    check("ctc_" + red_name, {"logits"}, [red = red](Inputs& in) {
      return ctc_loss(log_softmax(in["logits"], -1), in["input_lengths"], in["targets"], in["target_lengths"], 0, red, true);
    });
  check("ctc_blank_last", {"logits"}, [](Inputs& in) {
    return ctc_loss(log_softmax(in["logits"], -1), in["input_lengths"], in["targets"], in["target_lengths"], 5);
  });
}

TEST(ParityNn, ConcatAndSplit) {
  check("concat", {"a", "b"}, [](Inputs& in) {
    return concat({in["a"], transpose(in["b"], 1, 2), slice(in["a"], 1, 0, 1)}, 1);
  }, 0, 0);
  check("split", {"x"}, [](Inputs& in) {
    const std::vector<Tensor> p = split(in["x"], {2, 3, 4}, 1);
    return concat({softmax(p[0]), p[2], log_softmax(p[1], 1)}, 1);
  });
}
