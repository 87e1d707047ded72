#include <mtk/base/error.hpp>
#include <mtk/files/files.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <unistd.h>

namespace mtk {

namespace fs = std::filesystem;

std::string read_whole_file(const std::string& path, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(where, cat("cannot open '", path, "': ", std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      fail(where, cat("cannot read '", path, "': ", std::strerror(e)));
    }
    if (n == 0)
      break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

namespace {

// Writes all of `text` to `fd`, then closes it; fails naming `path` with the system's reason.
void write_all_and_close(int fd, const std::string& path, const std::string& text,
                         const std::string& where, bool sync) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      fail(where, cat("cannot write '", path, "': ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail(where, cat("cannot fsync '", path, "': ", std::strerror(e)));
  }
  if (::close(fd) != 0)
    fail(where, cat("cannot close '", path, "': ", std::strerror(errno)));
}

}  // namespace

void write_file_durably(const std::string& path, const std::string& text,
                        const std::string& where) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(where, cat("cannot create '", path, "': ", std::strerror(errno)));
  write_all_and_close(fd, path, text, where, true);
}

void append_to_file(const std::string& path, const std::string& text, const std::string& where) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(where, cat("cannot open '", path, "' to append to it: ", std::strerror(errno)));
  write_all_and_close(fd, path, text, where, false);
}

void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& where, const std::string& tmp_in) {
  const std::string tmp = tmp_in.empty() ? temp_path(path) : tmp_in;
  try {
    write_file_durably(tmp, text, where);
    rename_path(tmp, path, where);
  } catch (const Error&) {
    std::remove(tmp.c_str());
    throw;
  }
  const std::string dir = fs::path(path).parent_path().string();
  fsync_path(dir.empty() ? "." : dir, true, where);
}

void rename_path(const std::string& from, const std::string& to, const std::string& where) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail(where, cat("cannot rename '", from, "' to '", to, "': ", std::strerror(errno)));
}

void fsync_path(const std::string& path, bool directory, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0)
    fail(where, cat("cannot open '", path, "' to fsync it: ", std::strerror(errno)));
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail(where, cat("fsync('", path, "') failed: ", std::strerror(e)));
  }
  ::close(fd);
}

void make_directories(const std::string& path, const std::string& where) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    fail(where, cat("cannot create the directory '", path, "': ", ec.message()));
  if (!fs::is_directory(path, ec))  // create_directories accepts an existing file on some systems
    fail(where, cat("cannot create the directory '", path, "': a file of that name exists"));
}

std::string temp_path(const std::string& path) {
  return cat(path, ".tmp-", ::getpid());
}

std::string random_nonce() {
  std::random_device rd;
  const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  std::uint64_t x =
      (std::uint64_t(rd()) << 32) ^ rd() ^ std::uint64_t(t) ^ (std::uint64_t(::getpid()) << 16);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

}  // namespace mtk
