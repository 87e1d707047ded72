// LineStream: zlib's gzread reads gzip and plain files alike; lines are split with memchr on a
// fixed buffer, so neither a NUL byte nor a huge line changes what a line is or what it costs.
#include <mtk/base/error.hpp>
#include <mtk/text/line_stream.hpp>

#include <cerrno>
#include <cstring>
#include <zlib.h>

namespace mtk::text {
namespace {
constexpr std::size_t kBuffer = std::size_t{1} << 17;
const char* const kWhere = "mtk::text::LineStream";
}  // namespace

struct LineStream::File {
  gzFile gz = nullptr;
};

LineStream::LineStream(const std::string& path, std::size_t keep)
    : path_(path), keep_(keep), file_(std::make_unique<File>()) {
  if (keep == 0)
    fail(kWhere, cat("'", path, "': a line must be allowed at least one byte"));
  file_->gz = gzopen(path.c_str(), "rb");
  if (!file_->gz)
    fail(kWhere, cat("cannot open '", path, "': ", errno ? std::strerror(errno) : "out of memory"));
  gzbuffer(file_->gz, static_cast<unsigned>(kBuffer));
  buffer_.resize(kBuffer);
}

LineStream::~LineStream() {
  if (file_ && file_->gz)
    gzclose(file_->gz);
}

std::uint64_t LineStream::file_offset() const {
  const auto at = gzoffset(file_->gz);
  return at < 0 ? 0 : static_cast<std::uint64_t>(at);
}

// Refills the buffer; false at the end of the file.
bool LineStream::fill() {
  const int got = gzread(file_->gz, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (got < 0) {
    int err = 0;
    const char* msg = gzerror(file_->gz, &err);
    fail(kWhere, cat(path_, ":", line_number_ + 1,
                     ": read error: ", err == Z_ERRNO ? std::strerror(errno) : msg));
  }
  begin_ = 0;
  end_ = static_cast<std::size_t>(got);
  if (got == 0) {
    // A truncated gzip stream ends without an error from gzread on some zlib versions.
    int err = 0;
    const char* msg = gzerror(file_->gz, &err);
    if (err != Z_OK && err != Z_BUF_ERROR)
      fail(kWhere, cat(path_, ":", line_number_ + 1, ": read error: ", msg));
    eof_ = true;
  }
  return got > 0;
}

bool LineStream::next(RawLine& line) {
  line.text.clear();
  line.overlong = false;
  bool any = false;
  const std::size_t keep = keep_ + 1;  // one more byte: a CR after a line of exactly keep_ bytes
  for (;;) {
    if (begin_ == end_ && (eof_ || !fill()))
      break;
    any = true;
    const char* start = buffer_.data() + begin_;
    const auto* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    const std::size_t n = nl ? static_cast<std::size_t>(nl - start) : end_ - begin_;
    if (!line.overlong) {
      const std::size_t room = keep - std::min(keep, line.text.size());
      line.text.append(start, std::min(n, room));
      if (n > room)
        line.overlong = true;
    }
    begin_ += n;
    if (nl) {
      ++begin_;
      break;
    }
  }
  if (!any)
    return false;
  ++line_number_;
  if (!line.overlong && !line.text.empty() && line.text.back() == '\r')
    line.text.pop_back();
  if (line.text.size() > keep_) {
    line.text.resize(keep_);
    line.overlong = true;
  }
  return true;
}

}  // namespace mtk::text
