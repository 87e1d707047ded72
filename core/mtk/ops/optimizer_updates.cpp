// Fused optimizer updates: adam_update (no gradient: updates are applied by assign). Each may
// write its new values over the parameter and slots it reads (Lowering::allow_overwrite): the
// in-place pass hands it their storage when nothing reads the old values later.
#include <mtk/base/error.hpp>
// make_op_kind names gradient<A> (defined there) also for ops without a gradient.
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/optimizer.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/optimizer_updates.hpp>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

struct AdamAttrs {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

void lower_adam_update(Lowering& l, const AdamAttrs& a) {
  const Operation& o = l.op();
  for (int t : o.inputs)
    l.materialize(t);
  const int p = o.inputs[0], m = o.inputs[1], v = o.inputs[2], gr = o.inputs[3], ss = o.inputs[4];
  const int np = o.outputs[0], nm = o.outputs[1], nv = o.outputs[2];
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
      8.0 * static_cast<double>(l.local(p).num_elements()));
  l.allow_overwrite(np, p);
  l.allow_overwrite(nm, m);
  l.allow_overwrite(nv, v);
}

constexpr auto adam_update_op =
    make_op_kind<AdamAttrs>("adam_update", {FlopClass::optimizer}, lower_adam_update);

struct AdafactorAttrs {
  double epsilon1 = 0.0, beta1 = 0.0;
};

void lower_adafactor_second_moment(Lowering& l, const AdafactorAttrs& attrs) {
  const Operation& o = l.op();
  for (int t : o.inputs)
    l.materialize(t);
  const int v = o.inputs[0], gr = o.inputs[1], dc = o.inputs[2];
  const int nv = o.outputs[0], up = o.outputs[1];
  const float eps1 = static_cast<float>(attrs.epsilon1);
  l.add_step(
      l.label(), {v, gr, dc}, {nv, up},
      [=](Buffers& b, const ExecSpace& space) {
        auto in = [&](int t) { return view_of<float>(b, t); };
        FView new_v = in(nv), update;
        kernels::adafactor_second_moment(space, in(v), in(gr), in(dc), eps1, new_v, update);
        b[static_cast<size_t>(nv)] = new_v;
        b[static_cast<size_t>(up)] = update;
      },
      7.0 * static_cast<double>(l.local(v).num_elements()));
  l.allow_overwrite(nv, v);
}

// Inputs {p, update, clip, scale} or, with momentum, {p, update, clip, scale, m}.
void lower_adafactor_apply(Lowering& l, const AdafactorAttrs& attrs) {
  const Operation& o = l.op();
  for (int t : o.inputs)
    l.materialize(t);
  const double beta1 = attrs.beta1;
  const int p = o.inputs[0], up = o.inputs[1], cl = o.inputs[2], sc = o.inputs[3];
  const int m = beta1 > 0.0 ? o.inputs[4] : -1;
  const int np = o.outputs[0], nm = beta1 > 0.0 ? o.outputs[1] : -1;
  std::vector<int> reads{p, up, cl, sc}, writes{np};
  if (m >= 0) {
    reads.push_back(m);
    writes.push_back(nm);
  }
  l.add_step(
      l.label(), reads, writes,
      [=](Buffers& b, const ExecSpace& space) {
        auto in = [&](int t) { return view_of<float>(b, t); };
        FView new_p = in(np), new_m = nm >= 0 ? in(nm) : FView();
        kernels::adafactor_apply(space, in(p), m >= 0 ? in(m) : FView(), in(up), in(cl), in(sc),
                                 beta1, new_p, new_m);
        b[static_cast<size_t>(np)] = new_p;
        if (nm >= 0)
          b[static_cast<size_t>(nm)] = new_m;
      },
      5.0 * static_cast<double>(l.local(p).num_elements()));
  l.allow_overwrite(np, p);
  if (m >= 0)
    l.allow_overwrite(nm, m);
}

constexpr auto adafactor_second_moment_op = make_op_kind<AdafactorAttrs>(
    "adafactor_second_moment", {FlopClass::optimizer}, lower_adafactor_second_moment);
constexpr auto adafactor_apply_op =
    make_op_kind<AdafactorAttrs>("adafactor_apply", {FlopClass::optimizer}, lower_adafactor_apply);

void require_like(const Tensor& t, const Tensor& like, const char* where) {
  require_float(t, where);
  if (t.shape() != like.shape())
    fail(where, cat("tensor ", describe(t), " does not match ", describe(like)));
}

void require_scalar(const Tensor& t, const char* where) {
  require_float(t, where);
  if (t.shape().rank() != 0)
    fail(where, cat("tensor ", describe(t), " must be a scalar"));
}

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
  return g.add_op(adam_update_op, {param, m, v, grad, step_size}, {out, out, out},
                  AdamAttrs{beta1, beta2, epsilon});
}

std::vector<Tensor> adafactor_second_moment(const Tensor& v, const Tensor& grad,
                                            const Tensor& decay, double epsilon1) {
  const char* where = "mtk::adafactor_second_moment";
  Graph& g = graph_of({v, grad, decay}, where);
  require_like(v, v, where);
  require_like(grad, v, where);
  require_scalar(decay, where);
  const std::pair<Shape, DType> out{v.shape(), DType::float32};
  return g.add_op(adafactor_second_moment_op, {v, grad, decay}, {out, out},
                  AdafactorAttrs{epsilon1, 0.0});
}

std::vector<Tensor> adafactor_apply(const Tensor& param, const Tensor& m, const Tensor& update,
                                    const Tensor& clip, const Tensor& scale, double beta1) {
  const char* where = "mtk::adafactor_apply";
  Graph& g = graph_of({param, update, clip, scale}, where);
  require_like(param, param, where);
  require_like(update, param, where);
  require_scalar(clip, where);
  require_scalar(scale, where);
  const std::pair<Shape, DType> out{param.shape(), DType::float32};
  if (beta1 > 0.0) {
    require_like(m, param, where);
    return g.add_op(adafactor_apply_op, {param, update, clip, scale, m}, {out, out},
                    AdafactorAttrs{0.0, beta1});
  }
  return g.add_op(adafactor_apply_op, {param, update, clip, scale}, {out},
                  AdafactorAttrs{0.0, beta1});
}

}  // namespace mtk
