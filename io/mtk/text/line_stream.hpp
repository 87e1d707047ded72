#pragma once
// Raw lines of a text file, plain or gzip-compressed, in bounded memory: the one line splitter
// under every corpus reader (mtk-lm1b's LineReader, mtk-wmt's pairs).

#include <cstdint>
#include <memory>
#include <string>

namespace mtk::text {

/// One raw line of a LineStream.
struct RawLine {
  std::string text;  ///< the line without '\n' (and without a CR before it), at most `keep` bytes
  bool overlong = false;  ///< the line had more than `keep` bytes; the rest was read and dropped
};

/// Splits a file into lines at '\n' only: NUL bytes, CRs inside a line and invalid UTF-8 are
/// ordinary bytes here (the caller judges them), so line N of the stream is always line N of the
/// file as `wc -l` counts it (plus a last line without '\n'). A line longer than `keep` bytes is
/// read to its end but only its first `keep` bytes are kept, so memory stays bounded whatever the
/// file holds. gzip files (any number of members) are decompressed on the fly; other files are read
/// as they are. Errors (mtk::Error) name the file and the line.
class LineStream {
 public:
  LineStream(const std::string& path, std::size_t keep);
  ~LineStream();
  LineStream(const LineStream&) = delete;
  LineStream& operator=(const LineStream&) = delete;

  /// The next line; false at the end of the file.
  bool next(RawLine& line);
  /// 1-based number of the line last returned.
  std::int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }
  /// Bytes of the file read so far (compressed bytes of a gzip file): progress against its size.
  std::uint64_t file_offset() const;

 private:
  bool fill();
  struct File;
  std::string path_;
  std::size_t keep_;
  std::unique_ptr<File> file_;
  std::string buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::int64_t line_number_ = 0;
};

}  // namespace mtk::text
