#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/files/sha256.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MTK_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace mtk {

namespace {

alignas(16) constexpr std::uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

void compress_portable(std::uint32_t state[8], const std::uint8_t* data, std::size_t blocks) {
  std::uint32_t w[64];
  for (; blocks > 0; --blocks, data += 64) {
    for (int t = 0; t < 16; ++t)
      w[t] = (std::uint32_t(data[4 * t]) << 24) | (std::uint32_t(data[4 * t + 1]) << 16) |
             (std::uint32_t(data[4 * t + 2]) << 8) | std::uint32_t(data[4 * t + 3]);
    for (int t = 16; t < 64; ++t) {
      const std::uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const std::uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4],
                  f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; ++t) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[t] + w[t];
      const std::uint32_t t2 =
          (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#ifdef MTK_SHA256_X86
// The SHA-NI form of the same compression (Intel's SHA extensions: sha256rnds2 runs two rounds,
// sha256msg1/msg2 extend the message schedule four words at a time).
__attribute__((target("sha,sse4.1,ssse3"))) void compress_x86(std::uint32_t state[8],
                                                              const std::uint8_t* data,
                                                              std::size_t blocks) {
  const __m128i byteswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
  __m128i state1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);                // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);          // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i w[16];
    for (int g = 0; g < 16; ++g) {
      if (g < 4) {
        w[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * g)),
                                byteswap);
      } else {
        __m128i x = _mm_sha256msg1_epu32(w[g - 4], w[g - 3]);
        x = _mm_add_epi32(x, _mm_alignr_epi8(w[g - 1], w[g - 2], 4));
        w[g] = _mm_sha256msg2_epu32(x, w[g - 1]);
      }
      __m128i msg =
          _mm_add_epi32(w[g], _mm_load_si128(reinterpret_cast<const __m128i*>(&kRound[4 * g])));
      state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
      msg = _mm_shuffle_epi32(msg, 0x0E);
      state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);     // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), state1);
}

bool cpu_has_sha() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  const bool ssse3 = (c >> 9) & 1u, sse41 = (c >> 19) & 1u;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, a, b, c, d);
  return ssse3 && sse41 && ((b >> 29) & 1u);
}
#endif

using Compress = void (*)(std::uint32_t*, const std::uint8_t*, std::size_t);

// MTK_SHA256_IMPL=portable forces the portable code (tests, or a CPU that misreports).
Compress compress_function() {
#ifdef MTK_SHA256_X86
  static const Compress f = [] {
    const bool portable = runtime_options().sha256_impl() == "portable";
    return !portable && cpu_has_sha() ? &compress_x86 : &compress_portable;
  }();
  return f;
#else
  return &compress_portable;
#endif
}

}  // namespace

const char* sha256_implementation() {
  return compress_function() == &compress_portable ? "portable" : "x86-sha";
}

Sha256::Sha256() {
  static constexpr std::uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                            0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::memcpy(state_, init, sizeof state_);
}

void Sha256::update(const void* data, std::size_t bytes) {
  if (finished_)
    fail("mtk::Sha256::update", "the hash is already finished");
  if (bytes == 0)
    return;
  const auto* p = static_cast<const std::uint8_t*>(data);
  length_ += bytes;
  const Compress compress = compress_function();
  if (buffered_ > 0) {
    const std::size_t take = std::min(bytes, sizeof buffer_ - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    bytes -= take;
    if (buffered_ < sizeof buffer_)
      return;
    compress(state_, buffer_, 1);
    buffered_ = 0;
  }
  if (bytes >= 64) {
    compress(state_, p, bytes / 64);
    p += bytes / 64 * 64;
    bytes %= 64;
  }
  std::memcpy(buffer_, p, bytes);
  buffered_ = bytes;
}

std::array<std::uint8_t, 32> Sha256::digest() {
  if (finished_)
    fail("mtk::Sha256::digest", "the hash is already finished");
  const std::uint64_t bits = length_ * 8;
  std::uint8_t pad[72] = {0x80};
  const std::size_t pad_len = (buffered_ < 56 ? 56 - buffered_ : 120 - buffered_);
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
  update(pad, pad_len);
  update(len, 8);
  finished_ = true;
  std::array<std::uint8_t, 32> out{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      out[static_cast<size_t>(4 * i + j)] = static_cast<std::uint8_t>(state_[i] >> (24 - 8 * j));
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
