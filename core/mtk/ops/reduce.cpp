// Reductions: reduce (sum, max, min), softmax, log_softmax, cumsum, top_1.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/parallel/collectives.hpp>

#include <algorithm>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// -------------------------------------------------------------------------------- reduce
struct ReduceAttrs {
  ReduceFn fn = ReduceFn::sum;
};

void reduce_grad(GradientContext& c, const ReduceAttrs& attrs) {
  const Tensor x = c.input(0);
  if (attrs.fn == ReduceFn::sum)
    c.add(0, broadcast(c.dy(), x.shape()));
  else
    c.add(0, broadcast(c.dy(), x.shape()) * equal(x, c.output(0)));
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
      l.label(), {x}, y, l.dtype(x),
      [=](auto e, const Buffers& b, const ExecSpace& space) {
        using T = decltype(e);
        return kernels::reduce<T>(space, fn, lx, view_of<T>(b, x), ly);
      },
      static_cast<double>(lx.num_elements()));
  if (fn == ReduceFn::sum)
    finish_split_sum(l, x, y, reduced_axes);
  else if (!reduced_axes.empty())
    finish_split_extremum(l, fn, y, reduced_axes);
}

constexpr auto reduce_op =
    make_op_kind<ReduceAttrs>("reduce", {FlopClass::reduce}, lower_reduce, reduce_grad);

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

// --------------------------------------------------------------------------------- top_1
struct Top1Attrs {
  std::string dim;
};

void top_1_grad(GradientContext& c, const Top1Attrs& attrs) {
  const Tensor x = c.input(0);
  Tensor hot = one_hot(c.output(1), x.shape().dim(attrs.dim));
  c.add(0, einsum_to({c.dy(), hot}, x.shape()));
}

void lower_top_1(Lowering& l, const Top1Attrs& attrs) {
  const Operation& o = l.op();
  const std::string& dim = attrs.dim;
  const int x = o.inputs[0], v = o.outputs[0], ix = o.outputs[1];
  l.require_whole(x, dim);
  l.materialize(x);
  const int d = l.layout(x).shape().index_of(dim);
  const Shape lx = l.local(x);
  l.add_step(
      l.label(), {x}, {v, ix},
      [=](Buffers& b, const ExecSpace& space) {
        FView values = view_of<float>(b, v);
        kernels::IView indices = view_of<std::int32_t>(b, ix);
        kernels::top_1(space, lx, view_of<float>(b, x), d, values, indices);
        b[static_cast<size_t>(v)] = values;
        b[static_cast<size_t>(ix)] = indices;
      },
      static_cast<double>(lx.num_elements()));
}

constexpr auto top_1_op =
    make_op_kind<Top1Attrs>("top_1", {FlopClass::reduce}, lower_top_1, top_1_grad,
                            [](const Top1Attrs& a) { return std::vector<std::string>{a.dim}; });

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

Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive) {
  require_float(x, "mtk::cumsum");
  dim_index(x, dim, "mtk::cumsum");
  return x.graph().add_op1(cumsum_op, {x}, x.shape(), DType::float32, CumsumAttrs{dim, exclusive});
}

std::pair<Tensor, Tensor> top_1(const Tensor& x, const std::string& dim) {
  require_float(x, "mtk::top_1");
  int i = dim_index(x, dim, "mtk::top_1");
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + i);
  auto out = x.graph().add_op(
      top_1_op, {x}, {{Shape(dims), DType::float32}, {Shape(dims), DType::int32}}, Top1Attrs{dim});
  return {out[0], out[1]};
}

}  // namespace mtk
