// Softmax and log-softmax along a named dim (split or whole).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/parallel/collectives.hpp>

#include <algorithm>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// ------------------------------------------------------------------- softmax, log_softmax
struct SoftmaxAttrs {
  std::string dim;
};

// dx = y * (dy - sum(dy * y))
void softmax_grad(GradientContext& c, const SoftmaxAttrs& attrs) {
  const Tensor y = c.output(0);
  Tensor s = reduce_sum(c.dy() * y, {attrs.dim});
  c.add(0, y * (c.dy() - s));
}

// dx = dy - softmax(x) * sum(dy)
void log_softmax_grad(GradientContext& c, const SoftmaxAttrs& attrs) {
  Tensor s = reduce_sum(c.dy(), {attrs.dim});
  c.add(0, c.dy() - exp(c.output(0)) * s);
}

// The dim is split: max and sum over it need an allreduce each.
void lower_split_softmax(Lowering& l, int x, int y, int d, int axis, bool log) {
  const Shape lx = l.local(x);
  auto dims = lx.dims();
  dims.erase(dims.begin() + d);
  const Shape lr(dims);
  const Mesh mesh = l.mesh();
  l.count_comm(Collective::allreduce,
               lr.num_elements() * static_cast<std::int64_t>(dtype_bytes(DType::float32)) * 2,
               {axis});
  l.add_step(
      l.label() + " (split over " + l.mesh_shape()[axis].name + ")", {x}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        const FView X = view_of<float>(b, x);
        FView m = kernels::reduce<float>(space, ReduceFn::max, lx, X, lr);
        allreduce<float>(mesh, {axis}, m, ReduceOp::max);
        FView z = kernels::binary<float>(space, BinaryFn::subtract, lx, X, lr, m, lx);
        FView e = kernels::unary<float>(space, UnaryFn::exp, z);
        FView s = kernels::reduce<float>(space, ReduceFn::sum, lx, e, lr);
        allreduce<float>(mesh, {axis}, s, ReduceOp::sum);
        if (log) {
          FView ls = kernels::unary<float>(space, UnaryFn::log, s);
          b[static_cast<size_t>(y)] =
              kernels::binary<float>(space, BinaryFn::subtract, lx, z, lr, ls, lx);
        } else {
          b[static_cast<size_t>(y)] =
              kernels::binary<float>(space, BinaryFn::divide, lx, e, lr, s, lx);
        }
      },
      5.0 * static_cast<double>(lx.num_elements()));
}

void lower_softmax_op(Lowering& l, const SoftmaxAttrs& attrs, bool log) {
  const Operation& o = l.op();
  const int x = o.inputs[0], y = o.outputs[0];
  l.materialize(x);
  const int d = l.layout(x).shape().index_of(attrs.dim);
  const Shape lx = l.local(x);
  const int axis = l.layout(x).mesh_axis(d);
  if (axis >= 0)
    return lower_split_softmax(l, x, y, d, axis, log);
  l.add_step(
      l.label(), {x}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] = kernels::softmax(space, lx, view_of<float>(b, x), d, log);
      },
      5.0 * static_cast<double>(lx.num_elements()));
}

void lower_softmax(Lowering& l, const SoftmaxAttrs& attrs) {
  lower_softmax_op(l, attrs, false);
}
void lower_log_softmax(Lowering& l, const SoftmaxAttrs& attrs) {
  lower_softmax_op(l, attrs, true);
}

constexpr auto softmax_op =
    make_op_kind<SoftmaxAttrs>("softmax", {FlopClass::softmax}, lower_softmax, softmax_grad);
constexpr auto log_softmax_op = make_op_kind<SoftmaxAttrs>("log_softmax", {FlopClass::softmax},
                                                           lower_log_softmax, log_softmax_grad);

}  // namespace

Tensor softmax(const Tensor& x, const std::string& dim) {
  require_float(x, "mtk::softmax");
  dim_index(x, dim, "mtk::softmax");
  return x.graph().add_op1(softmax_op, {x}, x.shape(), DType::float32, SoftmaxAttrs{dim});
}

Tensor log_softmax(const Tensor& x, const std::string& dim) {
  require_float(x, "mtk::log_softmax");
  dim_index(x, dim, "mtk::log_softmax");
  return x.graph().add_op1(log_softmax_op, {x}, x.shape(), DType::float32, SoftmaxAttrs{dim});
}

}  // namespace mtk
