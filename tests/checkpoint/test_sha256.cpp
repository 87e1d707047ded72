// SHA-256 through OpenSSL's EVP: FIPS 180-4's published vectors through every public entry
// (one-shot, incremental, whole files), and the misuses that must fail naming the function. The
// on-disk format of checkpoints is SHA-256 itself: a checkpoint written by MTK's earlier
// hand-written code verifies and restores (pre_openssl_checkpoint.sh).

#include <mtk/base/error.hpp>
#include <mtk/files/sha256.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

struct Vector {
  std::string message, digest;
};

// NIST's examples for FIPS 180-4 ("abc", the two-block message, one million 'a'), the empty
// message, and 55 bytes of 'a' (the longest message whose padding fits its block).
const Vector kVectors[] = {
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    {std::string(55, 'a'), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
};

std::string temp_file(const std::string& contents) {
  const fs::path p = fs::temp_directory_path() / ("mtk_sha256_" + std::to_string(::getpid()) + "_" +
                                                  std::to_string(contents.size()));
  std::ofstream(p, std::ios::binary) << contents;
  return p.string();
}

TEST(Sha256OpenSsl, KnownVectorsOneShotIncrementalAndFiles) {
  for (const auto& v : kVectors) {
    const std::string what = "message of " + std::to_string(v.message.size()) + " bytes";
    EXPECT_EQ(mtk::sha256_hex(v.message.data(), v.message.size()), v.digest) << what;
    mtk::Sha256 h;  // in uneven pieces
    for (size_t off = 0, piece = 1; off < v.message.size(); off += piece, piece = piece * 3 + 1)
      h.update(v.message.data() + off, std::min(piece, v.message.size() - off));
    EXPECT_EQ(h.hex_digest(), v.digest) << what << ", incremental";
    const std::string path = temp_file(v.message);
    EXPECT_EQ(mtk::sha256_file(path), v.digest) << what << ", file";
    fs::remove(path);
  }
}

TEST(Sha256OpenSsl, DigestBytesMatchTheHexAndMovesKeepTheState) {
  mtk::Sha256 a;
  a.update("ab", 2);
  mtk::Sha256 b = std::move(a);  // the moved-to hash goes on where the other stopped
  b.update("c", 1);
  const auto bytes = b.digest();
  char hex[65];
  for (size_t i = 0; i < bytes.size(); ++i)
    std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  EXPECT_EQ(std::string(hex), kVectors[0].digest);
}

TEST(Sha256OpenSsl, MisusesFailNamingTheFunctionAndTheFile) {
  mtk::Sha256 h;
  h.update("abc", 3);
  h.hex_digest();
  try {
    h.update("x", 1);
    ADD_FAILURE() << "update after the digest was accepted";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtk::Sha256::update"), std::string::npos) << e.what();
  }
  EXPECT_THROW(h.digest(), mtk::Error);
  try {
    mtk::sha256_file("/nonexistent/mtk-sha256-input");
    ADD_FAILURE() << "a missing file was hashed";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/mtk-sha256-input"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(std::string(mtk::sha256_implementation()).find("OpenSSL"), std::string::npos);
}

}  // namespace
