#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/error.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
#include <mtk/optim/optimizer.hpp>

#include <algorithm>
#include <map>
#include <string>

namespace mtk::optim {

Tensor global_step(Graph& g) {
  for (int i : g.variable_ops())
    if (g.op(i).name == "global_step")
      return g.tensor(g.op(i).outputs[0]);
  return variable(g, "global_step", Shape(), Initializer::zeros(), false);
}

Tensor slot_variable(const Tensor& var, const std::string& suffix, const Shape& shape,
                     DType storage) {
  Tensor slot =
      variable(var.graph(), var.name() + "/" + suffix, shape, Initializer::zeros(), false);
  var.graph().set_variable_storage(slot.name(), storage);
  return slot;
}

void Optimizer::set_state_dtypes(DType variables, DType slots, Rounding variable_rounding) {
  const char* where = "mtk::optim::Optimizer::set_state_dtypes";
  for (DType d : {variables, slots})
    if (d != DType::float32 && d != DType::bfloat16)
      fail(where,
           cat("variables and slots are stored as float32 or bfloat16, not ", dtype_name(d)));
  // float32 variables are not rounded: accepting it would be a silent no-op.
  if (variable_rounding == Rounding::stochastic && variables != DType::bfloat16)
    fail(where, cat("stochastic rounding needs bfloat16 variables, not ", dtype_name(variables)));
  variable_dtype_ = variables;
  slot_dtype_ = slots;
  variable_rounding_ = variable_rounding;
}

void Optimizer::store_variables(const std::vector<Tensor>& vars) const {
  for (const Tensor& v : vars)
    v.graph().set_variable_storage(v.name(), variable_dtype_, variable_rounding_);
}

Tensor global_norm(const std::vector<Tensor>& tensors) {
  if (tensors.empty())
    fail("mtk::optim::global_norm", "no tensors");
  // Tensors of the same dims have the same layout, so their partial sums (pending over the same
  // mesh dims) add up before one allreduce: one per group rather than one per tensor.
  std::map<std::vector<std::string>, Tensor> sums;
  for (const Tensor& t : tensors) {
    auto dims = t.shape().names();
    std::sort(dims.begin(), dims.end());
    const Tensor x = t.dtype() == DType::float32 ? t : cast(t, DType::float32);
    const Tensor s = reduce_sum_squares(x);  // one pass, no squares' tensor
    auto [it, fresh] = sums.emplace(dims, s);
    if (!fresh)
      it->second = it->second + s;
  }
  Tensor total;
  for (const auto& [dims, s] : sums)
    total = total.valid() ? total + s : s;
  return sqrt(total);
}

Tensor minimize(const Tensor& loss, Optimizer& optimizer, const LearningRateSchedule& schedule,
                Tensor* gradient_norm) {
  Graph& g = loss.graph();
  auto vars = g.trainable_variables();
  // Sharded first: the norm then reads the reduce-scattered shards, not the allreduced whole.
  auto grads = optimizer.shard_gradients(vars, gradients(loss, vars));
  if (gradient_norm)
    *gradient_norm = global_norm(grads);
  Tensor step = global_step(g);
  Tensor lr = schedule.build(step);
  optimizer.apply(vars, grads, step, lr);
  assign_add(step, constant(g, Shape(), 1.0));
  return lr;
}

}  // namespace mtk::optim
