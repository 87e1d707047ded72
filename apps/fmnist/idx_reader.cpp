#include "idx_reader.hpp"

#include <mtk/base/error.hpp>

#include <array>
#include <filesystem>
#include <memory>
#include <zlib.h>

namespace mtk::fmnist {
namespace {

// The whole (decompressed) content of `path`; gzread reads plain files as they are.
std::vector<std::uint8_t> read_all(const std::string& path, const char* where) {
  if (!std::filesystem::exists(path))
    fail(where, cat("file '", path, "' does not exist (Fashion-MNIST: Debian package ",
                    "dataset-fashion-mnist, or give its directory with --data-dir)"));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f)
    fail(where, cat("cannot open '", path, "'"));
  std::vector<std::uint8_t> out;
  std::array<std::uint8_t, 1 << 16> chunk{};
  for (;;) {
    const int n = gzread(f.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      fail(where, cat("'", path, "' is damaged: ", msg ? msg : "read error", " after ", out.size(),
                      " bytes"));
    }
    if (n == 0)
      break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  return out;
}

std::uint32_t big_endian(const std::vector<std::uint8_t>& b, size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) |
         (std::uint32_t{b[at + 2]} << 8) | std::uint32_t{b[at + 3]};
}

// The dims of an IDX file of `rank` dims after checking its magic number and size.
std::vector<std::int64_t> header(const std::vector<std::uint8_t>& bytes, const std::string& path,
                                 int rank, const char* where) {
  const size_t head = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < head)
    fail(where, cat("'", path, "' is truncated: ", bytes.size(), " bytes, shorter than the ", head,
                    "-byte IDX header of ", rank, " dims"));
  const std::uint32_t magic = big_endian(bytes, 0), want = 0x800u + static_cast<unsigned>(rank);
  if (magic != want)
    fail(where, cat("'", path, "' is not an IDX file of ", rank, " dims of unsigned bytes: magic ",
                    "number ", magic, ", expected ", want, " (0x0000080", rank, ")"));
  std::vector<std::int64_t> dims;
  std::int64_t total = 1;
  bool overflow = false;
  for (int d = 0; d < rank; ++d) {
    dims.push_back(big_endian(bytes, 4 + 4 * static_cast<size_t>(d)));
    overflow = overflow || __builtin_mul_overflow(total, dims.back(), &total);
  }
  const auto have = static_cast<std::int64_t>(bytes.size() - head);
  std::string shape;
  for (auto n : dims)
    shape += (shape.empty() ? "" : " x ") + std::to_string(n);
  if (overflow)
    fail(where, cat("'", path, "' is damaged: its header says ", shape, " values, more than any ",
                    "file holds; the file has ", have));
  if (have != total) {
    fail(where, cat("'", path, "' is ", have < total ? "truncated" : "too long", ": its header ",
                    "says ", shape, " = ", total, " values, the file has ", have));
  }
  return dims;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  const char* where = "mtk::fmnist::read_idx_images";
  auto bytes = read_all(path, where);
  const auto dims = header(bytes, path, 3, where);
  IdxImages out;
  out.count = dims[0];
  out.rows = dims[1];
  out.cols = dims[2];
  out.pixels.assign(bytes.begin() + 16, bytes.end());
  return out;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path) {
  const char* where = "mtk::fmnist::read_idx_labels";
  auto bytes = read_all(path, where);
  header(bytes, path, 1, where);
  return {bytes.begin() + 8, bytes.end()};
}

void check_image_limit(const IdxImages& images, std::int64_t limit, const std::string& setting,
                       const std::string& path) {
  if (limit < 0)
    fail("mtk::fmnist::check_image_limit",
         cat(setting, " is ", limit, ": give a number of images >= 0 (0: all)"));
  if (limit > images.count)
    fail("mtk::fmnist::check_image_limit",
         cat(setting, " is ", limit, ", but '", path, "' holds only ", images.count,
             " images: lower ", setting, " to at most ", images.count, " (or 0 for all)"));
}

Dataset read_fashion_mnist(const std::string& dir, std::int64_t train_limit,
                           std::int64_t test_limit) {
  const char* where = "mtk::fmnist::read_fashion_mnist";
  Dataset d;
  const auto file = [&](const std::string& name) { return dir + "/" + name; };
  d.train_images = read_idx_images(file("train-images-idx3-ubyte.gz"));
  d.train_labels = read_idx_labels(file("train-labels-idx1-ubyte.gz"));
  d.test_images = read_idx_images(file("t10k-images-idx3-ubyte.gz"));
  d.test_labels = read_idx_labels(file("t10k-labels-idx1-ubyte.gz"));
  const auto check = [&](const IdxImages& im, const std::vector<std::uint8_t>& labels,
                         const std::string& split) {
    if (im.count != static_cast<std::int64_t>(labels.size()))
      fail(where,
           cat(dir, ": ", split, " has ", im.count, " images but ", labels.size(), " labels"));
    if (im.rows != 28 || im.cols != 28)
      fail(where, cat(dir, ": ", split, " images are ", im.rows, " x ", im.cols, ", not 28 x 28"));
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] > 9)
        fail(where, cat(dir, ": ", split, " label ", i, " is ", int{labels[i]}, ", not 0..9"));
  };
  check(d.train_images, d.train_labels, "train");
  check(d.test_images, d.test_labels, "t10k");
  check_image_limit(d.train_images, train_limit, "data.train_limit",
                    file("train-images-idx3-ubyte.gz"));
  check_image_limit(d.test_images, test_limit, "data.test_limit",
                    file("t10k-images-idx3-ubyte.gz"));
  return d;
}

}  // namespace mtk::fmnist
