#pragma once
// A temporary folder for a test, shared by the ranks of a communicator: rank 0 makes it, every
// rank learns its path, rank 0 removes it when the object dies (kept if MTK_KEEP_TEST_DIRS is set,
// to look at what a failed test wrote).

#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <stdlib.h>
#include <string>

namespace mtk::test {

class TempDir {
 public:
  explicit TempDir(MPI_Comm comm = MPI_COMM_SELF) : comm_(comm) {
    int rank = 0;
    MPI_Comm_rank(comm_, &rank);
    std::string path;
    if (rank == 0) {
      std::string pattern = (std::filesystem::temp_directory_path() / "mtk-test-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr)
        std::abort();
      path = pattern;
    }
    int length = static_cast<int>(path.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, comm_);
    path.resize(static_cast<std::size_t>(length));
    MPI_Bcast(path.data(), length, MPI_CHAR, 0, comm_);
    path_ = path;
  }
  ~TempDir() {
    MPI_Barrier(comm_);
    int rank = 0;
    MPI_Comm_rank(comm_, &rank);
    std::error_code ec;
    if (rank == 0 && std::getenv("MTK_KEEP_TEST_DIRS") == nullptr)
      std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }

 private:
  MPI_Comm comm_;
  std::string path_;
};

}  // namespace mtk::test
