// The communicators made from one (split by colour, by node) and its place in a Cartesian
// topology: built on MPI's communicator calls only.

#include <mtk/base/error.hpp>
#include <mtk/parallel/mpi_interop.hpp>

#include <utility>

namespace mtk {

Communicator Communicator::split(int color, int key) const {
  if (color < 0)
    fail("mtk::Communicator::split", cat("color ", color, " is negative"));
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(mpi_comm(*this), color, key, &sub);
  return adopt(sub);
}

Communicator Communicator::split_node() const {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(mpi_comm(*this), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  return adopt(node);
}

bool Communicator::same_ranks(const Communicator& other) const {
  int result = MPI_UNEQUAL;
  MPI_Comm_compare(mpi_comm(*this), mpi_comm(other), &result);
  return result != MPI_UNEQUAL;
}

std::pair<int, int> Communicator::cart_shift(int direction, int displacement) const {
  int status = MPI_UNDEFINED;
  MPI_Topo_test(mpi_comm(*this), &status);
  if (status != MPI_CART)
    fail("mtk::Communicator::cart_shift", "the communicator has no Cartesian topology");
  int source = MPI_PROC_NULL, dest = MPI_PROC_NULL;
  MPI_Cart_shift(mpi_comm(*this), direction, displacement, &source, &dest);
  return {source == MPI_PROC_NULL ? -1 : source, dest == MPI_PROC_NULL ? -1 : dest};
}

}  // namespace mtk
