#include <mtk/base/error.hpp>
#include <mtk/parallel/mesh.hpp>

#include <algorithm>

namespace mtk {

struct Mesh::CommCache {
  std::map<std::vector<int>, Communicator> comms;
};

std::vector<int> normalize_axes(const MeshShape& shape, std::vector<int> axes) {
  for (int a : axes)
    if (a < 0 || a >= shape.ndims())
      fail("mtk::normalize_axes", cat("mesh axis ", a, " outside mesh ", shape.to_string()));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

namespace {

// The Cartesian communicator of `shape` over the ranks of `comm`, in their order.
Communicator cartesian(const MeshShape& shape, const Communicator& comm) {
  if (shape.ndims() == 0)
    fail("mtk::Mesh", "the mesh shape has no dimensions");
  if (comm.size() != shape.num_processors())
    fail("mtk::Mesh",
         cat("mesh ", shape.to_string(), " has ", shape.num_processors(),
             " processors but the communicator has ", comm.size(), " ranks; run with mpiexec -n ",
             shape.num_processors(), " or change the mesh"));
  std::vector<int> dims, periods(static_cast<size_t>(shape.ndims()), 1);
  for (const auto& d : shape.dims())
    dims.push_back(static_cast<int>(d.size));
  MPI_Comm cart = MPI_COMM_NULL;
  MPI_Cart_create(mpi_comm(comm), shape.ndims(), dims.data(), periods.data(), /*reorder=*/0, &cart);
  return adopt(cart);
}

}  // namespace

Mesh::Mesh(const MeshShape& shape, const Communicator& comm)
    : shape_(shape), cart_(cartesian(shape, comm)), cache_(std::make_shared<CommCache>()) {
  rank_ = cart_.rank();
  coordinates_.resize(static_cast<size_t>(shape.ndims()));
  MPI_Cart_coords(mpi_comm(cart_), rank_, shape.ndims(), coordinates_.data());
}

Mesh::Mesh(const MeshShape& shape, MPI_Comm comm) : Mesh(shape, borrow(comm)) {}

std::vector<int> Mesh::axes(const std::vector<std::string>& names) const {
  std::vector<int> out;
  for (const auto& n : names)
    out.push_back(axis(n));
  return out;
}

int Mesh::group_size(const std::vector<int>& axes) const {
  int n = 1;
  for (int a : normalize_axes(shape_, axes))
    n *= static_cast<int>(shape_[a].size);
  return n;
}

const Communicator& Mesh::axes_comm(const std::vector<int>& axes) const {
  auto key = normalize_axes(shape_, axes);
  auto it = cache_->comms.find(key);
  if (it != cache_->comms.end())
    return it->second;
  if (key.empty())
    return cache_->comms.emplace(key, cart_.split(rank_)).first->second;
  std::vector<int> remain(static_cast<size_t>(ndims()), 0);
  for (int a : key)
    remain[static_cast<size_t>(a)] = 1;
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Cart_sub(mpi_comm(cart_), remain.data(), &sub);
  return cache_->comms.emplace(key, adopt(sub)).first->second;
}

int Mesh::rank_in_group(const std::vector<int>& axes) const {
  int r = 0;
  for (int a : normalize_axes(shape_, axes))
    r = r * static_cast<int>(shape_[a].size) + coordinates_[static_cast<size_t>(a)];
  return r;
}

std::vector<int> Mesh::group_processors(const std::vector<int>& axes) const {
  auto key = normalize_axes(shape_, axes);
  std::vector<int> out;
  int n = group_size(key);
  for (int g = 0; g < n; ++g) {
    std::vector<int> c = coordinates_;
    int rest = g;
    for (auto it = key.rbegin(); it != key.rend(); ++it) {
      int len = static_cast<int>(shape_[*it].size);
      c[static_cast<size_t>(*it)] = rest % len;
      rest /= len;
    }
    out.push_back(shape_.pnum_of(c));
  }
  return out;
}

}  // namespace mtk
