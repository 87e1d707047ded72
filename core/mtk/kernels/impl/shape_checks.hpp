#pragma once
// Argument checks shared by the kernels that take a flat View and its Shape.

#include <mtk/base/error.hpp>
#include <mtk/base/shape.hpp>

#include <cstdint>

namespace mtk::kernels::impl {

/// `v` holds exactly the elements of shape `s`.
template <class V>
void check_size(const char* where, const Shape& s, const V& v, const char* what) {
  if (static_cast<std::int64_t>(v.extent(0)) != s.num_elements())
    fail(where, cat(what, " holds ", v.extent(0), " elements but its shape ", s.to_string(),
                    " has ", s.num_elements()));
}

/// `dim` is a dim of `s`.
inline void check_dim(const char* where, const Shape& s, int dim) {
  if (dim < 0 || dim >= s.rank())
    fail(where, cat("dim ", dim, " is outside ", s.to_string()));
}

}  // namespace mtk::kernels::impl
