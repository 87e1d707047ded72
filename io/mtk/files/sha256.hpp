#pragma once
// SHA-256 (FIPS 180-4) for checkpoint integrity: incremental hashing of memory and whole files.
// Uses the x86 SHA extensions when the CPU has them (checked at run time), else portable C++.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mtk {

/// Incremental SHA-256: update() any number of times, then digest() or hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t bytes);
  /// Finishes the hash (the object must not be updated afterwards).
  std::array<std::uint8_t, 32> digest();
  /// digest() as 64 lowercase hex characters.
  std::string hex_digest();

 private:
  std::uint32_t state_[8];
  std::uint8_t buffer_[64];
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;
  bool finished_ = false;
};

/// SHA-256 of `bytes` bytes at `data`, as lowercase hex.
std::string sha256_hex(const void* data, std::size_t bytes);
/// SHA-256 of a whole file, as lowercase hex. Throws mtk::Error naming the file when it cannot
/// be read.
std::string sha256_file(const std::string& path);
/// "x86-sha" or "portable": which compression function this process uses.
const char* sha256_implementation();

}  // namespace mtk
