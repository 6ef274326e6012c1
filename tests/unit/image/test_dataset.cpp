// Labelled image sets: IDX files gzip-compressed or not, their malformed variants as one-line
// errors naming the file; image folders in a fixed order; the augmentation primitives.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <unistd.h>

#include "support/test_support.h"
#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"

using namespace tfm;
using tfm::test::error_message;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tfm_dataset_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

// An IDX file of unsigned bytes with the given dimensions (big-endian, as LeCun's format says).
std::string idx_bytes(const std::vector<std::uint32_t>& dims, const std::vector<std::uint8_t>& data) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xff));
  s.append(data.begin(), data.end());
  return s;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

Image solid(std::int64_t w, std::int64_t h, std::uint8_t v) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.assign(static_cast<std::size_t>(w * h * 3), v);
  return img;
}

}  // namespace

TEST(ImageDataset, IdxImagesAndLabelsPlainAndGzipped) {
  std::vector<std::uint8_t> pixels;
  for (int i = 0; i < 3 * 2 * 4; ++i) pixels.push_back(static_cast<std::uint8_t>(i * 10));
  const std::string images = tmp("images.idx.gz"), labels = tmp("labels.idx");
  write_gzip(images, idx_bytes({3, 2, 4}, pixels));
  write_file_atomic(labels, idx_bytes({3}, {2, 0, 1}));
  const LabeledImages li = read_idx_images(images, labels);
  ASSERT_EQ(li.images.size(), 3u);
  EXPECT_EQ(li.labels, (std::vector<std::int64_t>{2, 0, 1}));
  EXPECT_EQ(li.label_names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(li.images[1].width, 4);
  EXPECT_EQ(li.images[1].height, 2);
  // Image 1, row 1, column 2: grey byte 8 + 4 + 2 = 14 -> 140, on all three channels.
  for (int c = 0; c < 3; ++c) EXPECT_EQ(li.images[1].at(2, 1, c), 140);
}

TEST(ImageDataset, MalformedIdxIsAOneLineErrorNamingTheFile) {
  const std::string p = tmp("bad.idx");
  auto error_for = [&](const std::string& bytes) {
    write_file_atomic(p, bytes);
    const std::string e = error_message([&] { read_idx(p); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find(p), std::string::npos) << e;
    return e;
  };
  EXPECT_NE(error_for("\x01\x02\x08\x01").find("first two bytes"), std::string::npos);
  EXPECT_NE(error_for(std::string("\0\0\x0D\x01\0\0\0\x01", 8) + "abcd").find("element type 0xd"), std::string::npos);
  EXPECT_NE(error_for(std::string("\0\0\x08\x02\0\0", 6)).find("truncated header"), std::string::npos);
  EXPECT_NE(error_for(idx_bytes({2, 3}, {1, 2, 3, 4, 5})).find("need 6"), std::string::npos);
  EXPECT_NE(error_for(idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6, 7})).find("holds 7 data bytes"), std::string::npos);
  // A gzip stream cut short: the error says so instead of reading fewer bytes.
  write_gzip(p + ".gz", idx_bytes({64}, std::vector<std::uint8_t>(64, 7)));
  std::string gz = read_file(p + ".gz");
  write_file_atomic(p + ".gz", gz.substr(0, gz.size() - 12));
  const std::string e = error_message([&] { read_idx(p + ".gz"); });
  EXPECT_NE(e.find("gzip"), std::string::npos) << e;
  // Images and labels that disagree in count.
  write_file_atomic(p + ".images", idx_bytes({2, 1, 1}, {1, 2}));
  write_file_atomic(p + ".labels", idx_bytes({3}, {0, 1, 1}));
  EXPECT_NE(error_message([&] { read_idx_images(p + ".images", p + ".labels"); }).find("holds 3 labels for the 2 images"),
            std::string::npos);
  EXPECT_NE(error_message([&] { read_idx(p + ".missing"); }).find("not found"), std::string::npos);
}

TEST(ImageDataset, FolderOfClassFoldersInNameOrder) {
  const fs::path root = tmp("folder");
  fs::remove_all(root);
  for (const char* cls : {"dog", "cat"}) fs::create_directories(root / cls);
  write_png((root / "dog" / "b.png").string(), solid(3, 2, 20));
  write_png((root / "dog" / "a.png").string(), solid(3, 2, 10));
  write_png((root / "cat" / "x.png").string(), solid(3, 2, 30));
  write_file_atomic((root / "cat" / "notes.txt").string(), "not an image");
  const LabeledImages li = read_image_folder(root.string());
  EXPECT_EQ(li.label_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(li.images.size(), 3u);
  EXPECT_EQ(li.labels, (std::vector<std::int64_t>{0, 1, 1}));
  EXPECT_EQ(li.images[1].at(0, 0, 0), 10);  // dog/a.png before dog/b.png
  // A model's class order wins; a class it names that the folder lacks is an error.
  EXPECT_EQ(read_image_folder(root.string(), {"dog", "cat"}).labels, (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_NE(error_message([&] { read_image_folder(root.string(), {"cat", "bird"}); }).find("bird"), std::string::npos);
  write_file_atomic((root / "cat" / "broken.png").string(), "\x89PNG\r\n\x1a\n garbage");
  EXPECT_NE(error_message([&] { read_image_folder(root.string()); }).find("broken.png"), std::string::npos);
}

TEST(ImageDataset, PadCropFlip) {
  Image img;
  img.width = 2;
  img.height = 1;
  img.rgb = {1, 2, 3, 4, 5, 6};
  const Image padded = pad_image(img, 1);
  EXPECT_EQ(padded.width, 4);
  EXPECT_EQ(padded.height, 3);
  EXPECT_EQ(padded.at(0, 0, 0), 0);
  EXPECT_EQ(padded.at(1, 1, 0), 1);
  EXPECT_EQ(padded.at(2, 1, 2), 6);
  const Image back = crop_image(padded, 1, 1, 2, 1);
  EXPECT_EQ(back.rgb, img.rgb);
  EXPECT_EQ(flip_horizontal(img).rgb, (std::vector<std::uint8_t>{4, 5, 6, 1, 2, 3}));
  EXPECT_NE(error_message([&] { crop_image(img, 1, 0, 2, 1); }).find("outside"), std::string::npos);
}
