#pragma once
// Convolutions and pooling over named spatial dims (1-D, 2-D, 3-D), built from ops: an optional
// halo exchange along each blocked spatial dim, patches (im2col), then one einsum with the filter
// (a reduction for pooling). So the local work is the einsum path's matrix product, gradients come
// from the ops', spatial blocks may be split over mesh dims and channels like d_ff.
// docs/spatial.md.

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::nn {

enum class Padding {
  same,  ///< TensorFlow's SAME: ceil(n / stride) outputs, the padding split evenly (extra after)
  valid  ///< no padding: (n - dilation * (size - 1) - 1) / stride + 1 outputs
};

/// One spatial dim of a convolution or pooling.
struct SpatialDim {
  std::string dim;  ///< the spatial dim (the positions inside a block when `blocks` is given)
  std::string tap;  ///< the filter's dim along it (pooling: the name of its window dim)
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  /// The dim counting the blocks of `dim` (the one a layout splits over a mesh dim), or "" when
  /// `dim` is not blocked. Blocked dims take SAME padding, and their block size must be a
  /// multiple of the stride.
  std::string blocks;
  std::int64_t window = 0;  ///< pooling only: the window size along `dim`
};

/// y = conv(x, filter): the cross-correlation of x (with `in_channels`) with `filter` (the tap
/// dims of `dims`, `in_channels`, `out_channels`). y has x's dims, each spatial dim resized to its
/// output positions and `in_channels` replaced by `out_channels`.
Tensor conv(const Tensor& x, const Tensor& filter, const std::vector<SpatialDim>& dims,
            const std::string& in_channels, const std::string& out_channels,
            Padding padding = Padding::same);

/// The transposed convolution: the gradient of conv() with respect to its input, as a layer. x
/// has `out_channels` of the filter; y has `in_channels`, each spatial dim of n positions widened
/// to n * stride (SAME) or (n - 1) * stride + dilation * (size - 1) + 1 (VALID).
Tensor conv_transpose(const Tensor& x, const Tensor& filter, const std::vector<SpatialDim>& dims,
                      const std::string& in_channels, const std::string& out_channels,
                      Padding padding = Padding::same);

/// The maximum over each window (SpatialDim::window, stride); padding positions never win.
Tensor max_pool(const Tensor& x, const std::vector<SpatialDim>& dims,
                Padding padding = Padding::valid);

/// The mean over each window; SAME padding positions are not counted.
Tensor avg_pool(const Tensor& x, const std::vector<SpatialDim>& dims,
                Padding padding = Padding::valid);

}  // namespace mtk::nn
