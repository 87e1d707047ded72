// Cumulative sums along a named dim (which must be whole).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/cumsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/reduce.hpp>

#include <algorithm>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// -------------------------------------------------------------------------------- cumsum
struct CumsumAttrs {
  std::string dim;
  bool exclusive = false;
};

void cumsum_grad(GradientContext& c, const CumsumAttrs& a) {
  Tensor total = reduce_sum(c.dy(), {a.dim});
  c.add(0, total - cumsum(c.dy(), a.dim, !a.exclusive));
}

void lower_cumsum(Lowering& l, const CumsumAttrs& a) {
  const Operation& o = l.op();
  const int x = o.inputs[0], y = o.outputs[0];
  l.require_whole(x, a.dim);
  l.materialize(x);
  const int d = l.layout(x).shape().index_of(a.dim);
  const Shape lx = l.local(x);
  const bool excl = a.exclusive;
  l.add_step(
      l.label(), {x}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] = kernels::cumsum(space, lx, view_of<float>(b, x), d, excl);
      },
      static_cast<double>(lx.num_elements()));
}

constexpr auto cumsum_op =
    make_op_kind<CumsumAttrs>("cumsum", {FlopClass::elementwise}, lower_cumsum, cumsum_grad,
                              [](const CumsumAttrs& a) { return std::vector<std::string>{a.dim}; });

}  // namespace

Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive) {
  require_float(x, "mtk::cumsum");
  dim_index(x, dim, "mtk::cumsum");
  return x.graph().add_op1(cumsum_op, {x}, x.shape(), DType::float32, CumsumAttrs{dim, exclusive});
}

}  // namespace mtk
