#include <mtk/app/run_dir_lock.hpp>
#include <mtk/base/error.hpp>
#include <mtk/metrics/metrics.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace mtk {
namespace {

const char* const kWhere = "mtk::RunDirLock";

std::string read_all(int fd) {
  std::string text;
  char buf[1024];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < 4096;)
    text.append(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    return "unknown-host";
  return host;
}

}  // namespace

RunDirLock::RunDirLock(const std::string& run_dir, const std::string& tool)
    : path_(run_dir + "/lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail(kWhere, cat("cannot open '", path_, "': ", std::strerror(errno)));
  int rc;
  do
    rc = ::flock(fd_, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    const std::string holder = read_all(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      fail(kWhere, cat("run directory '", run_dir, "' is in use by another job (",
                       holder.empty() ? "holder not yet written" : holder,
                       "); wait for it to end, stop it, or use another --run-dir"));
    fail(kWhere, cat("cannot lock '", path_, "': ", std::strerror(err)));
  }
  took_over_ = read_all(fd_);
  const std::string me = cat("host ", host_name(), ", pid ", ::getpid(), ", job ", batch_job_id(),
                             ", ", tool, ", since ", utc_timestamp());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, (me + "\n").data(), me.size() + 1, 0) < 0)
    fail(kWhere, cat("cannot write '", path_, "': ", std::strerror(errno)));
}

void RunDirLock::release() {
  if (fd_ < 0)
    return;
  // Emptied first: a lock file with content and no holder means a holder that died.
  (void)::ftruncate(fd_, 0);
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

RunDirLock::~RunDirLock() {
  release();
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept
    : path_(std::move(other.path_)), took_over_(std::move(other.took_over_)), fd_(other.fd_) {
  other.fd_ = -1;
}

RunDirLock& RunDirLock::operator=(RunDirLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    took_over_ = std::move(other.took_over_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

}  // namespace mtk
