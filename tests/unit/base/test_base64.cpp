// Base64 both ways (RFC 4648's test vectors), and the malformed inputs requests can carry.
#include <gtest/gtest.h>

#include "base/base64.h"
#include "support/test_support.h"
#include "tfm/image.h"

using namespace tfm;
using tfm::test::error_message;

TEST(Base64, Rfc4648VectorsBothWays) {
  const std::pair<const char*, const char*> v[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                   {"foo", "Zm9v"},  {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                   {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : v) {
    EXPECT_EQ(base64_encode(plain), coded);
    EXPECT_EQ(base64_decode(coded, "t"), plain);
  }
  EXPECT_EQ(base64_decode("Zm9v\nYmFy", "t"), "foobar");  // line-wrapped
  EXPECT_EQ(base64_decode("Zm8", "t"), "fo");             // padding left out
  const std::string all = [] {
    std::string s;
    for (int i = 0; i < 256; ++i) s += static_cast<char>(i);
    return s;
  }();
  EXPECT_EQ(base64_decode(base64_encode(all), "t"), all);
}

TEST(Base64, MalformedIsAnErrorNamingWhere) {
  EXPECT_NE(error_message([] { base64_decode("Zm9v!", "input[2]"); }).find("[input[2]] not base64: byte 4 has code 33"),
            std::string::npos);
  EXPECT_NE(error_message([] { base64_decode("Zg==Zg==", "x"); }).find("after '=' padding"), std::string::npos);
  EXPECT_NE(error_message([] { base64_decode("Z", "x"); }).find("cannot come from an encoder"), std::string::npos);
}

TEST(DataUrl, ImagesOnlyAndNeverFetched) {
  Image img;
  img.width = 2;
  img.height = 1;
  img.rgb = {255, 0, 0, 0, 0, 255};
  const Image back = decode_data_url("data:image/png;base64," + base64_encode(encode_png(img)), "input[0]");
  EXPECT_EQ(back.rgb, img.rgb);
  EXPECT_NE(error_message([] { decode_data_url("https://example.com/a.png", "input[0]"); }).find("remote URLs are not fetched"),
            std::string::npos);
  EXPECT_NE(error_message([] { decode_data_url("data:text/plain;base64,aGk=", "input[0]"); }).find("not an image type"),
            std::string::npos);
  EXPECT_NE(error_message([] { decode_data_url("data:image/png,rawbytes", "input[0]"); }).find("base64-encoded"),
            std::string::npos);
  EXPECT_NE(error_message([] { decode_data_url("data:image/png;base64,aGk=", "input[3]"); }).find("[input[3]]"),
            std::string::npos);
}
