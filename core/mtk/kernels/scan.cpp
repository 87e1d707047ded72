// mtk::kernels scans along one dim: cumsum and top_1. See reduce.hpp for the contracts.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/shape_checks.hpp>
#include <mtk/kernels/reduce.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <limits>

namespace mtk::kernels {

FView cumsum(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool exclusive,
             const View<double>& start) {
  using impl::alloc;
  using impl::check_dim;
  using impl::check_size;
  const char* where = "mtk::kernels::cumsum";
  check_dim(where, shape, dim);
  check_size(where, shape, x, "input");
  const Around a(shape, dim);
  const std::int64_t n = a.n, inner = a.inner, rows = a.outer * a.inner;
  const bool offset = start.extent(0) > 0;
  if (offset && static_cast<std::int64_t>(start.extent(0)) != rows)
    fail(where, cat("start holds ", start.extent(0), " values; ", shape.to_string(), " along dim ",
                    dim, " has ", rows, " rows"));
  FView y = alloc<float>(where, shape.num_elements());
  if (shape.num_elements() == 0)
    return y;
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t base = (r / inner) * n * inner + r % inner;
        double acc = offset ? start(r) : 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t k = base + i * inner;
          const float v = x(k);
          if (exclusive) {
            y(k) = static_cast<float>(acc);
            acc += v;
          } else {
            acc += v;
            y(k) = static_cast<float>(acc);
          }
        }
      });
  return y;
}

View<double> cumsum_row_totals(const ExecSpace& space, const Shape& shape, const FView& x,
                               int dim) {
  using impl::check_dim;
  using impl::check_size;
  const char* where = "mtk::kernels::cumsum_row_totals";
  check_dim(where, shape, dim);
  check_size(where, shape, x, "input");
  const Around a(shape, dim);
  const std::int64_t n = a.n, inner = a.inner, rows = a.outer * a.inner;
  View<double> t = impl::alloc<double>(where, rows);
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t base = (r / inner) * n * inner + r % inner;
        double acc = 0.0;  // cumsum's accumulator, in cumsum's order
        for (std::int64_t i = 0; i < n; ++i)
          acc += x(base + i * inner);
        t(r) = acc;
      });
  return t;
}

View<double> sum_of_leading_parts(const ExecSpace& space, const View<double>& parts,
                                  std::int64_t rows, std::int64_t count) {
  const char* where = "mtk::kernels::sum_of_leading_parts";
  if (rows < 0 || count < 0 || count * rows > static_cast<std::int64_t>(parts.extent(0)))
    fail(where, cat(count, " parts of ", rows, " rows do not fit in ", parts.extent(0), " values"));
  View<double> s = impl::alloc<double>(where, rows);
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        double acc = 0.0;
        for (std::int64_t j = 0; j < count; ++j)  // in part order: the same sum on every rank
          acc += parts(j * rows + r);
        s(r) = acc;
      });
  return s;
}

void top_1(const ExecSpace& space, const Shape& shape, const FView& x, int dim, FView& values,
           IView& indices) {
  using impl::alloc;
  using impl::check_dim;
  using impl::check_size;
  const char* where = "mtk::kernels::top_1";
  check_dim(where, shape, dim);
  check_size(where, shape, x, "input");
  const Around a(shape, dim);
  const std::int64_t n = a.n, inner = a.inner, rows = a.outer * a.inner;
  if (n > std::numeric_limits<std::int32_t>::max())
    fail(where, cat("dim ", shape[dim].name, " of ", shape.to_string(), " is too long for int32"));
  FView v = alloc<float>(where, rows);
  IView idx = alloc<std::int32_t>(where, rows);
  const float lowest = -std::numeric_limits<float>::infinity();
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t base = (r / inner) * n * inner + r % inner;
        float best = lowest;
        std::int32_t at = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float c = x(base + i * inner);
          if (i == 0 || c > best) {  // the first maximum wins ties
            best = c;
            at = static_cast<std::int32_t>(i);
          }
        }
        v(r) = best;
        idx(r) = at;
      });
  values = v;
  indices = idx;
}

}  // namespace mtk::kernels
