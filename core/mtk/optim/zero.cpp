#include <mtk/base/error.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
#include <mtk/optim/optimizer.hpp>
#include <mtk/optim/zero.hpp>
#include <mtk/parallel/collectives.hpp>

namespace mtk::optim {
namespace {

// The mesh axis y newly splits the outermost dim of its slice over (dims before it of local size
// 1) when x is complete and otherwise laid out alike, else -1: y's slice is then a contiguous part
// of x's.
int outermost_slice_axis(Lowering& l, int x, int y) {
  const auto from = l.axes(x), to = l.axes(y);
  if (!l.pending(x).empty() || l.dtype(x) != DType::float32)
    return -1;
  int axis = -1;
  const Shape local = l.local(x);
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i])
      continue;
    if (from[i] >= 0 || axis >= 0 || Around(local, static_cast<int>(i)).outer != 1)
      return -1;
    axis = to[i];
  }
  return axis;
}

// The same values under other dim names (sizes equal), laid out as the output's names say: a
// view of a contiguous part (no copy), or the lowering's relayout: a slice, a reduce-scatter of
// a pending sum, or an allgather.
void view_as(Lowering& l, int x, int y) {
  if (const int a = outermost_slice_axis(l, x, y); a >= 0) {
    const std::int64_t n = l.local(y).num_elements(), off = n * l.coords()[static_cast<size_t>(a)];
    l.add_step(l.label() + " (a view of the local part)", {x}, {y},
               [=](Buffers& b, const ExecSpace&) {
                 const Kokkos::View<float*> part =
                     Kokkos::subview(view_of<float>(b, x), std::make_pair(off, off + n));
                 b[static_cast<size_t>(y)] = Program::Buffer(part);
               });
    return;
  }
  const int r = l.relayout(x, l.axes(y));
  l.materialize(r);
  l.add_alias(r, y);
}

void lower_zero_view(Lowering& l, const NoAttrs&) {
  view_as(l, l.op().inputs[0], l.op().outputs[0]);
}

constexpr auto zero_view_op =
    make_op_kind<NoAttrs>("zero_view", {FlopClass::none, true}, lower_zero_view);

Tensor zero_view(const Tensor& x, const Shape& shape, const std::string& name) {
  const char* where = "mtk::optim::zero_view";
  if (shape.rank() != x.shape().rank())
    fail(where, cat("tensor '", x.name(), "' ", x.shape().to_string(), " cannot be viewed as ",
                    shape.to_string()));
  for (int i = 0; i < shape.rank(); ++i)
    if (shape[i].size != x.shape()[i].size)
      fail(where, cat("tensor '", x.name(), "' ", x.shape().to_string(), " cannot be viewed as ",
                      shape.to_string(), ": dim ", i, " differs in size"));
  return x.graph().add_named_op1(zero_view_op, name, {x}, shape, x.dtype());
}

// The new value of variable `var` from its shard x: allgathered in place into the variable's own
// float32 storage, which the shard's own part may already be (the update wrote it in place), so
// the assignment after it has nothing to copy and no second copy of the variable lives to the
// end of the run (analysis alike: nothing runs). Otherwise (bfloat16 storage, a shard dim that is
// not outermost) the relayout's allgather into a new buffer. The overlap pass may start it here and
// wait for it at the end of the run (program.overlap_allgather).
void lower_zero_gather(Lowering& l, const NoAttrs&) {
  const int var = l.op().inputs[0], x = l.op().inputs[1], y = l.op().outputs[0];
  const Graph& g = l.graph();
  const bool stored_f32 = g.variable_attrs(g.tensor_info(var).producer).storage == DType::float32;
  const int a = outermost_slice_axis(l, y, x);  // y -> x is the slice that x -> y undoes
  if (!stored_f32 || a < 0 || !l.pending(x).empty()) {
    view_as(l, x, y);
    return;
  }
  Program::Buffer* storage = l.variable_storage(var);
  const Mesh mesh = l.mesh();
  const std::int64_t n = l.local(x).num_elements(), off = n * l.coords()[static_cast<size_t>(a)];
  l.count_comm(Collective::allconcat, l.local_bytes(x), {a});
  l.add_step(
      l.label() + " (allgather in place into the variable)", {x, var}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        const Kokkos::View<float*> full = storage->view<float>();
        const auto part = view_of<float>(b, x);
        if (part.data() != full.data() + off)
          Kokkos::deep_copy(space, Kokkos::subview(full, std::make_pair(off, off + n)), part);
        space.fence();
        allgather_in_place<float>(mesh, a, full);
        b[static_cast<size_t>(y)] = Program::Buffer(full);
      },
      0, Program::Category::collective);
  l.mark_in_variable_storage(y);
  l.mark_overlappable_gather(y, {var, x, a, storage, off, n});
}

