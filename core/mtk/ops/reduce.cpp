// Reductions along named dims: sum, max, min (and mean, logsumexp built on them).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/reduce.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/state.hpp>
#include <mtk/parallel/collectives.hpp>

#include <algorithm>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// -------------------------------------------------------------------------------- reduce
void reduce_grad(GradientContext& c, const ReduceAttrs& attrs) {
  const Tensor x = c.input(0);
  if (attrs.fn == ReduceFn::sum)
    c.add(0, broadcast(c.dy(), x.shape()));
  else if (attrs.fn == ReduceFn::sum_squares)  // as square()'s gradient: dy * 2x
    c.add(0, multiply(broadcast(c.dy(), x.shape()), multiply(x, 2.0)));
  else  // the mask of the ties times dy, broadcast by the product (x's order): no broadcast copy
    // of dy. Ties up to rounding: equal inputs may come out of a product rounded differently at
    // different positions (OpenBLAS's Haswell/Zen sgemm), which an exact test would turn into a
    // gradient that depends on the matmul library and the layout (docs/numerics.md).
    c.add(0, compare(CompareFn::near_equal, x, c.output(0)) * c.dy());
}

// A sum over split dims leaves a partial sum (deferred for floats, summed now for integers).
void finish_split_sum(Lowering& l, int x, int y, const std::vector<int>& reduced_axes) {
  auto p = l.pending(x);
  p.insert(p.end(), reduced_axes.begin(), reduced_axes.end());
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  if (l.is_float(x) || p.empty()) {
    l.pending(y) = p;
    return;
  }
  l.pending(y) = {};
  const Mesh mesh = l.mesh();
  l.count_comm(Collective::allreduce, l.local_bytes(y), p);
  l.add_allreduce_step("allreduce(sum) of " + l.describe(y), y,
                       [mesh, p, y](Buffers& b, const ExecSpace&) {
                         allreduce<std::int32_t>(mesh, p, view_of<std::int32_t>(b, y));
                       });
}

// Max and min over split dims: an allreduce of the local results.
void finish_split_extremum(Lowering& l, ReduceFn fn, int y, const std::vector<int>& reduced_axes) {
  const Mesh mesh = l.mesh();
  const ReduceOp rop = fn == ReduceFn::max ? ReduceOp::max : ReduceOp::min;
  const DType dt = l.dtype(y);
  l.count_comm(Collective::allreduce, l.local_bytes(y), reduced_axes);
  l.add_allreduce_step(cat("allreduce(", reduce_name(fn), ") of ", l.describe(y)), y,
                       [=](Buffers& b, const ExecSpace&) {
                         visit_dtype(dt, [&](auto e) {
                           using T = decltype(e);
                           allreduce<T>(mesh, reduced_axes, view_of<T>(b, y), rop);
                           return 0;
                         });
                       });
}

void lower_reduce(Lowering& l, const ReduceAttrs& attrs) {
  const Operation& o = l.op();
  const int x = o.inputs[0], y = o.outputs[0];
  const ReduceFn fn = attrs.fn;
  const TensorLayout& lx_layout = l.layout(x);
  std::vector<int> reduced_axes;
  for (int i = 0; i < lx_layout.shape().rank(); ++i)
    if (!l.layout(y).shape().contains(lx_layout.shape()[i].name) && lx_layout.mesh_axis(i) >= 0)
      reduced_axes.push_back(lx_layout.mesh_axis(i));
  if (fn != ReduceFn::sum)
    l.materialize(x);
  const Shape lx = l.local(x), ly = l.local(y);
  l.add_typed_step(
      cat(l.label(), " ", lx.to_string(), " -> ", ly.to_string()), {x}, y, l.dtype(x),
      [=](auto e, const Buffers& b, const ExecSpace& space) {
        using T = decltype(e);
        return kernels::reduce<T>(space, fn, lx, view_of<T>(b, x), ly);
      },
      static_cast<double>(lx.num_elements()));
  if (fn == ReduceFn::sum || fn == ReduceFn::sum_squares)
    finish_split_sum(l, x, y, reduced_axes);
  else if (!reduced_axes.empty())
    finish_split_extremum(l, fn, y, reduced_axes);
}

constexpr auto reduce_op =
    make_op_kind<ReduceAttrs>("reduce", {FlopClass::reduce}, lower_reduce, reduce_grad);

}  // namespace

Tensor reduce(ReduceFn fn, const Tensor& x, const std::vector<std::string>& reduced_dims) {
  graph_of({x}, "mtk::reduce");
  std::vector<Dimension> keep;
  for (const auto& n : reduced_dims)
    dim_index(x, n, "mtk::reduce");
  for (const auto& d : x.shape().dims())
    if (std::find(reduced_dims.begin(), reduced_dims.end(), d.name) == reduced_dims.end())
      keep.push_back(d);
  if (reduced_dims.empty())
    return x;
  return x.graph().add_named_op1(reduce_op, std::string("reduce_") + reduce_name(fn), {x},
                                 Shape(keep), x.dtype(), ReduceAttrs{fn});
}

Tensor reduce_sum(const Tensor& x, const std::vector<std::string>& dims) {
  return reduce(ReduceFn::sum, x, dims);
}
Tensor reduce_sum(const Tensor& x) {
  return reduce(ReduceFn::sum, x, x.shape().names());
}
Tensor reduce_sum_squares(const Tensor& x) {
  if (x.dtype() == DType::int32)
    fail("mtk::reduce_sum_squares", cat("tensor '", x.name(), "' ", x.shape().to_string(),
                                        " is int32: cast it to float32 first"));
  if (x.shape().rank() == 0)  // nothing to sum: the square
    return square(x);
  return reduce(ReduceFn::sum_squares, x, x.shape().names());
}
Tensor reduce_mean(const Tensor& x, const std::vector<std::string>& dims) {
  std::int64_t n = 1;
  for (const auto& d : dims)
    n *= x.shape().size_of(d);
  return multiply(reduce_sum(x, dims), 1.0 / static_cast<double>(n));
}
Tensor reduce_mean(const Tensor& x) {
  return reduce_mean(x, x.shape().names());
}
Tensor reduce_max(const Tensor& x, const std::vector<std::string>& dims) {
  return reduce(ReduceFn::max, x, dims);
}
Tensor reduce_min(const Tensor& x, const std::vector<std::string>& dims) {
  return reduce(ReduceFn::min, x, dims);
}
Tensor reduce_logsumexp(const Tensor& x, const std::vector<std::string>& dims) {
  Tensor m = stop_gradient(reduce_max(x, dims));
  return add(log(reduce_sum(exp(subtract(x, m)), dims)), m);
}

}  // namespace mtk
