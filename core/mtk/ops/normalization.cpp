// Fused layer norm: layer_norm and its gradient op layer_norm_grad.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/normalization.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/normalization.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/parallel/collectives.hpp>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// What both lowerings need: the normalised dim's index, the mesh axis splitting it (-1: whole),
// its global size, and the scale laid out like that dim of x.
struct NormDim {
  int d = -1, axis = -1;
  std::int64_t size = 0;
  NormDim(Lowering& l, int x, const std::string& dim) {
    const TensorLayout& lay = l.layout(x);
    d = lay.shape().index_of(dim);
    const int a = lay.mesh_axis(d);
    axis = a >= 0 && l.mesh_shape()[a].size > 1 ? a : -1;
    size = lay.shape()[d].size;
  }
  // Vector [dim] t with the slices of x's dim.
  int like_x(Lowering& l, int x, int t) const {
    l.materialize(t);
    return l.relayout(t, {l.layout(x).mesh_axis(d)});
  }
  void count_allreduces(Lowering& l, int rows_tensor, int calls) const {
    if (axis >= 0)
      for (int k = 0; k < calls; ++k)
        l.count_comm(Collective::allreduce, l.local_bytes(rows_tensor), {axis});
  }
};

// Sums over the slice, allreduced over the axis splitting `dim`: the mean, then the centred
// squares (two passes keep the variance exact for rows with a large mean).
void lower_layer_norm(Lowering& l, const LayerNormAttrs& a) {
  const Operation& o = l.op();
  const int x = o.inputs[0], y = o.outputs[0], mean = o.outputs[1], rstd = o.outputs[2];
  l.materialize(x);
  const NormDim nd(l, x, a.dim);
  const int scale = nd.like_x(l, x, o.inputs[1]), bias = nd.like_x(l, x, o.inputs[2]);
  nd.count_allreduces(l, mean, 2);
  const Shape lx = l.local(x);
  const int d = nd.d, axis = nd.axis;
  const std::int64_t D = nd.size;
  const double eps = a.epsilon;
  const Mesh mesh = l.mesh();
  l.add_step(
      l.label(), {x, scale, bias}, {y, mean, rstd},
      [=](Buffers& b, const ExecSpace& space) {
        const FView X = view_of<float>(b, x);
        FView s1 = kernels::layer_norm_sums(space, lx, X, d, FView(), D);
        if (axis >= 0)
          allreduce<float>(mesh, {axis}, s1);
        FView s2 = kernels::layer_norm_sums(space, lx, X, d, s1, D);
        if (axis >= 0)
          allreduce<float>(mesh, {axis}, s2);
        FView m, r;
        kernels::layer_norm_moments(space, s1, s2, D, eps, m, r);
        b[static_cast<size_t>(y)] = kernels::layer_norm_apply(
            space, lx, X, d, m, r, view_of<float>(b, scale), view_of<float>(b, bias));
        b[static_cast<size_t>(mean)] = m;
        b[static_cast<size_t>(rstd)] = r;
      },
      8.0 * static_cast<double>(lx.num_elements()));
}

void lower_layer_norm_grad(Lowering& l, const LayerNormAttrs& a) {
  const Operation& o = l.op();
  const int x = o.inputs[0], mean = o.inputs[2], rstd = o.inputs[3], dy = o.inputs[4];
  const int dx = o.outputs[0], dyh = o.outputs[1];
  for (int t : {x, mean, rstd, dy})
    l.materialize(t);
  const NormDim nd(l, x, a.dim);
  const int scale = nd.like_x(l, x, o.inputs[1]);
  nd.count_allreduces(l, mean, 2);
  const Shape lx = l.local(x);
  const int d = nd.d, axis = nd.axis;
  const std::int64_t D = nd.size;
  const Mesh mesh = l.mesh();
  l.add_step(
      l.label(), {x, scale, mean, rstd, dy}, {dx, dyh},
      [=](Buffers& b, const ExecSpace& space) {
        auto in = [&](int t) { return view_of<float>(b, t); };
        FView sums = kernels::layer_norm_grad_sums(space, lx, in(x), d, in(mean), in(rstd),
                                                   in(scale), in(dy));
        if (axis >= 0)
          allreduce<float>(mesh, {axis}, sums);
        FView gx, gh;
        kernels::layer_norm_grad_apply(space, lx, in(x), d, in(mean), in(rstd), in(scale), in(dy),
                                       sums, D, gx, gh);
        b[static_cast<size_t>(dx)] = gx;
        b[static_cast<size_t>(dyh)] = gh;
      },
      11.0 * static_cast<double>(lx.num_elements()));
}

constexpr auto layer_norm_grad_op = make_op_kind<LayerNormAttrs>(
    "layer_norm_grad", {FlopClass::elementwise}, lower_layer_norm_grad);

// dx by the fused op; d scale and d bias sum dy xhat and dy over the other dims (graph reduces, so
// their partial sums over split dims are handled like any reduction's).
void layer_norm_grad(GradientContext& c, const LayerNormAttrs& a) {
  const Tensor x = c.input(0), scale = c.input(1);
  auto g = c.graph().add_op(layer_norm_grad_op, {x, scale, c.output(1), c.output(2), c.dy()},
                            {{x.shape(), DType::float32}, {x.shape(), DType::float32}}, a);
  c.add(0, g[0]);
  std::vector<std::string> others;
  for (const auto& dim : x.shape().dims())
    if (dim.name != a.dim)
      others.push_back(dim.name);
  c.add(1, others.empty() ? g[1] : reduce_sum(g[1], others));
  c.add(2, others.empty() ? c.dy() : reduce_sum(c.dy(), others));
}

constexpr auto layer_norm_op = make_op_kind<LayerNormAttrs>("layer_norm", {FlopClass::elementwise},
                                                            lower_layer_norm, layer_norm_grad);

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const std::string& dim,
                  double epsilon) {
  const char* where = "mtk::layer_norm";
  Graph& g = graph_of({x, scale, bias}, where);
  for (const Tensor* t : {&x, &scale, &bias})
    require_float(*t, where);
  const int d = dim_index(x, dim, where);
  const Shape want{x.shape()[d]};
  for (const Tensor* t : {&scale, &bias})
    if (t->shape() != want)
      fail(where,
           cat("scale and bias must have the shape ", want.to_string(), ", got ", describe(*t)));
  if (!(epsilon >= 0))
    fail(where, cat("epsilon ", epsilon, " must be >= 0"));
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + d);
  const Shape rows(dims);
  auto out = g.add_op(layer_norm_op, {x, scale, bias},
                      {{x.shape(), DType::float32}, {rows, DType::float32}, {rows, DType::float32}},
                      LayerNormAttrs{dim, epsilon});
  return out[0];
}

}  // namespace mtk