constexpr auto zero_gather_op =
    make_op_kind<NoAttrs>("zero_gather", {FlopClass::none, false}, lower_zero_gather);

Shape renamed(const Shape& s, const std::string& from, const std::string& to) {
  std::vector<Dimension> dims = s.dims();
  for (auto& d : dims)
    if (d.name == from)
      d.name = to;
  return Shape(dims);
}

}  // namespace

ZeroSharding::ZeroSharding(ShardOptions o) : o_(std::move(o)) {
  axis_ = o_.rules.mesh_axis_for(o_.batch_dim, o_.mesh);
  if (axis_ < 0)
    return;
  mesh_dim_ = o_.mesh[axis_].name;
  ranks_ = static_cast<int>(o_.mesh[axis_].size);
}

int ZeroSharding::shard_dim(const Tensor& var) const {
  const Shape& s = var.shape();
  if (!active() || s.num_elements() * 4 < o_.min_bytes || s.contains(o_.batch_dim))
    return -1;
  for (const auto& d : s.dims())
    if (o_.rules.mesh_axis_for(d.name, o_.mesh) == axis_)
      return -1;  // already split over the data-parallel dim
  for (int i = 0; i < s.rank(); ++i) {
    const int a = o_.rules.mesh_axis_for(s[i].name, o_.mesh);
    if ((a < 0 || o_.mesh[a].size == 1) && s[i].size % ranks_ == 0)
      return i;
  }
  return -1;
}

Shape ZeroSharding::sharded_shape(const Shape& s, int dim) const {
  return dim < 0 ? s : renamed(s, s[dim].name, o_.batch_dim);
}

Tensor ZeroSharding::shard(const Tensor& x, int dim, const std::string& name) const {
  return dim < 0 ? x : zero_view(x, sharded_shape(x.shape(), dim), name);
}

Tensor ZeroSharding::gather_into(const Tensor& var, const Tensor& x) const {
  if (x.shape() == var.shape())
    return x;
  if (x.shape().rank() != var.shape().rank())
    fail("mtk::optim::ZeroSharding::gather_into",
         cat("shard '", x.name(), "' ", x.shape().to_string(), " of variable '", var.name(), "' ",
             var.shape().to_string(), " differs in rank"));
  return var.graph().add_named_op1(zero_gather_op, var.name() + "/zero_gather", {var, x},
                                   var.shape(), var.dtype());
}

Tensor ZeroSharding::unshard(const Tensor& x, const Shape& full, const std::string& name) const {
  return x.shape() == full ? x : zero_view(x, full, name);
}

std::vector<Tensor> ZeroSharding::gradients(const std::vector<Tensor>& vars,
                                            const std::vector<Tensor>& grads) const {
  if (vars.size() != grads.size())
    fail("mtk::optim::ZeroSharding::gradients", "one gradient per variable");
  std::vector<Tensor> out = grads;
  for (size_t k = 0; k < vars.size(); ++k) {
    const int d = shard_dim(vars[k]);
    if (d >= 0 && grads[k].valid() && grads[k].shape() == vars[k].shape())
      out[k] = shard(grads[k], d, vars[k].name() + "/zero_grad");
  }
  return out;
}

ZeroSharding::Slot ZeroSharding::slot(const Tensor& var, const std::string& suffix,
                                      const Shape& shape, DType storage) {
  const int d = shard_dim(var);
  Slot s;
  if (d < 0 || !shape.contains(o_.batch_dim)) {
    s.variable = s.value = slot_variable(var, suffix, shape, storage);
    return s;
  }
  s.full_dim = var.shape()[d].name;
  s.variable = slot_variable(var, suffix, renamed(shape, o_.batch_dim, s.full_dim), storage);
  split_.emplace_back(s.variable.name(), s.full_dim);
  s.value = zero_view(s.variable, shape, s.variable.name() + "/zero_shard");
  return s;
}

void ZeroSharding::assign(const Slot& s, const Tensor& value) {
  if (s.full_dim.empty()) {
    mtk::assign(s.variable, value);
    return;
  }
  const Tensor full = zero_view(value, s.variable.shape(), s.variable.name() + "/zero_value");
  split_.emplace_back(full.name(), s.full_dim);
  mtk::assign(s.variable, full);
}

LayoutRules ZeroSharding::layout_rules(const LayoutRules& base) const {
  LayoutRules r = base;
  for (const auto& [tensor, dim] : split_)
    r = r.with_tensor(tensor, dim, mesh_dim_);
  return r;
}

}  // namespace mtk::optim
