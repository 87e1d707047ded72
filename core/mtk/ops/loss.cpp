// Fused losses: softmax_cross_entropy and its gradient op softmax_cross_entropy_grad.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/loss.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/loss.hpp>
#include <mtk/parallel/collectives.hpp>

namespace mtk {
namespace {

using namespace ops_impl;
using kernels::FView;

// Fused cross-entropy: row statistics of the local vocabulary slice in one read of the logits,
// combined over the mesh axis that splits the vocabulary (the max, then the sum of exponentials
// rebased on it, the target logit and the logit sum in one allreduce).
void lower_cross_entropy(Lowering& l, const CrossEntropyAttrs& a) {
  const Operation& o = l.op();
  const int x = o.inputs[0], t = o.inputs[1], loss = o.outputs[0], lse_out = o.outputs[1];
  l.materialize(x);
  const TensorLayout& lay = l.layout(x);
  const int d = lay.shape().index_of(a.dim);
  const int axis =
      lay.mesh_axis(d) >= 0 && l.mesh_shape()[lay.mesh_axis(d)].size > 1 ? lay.mesh_axis(d) : -1;
  const std::int64_t origin = lay.slice_origin(l.coords())[static_cast<size_t>(d)];
  const std::int64_t V = lay.shape()[d].size;
  const Shape lx = l.local(x), lr = l.local(loss);
  const double ls = a.label_smoothing, z = a.z_loss;
  const Mesh mesh = l.mesh();
  if (axis >= 0) {  // the slices' maxima, then the three rebased sums in one call
    const std::int64_t row_bytes =
        lr.num_elements() * static_cast<std::int64_t>(dtype_bytes(DType::float32));
    l.count_comm(Collective::allreduce, row_bytes, {axis});
    l.count_comm(Collective::allreduce, 3 * row_bytes, {axis});
  }
  l.add_step(
      l.label() + (axis >= 0 ? " (vocabulary split over " + l.mesh_shape()[axis].name + ")" : ""),
      {x, t}, {loss, lse_out},
      [=](Buffers& b, const ExecSpace& space) {
        FView st = kernels::cross_entropy_stats(space, lx, view_of<float>(b, x), d,
                                                view_of<std::int32_t>(b, t), origin);
        if (axis >= 0) {
          const std::int64_t n = lr.num_elements();
          FView m = uninitialized_view<float>("mtk::softmax_cross_entropy/max", n);
          Kokkos::deep_copy(space, m, Kokkos::subview(st, std::make_pair(std::int64_t{0}, n)));
          allreduce<float>(mesh, {axis}, m, ReduceOp::max);
          kernels::cross_entropy_rebase(space, st, m);
          FView sums = Kokkos::subview(st, std::make_pair(n, 4 * n));  // s, x_t, sum x
          allreduce<float>(mesh, {axis}, sums);
        }
        FView out, lse;
        kernels::cross_entropy_from_stats(space, st, ls, V, z, out, lse);
        b[static_cast<size_t>(loss)] = out;
        b[static_cast<size_t>(lse_out)] = lse;
      },
      4.0 * static_cast<double>(lx.num_elements()));
}

void lower_cross_entropy_grad(Lowering& l, const CrossEntropyAttrs& a) {
  const Operation& o = l.op();
  const int x = o.inputs[0], t = o.inputs[1], lse = o.inputs[2], dy = o.inputs[3],
            dx = o.outputs[0];
  for (int k : {x, lse, dy})
    l.materialize(k);
  const int d = l.layout(x).shape().index_of(a.dim);
  const std::int64_t origin = l.layout(x).slice_origin(l.coords())[static_cast<size_t>(d)];
  const std::int64_t V = l.layout(x).shape()[d].size;
  const Shape lx = l.local(x);
  const double ls = a.label_smoothing, z = a.z_loss;
  const Program* program = l.program();
  l.add_step(
      l.label(), {x, t, lse, dy}, {dx},
      [=](Buffers& b, const ExecSpace& space) {
        // The gradient's kept bf16 copy (both of its bf16 products read it), written here.
        const ProducedBf16Copy copy(*program, dx, lx.num_elements(),
                                    "mtk::kernels::cross_entropy_grad bf16 copy");
        const FView g = kernels::cross_entropy_grad(
            space, lx, view_of<float>(b, x), d, view_of<std::int32_t>(b, t), origin,
            view_of<float>(b, lse), view_of<float>(b, dy), ls, V, z,
            in_place_output<float>(b, dx, {x}), copy.bits(), copy.bits_only());
        b[static_cast<size_t>(dx)] = g;
        copy.keep(g);
      },
      3.0 * static_cast<double>(lx.num_elements()));
  l.mark_bf16_writes({dx}, true);
  if (l.local(dx) == lx)
    l.allow_overwrite(dx, x);  // the logits die here: their gradient may take their buffer
}

constexpr auto cross_entropy_grad_op = make_op_kind<CrossEntropyAttrs>(
    "softmax_cross_entropy_grad", {FlopClass::softmax}, lower_cross_entropy_grad);

// d loss / d logits by one fused op that reads the saved log-sum-exp (output 1).
void cross_entropy_grad(GradientContext& c, const CrossEntropyAttrs& attrs) {
  const Tensor logits = c.input(0), targets = c.input(1), lse = c.output(1);
  c.add(0, c.graph().add_op1(cross_entropy_grad_op, {logits, targets, lse, c.dy()}, logits.shape(),
                             DType::float32, attrs));
}

constexpr auto cross_entropy_op = make_op_kind<CrossEntropyAttrs>(
    "softmax_cross_entropy", {FlopClass::softmax}, lower_cross_entropy, cross_entropy_grad);

}  // namespace

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const std::string& dim,
                             double label_smoothing, double z_loss) {
  const char* where = "mtk::softmax_cross_entropy";
  Graph& g = graph_of({logits, targets}, where);
  require_float(logits, where);
  if (targets.dtype() != DType::int32)
    fail(where, cat("targets ", describe(targets), " must be int32"));
  const int d = dim_index(logits, dim, where);
  auto dims = logits.shape().dims();
  dims.erase(dims.begin() + d);
  if (Shape(dims) != targets.shape())
    fail(where, cat("targets ", describe(targets), " must have the shape of logits ",
                    describe(logits), " without '", dim, "': ", Shape(dims).to_string()));
  if (label_smoothing < 0 || label_smoothing >= 1)
    fail(where, cat("label smoothing ", label_smoothing, " not in [0, 1)"));
  auto out = g.add_op(cross_entropy_op, {logits, targets},
                      {{targets.shape(), DType::float32}, {targets.shape(), DType::float32}},
                      CrossEntropyAttrs{dim, label_smoothing, z_loss});
  return out[0];
}

Tensor softmax_cross_entropy_log_sum_exp(const Tensor& loss) {
  Graph& g = loss.graph();
  const Operation& op = g.op(loss.producer());
  if (!cross_entropy_op.is(op) || op.outputs[0] != loss.id())
    fail("mtk::softmax_cross_entropy_log_sum_exp",
         cat("'", loss.name(), "' is not the loss of a softmax_cross_entropy"));
  return g.tensor(op.outputs[1]);
}

}  // namespace mtk
