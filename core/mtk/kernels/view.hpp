#pragma once
// Local kernels: the work each processor does on its own slice. Every tensor is a flat row-major
// Kokkos View described by a Shape (the *local* slice shape). Kernels never communicate; the
// lowering adds collectives around them. All kernels are labelled ("mtk::kernels::<name>") and
// device-safe. Results are freshly allocated Views unless stated otherwise.
//
// Where a kernel needs to know where its slice sits in the global tensor (one_hot, gather,
// scatter_add, range, random), it takes the slice origin of the relevant dim(s).

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels {

template <class T>
using View = Kokkos::View<T*>;
using FView = View<float>;
using IView = View<std::int32_t>;

}  // namespace mtk::kernels
