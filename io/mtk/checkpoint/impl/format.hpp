#pragma once
// Names and small helpers of the on-disk format (docs/checkpoint-format.md). Internal: the
// checkpoint code's own namespace mtk::ckpt.

#include <mtk/base/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "MTK checkpoints hash float32 bytes as little-endian; port the hashing to this host first"
#endif

namespace mtk::ckpt {

constexpr const char* kVariablesFile = "variables.h5";
constexpr const char* kMetadataFile = "metadata.yaml";
constexpr const char* kSlicesFile = "slices.sha256";
constexpr const char* kManifestFile = "manifest.sha256";
constexpr const char* kLatestFile = "latest";
constexpr const char* kGroupPrefix = "/variables/";
constexpr const char* kFormatName = "mtk-checkpoint";
constexpr std::size_t kMaxReportedErrors = 40;
constexpr std::int64_t kReadBlockBytes = std::int64_t(64) << 20;

/// "1,2,3"; "-" for none.
std::string csv(const std::vector<std::int64_t>& v);
/// "[1, 2, 3]"
std::string bracket(const std::vector<std::int64_t>& v);
/// Inverse of csv(); fails naming `what` on anything but non-negative integers.
std::vector<std::int64_t> parse_csv(const std::string& text, const std::string& where,
                                    const std::string& what);
std::vector<std::int64_t> sizes_of(const Shape& s);
std::int64_t product(const std::vector<std::int64_t>& v);
/// "2024-05-01T12:00:00Z"
std::string now_utc();
std::string trim(const std::string& s);
/// The non-empty lines of `text`.
std::vector<std::string> split_lines(const std::string& text);

/// "step-000001000" -> 1000; false for any other name.
bool parse_step_dir(const std::string& name, std::int64_t* step);
/// Whether `dir` holds the four files of a checkpoint.
bool complete_checkpoint(const std::filesystem::path& dir);
/// Complete step-* directories of `root`, by ascending step.
std::vector<std::pair<std::int64_t, std::string>> scan_checkpoints(const std::string& root);

/// HDF5 path of variable `name` in variables.h5 (percent-encoded link name).
std::string dataset_path(const std::string& name, const std::string& where);

}  // namespace mtk::ckpt
