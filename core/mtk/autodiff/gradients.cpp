#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/sources.hpp>

#include <atomic>
#include <map>
#include <set>

namespace mtk {
namespace {

std::atomic<bool> g_fused_sums{true};

// By tensor: whether it depends on some x. Only those need a gradient: an attention bias built
// from the inputs gets none, so no op is added (and none runs) to sum the logits' gradient to its
// shape.
std::vector<bool> dependents(const Graph& g, const std::vector<Tensor>& xs, int last_op) {
  std::vector<bool> depends(static_cast<size_t>(g.num_tensors()), false);
  for (const auto& x : xs)
    if (x.valid() && &x.graph() == &g)
      depends.at(static_cast<size_t>(x.id())) = true;
  for (int oi = 0; oi <= last_op; ++oi) {
    const Operation& op = g.op(oi);
    bool any = false;
    for (int t : op.inputs)
      any = any || depends.at(static_cast<size_t>(t));
    if (any)
      for (int t : op.outputs)
        depends.at(static_cast<size_t>(t)) = true;
  }
  return depends;
}

}  // namespace

void set_fused_gradient_sums(bool on) {
  g_fused_sums.store(on, std::memory_order_relaxed);
}

bool fused_gradient_sums() {
  return g_fused_sums.load(std::memory_order_relaxed);
}

// The generic reverse sweep; each op's own gradient lives with the op (OpDef::gradient).
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& xs) {
  return gradients(loss, xs, {});
}

std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& xs,
                              const std::vector<Tensor>& initial) {
  if (!initial.empty() && initial.size() != xs.size())
    fail("mtk::gradients",
         cat(initial.size(), " initial gradients for ", xs.size(), " tensors; give one each"));
  if (!loss.valid())
    fail("mtk::gradients", "the loss tensor handle is empty");
  if (loss.dtype() != DType::float32)
    fail("mtk::gradients", cat("loss '", loss.name(), "' must be float32"));
  Graph& g = loss.graph();
  const int last_op = loss.producer();
  const std::vector<bool> depends = dependents(g, xs, last_op);
  auto needs = [&](int id) {
    return static_cast<size_t>(id) < depends.size() && depends[static_cast<size_t>(id)];
  };
  std::map<int, Tensor> grad;  // tensor id -> accumulated gradient
  // The xs whose later gradient parts may be contracted into the sum so far: those given an
  // initial sum (microbatches) and every x with fan-in (a weight read by several ops: the loss
  // head's slices, a shared table), so that no part is alive apart from the sum.
  std::set<int> summed;
  if (fused_gradient_sums())
    for (const auto& x : xs)
      if (x.valid() && &x.graph() == &g)
        summed.insert(x.id());
  std::set<int> no_sum;  // the xs given no running sum (an invalid initial): parts kept apart
  auto running_sum = [&](int id) {
    auto it = grad.find(id);
    return summed.count(id) && !no_sum.count(id) && it != grad.end() ? it->second : Tensor();
  };
  auto accumulate = [&](int id, const Tensor& d) {
    if (!d.valid() || !needs(id))
      return;
    const auto& info = g.tensor_info(id);
    if (info.dtype != DType::float32)
      return;
    Tensor shaped = d.shape() == info.shape ? d : sum_to(d, info.shape);
    auto it = grad.find(id);
    if (it == grad.end())
      grad.emplace(id, shaped);
    else if (accumulates_into(shaped, it->second))
      it->second = shaped;  // the part was contracted into the sum (GradientContext::running_sum)
    else
      it->second = it->second + shaped;
  };
  grad.emplace(loss.id(), constant(g, loss.shape(), 1.0));
  for (size_t i = 0; i < initial.size(); ++i) {
    if (!initial[i].valid()) {  // no running sum for this x
      no_sum.insert(xs[i].id());
      continue;
    }
    if (initial[i].shape() != xs[i].shape())
      fail("mtk::gradients",
           cat("initial gradient '", initial[i].name(), "' ", initial[i].shape().to_string(),
               " for '", xs[i].name(), "' ", xs[i].shape().to_string()));
    if (needs(xs[i].id()))
      grad.emplace(xs[i].id(), initial[i]);
  }

  for (int oi = last_op; oi >= 0; --oi) {
    const Operation op = g.op(oi);  // copy: the loop appends ops
    if (!op.def->gradient)
      continue;
    auto it = grad.find(op.outputs[0]);
    if (it == grad.end())
      continue;
    // The gradient's ops contract in the precision its forward op was built in (a bf16 model's
    // backward is bf16 too), whatever the graph's precision is now.
    // The gradient ops of a recomputed segment's op form that segment's backward part.
    const Precision saved = g.contraction_precision();
    const RecomputeTag saved_tag = g.recompute_tag();
    g.set_contraction_precision(op.precision);
    g.set_recompute_tag(op.recompute.segment >= 0 ? RecomputeTag{op.recompute.segment, true}
                                                  : RecomputeTag{});
    GradientContext ctx(g, op, it->second, accumulate, needs, running_sum);
    try {
      op.def->gradient(*op.def, ctx);
    } catch (...) {
      g.set_contraction_precision(saved);
      g.set_recompute_tag(saved_tag);
      throw;
    }
    g.set_contraction_precision(saved);
    g.set_recompute_tag(saved_tag);
  }

  std::vector<Tensor> out;
  for (const auto& x : xs) {
    if (!x.valid() || &x.graph() != &g)
      fail("mtk::gradients", "a tensor of another graph");
    auto it = grad.find(x.id());
    const size_t i = out.size();
    out.push_back(it != grad.end()                         ? it->second
                  : initial.empty() || !initial[i].valid() ? constant(g, x.shape(), 0.0)
                                                           : initial[i]);
  }
  return out;
}

}  // namespace mtk
