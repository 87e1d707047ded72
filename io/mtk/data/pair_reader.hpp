#pragma once
// SPDX-License-Identifier: Apache-2.0
// Where mtk-wmt's sentence pairs come from (docs/wmt.md, "Data formats"), and reading them line by
// line in bounded memory. An item of data.train (or a dev/test set) is one of
//   PREFIX           PREFIX.<source> and PREFIX.<target> (each plain or .gz): line N with line N
//   FILE.tsv         one file (or FILE.tsv.gz): `source<TAB>target` on each line
//   SOURCE|TARGET    two aligned files of any names (plain or .gz)

#include <mtk/text/line_pairs.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace mtk::wmt {

struct PairSource {
  enum class Kind { prefix, tsv, files };
  Kind kind = Kind::prefix;
  std::string item;                      ///< as written in the config
  std::string source_path, target_path;  ///< a TSV: both are the file
  /// Bytes of its files (a TSV counted once).
  std::uint64_t bytes() const;
  /// "corpus/pairs.tsv" or "corpus/train.en + corpus/train.fr".
  std::string describe() const;
};

/// The files of `item` (see the file comment) for languages `source` and `target`; `setting`
/// names the config key in errors ("data.train"). A file that does not exist is an error naming
/// it and the forms an item may take.
PairSource resolve_pair_source(const std::string& item, const std::string& source,
                               const std::string& target, const std::string& setting);

/// Reads the pairs of a PairSource: line N of a TSV split at its one TAB, or line N of both
/// files (text::LinePairs: files of different line counts are an error naming both). Each side
/// keeps at most `max_line_bytes` bytes and is marked overlong beyond (a TSV line longer than
/// both sides together is read to its end but not kept, as text::LineStream does).
class PairReader {
 public:
  PairReader(const PairSource& source, std::size_t max_line_bytes);
  ~PairReader();
  /// The next pair; false at the end. `malformed`: a TSV line without exactly one TAB (its sides
  /// are then empty), to be skipped and counted.
  bool next(text::RawLine& source, text::RawLine& target, bool& malformed);
  /// 1-based line number of the pair last returned.
  std::int64_t line_number() const;
  /// Bytes of the files read so far, against PairSource::bytes() for progress.
  std::uint64_t file_offset() const;

 private:
  std::size_t keep_;
  std::unique_ptr<text::LineStream> tsv_;
  std::unique_ptr<text::LinePairs> pairs_;
  text::RawLine line_;
};

}  // namespace mtk::wmt
