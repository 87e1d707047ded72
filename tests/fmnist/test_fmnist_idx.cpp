// The IDX reader of mtk-fmnist on Debian's Fashion-MNIST files (counts, dims, labels) and on
// damaged files: each error names the function and the file and says what is wrong.
#include <mtk/base/error.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "idx_reader.hpp"
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>
#include <zlib.h>

namespace mtk::fmnist {
namespace {

namespace fs = std::filesystem;

bool have_data() {
  return fs::exists(std::string(kDefaultDataDir) + "/train-images-idx3-ubyte.gz");
}

std::string temp_path(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("mtk-fmnist-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

void write_plain(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// An IDX3 file of `n` images of 2 x 3 pixels, valued by index.
std::vector<std::uint8_t> idx3(std::uint32_t n, std::uint32_t magic = 0x803) {
  std::vector<std::uint8_t> b;
  for (std::uint32_t v : {magic, n, 2u, 3u})
    for (int s = 24; s >= 0; s -= 8)
      b.push_back(static_cast<std::uint8_t>(v >> s));
  for (std::uint32_t i = 0; i < n * 6; ++i)
    b.push_back(static_cast<std::uint8_t>(i));
  return b;
}

using test::error_of;

TEST(IdxReader, ReadsFashionMnist) {
  if (!have_data())
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed at " << kDefaultDataDir;
  const Dataset d = read_fashion_mnist(kDefaultDataDir);
  EXPECT_EQ(d.train_images.count, 60000);
  EXPECT_EQ(d.test_images.count, 10000);
  EXPECT_EQ(d.train_images.rows, 28);
  EXPECT_EQ(d.train_images.cols, 28);
  EXPECT_EQ(d.train_images.pixels.size(), 60000u * 784u);
  EXPECT_EQ(d.test_labels.size(), 10000u);
  // Ten classes, each 6000 times in training and 1000 times in the test set.
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(std::count(d.train_labels.begin(), d.train_labels.end(), c), 6000) << c;
    EXPECT_EQ(std::count(d.test_labels.begin(), d.test_labels.end(), c), 1000) << c;
  }
  EXPECT_EQ(*std::max_element(d.train_images.pixels.begin(), d.train_images.pixels.end()), 255);
  EXPECT_EQ(d.train_labels[0], 9);  // the first training image is an ankle boot
}

TEST(IdxReader, ReadsPlainAndGzipFiles) {
  const auto bytes = idx3(4);
  write_plain(temp_path("plain-idx3"), bytes);
  write_gz(temp_path("gz-idx3.gz"), bytes);
  for (const auto& name : {"plain-idx3", "gz-idx3.gz"}) {
    const IdxImages im = read_idx_images(temp_path(name));
    EXPECT_EQ(im.count, 4);
    EXPECT_EQ(im.rows, 2);
    EXPECT_EQ(im.cols, 3);
    ASSERT_EQ(im.pixels.size(), 24u);
    EXPECT_EQ(im.pixels[23], 23);
  }
}

TEST(IdxReader, DamagedFilesFailNamingTheFile) {
  const std::string missing = temp_path("missing-idx3.gz");
  EXPECT_NE(error_of([&] { read_idx_images(missing); }).find("'" + missing + "' does not exist"),
            std::string::npos);

  const std::string magic = temp_path("magic.gz");
  write_gz(magic, idx3(2, 0x801));
  const std::string m = error_of([&] { read_idx_images(magic); });
  EXPECT_NE(m.find("mtk::fmnist::read_idx_images"), std::string::npos) << m;
  EXPECT_NE(m.find(magic), std::string::npos) << m;
  EXPECT_NE(m.find("magic number 2049, expected 2051"), std::string::npos) << m;

  auto bytes = idx3(3);
  bytes.resize(bytes.size() - 5);
  const std::string truncated = temp_path("truncated.gz");
  write_gz(truncated, bytes);
  const std::string t = error_of([&] { read_idx_images(truncated); });
  EXPECT_NE(t.find("'" + truncated +
                   "' is truncated: its header says 3 x 2 x 3 = 18 values, "
                   "the file has 13"),
            std::string::npos)
      << t;

  const std::string header = temp_path("header.gz");
  write_gz(header, {0, 0, 8, 1, 0});
  const std::string h = error_of([&] { read_idx_labels(header); });
  EXPECT_NE(h.find("mtk::fmnist::read_idx_labels: '" + header + "' is truncated: 5 bytes"),
            std::string::npos)
      << h;

  // A gzip stream cut short: zlib's error, with the file's name.
  std::string gz_bytes;
  {
    write_gz(temp_path("whole.gz"), idx3(50));
    std::ifstream in(temp_path("whole.gz"), std::ios::binary);
    gz_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = temp_path("cut.gz");
  write_plain(cut, std::vector<std::uint8_t>(gz_bytes.begin(), gz_bytes.begin() + 40));
  const std::string c = error_of([&] { read_idx_images(cut); });
  EXPECT_NE(c.find(cut), std::string::npos) << c;
  EXPECT_FALSE(c.empty());
}

TEST(IdxReader, MismatchedCountsFailNamingTheDirectory) {
  const std::string dir = temp_path("set");
  fs::create_directories(dir);
  write_gz(dir + "/train-images-idx3-ubyte.gz", idx3(2));
  write_gz(dir + "/train-labels-idx1-ubyte.gz", {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3});
  std::string m = error_of([&] { read_fashion_mnist(dir); });
  EXPECT_NE(m.find("t10k-images-idx3-ubyte.gz' does not exist"), std::string::npos) << m;
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", idx3(1));
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", {0, 0, 8, 1, 0, 0, 0, 1, 4});
  m = error_of([&] { read_fashion_mnist(dir); });
  EXPECT_NE(m.find("mtk::fmnist::read_fashion_mnist: " + dir + ": train has 2 images but 3 labels"),
            std::string::npos)
      << m;
}

// A Fashion-MNIST directory of `train` and `test` 28 x 28 images (issue 64 item 4).
std::string small_set(const std::string& name, std::uint32_t train, std::uint32_t test) {
  const std::string dir = temp_path(name);
  fs::create_directories(dir);
  const auto images = [](std::uint32_t n) {
    std::vector<std::uint8_t> b;
    for (std::uint32_t v : {0x803u, n, 28u, 28u})
      for (int s = 24; s >= 0; s -= 8)
        b.push_back(static_cast<std::uint8_t>(v >> s));
    b.resize(b.size() + size_t{n} * 784, 7);
    return b;
  };
  const auto labels = [](std::uint32_t n) {
    std::vector<std::uint8_t> b;
    for (std::uint32_t v : {0x801u, n})
      for (int s = 24; s >= 0; s -= 8)
        b.push_back(static_cast<std::uint8_t>(v >> s));
    for (std::uint32_t i = 0; i < n; ++i)
      b.push_back(static_cast<std::uint8_t>(i % 10));
    return b;
  };
  write_gz(dir + "/train-images-idx3-ubyte.gz", images(train));
  write_gz(dir + "/train-labels-idx1-ubyte.gz", labels(train));
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", images(test));
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", labels(test));
  return dir;
}

// data.train_limit / data.test_limit past the images in the files: an error naming the setting,
// the limit, the file and its count (before, training read past the end of the pixels).
TEST(IdxReader, LimitsPastTheDataFailNamingFileCountAndLimit) {
  const std::string dir = small_set("limits", 100, 30);
  const Dataset d = read_fashion_mnist(dir, 100, 30);  // exactly all: fine
  EXPECT_EQ(d.train_images.count, 100);
  EXPECT_EQ(read_fashion_mnist(dir, 0, 0).test_images.count, 30);
  std::string m = error_of([&] { read_fashion_mnist(dir, 5000, 0); });
  EXPECT_NE(m.find("data.train_limit is 5000, but '" + dir +
                   "/train-images-idx3-ubyte.gz' holds only 100 images"),
            std::string::npos)
      << m;
  m = error_of([&] { read_fashion_mnist(dir, 0, 31); });
  EXPECT_NE(m.find("data.test_limit is 31, but '" + dir +
                   "/t10k-images-idx3-ubyte.gz' holds only 30 images"),
            std::string::npos)
      << m;
}

// Header dims whose product overflows are refused, not wrapped into a count that might match.
TEST(IdxReader, HeaderCountsAreCheckedAgainstTheFileLength) {
  const std::string big = temp_path("overflow.gz");
  std::vector<std::uint8_t> b;
  for (std::uint32_t v : {0x803u, 0xffffffffu, 0xffffffffu, 0xffffffffu})
    for (int s = 24; s >= 0; s -= 8)
      b.push_back(static_cast<std::uint8_t>(v >> s));
  b.resize(b.size() + 10);
  write_gz(big, b);
  const std::string m = error_of([&] { read_idx_images(big); });
  EXPECT_NE(m.find("'" + big +
                   "' is damaged: its header says 4294967295 x 4294967295 x "
                   "4294967295 values"),
            std::string::npos)
      << m;
  // A header that claims more images than the file holds.
  auto more = idx3(3);
  more[7] = 9;
  const std::string claims = temp_path("claims.gz");
  write_gz(claims, more);
  const std::string c = error_of([&] { read_idx_images(claims); });
  EXPECT_NE(c.find("is truncated: its header says 9 x 2 x 3 = 54 values, the file has 18"),
            std::string::npos)
      << c;
}

}  // namespace
}  // namespace mtk::fmnist
