#pragma once
// SHA-256 (FIPS 180-4) for checkpoint and token-shard integrity: incremental hashing of memory
// and whole files, through OpenSSL's EVP interface (libcrypto picks the CPU's SHA instructions
// where it has them). The digests are SHA-256's: files written with MTK's earlier hand-written
// code verify the same.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mtk {

/// Incremental SHA-256: update() any number of times, then digest() or hex_digest() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t bytes);
  /// Finishes the hash (the object must not be updated afterwards).
  std::array<std::uint8_t, 32> digest();
  /// digest() as 64 lowercase hex characters.
  std::string hex_digest();

 private:
  void* context_ = nullptr;  // OpenSSL's EVP_MD_CTX, kept out of this header
  bool finished_ = false;
};

/// SHA-256 of `bytes` bytes at `data`, as lowercase hex.
std::string sha256_hex(const void* data, std::size_t bytes);
/// SHA-256 of a whole file, as lowercase hex. Throws mtk::Error naming the file when it cannot
/// be read.
std::string sha256_file(const std::string& path);
/// Which implementation this process uses: OpenSSL's version text, e.g. "OpenSSL 3.0.19 ...".
const char* sha256_implementation();

}  // namespace mtk
