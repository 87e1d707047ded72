// Fused optimizer updates: adam_update (no gradient: updates are applied by assign).
#include <mtk/base/error.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/ops.hpp>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

struct AdamAttrs {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

void lower_adam_update(Lowering& l) {
  const Operation& o = l.op();
  for (int t : o.inputs)
    l.materialize(t);
  const int p = o.inputs[0], m = o.inputs[1], v = o.inputs[2], gr = o.inputs[3], ss = o.inputs[4];
  const int np = o.outputs[0], nm = o.outputs[1], nv = o.outputs[2];
  const AdamAttrs& a = o.attrs<AdamAttrs>();
  const float b1 = static_cast<float>(a.beta1), b2 = static_cast<float>(a.beta2),
              eps = static_cast<float>(a.epsilon);
  l.add_step(
      l.label(), {p, m, v, gr, ss}, {np, nm, nv},
      [=](Buffers& b, const ExecSpace& space) {
        auto in = [&](int t) { return view_of<float>(b, t); };
        FView new_p = in(np), new_m = in(nm), new_v = in(nv);
        kernels::adam_update(space, in(p), in(m), in(v), in(gr), in(ss), b1, b2, eps, new_p, new_m,
                             new_v);
        b[static_cast<size_t>(np)] = new_p;
        b[static_cast<size_t>(nm)] = new_m;
        b[static_cast<size_t>(nv)] = new_v;
      },
      "optimizer", 8.0 * static_cast<double>(l.local(p).num_elements()));
}

constexpr OpDef adam_update_def{"adam_update", nullptr, lower_adam_update};

}  // namespace

std::vector<Tensor> adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                                const Tensor& grad, const Tensor& step_size, double beta1,
                                double beta2, double epsilon) {
  const char* where = "mtk::adam_update";
  Graph& g = graph_of({param, m, v, grad, step_size}, where);
  for (const Tensor* t : {&param, &m, &v, &grad}) {
    require_float(*t, where);
    if (t->shape() != param.shape())
      fail(where, cat("tensor ", describe(*t), " does not match parameter ", describe(param)));
  }
  if (step_size.shape().rank() != 0)
    fail(where, cat("step size ", describe(step_size), " must be a scalar"));
  const std::pair<Shape, DType> out{param.shape(), DType::float32};
  return g.add_op(adam_update_def, "adam_update", {param, m, v, grad, step_size}, {out, out, out},
                  AdamAttrs{beta1, beta2, epsilon});
}

}  // namespace mtk
