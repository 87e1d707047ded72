#pragma once
// Reductions: reduce, softmax, cumsum, top_1.
// (kernels/reduce.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

/// Reduces the dims of in_shape that out_shape lacks; out_shape's dims are a subset of in_shape's
/// in any order.
template <class T>
View<T> reduce(const ExecSpace& space, ReduceFn fn, const Shape& in_shape, const View<T>& x,
               const Shape& out_shape);
/// Softmax (or log-softmax) along `dim`, which is whole locally.
FView softmax(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool log);
/// Gradient of softmax / log-softmax along `dim` (whole locally) given its output y and dy, in one
/// pass per row. `into`: where to write it (may be dy), else allocated; `bf16_into` (as many
/// values): where to write its bf16 bit patterns too (the copy bf16 contractions read).
FView softmax_grad(const ExecSpace& space, const Shape& shape, const FView& y, const FView& dy,
                   int dim, bool log, const FView& into = {},
                   const View<std::uint16_t>& bf16_into = {});
/// Inclusive (or exclusive) cumulative sum along `dim`, accumulated in double. `start` (one value
/// per row: the outer * inner positions around `dim`, row-major) is added before the first element
/// of each row: the sum of the rows' earlier parts held elsewhere (a split dim).
FView cumsum(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool exclusive,
             const View<double>& start = {});
/// Each row's sum along `dim` in double, in cumsum's order (what a following part of the row
/// starts from).
View<double> cumsum_row_totals(const ExecSpace& space, const Shape& shape, const FView& x, int dim);
/// parts holds parts of `rows` values each, one after the other; the sum of the first `count` of
/// them, part by part in order, for each row.
View<double> sum_of_leading_parts(const ExecSpace& space, const View<double>& parts,
                                  std::int64_t rows, std::int64_t count);
/// Max along `dim` (whole locally) and its position; out_shape = shape without `dim`.
void top_1(const ExecSpace& space, const Shape& shape, const FView& x, int dim, FView& values,
           IView& indices);

}  // namespace mtk::kernels
