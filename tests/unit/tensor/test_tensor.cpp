// Tensor core: factories, views, copies, dtype conversion, memory accounting, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

TEST(Tensor, FactoriesAndQueries) {
  Tensor z = Tensor::zeros({2, 3});
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dim(), 2);
  EXPECT_EQ(z.size(-1), 3);
  EXPECT_TRUE(z.is_contiguous());
  for (float v : z.to_floats()) EXPECT_EQ(v, 0.0f);
  Tensor f = Tensor::full({4}, 2.5f, DType::bf16);
  for (float v : f.to_floats()) EXPECT_EQ(v, 2.5f);
  EXPECT_EQ(Tensor::from_ints({1, 2, 3}, {3}, DType::i32).to_ints(), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(z.str(), "Tensor(f32, (2,3))");
}

TEST(Tensor, AllocationsAre64ByteAlignedAndCounted) {
  const MemoryStats before = memory_stats();
  {
    Tensor t = Tensor::empty({1000});
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u);
    EXPECT_GE(memory_stats().current_bytes, before.current_bytes + 4000);
    EXPECT_GE(memory_stats().peak_bytes, before.current_bytes + 4000);
  }
  EXPECT_EQ(memory_stats().current_bytes, before.current_bytes);
}

TEST(Tensor, RandomIsDeterministicAndThreadIndependent) {
  set_num_threads(1);
  const std::vector<float> a = Tensor::randn({10001}, 7).to_floats();
  set_num_threads(2);
  const std::vector<float> b = Tensor::randn({10001}, 7).to_floats();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Tensor::randn({10001}, 8).to_floats());
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= a.size();
  for (float v : a) var += (v - mean) * (v - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.05);
}

TEST(Tensor, ViewsShareStorageAndCopyOnContiguous) {
  Tensor x = Tensor::from_floats({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_EQ(t.to_floats(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor c = contiguous(t);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_floats(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor s = slice(x, 1, 0, 3, 2);
  EXPECT_EQ(s.to_floats(), (std::vector<float>{0, 2, 3, 5}));
  Tensor e = expand(Tensor::from_floats({1, 2}, {2, 1}), {2, 3});
  EXPECT_EQ(e.to_floats(), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(reshape(x, {3, -1}).shape(), (Shape{3, 2}));
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(squeeze(unsqueeze(x, 2), 2).shape(), (Shape{2, 3}));
}

TEST(Tensor, ReshapeOfNonViewableLayoutNamesTheFix) {
  Tensor t = transpose(Tensor::zeros({2, 3}), 0, 1);
  try {
    reshape(t, {6});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[reshape]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("contiguous()"), std::string::npos);
  }
  // Views that are possible on non-contiguous layouts still work.
  Tensor p = permute(Tensor::zeros({2, 3, 4}), {1, 0, 2});  // (3,2,4), last dim contiguous
  EXPECT_EQ(reshape(p, {3, 2, 2, 2}).shape(), (Shape{3, 2, 2, 2}));
}

TEST(Tensor, Errors) {
  EXPECT_THROW(Tensor::from_floats({1, 2}, {3}), Error);
  EXPECT_THROW(Tensor::zeros({2}).data<std::int32_t>(), Error);
  EXPECT_THROW(permute(Tensor::zeros({2, 2}), {0, 0}), Error);
  EXPECT_THROW(expand(Tensor::zeros({2}), {3}), Error);
  EXPECT_THROW(Tensor().raw_data(), Error);
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}, "add"), Error);
  EXPECT_EQ(broadcast_shapes({2, 1}, {3}, "add"), (Shape{2, 3}));
}

TEST(DType, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);             // ties-to-even overflows to Inf
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  // Exhaustive: every f16 bit pattern survives f16 -> f32 -> f16.
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << h;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(static_cast<std::uint16_t>(h))), h);
  }
  // bf16 rounding: 1 + 2^-8 is a tie between 1 and 1+2^-7 -> even (1).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // tie -> even upward
}

TEST(Tensor, CastRoundTrips) {
  Tensor x = Tensor::randn({33}, 3);
  Tensor h = cast(x, DType::f16);
  EXPECT_EQ(h.dtype(), DType::f16);
  test::expect_close(cast(h, DType::f32), x, 1e-3, 1e-4, "f16 round trip");
  test::expect_close(cast(cast(x, DType::bf16), DType::f32), x, 8e-3, 1e-5, "bf16 round trip");
}
