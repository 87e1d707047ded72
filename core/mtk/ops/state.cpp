// Training state: stop_gradient, assign (set, add, subtract).
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
// make_op_kind names gradient<A> (defined there) also for ops without a gradient.
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/random.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/state.hpp>

#include <cstdint>
#include <utility>

namespace mtk {
namespace {

using namespace ops_impl;

// ------------------------------------------------------------------------- stop_gradient
// No gradient function: gradients stop here.
void lower_stop_gradient(Lowering& l, const NoAttrs&) {
  const int x = l.op().inputs[0], y = l.op().outputs[0];
  l.materialize(x);
  l.add_step(l.label(), {x}, {y}, [=](Buffers& b, const ExecSpace&) {
    b[static_cast<size_t>(y)] = b[static_cast<size_t>(x)];
  });
}

constexpr auto stop_gradient_op = make_op_kind<NoAttrs>(
    "stop_gradient", {FlopClass::none, true, false, true}, lower_stop_gradient);

// -------------------------------------------------------------------------------- assign
enum class AssignMode { set, add, subtract };

struct AssignAttrs {
  AssignMode mode = AssignMode::set;
};

// A bfloat16 variable: the value, computed in float32, is rounded into the storage by a step
// right where it is computed, so the float32 value dies there instead of living to the end of the
// run. The run still sees the old value: its steps read the float32 copy the variable's read step
// made before (ops/sources.cpp), and nothing reads the storage again in the run (recomputed reads
// run before the backward, and updates come after it).
// Stochastic rounding draws its bits from (the variable's name, Program::step(), the element's
// global index): the same on every mesh and layout, fresh each step, and after a restart the same
// as without one (checkpoints keep Program::step()).
void lower_bfloat16_assign(Lowering& l, AssignMode mode, int var, int val,
                           Program::Buffer* storage) {
  const float sign = mode == AssignMode::set ? 0.f : mode == AssignMode::add ? 1.f : -1.f;
  const Graph& g = l.graph();
  const int producer = g.tensor_info(var).producer;
  Program::StepFn body;
  if (g.variable_attrs(producer).rounding == Rounding::stochastic) {
    const Shape gs = l.layout(var).shape(), ls = l.local(var);
    const auto origin = l.layout(var).slice_origin(l.coords());
    // Salted so that the bits differ from a random op seeded with the same hash.
    const std::uint64_t seed = kernels::hash_name(g.op(producer).name) ^ 0x5352424631360000ull;
    const Program* p = l.program();
    body = [=](Buffers& b, const ExecSpace& space) {
      kernels::store_bfloat16_stochastic(space, b[static_cast<size_t>(val)].view<float>(), sign,
                                         storage->view<std::uint16_t>(), gs, ls, origin, seed,
                                         static_cast<std::uint64_t>(p->step()));
    };
  } else {
    body = [=](Buffers& b, const ExecSpace& space) {
      kernels::store_bfloat16(space, b[static_cast<size_t>(val)].view<float>(), sign,
                              storage->view<std::uint16_t>());
    };
  }
  l.add_step(l.label() + " (bfloat16 storage)", {val}, {}, std::move(body), 0,
             Program::Category::other);
}

void lower_assign(Lowering& l, const AssignAttrs& attrs) {
  const Operation& o = l.op();
  const int var = o.inputs[0], val = o.inputs[1];
  l.materialize(val);
  const AssignMode mode = attrs.mode;
  Program::Buffer* storage = l.variable_storage(var);
  l.count_flops(FlopClass::assign, static_cast<double>(l.local(val).num_elements()));
  const Graph& g = l.graph();
  if (g.variable_attrs(g.tensor_info(var).producer).storage == DType::bfloat16) {
    l.note_assignment(var, val, mode == AssignMode::set);
    lower_bfloat16_assign(l, mode, var, val, storage);
    return;
  }
  l.add_assignment(
      l.label(), val, var,
      [=](Buffers& b, const ExecSpace& space) {
        const Program::Buffer& v = b[static_cast<size_t>(val)];
        if (mode == AssignMode::set) {
          if (v.data() !=
              storage->data())  // else written in place (mtk/lower/in_place_updates.hpp)
            *storage = v;
        } else {
          kernels::axpy<float>(space, mode == AssignMode::add ? 1.f : -1.f, v.view<float>(),
                               storage->view<float>());
        }
      },
      mode == AssignMode::set);
}

constexpr auto assign_kind = make_op_kind<AssignAttrs>("assign", {FlopClass::none}, lower_assign);

Tensor assign_op(const Tensor& var, const Tensor& value, AssignMode mode, const char* where) {
  Graph& g = graph_of({var, value}, where);
  if (!g.op(var.producer()).def->is_variable)
    fail(where, cat("target ", describe(var), " is not a variable"));
  if (value.shape() != var.shape() || value.dtype() != var.dtype())
    fail(where, cat("value ", describe(value), " does not match variable ", describe(var)));
  return g.add_named_op1(assign_kind, std::string("assign_") + var.name(), {var, value}, Shape(),
                         var.dtype(), AssignAttrs{mode});
}

}  // namespace

Tensor stop_gradient(const Tensor& x) {
  graph_of({x}, "mtk::stop_gradient");
  return x.graph().add_op1(stop_gradient_op, {x}, x.shape(), x.dtype());
}

Tensor assign(const Tensor& v, const Tensor& x) {
  return assign_op(v, x, AssignMode::set, "mtk::assign");
}
Tensor assign_add(const Tensor& v, const Tensor& x) {
  return assign_op(v, x, AssignMode::add, "mtk::assign_add");
}
Tensor assign_sub(const Tensor& v, const Tensor& x) {
  return assign_op(v, x, AssignMode::subtract, "mtk::assign_sub");
}

}  // namespace mtk
