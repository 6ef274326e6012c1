// PromptCache (tfm/prompt_cache.h): lookups check the tokens and the previous key, the budget
// evicts least recently used first, and files round-trip; another layout, a bad key and every
// truncation are refused with an error, never a crash.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/prompt_cache.h"

using namespace tfm;

namespace {

std::vector<unsigned char> rows(unsigned char fill) { return std::vector<unsigned char>(16, fill); }

}  // namespace

TEST(PromptCache, LookupsBudgetAndFiles) {
  PromptCache c(3 * (16 + 2 * 4));  // room for three blocks of 2 tokens and 16 bytes
  const std::vector<std::int32_t> a{1, 2}, b{3, 4}, d{5, 6};
  const std::uint64_t ka = PromptCache::chain(0, a), kb = PromptCache::chain(ka, b), kd = PromptCache::chain(kb, d);
  c.put(ka, 0, a, rows(1));
  c.put(kb, ka, b, rows(2));
  ASSERT_NE(c.find(ka, 0, a), nullptr);
  EXPECT_EQ((*c.find(kb, ka, b))[0], 2);
  EXPECT_EQ(c.find(kb, 0, b), nullptr);       // another prefix before it
  EXPECT_EQ(c.find(kb, ka, d), nullptr);      // other tokens under the same key
  EXPECT_NE(PromptCache::chain(0, a), PromptCache::chain(1, a));
  const std::string layout = "model m, test";
  const std::string file = c.serialize(layout);
  c.put(kd, kb, d, rows(3));
  c.find(ka, 0, a);                            // a is now the most recent: b goes first
  c.put(PromptCache::chain(kd, a), kd, a, rows(4));
  EXPECT_EQ(c.blocks(), 3);
  EXPECT_EQ(c.find(kb, ka, b), nullptr);
  EXPECT_EQ(c.evictions(), 1);

  PromptCache r(1 << 20);
  EXPECT_EQ(r.deserialize(file, layout, 2, 16, "f"), 2);
  EXPECT_EQ((*r.find(kb, ka, b))[5], 2);
  EXPECT_EQ(r.tokens(), 4);
  EXPECT_EQ(r.deserialize(file, layout, 2, 16, "f"), 0);  // already there
  r.clear();
  EXPECT_EQ(r.blocks(), 0);
  EXPECT_EQ(r.bytes(), 0);

  auto error = [&](std::string_view bytes, const std::string& lay = "model m, test", std::uint64_t bt = 2, std::uint64_t bb = 16) {
    try {
      PromptCache x(1 << 20);
      x.deserialize(bytes, lay, bt, bb, "f.bin");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(file, "model other").find("another model"), std::string::npos);
  EXPECT_NE(error(file, layout, 3).find("holds 2 tokens"), std::string::npos);
  EXPECT_NE(error(file, layout, 2, 32).find("bytes of keys and values"), std::string::npos);
  EXPECT_NE(error("junk").find("not a tfm prompt-cache file"), std::string::npos);
  for (std::size_t n = 0; n < file.size(); ++n) EXPECT_NE(error(file.substr(0, n)), "no error") << n;
  EXPECT_NE(error(file + "x").find("after the last block"), std::string::npos);
  std::string forged = file;
  forged[forged.size() - 28] ^= 1;  // a token of the last block (before its 8-byte size and 16 bytes): its key no longer matches
  EXPECT_NE(error(forged).find("not the hash"), std::string::npos);
}
