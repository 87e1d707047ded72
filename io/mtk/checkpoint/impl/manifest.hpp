#pragma once
// manifest.sha256: the SHA-256 of metadata.yaml and slices.sha256 (`sha256sum -c` reads it).
// Internal.

#include <string>
#include <vector>

namespace mtk::ckpt {

/// The text of manifest.sha256 for these two files.
std::string manifest_text(const std::string& metadata_text, const std::string& slices_text);

/// Reads metadata.yaml and slices.sha256 of `dir` and checks them against manifest.sha256.
/// Appends each mismatch to `errors` (the texts are returned even when they mismatch).
void read_small_files(const std::string& dir, std::string* metadata_text, std::string* slices_text,
                      std::vector<std::string>* errors, const std::string& where);

}  // namespace mtk::ckpt
