// Softmax and log-softmax along a named dim (split or whole).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/reduce.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/attributes.hpp>
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
void softmax_grad(GradientContext& c, const SoftmaxAttrs& attrs);
void log_softmax_grad(GradientContext& c, const SoftmaxAttrs& attrs);

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

// ------------------------------------------------------------------- their gradient
// One op for dx = y * (dy - sum(dy * y)) (softmax) or dx = dy - exp(y) * sum(dy) (log-softmax):
// one pass per row where the dim is whole, instead of four elementwise and reduction passes over
// [batch, heads, length, memory_length]; it writes the bf16 copy its two gradient products read.
// The dim is split: the row sums are partial, summed over the mesh axis before the update.
void lower_split_softmax_grad(Lowering& l, int y, int dy, int dx, int d, int axis, bool log) {
  const Shape ly = l.local(y);
  auto dims = ly.dims();
  dims.erase(dims.begin() + d);
  const Shape lr(dims);
  const Mesh mesh = l.mesh();
  l.count_comm(Collective::allreduce,
               lr.num_elements() * static_cast<std::int64_t>(dtype_bytes(DType::float32)), {axis});
  l.add_step(
      l.label() + " (split over " + l.mesh_shape()[axis].name + ")", {y, dy}, {dx},
      [=](Buffers& b, const ExecSpace& space) {
        using kernels::binary;
        const FView Y = view_of<float>(b, y), DY = view_of<float>(b, dy);
        const FView summed = log ? DY : binary<float>(space, BinaryFn::multiply, ly, DY, ly, Y, ly);
        FView s = kernels::reduce<float>(space, ReduceFn::sum, ly, summed, lr);
        allreduce<float>(mesh, {axis}, s, ReduceOp::sum);
        FView out;
        if (log) {  // dy - exp(y) * s
          const FView e = kernels::unary<float>(space, UnaryFn::exp, Y);
          const FView es = binary<float>(space, BinaryFn::multiply, ly, e, lr, s, ly);
          out = binary<float>(space, BinaryFn::subtract, ly, DY, ly, es, ly);
        } else {  // y * (dy - s)
          const FView t = binary<float>(space, BinaryFn::subtract, ly, DY, lr, s, ly);
          out = binary<float>(space, BinaryFn::multiply, ly, Y, ly, t, ly);
        }
        b[static_cast<size_t>(dx)] = out;
      },
      4.0 * static_cast<double>(ly.num_elements()));
}

void lower_softmax_grad(Lowering& l, const SoftmaxGradAttrs& a) {
  const Operation& o = l.op();
  const int y = o.inputs[0], dy = o.inputs[1], dx = o.outputs[0];
  for (int k : {y, dy})
    l.materialize(k);
  const int d = l.layout(y).shape().index_of(a.dim);
  const int axis = l.layout(y).mesh_axis(d);
  if (axis >= 0)
    return lower_split_softmax_grad(l, y, dy, dx, d, axis, a.log);
  const Shape ly = l.local(y);
  const bool log = a.log;
  const Program* program = l.program();
  l.add_step(
      l.label(), {y, dy}, {dx},
      [=](Buffers& b, const ExecSpace& space) {
        // The gradient's kept bf16 copy (its bf16 products read it), written here.
        const ProducedBf16Copy copy(*program, dx, ly.num_elements(),
                                    "mtk::kernels::softmax_grad bf16 copy");
        const FView g =
            kernels::softmax_grad(space, ly, view_of<float>(b, y), view_of<float>(b, dy), d, log,
                                  in_place_output<float>(b, dx, {dy}), copy.bits());
        b[static_cast<size_t>(dx)] = g;
        copy.keep(g);
      },
      4.0 * static_cast<double>(ly.num_elements()));
  l.mark_bf16_writes({dx});
  if (l.local(dy) == ly)
    l.allow_overwrite(dx, dy);  // dy usually dies here: dx may take its buffer
}

constexpr auto softmax_grad_op =
    make_op_kind<SoftmaxGradAttrs>("softmax_grad", {FlopClass::softmax}, lower_softmax_grad);

Tensor softmax_grad_of(const Tensor& y, const Tensor& dy, const std::string& dim, bool log) {
  return y.graph().add_op1(softmax_grad_op, {y, dy}, y.shape(), DType::float32,
                           SoftmaxGradAttrs{dim, log});
}

void softmax_grad(GradientContext& c, const SoftmaxAttrs& attrs) {
  c.add(0, softmax_grad_of(c.output(0), c.dy(), attrs.dim, false));
}

void log_softmax_grad(GradientContext& c, const SoftmaxAttrs& attrs) {
  c.add(0, softmax_grad_of(c.output(0), c.dy(), attrs.dim, true));
}

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
