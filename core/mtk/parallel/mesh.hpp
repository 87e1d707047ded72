#pragma once
// The processor mesh: MPI ranks arranged as a Cartesian grid with named dimensions.

#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/mesh_shape.hpp>
#include <mtk/parallel/mpi_interop.hpp>  // the MPI_Comm constructor

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mtk {

/// MPI ranks as an n-dimensional Cartesian mesh. The mesh owns a Cartesian communicator created
/// from the user's communicator (rank order kept: rank == row-major processor number), so MTK's
/// messages never mix with the user's. Copies share the communicator and the cache of
/// sub-communicators; the last copy frees them.
class Mesh {
 public:
  /// Collective over `comm`. Throws on every rank when the mesh size differs from the size of
  /// `comm`.
  Mesh(const MeshShape& shape, const Communicator& comm);
  Mesh(const MeshShape& shape, MPI_Comm comm);

  const MeshShape& shape() const { return shape_; }
  int ndims() const { return shape_.ndims(); }
  int size() const { return shape_.num_processors(); }
  /// The mesh's own Cartesian communicator.
  const Communicator& comm() const { return cart_; }
  /// This rank's processor number (row-major over the mesh dims).
  int rank() const { return rank_; }
  const std::vector<int>& coordinates() const { return coordinates_; }
  int coordinate(int axis) const { return coordinates_.at(static_cast<size_t>(axis)); }
  /// Mesh axis of `name`; throws naming the mesh when absent.
  int axis(const std::string& name) const { return shape_.axis(name); }
  std::vector<int> axes(const std::vector<std::string>& names) const;
  /// Number of processors along `axes` together.
  int group_size(const std::vector<int>& axes) const;

  /// Communicator among the processors that share this rank's coordinates on every mesh axis
  /// not in `axes` (an MPI_Cart_sub). Rank order within it is row-major over `axes` in mesh order.
  /// Collective on first use for a given set; cached afterwards. An empty set is this rank alone.
  const Communicator& axes_comm(const std::vector<int>& axes) const;
  /// This rank's position in axes_comm(axes).
  int rank_in_group(const std::vector<int>& axes) const;
  /// Processor numbers of the group axes_comm(axes), in its rank order.
  std::vector<int> group_processors(const std::vector<int>& axes) const;

 private:
  struct CommCache;
  MeshShape shape_;
  Communicator cart_;
  std::shared_ptr<CommCache> cache_;
  int rank_ = 0;
  std::vector<int> coordinates_;
};

/// Sorted, duplicate-free axes; throws naming the mesh when an axis is out of range.
std::vector<int> normalize_axes(const MeshShape& shape, std::vector<int> axes);

}  // namespace mtk
