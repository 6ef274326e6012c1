// Images inside requests: RFC 2397 data: URLs with base64 payloads, as browsers' FileReader and
// OpenAI's image inputs write them. Nothing is fetched: a server that followed http(s) URLs from
// requests could be made to reach anything its host can.
#include "base/base64.h"
#include "tfm/error.h"
#include "tfm/image.h"

namespace tfm {

Image decode_data_url(std::string_view url, const std::string& where, std::int64_t max_pixels) {
  TFM_CHECK(url.rfind("data:", 0) == 0, where, "images are given as data: URLs (data:image/png;base64,...); ",
            url.rfind("http", 0) == 0 ? "remote URLs are not fetched" : "this is not one");
  const auto comma = url.find(',');
  TFM_CHECK(comma != std::string_view::npos, where, "a data: URL needs a ',' before its payload");
  const std::string_view meta = url.substr(5, comma - 5);
  TFM_CHECK(meta.size() >= 7 && meta.substr(meta.size() - 7) == ";base64", where,
            "the data: URL must be base64-encoded (data:image/...;base64,...)");
  TFM_CHECK(meta.rfind("image/", 0) == 0 || meta == ";base64", where, "the data: URL's type '",
            std::string(meta.substr(0, meta.size() - 7)), "' is not an image type");
  const std::string bytes = base64_decode(url.substr(comma + 1), where);
  return decode_image({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, where, max_pixels);
}

}  // namespace tfm
