#pragma once
// Counter-based random numbers, identical on every mesh and layout.
// (kernels/random.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels {

/// Counter-based random values: element g (global row-major index in global_shape) depends only
/// on (seed, g), so every mesh and layout produces the same numbers. The local slice has shape
/// local_shape and starts at `origin` in the global tensor.
FView random_uniform(const ExecSpace& space, const Shape& global_shape, const Shape& local_shape,
                     const std::vector<std::int64_t>& origin, std::uint64_t seed, float low,
                     float high);
/// Normal(mean, stddev); `truncated` redraws values beyond 2 stddev (as tf.truncated_normal).
FView random_normal(const ExecSpace& space, const Shape& global_shape, const Shape& local_shape,
                    const std::vector<std::int64_t>& origin, std::uint64_t seed, float mean,
                    float stddev, bool truncated);
/// A stable 64-bit hash of a string (variable names become seeds).
std::uint64_t hash_name(const std::string& name);

}  // namespace mtk::kernels
