// Indexing: one_hot, gather, scatter_add.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/indexing.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/indexing.hpp>

#include <algorithm>
#include <set>

namespace mtk {
namespace {

using namespace ops_impl;

// ------------------------------------------------------------------------------- one_hot
void lower_one_hot(Lowering& l, const OneHotAttrs& a) {
  const Operation& o = l.op();
  const int ids = o.inputs[0], y = o.outputs[0];
  const int d = l.layout(y).shape().index_of(a.dim);
  const std::int64_t origin = l.layout(y).slice_origin(l.coords())[static_cast<size_t>(d)];
  const Shape li = l.local(ids), ly = l.local(y);
  const float on = static_cast<float>(a.on), off = static_cast<float>(a.off);
  l.add_step(
      l.label(), {ids}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] =
            kernels::one_hot(space, li, view_of<std::int32_t>(b, ids), ly, d, origin, on, off);
      },
      static_cast<double>(ly.num_elements()));
}

constexpr auto one_hot_op =
    make_op_kind<OneHotAttrs>("one_hot", {FlopClass::elementwise}, lower_one_hot);

// -------------------------------------------------------------------- gather, scatter_add
void gather_grad(GradientContext& c, const GatherAttrs& attrs) {
  const Tensor table = c.input(0), ids = c.input(1);
  if (c.needs(0))  // no table-sized op when only the rows' gradient is asked for
    c.add(0, scatter_add(ids, c.dy(), table.shape(), attrs.dim));
}

void lower_gather(Lowering& l, const GatherAttrs& attrs) {
  const Operation& o = l.op();
  const std::string& dim = attrs.dim;
  int table = o.inputs[0];
  const int ids = o.inputs[1], y = o.outputs[0];
  l.materialize(table);
  int d = l.layout(table).shape().index_of(dim);
  int axis = l.layout(table).mesh_axis(d);
  if (axis >= 0 && l.layout(y).tensor_dim_on(axis) >= 0) {
    table = l.gather_dims(table, {dim});
    axis = -1;
  }
  const std::int64_t origin = l.layout(table).slice_origin(l.coords())[static_cast<size_t>(d)];
  if (axis >= 0)
    l.pending(y) = {axis};  // rows outside the slice are 0
  const Shape lt = l.local(table), li = l.local(ids), ly = l.local(y);
  l.add_step(
      l.label(), {table, ids}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] = kernels::gather(space, lt, view_of<float>(b, table), d, origin,
                                                    li, view_of<std::int32_t>(b, ids), ly);
      },
      static_cast<double>(ly.num_elements()));
}

constexpr auto gather_op =
    make_op_kind<GatherAttrs>("gather", {FlopClass::gather}, lower_gather, gather_grad);

void scatter_add_grad(GradientContext& c, const GatherAttrs& attrs) {
  const Tensor ids = c.input(0), upd = c.input(1);
  c.add(1, sum_to(gather(c.dy(), ids, attrs.dim), upd.shape()));
}

