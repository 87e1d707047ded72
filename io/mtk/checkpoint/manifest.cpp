#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/format.hpp>
#include <mtk/checkpoint/impl/manifest.hpp>
#include <mtk/files/files.hpp>
#include <mtk/files/sha256.hpp>

#include <filesystem>
#include <map>
#include <utility>

namespace mtk::ckpt {

namespace fs = std::filesystem;

namespace {
// A damaged file's line as it can be shown in a message: at most 60 characters, bytes outside
// printable ASCII as '?'.
std::string printable_excerpt(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size() && i < 60; ++i)
    out += (line[i] >= 0x20 && line[i] < 0x7f) ? line[i] : '?';
  return line.size() > 60 ? out + "..." : out;
}
}  // namespace

std::string manifest_text(const std::string& metadata_text, const std::string& slices_text) {
  return cat(sha256_hex(metadata_text.data(), metadata_text.size()), "  ", kMetadataFile, "\n",
             sha256_hex(slices_text.data(), slices_text.size()), "  ", kSlicesFile, "\n");
}

void read_small_files(const std::string& dir, std::string* metadata_text, std::string* slices_text,
                      std::vector<std::string>* errors, const std::string& where) {
  if (!fs::is_directory(dir))
    fail(where, cat("'", dir, "' is not a directory"));
  const std::string manifest = read_whole_file(dir + "/" + kManifestFile, where);
  *metadata_text = read_whole_file(dir + "/" + kMetadataFile, where);
  *slices_text = read_whole_file(dir + "/" + kSlicesFile, where);
  std::map<std::string, std::string> listed;
  for (const auto& line : split_lines(manifest)) {
    const auto sep = line.find("  ");
    if (line.size() < 67 || sep != 64) {
      errors->push_back(
          cat(dir, "/", kManifestFile, ": malformed line '", printable_excerpt(line), "'"));
      continue;
    }
    listed[line.substr(66)] = line.substr(0, 64);
  }
  const std::pair<const char*, const std::string*> files[] = {{kMetadataFile, metadata_text},
                                                              {kSlicesFile, slices_text}};
  for (const auto& [name, text] : files) {
    auto it = listed.find(name);
    if (it == listed.end()) {
      errors->push_back(cat(dir, "/", kManifestFile, " does not list ", name));
      continue;
    }
    const std::string actual = sha256_hex(text->data(), text->size());
    if (actual != it->second)
      errors->push_back(
          cat(dir, "/", name, " is corrupted: SHA-256 ", actual, ", manifest says ", it->second));
  }
}

}  // namespace mtk::ckpt
