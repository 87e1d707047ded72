// safetensors files (io/mtk/checkpoint/safetensors.hpp): the bytes MTK writes (header length,
// sorted compact JSON padded to 8 bytes, data in name order), reading them back, and the damaged
// or hostile files the reader must refuse naming the file and the tensor.

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/safetensors.hpp>
#include <mtk/files/files.hpp>

#include <gtest/gtest.h>

#include "../temp_dir.hpp"
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using mtk::SafetensorsFile;

SafetensorsFile sample() {
  SafetensorsFile f;
  const std::vector<float> w = {1.0f, -2.5f, 3.25f, 1e-3f, 0.0f, 65504.0f};
  f.tensors["b/w"] = mtk::safetensors_from_floats({2, 3}, w.data(), false);
  f.tensors["a/bf16"] = mtk::safetensors_from_floats({3}, w.data(), true);
  const float one = 1.0f;
  f.tensors["c/scalar"] = mtk::safetensors_from_floats({}, &one, false);
  f.tensors["d/empty"] = mtk::safetensors_from_floats({0, 4}, nullptr, false);
  f.metadata = {{"format", "pt"}, {"z", "last"}};
  return f;
}

std::uint64_t header_length(const std::string& bytes) {
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian host (the writer checks)
  return n;
}

// A file of `header` JSON and `data` bytes.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// read_safetensors of `bytes` fails with a message containing every one of `parts`.
void expect_refused(const std::string& bytes, const std::vector<std::string>& parts) {
  mtk::test::TempDir dir;
  const std::string path = dir.path() + "/bad.safetensors";
  mtk::write_file_atomically(path, bytes, "test");
  try {
    mtk::read_safetensors(path, "test");
    FAIL() << "accepted: " << bytes.substr(8);
  } catch (const mtk::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    for (const auto& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

TEST(Safetensors, BytesAreSortedCompactAlignedAndDeterministic) {
  const std::string bytes = mtk::safetensors_bytes(sample(), "test");
  EXPECT_EQ(bytes, mtk::safetensors_bytes(sample(), "test"));
  const std::uint64_t n = header_length(bytes);
  EXPECT_EQ((8 + n) % 8, 0u);
  const std::string header = bytes.substr(8, n);
  const std::string expected = R"({"__metadata__":{"format":"pt","z":"last"},)"
                               R"("a/bf16":{"data_offsets":[0,6],"dtype":"BF16","shape":[3]},)"
                               R"("b/w":{"data_offsets":[6,30],"dtype":"F32","shape":[2,3]},)"
                               R"("c/scalar":{"data_offsets":[30,34],"dtype":"F32","shape":[]},)"
                               R"("d/empty":{"data_offsets":[34,34],"dtype":"F32","shape":[0,4]}})";
  EXPECT_EQ(header.substr(0, expected.size()), expected);
  EXPECT_EQ(header.find_first_not_of(' ', expected.size()), std::string::npos);
  EXPECT_EQ(bytes.size(), 8 + n + 34);
}

TEST(Safetensors, ReadsBackWhatItWrote) {
  mtk::test::TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  const SafetensorsFile f = sample();
  mtk::write_safetensors(path, f, "test");
  const SafetensorsFile g = mtk::read_safetensors(path, "test");
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    EXPECT_EQ(g.tensors.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(g.tensors.at(name).shape, t.shape) << name;
    EXPECT_EQ(g.tensors.at(name).bytes, t.bytes) << name;
  }
  const std::vector<float> w = mtk::safetensors_floats(g, "b/w", path, "test");
  EXPECT_EQ(w, (std::vector<float>{1.0f, -2.5f, 3.25f, 1e-3f, 0.0f, 65504.0f}));
  // bfloat16: rounded to nearest even, widened exactly.
  const std::vector<float> b = mtk::safetensors_floats(g, "a/bf16", path, "test");
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -2.5f);
  EXPECT_EQ(b[2], 3.25f);
  EXPECT_THROW(mtk::safetensors_floats(g, "missing", path, "test"), mtk::Error);
}

TEST(Safetensors, RefusesDamagedFiles) {
  const std::string good = mtk::safetensors_bytes(sample(), "test");
  expect_refused(good.substr(0, 5), {"too short"});
  expect_refused(good.substr(0, good.size() - 1), {"truncated"});
  expect_refused(good + "x", {"bytes after the last tensor"});
  expect_refused(file_of("{\"a\": 1", ""), {"not JSON"});
  expect_refused(file_of("[1, 2]", ""), {"not a JSON object"});
  std::string huge(8, '\xff');
  expect_refused(huge, {"header length"});
  expect_refused(file_of(R"({"t":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", "x"),
                 {"tensor 't'", "F8"});
  expect_refused(file_of(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 't'", "4 bytes", "takes 8"});
  expect_refused(file_of(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 't'", "shape"});
  // Holes and overlaps.
  expect_refused(file_of(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "xx"),
                 {"tensor 'a'", "a hole"});
  expect_refused(file_of(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                         R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                         "xxx"),
                 {"tensor 'b'", "overlaps"});
  expect_refused(file_of(R"({"__metadata__":{"k":1}})", ""), {"__metadata__", "'k'"});
}

TEST(Safetensors, WriterRefusesInconsistentTensors) {
  SafetensorsFile f;
  f.tensors["t"] = {"F32", {2, 2}, std::string(12, '\0')};
  EXPECT_THROW(mtk::safetensors_bytes(f, "test"), mtk::Error);
  f.tensors["t"] = {"Q7", {1}, std::string(1, '\0')};
  EXPECT_THROW(mtk::safetensors_bytes(f, "test"), mtk::Error);
  f.tensors.clear();
  f.tensors["__metadata__"] = {"F32", {1}, std::string(4, '\0')};
  EXPECT_THROW(mtk::safetensors_bytes(f, "test"), mtk::Error);
}

}  // namespace
