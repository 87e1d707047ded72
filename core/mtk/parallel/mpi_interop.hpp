#pragma once
// mtk::Communicator to and from MPI_Comm, for code that must see MPI itself: the mesh (Cartesian
// communicators), HDF5's MPI-IO driver, and callers holding their own MPI_Comm.

#include <mtk/parallel/communicator.hpp>

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace mtk {

/// A Communicator owning a duplicate of `comm`. Collective over `comm`.
Communicator duplicate(MPI_Comm comm);
/// A Communicator owning `comm` itself (made by the caller, e.g. MPI_Cart_create): freed with
/// the last copy.
Communicator adopt(MPI_Comm comm);
/// A Communicator using `comm` without owning it: the caller keeps `comm` alive. No collective.
Communicator borrow(MPI_Comm comm);
/// The MPI communicator, for libraries that take one (H5Pset_fapl_mpio). Owned by `comm`.
MPI_Comm mpi_comm(const Communicator& comm);

/// An MPI_Info holding `hints` (key, value), freed with this object: MPI-IO hints for HDF5.
class MpiInfo {
 public:
  explicit MpiInfo(const std::vector<std::pair<std::string, std::string>>& hints);
  ~MpiInfo();
  MpiInfo(const MpiInfo&) = delete;
  MpiInfo& operator=(const MpiInfo&) = delete;
  MPI_Info get() const { return info_; }

 private:
  MPI_Info info_ = MPI_INFO_NULL;
};

/// agree() and agree_on_failure() on an MPI communicator (see Communicator::agree).
inline void agree(MPI_Comm comm, const std::string& local_failure) {
  borrow(comm).agree(local_failure);
}
template <class F>
auto agree_on_failure(MPI_Comm comm, F&& fn) -> decltype(fn()) {
  return agree_on_failure(borrow(comm), std::forward<F>(fn));
}

}  // namespace mtk
