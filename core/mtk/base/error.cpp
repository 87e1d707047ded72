#include <mtk/base/error.hpp>

#include <vector>

namespace mtk {

void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

void agree(MPI_Comm comm, const std::string& local_failure) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = local_failure.empty() ? size : rank;
  int first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size)
    return;
  int length = rank == first ? static_cast<int>(local_failure.size()) : 0;
  MPI_Bcast(&length, 1, MPI_INT, first, comm);
  std::vector<char> text(local_failure.begin(), local_failure.end());
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, first, comm);
  std::string message(text.begin(), text.end());
  if (rank == first)
    throw AgreedError(message);
  throw AgreedError(cat("[failed on rank ", first, "] ", message));
}

}  // namespace mtk
