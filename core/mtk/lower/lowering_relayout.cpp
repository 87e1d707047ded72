#include <mtk/base/error.hpp>
#include <mtk/lower/impl/step_kinds.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/relayout.hpp>

#include <algorithm>

namespace mtk {

// Pending partial sums and layout changes: allreduce, reduce-scatter and relayout steps.

using namespace lowering_kinds;

void Lowering::materialize(int t) {
  auto ax = pending_[static_cast<size_t>(t)];
  if (ax.empty())
    return;
  pending_[static_cast<size_t>(t)].clear();
  count_comm(Collective::allreduce, local_bytes(t), ax);
  const Mesh mesh = mesh_;
  std::string names;
  for (int a : ax)
    names += (names.empty() ? "" : ",") + shape_[a].name;
  add_step_of(
      allreduce_step.def, cat("allreduce(sum) of ", describe(t), " over ", names), {t}, {t},
      [mesh, ax, t](Buffers& b, const ExecSpace&) {
        allreduce<float>(mesh, ax, b[static_cast<size_t>(t)].view<float>());
      },
      0, Program::Category::collective);
  p_->steps_.back().sum_axes = ax;  // the overlap pass may move it
}

// A partial sum pending over a mesh axis that `to` splits a whole dim over: one reduce-scatter
// along that dim (half an allreduce's traffic, no slicing after it) instead of allreduce + slice.
// t itself stays pending: another reader still gets the whole sum.
int Lowering::reduce_scatter_pending(int t, const std::vector<int>& to) {
  if (dtype(t) != DType::float32)
    return t;
  int cur = t;
  for (size_t j = 0; j < to.size(); ++j) {
    const int a = to[j];
    const auto from = axes(cur);
    const auto& pend = pending_[static_cast<size_t>(cur)];
    if (a < 0 || from[j] >= 0 || std::find(pend.begin(), pend.end(), a) == pend.end() ||
        std::find(from.begin(), from.end(), a) != from.end())
      continue;
    auto ax = from;
    ax[j] = a;
    std::vector<int> rest;
    for (int p : pend)
      if (p != a)
        rest.push_back(p);
    const int out = new_temp(layout(cur).shape(), ax, DType::float32);
    pending_[static_cast<size_t>(out)] = rest;
    count_comm(Collective::reduce_scatter, local_bytes(out), {a});
    const Mesh mesh = mesh_;
    const Shape local_shape = local(cur);
    const int dim = static_cast<int>(j), in = cur;
    add_step_of(
        reduce_scatter_step.def,
        cat("reduce_scatter(sum) of ", describe(in), " over ", shape_[a].name, " along '",
            local_shape[dim].name, "'"),
        {in}, {out},
        [=](Buffers& b, const ExecSpace&) {
          b[static_cast<size_t>(out)] = Program::Buffer(reduce_scatter<float>(
              mesh, a, local_shape, dim, b[static_cast<size_t>(in)].view<float>()));
        },
        0, Program::Category::collective);
    p_->steps_.back().sum_axes = {a};  // the overlap pass may start it early
    scatters_[out] = {local_shape, dim};
    cur = out;
  }
  return cur;
}

int Lowering::relayout(int t, const std::vector<int>& to) {
  if (to == axes(t))
    return t;
  t = reduce_scatter_pending(t, to);
  materialize(t);  // what is still pending (over other axes)
  if (to == axes(t))
    return t;
  const Shape& s = layout(t).shape();
  auto plan = plan_relayout(s, axes(t), to, shape_);
  const DType dt = dtype(t);
  int out = new_temp(s, to, dt);
  for (const auto& m : plan) {
    const std::int64_t bytes =
        m.local_before.num_elements() * static_cast<std::int64_t>(dtype_bytes(dt));
    if (m.kind == RelayoutMove::Kind::allconcat)
      count_comm(Collective::allconcat, bytes, {m.axis});
    if (m.kind == RelayoutMove::Kind::alltoall)
      count_comm(Collective::alltoall, bytes, {m.axis});
  }
  const Mesh mesh = mesh_;
  add_step_of(
      relayout_step.def, cat("relayout ", describe(t), ": ", describe_relayout(plan, shape_)), {t},
      {out},
      [mesh, plan, t, out, dt](Buffers& b, const ExecSpace& space) {
        const Program::Buffer& src = b[static_cast<size_t>(t)];
        b[static_cast<size_t>(out)] = visit_dtype(dt, [&](auto v) {
          using T = decltype(v);
          return Program::Buffer(run_relayout<T>(space, mesh, plan, src.view<T>()));
        });
      },
      0, Program::Category::collective);
  return out;
}

int Lowering::gather_dims(int t, const std::set<std::string>& dims) {
  auto to = axes(t);
  for (int i = 0; i < layout(t).shape().rank(); ++i)
    if (dims.count(layout(t).shape()[i].name))
      to[static_cast<size_t>(i)] = -1;
  return relayout(t, to);
}

void Lowering::require_whole(int t, const std::string& dim) {
  const TensorLayout& l = layout(t);
  int i = l.shape().index_of(dim);
  if (i >= 0 && l.mesh_axis(i) >= 0 && shape_[l.mesh_axis(i)].size > 1)
    fail("mtk::lower",
         cat(label(), " needs dimension '", dim, "' whole, but tensor ", describe(t),
             " splits it over mesh dimension '", shape_[l.mesh_axis(i)].name, "' of size ",
             shape_[l.mesh_axis(i)].size, "; change the layout rule for '", dim, "'"));
}

}  // namespace mtk
