// Parity with PyTorch (tools/reference/ref_math.py) for the arithmetic, activation,
// reduction and masking ops: forward values and the gradients of sum(op(x) * w).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = test::load_fixture("math_ops");
  return f;
}

using Inputs = std::map<std::string, Tensor>;

// Loads <name>.<input> for each input (f32 ones become leaves), runs fn, compares y and the
// gradient of every f32 input.
void check_case(const std::string& name, const std::vector<std::string>& inputs,
                const std::function<Tensor(Inputs&)>& fn, double rtol = 1e-5, double atol = 1e-6) {
  SCOPED_TRACE(name);
  Inputs in;
  for (const auto& k : inputs) {
    in[k] = test::fixture_tensor(fixture(), name + "." + k);
    if (in[k].dtype() == DType::f32) in[k].requires_grad_();
  }
  Tensor y = fn(in);
  test::expect_close(y, test::fixture_tensor(fixture(), name + ".y"), rtol, atol, name + ".y");
  backward(y, test::fixture_tensor(fixture(), name + ".w"));
  for (const auto& k : inputs) {
    if (in[k].dtype() != DType::f32) continue;
    test::expect_close(in[k].grad(), test::fixture_tensor(fixture(), name + ".grad." + k), rtol, atol,
                       name + ".grad." + k);
  }
}

}  // namespace

TEST(ParityMath, BinaryBroadcasting) {
  for (const std::string s : {"btc_c", "b1c_1t1", "same"}) {
    check_case("add." + s, {"a", "b"}, [](Inputs& i) { return i["a"] + i["b"]; });
    check_case("sub." + s, {"a", "b"}, [](Inputs& i) { return i["a"] - i["b"]; });
    check_case("mul." + s, {"a", "b"}, [](Inputs& i) { return i["a"] * i["b"]; });
    check_case("div." + s, {"a", "b"}, [](Inputs& i) { return i["a"] / i["b"]; });
  }
}

TEST(ParityMath, BinaryNonContiguousOperand) {
  check_case("mul.transposed", {"a", "b"}, [](Inputs& i) { return transpose(i["a"], 0, 1) * i["b"]; });
}

TEST(ParityMath, UnaryAndActivations) {
  const std::map<std::string, std::function<Tensor(const Tensor&)>> ops = {
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApprox::tanh); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }},
      {"pow2", [](const Tensor& x) { return pow(x, 2.0f); }},
      {"pow1.5", [](const Tensor& x) { return pow(x, 1.5f); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"neg", [](const Tensor& x) { return -x; }},
      {"add_scalar", [](const Tensor& x) { return x + 0.75f; }},
      {"mul_scalar", [](const Tensor& x) { return x * -1.25f; }},
      {"div_scalar", [](const Tensor& x) { return x / 3.0f; }},
  };
  for (const auto& [name, op] : ops) {
    check_case("unary." + name, {"x"}, [&op = op](Inputs& i) { return op(i["x"]); });
    // The same op on a transposed (non-contiguous) view.
    check_case("unary_t." + name, {"x"}, [&op = op](Inputs& i) { return op(transpose(i["x"], 0, 1)); });
  }
}

TEST(ParityMath, Reductions) {
  const std::map<std::string, std::function<Tensor(const Tensor&)>> ops = {
      {"sum1", [](const Tensor& x) { return sum(x, 1); }},
      {"sum_last_keep", [](const Tensor& x) { return sum(x, -1, true); }},
      {"mean0", [](const Tensor& x) { return mean(x, 0); }},
      {"mean2_keep", [](const Tensor& x) { return mean(x, 2, true); }},
      {"max1", [](const Tensor& x) { return max(x, 1); }},
      {"max2_keep", [](const Tensor& x) { return max(x, 2, true); }},
      {"sum_all", [](const Tensor& x) { return sum(x); }},
      {"mean_all", [](const Tensor& x) { return mean(x); }},
      {"max_all", [](const Tensor& x) { return max(x); }},
      {"sum_t", [](const Tensor& x) { return sum(transpose(x, 0, 2), 1); }},
  };
  for (const auto& [name, op] : ops) check_case("reduce." + name, {"x"}, [&op = op](Inputs& i) { return op(i["x"]); });
  const Tensor x = test::fixture_tensor(fixture(), "reduce.sum1.x");
  EXPECT_EQ(argmax(x, 2).to_ints(), test::fixture_tensor(fixture(), "reduce.argmax2").to_ints());
}

TEST(ParityMath, MaskedFillAndWhere) {
  check_case("masked_fill", {"x", "mask"}, [](Inputs& i) { return masked_fill(i["x"], i["mask"], -1e4f); });
  check_case("where", {"mask", "a", "b"}, [](Inputs& i) { return where(i["mask"], i["a"], i["b"]); });
}
