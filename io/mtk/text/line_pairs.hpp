#pragma once
// Aligned line pairs of a parallel corpus (source file, target file), in bounded memory.

#include <mtk/text/line_stream.hpp>

#include <string>

namespace mtk::text {

/// Reads two files line by line together: each pair is line N of the source and line N of the
/// target, whatever bytes the lines hold (text::LineStream). When one file ends before the other,
/// next() fails (mtk::Error) naming both files and both line counts as `wc -l` (plus a last line
/// without newline) counts them.
class LinePairs {
 public:
  LinePairs(const std::string& source_path, const std::string& target_path, std::size_t keep);

  /// The next pair; false when both files have ended together.
  bool next(RawLine& source, RawLine& target);
  /// 1-based number of the pair last returned (its line number in both files).
  std::int64_t line_number() const { return source_.line_number(); }
  /// Bytes read of both files (compressed bytes of gzip files), for progress.
  std::uint64_t file_offset() const { return source_.file_offset() + target_.file_offset(); }

 private:
  LineStream source_, target_;
};

}  // namespace mtk::text
