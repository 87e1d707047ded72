// Cumulative sums along a named dim, whole or split over a mesh dim.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/reduce.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/cumsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/parallel/collectives.hpp>

#include <algorithm>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// -------------------------------------------------------------------------------- cumsum
void cumsum_grad(GradientContext& c, const CumsumAttrs& a) {
  Tensor total = reduce_sum(c.dy(), {a.dim});
  c.add(0, total - cumsum(c.dy(), a.dim, !a.exclusive));
}

// Split over mesh axis a: each rank scans its part starting from the sum of the parts before it
// (coordinates below its own), whose row totals an allconcat brings.
void lower_cumsum(Lowering& l, const CumsumAttrs& a) {
  const Operation& o = l.op();
  const int x = o.inputs[0], y = o.outputs[0];
  l.materialize(x);
  const int d = l.layout(x).shape().index_of(a.dim);
  const int axis = l.layout(x).mesh_axis(d);
  const Shape lx = l.local(x);
  const bool excl = a.exclusive;
  const bool split = axis >= 0 && l.mesh_shape()[axis].size > 1;
  if (!split) {
    l.add_step(
        l.label(), {x}, {y},
        [=](Buffers& b, const ExecSpace& space) {
          b[static_cast<size_t>(y)] = kernels::cumsum(space, lx, view_of<float>(b, x), d, excl);
        },
        static_cast<double>(lx.num_elements()));
    return;
  }
  const std::int64_t rows = lx.num_elements() / lx[d].size;
  const int before = l.coords()[static_cast<size_t>(axis)];
  const Mesh mesh = l.mesh();
  l.count_comm(Collective::allconcat, rows * static_cast<std::int64_t>(sizeof(double)), {axis});
  l.add_step(
      l.label() + " (split: the parts before, by allconcat)", {x}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        const auto xv = view_of<float>(b, x);
        const auto totals = kernels::cumsum_row_totals(space, lx, xv, d);
        space.fence();
        const auto parts =
            allconcat<double>(mesh, axis, Shape{{"part", 1}, {"rows", rows}}, 0, totals);
        const auto start = kernels::sum_of_leading_parts(space, parts, rows, before);
        b[static_cast<size_t>(y)] = kernels::cumsum(space, lx, xv, d, excl, start);
      },
      2.0 * static_cast<double>(lx.num_elements()));
}

constexpr auto cumsum_op =
    make_op_kind<CumsumAttrs>("cumsum", {FlopClass::elementwise}, lower_cumsum, cumsum_grad);

}  // namespace

Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive) {
  require_float(x, "mtk::cumsum");
  dim_index(x, dim, "mtk::cumsum");
  return x.graph().add_op1(cumsum_op, {x}, x.shape(), DType::float32, CumsumAttrs{dim, exclusive});
}

}  // namespace mtk
