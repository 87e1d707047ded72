#pragma once
// Reads the IDX files of MNIST and Fashion-MNIST (plain or gzip-compressed): a big-endian header
// (magic 0x00000801 for labels, 0x00000803 for images, then the dims) and unsigned bytes. Every
// failure names the function, the file and what was expected against what was found.

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::fmnist {

/// Images [count, rows, cols] of unsigned bytes, row-major.
struct IdxImages {
  std::int64_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;
};

/// Reads an IDX3 image file (`*-images-idx3-ubyte[.gz]`).
IdxImages read_idx_images(const std::string& path);
/// Reads an IDX1 label file (`*-labels-idx1-ubyte[.gz]`).
std::vector<std::uint8_t> read_idx_labels(const std::string& path);

/// Fashion-MNIST in `dir`: train-{images-idx3,labels-idx1}-ubyte.gz and the same for t10k.
struct Dataset {
  IdxImages train_images, test_images;
  std::vector<std::uint8_t> train_labels, test_labels;
};
/// Reads the four files and checks that images and labels agree in count and labels are < 10, and
/// that `train_limit` and `test_limit` (data.train_limit / data.test_limit; 0: all images) do not
/// exceed the images the files hold.
Dataset read_fashion_mnist(const std::string& dir, std::int64_t train_limit = 0,
                           std::int64_t test_limit = 0);

/// Fails naming `setting`, its value, the file at `path` and its image count when `limit` (0: all)
/// asks for more images than `images` holds: a limit past the end would read past the data.
void check_image_limit(const IdxImages& images, std::int64_t limit, const std::string& setting,
                       const std::string& path);

/// Where Debian's dataset-fashion-mnist installs the files.
inline const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

}  // namespace mtk::fmnist
