#pragma once
// Patch kernels (the local work of ops/patches.hpp): im2col and its adjoint over up to three
// spatial dims, so that a convolution is one einsum (kernels/einsum.hpp) of the patches with the
// filter. (kernels/patches.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>
#include <vector>

namespace mtk::kernels {

/// One spatial dim of a patch extraction: output position o, tap t read input position
/// o * stride + t * dilation - pad_before of dim `dim` (outside [0, n): the pad value).
struct PatchGeometry {
  int dim = 0;            ///< the spatial dim's index in the input shape
  std::int64_t taps = 1;  ///< filter size along it
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t pad_before = 0;
  std::int64_t out = 1;  ///< output positions
};

/// The patches of x: the input's dims with each spatial dim resized to its `out`, and one dim of
/// `taps` per geometry, in order, before the last dim where that is not spatial (the channels:
/// each position's [taps][channels]), else after it (row-major; ops/patches.hpp patches_shape).
template <class T>
View<T> extract_patches(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                        const std::vector<PatchGeometry>& axes, T pad_value);

/// The adjoint of extract_patches (col2im): every input position sums, in a fixed order, the
/// patch entries that were read from it. `in_shape` is the input's shape.
template <class T>
View<T> fold_patches(const ExecSpace& space, const Shape& in_shape, const View<T>& patches,
                     const std::vector<PatchGeometry>& axes);

}  // namespace mtk::kernels