// Dims summed away (in ids/updates, not in the table): their split axes leave partial sums. Such
// a dim split over an axis that also splits the table is gathered first. When the updates, gathered
// whole over the remaining split summed dims, are smaller than this rank's table slice (an
// embedding's gradient: a batch of rows against a whole vocabulary), they are gathered instead:
// an allconcat of the few rows replaces an allreduce of the table, and every rank then sums the
// positions in the one-processor order.
std::vector<int> scatter_pending(Lowering& l, int& ids, int& upd, int y) {
  const Shape& ts = l.layout(y).shape();
  std::set<std::string> summed;
  for (int t : {ids, upd})
    for (const auto& dm : l.layout(t).shape().dims())
      if (!ts.contains(dm.name))
        summed.insert(dm.name);
  std::set<std::string> conflict;
  for (int t : {ids, upd})
    for (int i = 0; i < l.layout(t).shape().rank(); ++i)
      if (summed.count(l.layout(t).shape()[i].name) && l.layout(t).mesh_axis(i) >= 0 &&
          l.layout(y).tensor_dim_on(l.layout(t).mesh_axis(i)) >= 0)
        conflict.insert(l.layout(t).shape()[i].name);
  std::int64_t gathered = l.local(upd).num_elements();
  for (int i = 0; i < l.layout(upd).shape().rank(); ++i) {
    const int a = l.layout(upd).mesh_axis(i);
    if (summed.count(l.layout(upd).shape()[i].name) && a >= 0)
      gathered *= l.mesh_shape()[a].size;
  }
  if (gathered < l.local(y).num_elements())
    conflict = summed;
  ids = l.gather_dims(ids, conflict);
  upd = l.gather_dims(upd, conflict);
  std::vector<int> p;
  for (int t : {upd, ids})
    for (int i = 0; i < l.layout(t).shape().rank(); ++i)
      if (summed.count(l.layout(t).shape()[i].name) && l.layout(t).mesh_axis(i) >= 0)
        p.push_back(l.layout(t).mesh_axis(i));
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

void lower_scatter_add(Lowering& l, const GatherAttrs& attrs) {
  const Operation& o = l.op();
  int ids = o.inputs[0], upd = o.inputs[1];
  const int y = o.outputs[0];
  l.materialize(upd);
  l.pending(y) = scatter_pending(l, ids, upd, y);
  const int d = l.layout(y).shape().index_of(attrs.dim);
  const std::int64_t origin = l.layout(y).slice_origin(l.coords())[static_cast<size_t>(d)];
  const Shape li = l.local(ids), lu = l.local(upd), ly = l.local(y);
  l.add_step(
      l.label(), {ids, upd}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] = kernels::scatter_add(space, li, view_of<std::int32_t>(b, ids),
                                                         lu, view_of<float>(b, upd), ly, d, origin);
      },
      static_cast<double>(lu.num_elements()));
}

constexpr auto scatter_add_op = make_op_kind<GatherAttrs>("scatter_add", {FlopClass::gather},
                                                          lower_scatter_add, scatter_add_grad);

// y = sum + scatter_add(ids, upd) (inputs sum, ids, upd), scattered into the sum's buffer.
void scatter_add_into_grad(GradientContext& c, const GatherAttrs& attrs) {
  if (c.needs(0))
    c.add(0, c.dy());
  if (c.needs(2))
    c.add(2, sum_to(gather(c.dy(), c.input(1), attrs.dim), c.input(2).shape()));
}

// The step y = sum + scatter of (ids, upd) into sum's buffer when the in-place pass gives y that
// buffer (else into a copy of the sum).
void add_scatter_into_step(Lowering& l, int sum, int ids, int upd, int y, const std::string& dim) {
  const int d = l.layout(y).shape().index_of(dim);
  const std::int64_t origin = l.layout(y).slice_origin(l.coords())[static_cast<size_t>(d)];
  const Shape li = l.local(ids), lu = l.local(upd), ly = l.local(y);
  l.add_step(
      l.label(), {sum, ids, upd}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        kernels::FView into = in_place_output<float>(b, y, {sum});
        if (!into.data()) {  // out of place (a run fetching the old sum): a copy of it
          into = uninitialized_view<float>("mtk::scatter_add_into", ly.num_elements());
          Kokkos::deep_copy(space, into, view_of<float>(b, sum));
        }
        kernels::scatter_add_into(space, li, view_of<std::int32_t>(b, ids), lu,
                                  view_of<float>(b, upd), ly, d, origin, into);
        b[static_cast<size_t>(y)] = into;
      },
      static_cast<double>(lu.num_elements()));
  l.allow_overwrite(y, sum);  // each element read before it is written
}

