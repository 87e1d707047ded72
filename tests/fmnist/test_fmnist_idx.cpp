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

}  // namespace
}  // namespace mtk::fmnist
