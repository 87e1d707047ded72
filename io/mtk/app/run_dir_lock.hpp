#pragma once
// One job per run directory: an advisory lock (flock) on RUN_DIR/lock, held by rank 0 for the life
// of the job, with the holder's host, pid, job id and start time written inside.

#include <string>

namespace mtk {

/// Takes RUN_DIR/lock (the directory must exist). A lock another live process holds is refused
/// (mtk::Error naming that holder: host, pid, job, tool, start time). A lock file whose holder is
/// gone (the kernel dropped its flock when it died) is taken over; `took_over()` then names the
/// old holder. Released (and the file emptied) by the destructor.
/// flock is per host on some network file systems: two hosts may still share a directory there.
class RunDirLock {
 public:
  RunDirLock() = default;
  RunDirLock(const std::string& run_dir, const std::string& tool);
  ~RunDirLock();
  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&& other) noexcept;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  bool held() const { return fd_ >= 0; }
  /// The stale holder taken over ("" when the lock was free and empty).
  const std::string& took_over() const { return took_over_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_, took_over_;
  int fd_ = -1;
};

}  // namespace mtk
