#pragma once
// Patches (im2col) over named spatial dims and their adjoint: a convolution is an einsum of the
// patches with the filter, its input gradient folds the einsum's gradient back (col2im), and a
// transposed convolution is that fold. nn/conv.hpp builds the layers on them; docs/spatial.md.

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {

/// One spatial dim of a patch extraction. Output position o and tap t read position
/// o * stride + t * dilation - pad_before of `dim`; positions outside the dim read the pad value.
struct PatchDim {
  std::string dim;  ///< the spatial dim (whole on every processor: a blocks dim splits it)
  std::string tap;  ///< the new dim of the taps, of size `size`
  std::int64_t size = 1;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t pad_before = 0;
  std::int64_t pad_after = 0;
};

/// Output positions of `d` over an input of `n` positions:
/// (n + pad_before + pad_after - dilation * (size - 1) - 1) / stride + 1 (< 1: the filter does not
/// fit the padded input).
std::int64_t patch_positions(const PatchDim& d, std::int64_t n);

/// The shape of the patches of a tensor of shape `s`: its dims with each spatial dim resized to
/// patch_positions(), and the tap dims in the order of `dims` before its last dim where that dim
/// is not spatial (channels last: [..., taps..., channels]), else after it. Fails naming the dims
/// and sizes when a filter is larger than the padded input.
Shape patches_shape(const Shape& s, const std::vector<PatchDim>& dims);

/// The patches of x, of shape patches_shape(x.shape(), dims). Fails naming the tensor, dim and
/// sizes when a filter is larger than the padded input.
Tensor extract_patches(const Tensor& x, const std::vector<PatchDim>& dims, double pad_value = 0.0);

/// The adjoint of extract_patches (col2im): `patches` as extract_patches makes them from a tensor
/// of `shape`, summed back into `shape`.
Tensor fold_patches(const Tensor& patches, const Shape& shape, const std::vector<PatchDim>& dims);

}  // namespace mtk
