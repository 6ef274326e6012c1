// safetensors: round trip, exact byte layout, and rejection of malformed files.
#include <gtest/gtest.h>

#include <cstdio>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {
std::string header_file(const std::string& json, std::size_t data_bytes) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((json.size() >> (8 * i)) & 0xff));
  return out + json + std::string(data_bytes, '\0');
}
}  // namespace

TEST(Safetensors, RoundTripIsBitExact) {
  std::map<std::string, Tensor> t = {{"a", Tensor::randn({3, 5}, 1)},
                                     {"b", cast(Tensor::randn({7}, 2), DType::bf16)},
                                     {"c", Tensor::from_ints({1, -2, 3}, {3}, DType::i64)}};
  const std::string path = ::testing::TempDir() + "/rt.safetensors";
  save_safetensors(path, t, {{"format", "pt"}});
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  for (const auto& [name, x] : t) test::expect_bitwise_equal(f.tensors.at(name), x, name);
  std::remove(path.c_str());
}

TEST(Safetensors, LayoutFollowsTheSpec) {
  const std::string bytes = serialize_safetensors({{"x", Tensor::from_floats({1, 2}, {2})}});
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 8);
  EXPECT_NE(bytes.find("\"data_offsets\":[0,8]"), std::string::npos);
  EXPECT_NE(bytes.find("\"dtype\":\"F32\""), std::string::npos);
}

TEST(Safetensors, RejectsMalformedFiles) {
  const auto bad = [](const std::string& bytes) {
    try {
      parse_safetensors(bytes, "test");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(bad("abc").find("too short"), std::string::npos);
  EXPECT_NE(bad(header_file("{\"x\":", 0)).find("not valid JSON"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(bad(huge).find("exceeds"), std::string::npos);
  EXPECT_NE(bad(header_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4)).find("outside"),
            std::string::npos);
  EXPECT_NE(bad(header_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("needs 12"),
            std::string::npos);
  EXPECT_NE(bad(header_file(R"({"x":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", 8)).find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(bad(header_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)).find("non-negative"),
            std::string::npos);
  // A truncated valid file.
  const std::string good = serialize_safetensors({{"x", Tensor::randn({16}, 1)}});
  EXPECT_NE(bad(good.substr(0, good.size() - 5)).find("outside"), std::string::npos);
}
