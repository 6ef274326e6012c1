// The label-embedding cache of CLIP's zero-shot classification (tfm/contrastive.h): hits,
// least-recently-used eviction, and a capacity of 0 that keeps nothing. (The model side is
// tested against PyTorch in tests/parity/test_parity_clip.cpp and end to end, with the cache
// and without it, in tests/cli/clip_zero_shot.sh.)
#include <gtest/gtest.h>

#include "tfm/contrastive.h"

using namespace tfm;

TEST(TextEmbeddingCache, FindsWhatItHoldsAndDropsTheLeastRecentlyUsed) {
  TextEmbeddingCache cache(2);
  std::vector<float> v;
  EXPECT_FALSE(cache.find("a cat", v));
  cache.put("a cat", {1, 0});
  cache.put("a dog", {0, 1});
  ASSERT_TRUE(cache.find("a cat", v));  // now the most recent
  EXPECT_EQ(v, (std::vector<float>{1, 0}));
  cache.put("a bird", {0.6f, 0.8f});  // evicts "a dog", the least recently used
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.find("a dog", v));
  EXPECT_TRUE(cache.find("a cat", v));
  ASSERT_TRUE(cache.find("a bird", v));
  EXPECT_EQ(v, (std::vector<float>{0.6f, 0.8f}));
  EXPECT_EQ(cache.hits(), 3u);
  cache.put("a bird", {9, 9});  // a text already held keeps its embedding
  ASSERT_TRUE(cache.find("a bird", v));
  EXPECT_EQ(v[0], 0.6f);
}

TEST(TextEmbeddingCache, CapacityZeroKeepsNothing) {
  TextEmbeddingCache cache(0);
  cache.put("x", {1});
  std::vector<float> v;
  EXPECT_FALSE(cache.find("x", v));
  EXPECT_EQ(cache.size(), 0u);
}
