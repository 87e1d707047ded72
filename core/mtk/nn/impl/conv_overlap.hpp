#pragma once
// The interior/border split of convolutions, transposed convolutions and pooling under
// program.overlap_halo (docs/spatial.md#overlap): along one blocked dim, the outputs that need no
// halo (the interior) are built so that the halo exchange's start and finish can be moved around
// them (overlap_halos), the border outputs from the exchanged halos.

#include <mtk/graph/graph.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/patches.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace mtk::nn::impl {

/// How one spatial dim is convolved: the halo to exchange (blocked dims) and the patch geometry.
struct DimPlan {
  std::int64_t halo_left = 0, halo_right = 0;
  PatchDim patch;
};

/// Along one blocked dim with a halo: of the m outputs of a block, [0, top) read the left halo and
/// [first, m) the right one; the others (the interior) read the block only. (Transposed: the m
/// inputs of a block, [0, top) write into the left halo, [first, m) into the right one.)
struct Border {
  bool exchange = false;  ///< more than one block and a halo: exchanged, not padded
  bool active = false;    ///< the dim split into border and interior
  std::int64_t top = 0, first = 0, m = 0, stride = 1, span = 1;
  /// Input rows (in the widened block) of outputs [o0, o1).
  std::int64_t begin(std::int64_t o0) const { return o0 * stride; }
  std::int64_t rows(std::int64_t o0, std::int64_t o1) const {
    return (o1 - o0 - 1) * stride + span;
  }
};

/// Per dim its border, `s` the shape of the (convolution's) input: the first exchanged dim is
/// split. Empty when that dim has no interior (nothing to split).
std::vector<Border> plan_borders(const Shape& s, const std::vector<SpatialDim>& dims,
                                 const std::vector<DimPlan>& plans);

/// The layer's local work on a widened or padded input: patches, then an einsum or a reduction.
using PatchCore = std::function<Tensor(const Tensor&, const std::vector<PatchDim>&)>;

/// core(x with halos) as its interior rows along the split dim and its border rows: the other
/// dims' exchanges, the split dim's exchange, the interior, the border. `fill`: the halo value
/// at the image's edges (pooling's -inf).
Tensor overlapped_patches(const PatchCore& core, const Tensor& x,
                          const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                          const std::vector<Border>& borders, double fill);

/// A transposed convolution's local work on rows of its input: the einsum with the filter and
/// fold_patches into `out` (the widened output of those rows).
using FoldCore =
    std::function<Tensor(const Tensor&, const Shape& out, const std::vector<PatchDim>&)>;

/// fold(x) with its halos summed back into their owners (the adjoint of overlapped_patches):
/// the border rows' contributions first, their halo_reduce along the split dim, the interior
/// rows' (no halo), then the sum and the other dims' halo_reduce. `widened`: the output with
/// every exchanged dim widened by its halo.
Tensor overlapped_fold(const FoldCore& fold, const Tensor& x, const Shape& widened,
                       const std::vector<SpatialDim>& dims, const std::vector<DimPlan>& plans,
                       const std::vector<Border>& borders);

}  // namespace mtk::nn::impl
