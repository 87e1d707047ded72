// The maximum along a named dim and its position (the MoE router's choice).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/reduce.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/top_1.hpp>

#include <algorithm>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// --------------------------------------------------------------------------------- top_1
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