// As einsum_accumulate: into the sum where both carry the same pending mesh axes; otherwise the
// sum is reduced first and a scatter still pending is made apart, reduced and added.
void lower_scatter_add_into(Lowering& l, const GatherAttrs& attrs) {
  const Operation& o = l.op();
  const int sum = o.inputs[0], y = o.outputs[0];
  int ids = o.inputs[1], upd = o.inputs[2];
  l.materialize(upd);
  const std::vector<int> pending = scatter_pending(l, ids, upd, y);
  if (l.pending(sum) != pending)
    l.materialize(sum);
  if (l.pending(sum) == pending) {
    l.pending(y) = pending;
    add_scatter_into_step(l, sum, ids, upd, y, attrs.dim);
    return;
  }
  const int part = l.new_temp(l.layout(y).shape(), l.axes(y), DType::float32);
  l.pending(part) = pending;
  const int d = l.layout(y).shape().index_of(attrs.dim);
  const std::int64_t origin = l.layout(y).slice_origin(l.coords())[static_cast<size_t>(d)];
  const Shape li = l.local(ids), lu = l.local(upd), ly = l.local(y);
  l.add_step(
      l.label(), {ids, upd}, {part},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(part)] = kernels::scatter_add(
            space, li, view_of<std::int32_t>(b, ids), lu, view_of<float>(b, upd), ly, d, origin);
      },
      static_cast<double>(lu.num_elements()));
  l.materialize(part);
  l.add_sum_step(sum, part, y);
}

constexpr auto scatter_add_into_op = make_op_kind<GatherAttrs>(
    "scatter_add_into", {FlopClass::gather}, lower_scatter_add_into, scatter_add_into_grad);

}  // namespace

Tensor one_hot(const Tensor& ids, const Dimension& dim, double on, double off) {
  graph_of({ids}, "mtk::one_hot");
  if (ids.dtype() != DType::int32)
    fail("mtk::one_hot", cat("ids ", describe(ids), " must be int32"));
  if (ids.shape().contains(dim.name))
    fail("mtk::one_hot", cat("ids ", describe(ids), " already have dimension '", dim.name, "'"));
  auto dims = ids.shape().dims();
  dims.push_back(dim);
  return ids.graph().add_op1(one_hot_op, {ids}, Shape(dims), DType::float32,
                             OneHotAttrs{dim.name, on, off});
}

Tensor gather(const Tensor& table, const Tensor& ids, const std::string& dim) {
  const char* where = "mtk::gather";
  Graph& g = graph_of({table, ids}, where);
  require_float(table, where);
  if (ids.dtype() != DType::int32)
    fail(where, cat("ids ", describe(ids), " must be int32"));
  int i = dim_index(table, dim, where);
  if (ids.shape().contains(dim))
    fail(where, cat("ids ", describe(ids), " must not have the gathered dimension '", dim, "'"));
  auto dims = ids.shape().dims();
  for (int j = 0; j < table.shape().rank(); ++j)
    if (j != i)
      dims.push_back(table.shape()[j]);
  Shape out(dims);
  union_shape({table, ids}, where);
  return g.add_op1(gather_op, {table, ids}, out, DType::float32, GatherAttrs{dim});
}

namespace {

Graph& check_scatter(const char* where, const Tensor& ids, const Tensor& updates,
                     const Shape& table_shape, const std::string& dim) {
  Graph& g = graph_of({ids, updates}, where);
  require_float(updates, where);
  if (!table_shape.contains(dim))
    fail(where, cat("table ", table_shape.to_string(), " lacks '", dim, "'"));
  for (const auto& d : updates.shape().dims())
    if (!ids.shape().contains(d.name) && !table_shape.contains(d.name))
      fail(where, cat("updates dimension '", d.name, "' is in neither ids ", describe(ids),
                      " nor table ", table_shape.to_string()));
  return g;
}

}  // namespace

Tensor scatter_add(const Tensor& ids, const Tensor& updates, const Shape& table_shape,
                   const std::string& dim) {
  Graph& g = check_scatter("mtk::scatter_add", ids, updates, table_shape, dim);
  return g.add_op1(scatter_add_op, {ids, updates}, table_shape, DType::float32, GatherAttrs{dim});
}

Tensor scatter_add_into(const Tensor& sum, const Tensor& ids, const Tensor& updates,
                        const std::string& dim) {
  const char* where = "mtk::scatter_add_into";
  require_float(sum, where);
  check_scatter(where, ids, updates, sum.shape(), dim);
  Graph& g = graph_of({sum, ids, updates}, where);
  return g.add_op1(scatter_add_into_op, {sum, ids, updates}, sum.shape(), DType::float32,
                   GatherAttrs{dim});
}

}  // namespace mtk
