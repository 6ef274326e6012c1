// Parity with PyTorch (tools/reference/ref_attention.py) for scaled_dot_product_attention:
// forward and gradients of q, k, v (and a learned bias), for both the fused and the plain
// path, over GQA/MQA, KV-cache alignment, padding masks, ALiBi, T5-style bias, windows and
// sparse patterns (global tokens, BigBird random blocks).
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

bool has(const SafetensorsFile& f, const std::string& key) { return f.tensors.count(key) != 0; }

void check_config(const std::string& name) {
  const SafetensorsFile f = test::load_fixture("attention_" + name);
  const std::vector<std::int64_t> flags = test::fixture_tensor(f, "flags").to_ints();  // [causal, window]
  for (bool flash : {true, false}) {
    const std::string what = name + (flash ? " flash" : " plain");
    Tensor q = test::fixture_tensor(f, "q").requires_grad_(), k = test::fixture_tensor(f, "k").requires_grad_(),
           v = test::fixture_tensor(f, "v").requires_grad_();
    AttentionOptions o;
    o.use_flash = flash;
    o.causal = flags[0] != 0;
    o.window = flags[1];
    if (has(f, "sparse.params")) {  // [random_blocks, block_size, seed] and the global positions
      const std::vector<std::int64_t> sp = test::fixture_tensor(f, "sparse.params").to_ints();
      o.sparse.global_tokens = test::fixture_tensor(f, "sparse.globals").to_ints();
      o.sparse.random_blocks = sp[0];
      o.sparse.block_size = sp[1];
      o.sparse.seed = static_cast<std::uint64_t>(sp[2]);
    }
    if (has(f, "valid_lens")) o.valid_lens = test::fixture_tensor(f, "valid_lens");
    if (has(f, "bias")) o.bias = test::fixture_tensor(f, "bias").requires_grad_();
    if (has(f, "slopes")) {
      o.alibi_slopes = alibi_slopes(q.size(1));  // ours, checked against the paper's below
      test::expect_close(o.alibi_slopes, test::fixture_tensor(f, "slopes"), 1e-6, 0, what + " slopes");
    }
    Tensor out = scaled_dot_product_attention(q, k, v, o);
    test::expect_close(out, test::fixture_tensor(f, "out"), 1e-5, 2e-6, what + " out");
    backward(out, test::fixture_tensor(f, "w"));
    test::expect_close(q.grad(), test::fixture_tensor(f, "grad.q"), 1e-5, 5e-6, what + " grad.q");
    test::expect_close(k.grad(), test::fixture_tensor(f, "grad.k"), 1e-5, 5e-6, what + " grad.k");
    test::expect_close(v.grad(), test::fixture_tensor(f, "grad.v"), 1e-5, 5e-6, what + " grad.v");
    if (has(f, "grad.bias")) test::expect_close(o.bias.grad(), test::fixture_tensor(f, "grad.bias"), 1e-5, 5e-6, what + " grad.bias");
  }
}

}  // namespace

TEST(ParityAttention, Basic) { check_config("basic"); }
TEST(ParityAttention, CausalGqa) { check_config("causal_gqa"); }
TEST(ParityAttention, MqaKvCache) { check_config("mqa_cache"); }
TEST(ParityAttention, PaddingPerBatchWithEmptySequence) { check_config("pad_batch"); }
TEST(ParityAttention, PaddingPerQueryCausal) { check_config("pad_query_causal"); }
TEST(ParityAttention, Alibi) { check_config("alibi"); }
TEST(ParityAttention, T5LearnedBias) { check_config("t5_bias"); }
TEST(ParityAttention, SlidingWindow) { check_config("window"); }
TEST(ParityAttention, LongCausalWithBias) { check_config("long_bias"); }

// Sparse patterns (global tokens + BigBird random blocks over a window) against a dense
// masked reference whose random blocks come from the Python twin of the generator.
TEST(ParityAttention, SparseBidirectionalPadded) { check_config("sparse_bidir_pad"); }
TEST(ParityAttention, SparseCausalGqa) { check_config("sparse_causal_gqa"); }
TEST(ParityAttention, SparseLongOddHeadDim) { check_config("sparse_long"); }
TEST(ParityAttention, SparseGlobalOnlyPadded) { check_config("sparse_global_only"); }
TEST(ParityAttention, SparseKvCacheAlignment) { check_config("sparse_cache"); }

TEST(ParityAttention, AlibiSlopes) {
  const SafetensorsFile f = test::load_fixture("attention_alibi_slopes");
  for (std::int64_t n = 1; n <= 32; ++n)
    test::expect_close(alibi_slopes(n), test::fixture_tensor(f, "slopes." + std::to_string(n)), 1e-6, 0,
                       "slopes " + std::to_string(n));
}
