// SPDX-License-Identifier: Apache-2.0
#include <mtk/base/error.hpp>
#include <mtk/data/pair_reader.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace mtk::wmt {

namespace fs = std::filesystem;

namespace {

const char* const kForms =
    "an item is PREFIX (PREFIX.<source> and PREFIX.<target>, plain or .gz), FILE.tsv or "
    "FILE.tsv.gz (source<TAB>target), or SOURCE_FILE|TARGET_FILE";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string trimmed(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  const auto b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

void require_file(const std::string& path, const std::string& item, const std::string& setting) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    fail("mtk::wmt::resolve_pair_source", cat(setting, ": '", path, "' (of '", item,
                                              "') does not exist or is not a file; ", kForms));
}

// PREFIX.lang, else PREFIX.lang.gz.
std::string prefix_file(const std::string& prefix, const std::string& lang,
                        const std::string& setting) {
  const std::string plain = prefix + "." + lang;
  std::error_code ec;
  if (fs::is_regular_file(plain, ec))
    return plain;
  if (fs::is_regular_file(plain + ".gz", ec))
    return plain + ".gz";
  fail("mtk::wmt::resolve_pair_source", cat(setting, ": training file '", plain, "' (or '", plain,
                                            ".gz') does not exist; ", kForms));
}

}  // namespace

std::uint64_t PairSource::bytes() const {
  std::uint64_t n = fs::file_size(source_path);
  if (kind != Kind::tsv)
    n += fs::file_size(target_path);
  return n;
}

std::string PairSource::describe() const {
  return kind == Kind::tsv ? source_path : cat(source_path, " + ", target_path);
}

PairSource resolve_pair_source(const std::string& item, const std::string& source,
                               const std::string& target, const std::string& setting) {
  PairSource p;
  p.item = item;
  const auto bar = item.find('|');
  if (bar != std::string::npos) {
    p.kind = PairSource::Kind::files;
    p.source_path = trimmed(item.substr(0, bar));
    p.target_path = trimmed(item.substr(bar + 1));
    if (p.source_path.empty() || p.target_path.empty() ||
        p.target_path.find('|') != std::string::npos)
      fail("mtk::wmt::resolve_pair_source", cat(setting, ": '", item, "' is not SOURCE|TARGET"));
    require_file(p.source_path, item, setting);
    require_file(p.target_path, item, setting);
  } else if (ends_with(item, ".tsv") || ends_with(item, ".tsv.gz")) {
    p.kind = PairSource::Kind::tsv;
    p.source_path = p.target_path = item;
    require_file(item, item, setting);
  } else {
    p.source_path = prefix_file(item, source, setting);
    p.target_path = prefix_file(item, target, setting);
  }
  return p;
}

PairReader::PairReader(const PairSource& source, std::size_t max_line_bytes)
    : keep_(max_line_bytes) {
  if (source.kind == PairSource::Kind::tsv)
    tsv_ = std::make_unique<text::LineStream>(source.source_path, 2 * max_line_bytes + 1);
  else
    pairs_ =
        std::make_unique<text::LinePairs>(source.source_path, source.target_path, max_line_bytes);
}

PairReader::~PairReader() = default;

bool PairReader::next(text::RawLine& source, text::RawLine& target, bool& malformed) {
  malformed = false;
  if (pairs_)
    return pairs_->next(source, target);
  if (!tsv_->next(line_))
    return false;
  source.text.clear();
  target.text.clear();
  source.overlong = target.overlong = line_.overlong;
  if (line_.overlong)
    return true;
  const std::string& t = line_.text;
  const auto tab = t.find('\t');
  if (tab == std::string::npos || t.find('\t', tab + 1) != std::string::npos) {
    malformed = true;
    return true;
  }
  const auto side = [&](text::RawLine& out, std::size_t begin, std::size_t size) {
    out.overlong = size > keep_;
    out.text.assign(t, begin, std::min(size, keep_));
  };
  side(source, 0, tab);
  side(target, tab + 1, t.size() - tab - 1);
  return true;
}

std::int64_t PairReader::line_number() const {
  return pairs_ ? pairs_->line_number() : tsv_->line_number();
}

std::uint64_t PairReader::file_offset() const {
  return pairs_ ? pairs_->file_offset() : tsv_->file_offset();
}

}  // namespace mtk::wmt
