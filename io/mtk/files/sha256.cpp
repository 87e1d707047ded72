#include <mtk/base/error.hpp>
#include <mtk/files/sha256.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace mtk {

namespace {

EVP_MD_CTX* context_of(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}

// OpenSSL's reason for the last failure (its error queue), for the message.
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  if (code == 0)
    return "no OpenSSL error recorded";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  return text;
}

}  // namespace

const char* sha256_implementation() {
  return OpenSSL_version(OPENSSL_VERSION);
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_ || EVP_DigestInit_ex(context_of(context_), EVP_sha256(), nullptr) != 1) {
    const std::string why = openssl_error();
    EVP_MD_CTX_free(context_of(context_));
    fail("mtk::Sha256", "OpenSSL's SHA-256 did not start: " + why);
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(context_of(context_));
}

Sha256::Sha256(Sha256&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)), finished_(other.finished_) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(context_of(context_));
    context_ = std::exchange(other.context_, nullptr);
    finished_ = other.finished_;
  }
  return *this;
}

void Sha256::update(const void* data, std::size_t bytes) {
  if (finished_ || !context_)
    fail("mtk::Sha256::update", "the hash is already finished");
  if (bytes > 0 && EVP_DigestUpdate(context_of(context_), data, bytes) != 1)
    fail("mtk::Sha256::update", cat("OpenSSL failed to hash ", bytes, " bytes: ", openssl_error()));
}

std::array<std::uint8_t, 32> Sha256::digest() {
  if (finished_ || !context_)
    fail("mtk::Sha256::digest", "the hash is already finished");
  finished_ = true;
  std::array<std::uint8_t, 32> out{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_of(context_), out.data(), &length) != 1 || length != out.size())
    fail("mtk::Sha256::digest",
         cat("OpenSSL failed to finish the hash (", length, " of 32 bytes): ", openssl_error()));
  return out;
}

std::string Sha256::hex_digest() {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : digest()) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string sha256_hex(const void* data, std::size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.hex_digest();
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("mtk::sha256_file", cat("cannot open '", path, "': ", std::strerror(errno)));
  Sha256 h;
  std::vector<std::uint8_t> buf(std::size_t(4) << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      const int e = errno;
      ::close(fd);
      fail("mtk::sha256_file", cat("cannot read '", path, "': ", std::strerror(e)));
    }
    if (n == 0)
      break;
    h.update(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return h.hex_digest();
}

}  // namespace mtk
