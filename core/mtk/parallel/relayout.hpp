#pragma once
// Changing which mesh axes split a tensor's dims: the communication behind reshape and behind
// gathering a dim an op needs whole. Planned once at lowering, executed every run.

#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

namespace mtk {

/// One move of a relayout: newly split dim -> local slice; no longer split -> allconcat; a dim
/// leaving an axis while another arrives -> alltoall.
struct RelayoutMove {
  enum class Kind { slice, allconcat, alltoall } kind;
  int axis = -1;
  int dim = -1;         ///< slice / allconcat dim; alltoall: the dim that becomes split
  int concat_dim = -1;  ///< alltoall: the dim that becomes whole
  Shape local_before;   ///< local shape before this move
};

/// The local shape of `shape` when dim i is split over mesh axis axes[i] (-1: whole).
Shape local_shape(const Shape& shape, const std::vector<int>& axes, const MeshShape& mesh);

/// Moves from per-dim axes `from` to `to` (same global shape). Slices come first (they shrink
/// the data), then alltoalls, then allconcats.
std::vector<RelayoutMove> plan_relayout(const Shape& shape, const std::vector<int>& from,
                                        const std::vector<int>& to, const MeshShape& mesh);

/// Runs a plan on this rank's slice.
template <class T>
Kokkos::View<T*> run_relayout(const ExecSpace& space, const Mesh& mesh,
                              const std::vector<RelayoutMove>& plan, Kokkos::View<T*> x);

/// "slice on model, alltoall on batch" for explain().
std::string describe_relayout(const std::vector<RelayoutMove>& plan, const MeshShape& mesh);

}  // namespace mtk
