// Einsum: one or two operands per op (more are contracted left to right by the builder).
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/einsum_accumulate.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/shape.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace mtk {
namespace {

using namespace ops_impl;

// Input i's gradient part xs[0] x xs[1]: contracted into the running sum it is added to, where
// gradients() has one and the part needs no broadcast (GradientContext::running_sum).
void add_product(GradientContext& c, size_t i, const std::vector<Tensor>& xs, Precision p) {
  const Shape& s = c.input(i).shape();
  const Tensor sum = c.running_sum(i);
  bool whole = sum.valid() && sum.shape() == s;
  for (const auto& d : s.dims())
    whole = whole && (xs[0].shape().contains(d.name) || xs[1].shape().contains(d.name));
  c.add(i, whole ? einsum_accumulate(sum, xs, p) : einsum_to(xs, s, p));
}

// The gradients are contractions too and run in the forward op's precision.
void einsum_grad(GradientContext& c, const EinsumAttrs& attrs) {
  const Precision p = attrs.precision;
  if (c.op().inputs.size() == 1) {
    c.add(0, einsum_to({c.dy()}, c.input(0).shape(), p));
  } else {
    // x W: W's part first, its last read of the activation x, which may then die before x's part
    // (dy W) is allocated. The parts are independent, so the values do not change.
    auto is_variable = [&](size_t i) {
      return c.graph().op(c.input(i).producer()).def->is_variable;
    };
    const size_t first = is_variable(1) && !is_variable(0) ? 1 : 0;
    for (const size_t i : {first, 1 - first})
      if (c.needs(i))
        add_product(c, i, {c.dy(), c.input(1 - i)}, p);
  }
}

// Mesh axes claimed by two different dim names: keep the output's (or the first), gather the
// others in the inputs, so the local products partition the work.
void gather_conflicting_dims(Lowering& l, int y, std::vector<int>& in) {
  std::map<int, std::vector<std::string>> names_on_axis;
  auto note = [&](int t) {
    const TensorLayout& lt = l.layout(t);
    for (int i = 0; i < lt.shape().rank(); ++i) {
      int a = lt.mesh_axis(i);
      if (a < 0)
        continue;
      auto& v = names_on_axis[a];
      if (std::find(v.begin(), v.end(), lt.shape()[i].name) == v.end())
        v.push_back(lt.shape()[i].name);
    }
  };
  note(y);
  for (int t : in)
    note(t);
  std::set<std::string> to_gather;
  for (auto& [axis, names] : names_on_axis)
    for (size_t k = 1; k < names.size(); ++k)
      to_gather.insert(names[k]);
  for (auto& t : in)
    t = l.gather_dims(t, to_gather);
}

// The output's pending partial sums: the inputs' pending sums pass through when the other operand
// is identical on every member of the pending group; reduced dims that are split add theirs.
std::vector<int> einsum_pending(Lowering& l, int y, const std::vector<int>& in) {
  std::vector<int> out_pending;
  if (in.size() == 2) {
    if (!l.pending(in[0]).empty() && !l.pending(in[1]).empty())
      l.materialize(in[1]);
    for (size_t k = 0; k < 2; ++k) {
      const auto& pk = l.pending(in[k]);
      if (!pk.empty() && Lowering::intersects(pk, l.split_axes_of(in[1 - k])))
        l.materialize(in[k]);
    }
    for (int t : in)
      for (int a : l.pending(t))
        out_pending.push_back(a);
  } else {
    out_pending = l.pending(in[0]);
  }
  const Shape& ys = l.layout(y).shape();
  for (int t : in)
    for (int i = 0; i < l.layout(t).shape().rank(); ++i)
      if (!ys.contains(l.layout(t).shape()[i].name) && l.layout(t).mesh_axis(i) >= 0)
        out_pending.push_back(l.layout(t).mesh_axis(i));
  std::sort(out_pending.begin(), out_pending.end());
  out_pending.erase(std::unique(out_pending.begin(), out_pending.end()), out_pending.end());
  for (int a : out_pending)
    if (l.layout(y).tensor_dim_on(a) >= 0)
      fail("mtk::lower",
           cat(l.label(), ": output ", l.describe(y), " is split over mesh dimension '",
               l.mesh_shape()[a].name, "' which also splits a summed dimension"));
  return out_pending;
}

// Counts the gemm calls kernels::einsum makes for la x lc -> ly (batched vector products run
// elementwise and make none).
void count_einsum_gemms(Lowering& l, const Shape& la, const Shape& lc, const Shape& ly) {
  std::int64_t nb = 1, m = 1, n = 1, k = 1;
  bool has_m = false, has_n = false, has_k = false;
  for (const auto& d : ly.dims()) {
    const bool in_a = la.contains(d.name), in_c = lc.contains(d.name);
    (in_a && in_c ? nb : in_a ? m : n) *= d.size;
    has_m |= in_a && !in_c;
    has_n |= in_c && !in_a;
  }
  for (const auto& d : la.dims())
    if (lc.contains(d.name) && !ly.contains(d.name)) {
      k *= d.size;
      has_k = true;
    }
  if (!(nb > 1 && (!has_k || (!has_m && !has_n))))
    l.count_gemms(m, n, k, nb);
}

// The step y = a x c, or with `sum` >= 0 y = sum + a x c contracted into sum's buffer when the
// in-place pass gives y that buffer (else into a copy of sum).
void add_contraction_step(Lowering& l, int a, int c, int y, Precision precision, int sum) {
  const Shape la = l.local(a), lc = l.local(c), ly = l.local(y);
  const double flops = 2.0 * static_cast<double>(kernels::einsum_macs(la, lc, ly));
  count_einsum_gemms(l, la, lc, ly);
  l.count_moved_bytes(kernels::einsum_moved_bytes(la, lc, ly, precision));
  const Program* program = l.program();
  const bool bf16 = precision == Precision::bfloat16;
  std::vector<int> reads{a, c};
  if (sum >= 0)
    reads.push_back(sum);
  l.add_step(
      cat(l.label(), " ", la.to_string(), " x ", lc.to_string(), sum >= 0 ? " + " : " -> ",
          ly.to_string(), bf16 ? " (bf16)" : ""),
      reads, {y},
      [=](Buffers& b, const ExecSpace& space) {
        const kernels::Bf16Reuse reuse = bf16 ? program->bf16_reuse(a, c) : kernels::Bf16Reuse{};
        const kernels::Bf16Reuse* r = reuse.copies ? &reuse : nullptr;
        const kernels::FView av = view_of<float>(b, a), cv = view_of<float>(b, c);
        if (sum < 0) {
          b[static_cast<size_t>(y)] = kernels::einsum(space, la, av, lc, cv, ly, precision, r);
          return;
        }
        kernels::FView into = in_place_output<float>(b, y, {sum});
        if (!into.data()) {  // out of place (a run fetching the old sum): a copy of it
          into = uninitialized_view<float>("mtk::einsum_accumulate", ly.num_elements());
          Kokkos::deep_copy(space, into, view_of<float>(b, sum));
        }
        kernels::einsum_accumulate(space, la, av, lc, cv, ly, into, precision, r);
        b[static_cast<size_t>(y)] = into;
      },
      flops + (sum >= 0 ? static_cast<double>(ly.num_elements()) : 0.0));
  if (sum >= 0)
    l.allow_overwrite(y, sum);  // the sum is read before its place is written
  if (!bf16)
    return;
  l.mark_bf16_reads({a, c});
  // An operand with a dim neither the other operand nor the output has is summed in float32
  // before its rounding (kernels/einsum.hpp): its exact values matter.
  auto rounded_only = [&](const Shape& x, const Shape& other) {
    for (const auto& d : x.dims())
      if (!other.contains(d.name) && !ly.contains(d.name))
        return false;
    return true;
  };
  std::vector<int> exact;
  if (a != sum && rounded_only(la, lc))
    exact.push_back(a);
  if (c != sum && c != a && rounded_only(lc, la))
    exact.push_back(c);
  l.mark_bf16_exact_reads(std::move(exact));
}

void lower_einsum(Lowering& l, const EinsumAttrs& attrs) {
  const Operation& o = l.op();
  std::vector<int> in = o.inputs;
  const int y = o.outputs[0];
  gather_conflicting_dims(l, y, in);
  l.pending(y) = einsum_pending(l, y, in);
  const Shape ly = l.local(y);
  if (in.size() == 1) {
    const int a = in[0];
    const Shape la = l.local(a);
    l.add_step(
        l.label(), {a}, {y},
        [=](Buffers& b, const ExecSpace& space) {
          b[static_cast<size_t>(y)] = kernels::einsum(space, la, view_of<float>(b, a), ly);
        },
        static_cast<double>(la.num_elements()));
    return;
  }
  add_contraction_step(l, in[0], in[1], y, attrs.precision, -1);
}

constexpr auto einsum_op =
    make_op_kind<EinsumAttrs>("einsum", {FlopClass::einsum}, lower_einsum, einsum_grad);

// ------------------------------------------------------------------- einsum_accumulate
// y = sum + a x c (inputs sum, a, c): the product contracted into the sum's buffer.

void einsum_accumulate_grad(GradientContext& c, const EinsumAttrs& attrs) {
  if (c.needs(0))
    c.add(0, c.dy());
  if (c.needs(1))
    c.add(1, einsum_to({c.dy(), c.input(2)}, c.input(1).shape(), attrs.precision));
  if (c.needs(2))
    c.add(2, einsum_to({c.dy(), c.input(1)}, c.input(2).shape(), attrs.precision));
}

// A partial sum is linear: the product adds into the sum where both carry the same pending mesh
// dims (data-parallel weight gradients over microbatches: one allreduce after the last slice).
// Where they differ the sum is reduced first; a product that still has a pending sum then is
// made apart, reduced, and added (the unfused path).
void lower_einsum_accumulate(Lowering& l, const EinsumAttrs& attrs) {
  const Operation& o = l.op();
  const int sum = o.inputs[0], y = o.outputs[0];
  std::vector<int> in{o.inputs[1], o.inputs[2]};
  if (!(l.layout(sum).shape() == l.layout(y).shape()) || l.axes(sum) != l.axes(y))
    fail("mtk::lower",
         cat(l.label(), ": the sum ", l.describe(sum), " is laid out unlike ", l.describe(y)));
  gather_conflicting_dims(l, y, in);
  const std::vector<int> pending = einsum_pending(l, y, in);
  if (l.pending(sum) != pending)
    l.materialize(sum);
  if (l.pending(sum) == pending) {
    l.pending(y) = pending;
    add_contraction_step(l, in[0], in[1], y, attrs.precision, sum);
    return;
  }
  const int part = l.new_temp(l.layout(y).shape(), l.axes(y), DType::float32);
  l.pending(part) = pending;
  add_contraction_step(l, in[0], in[1], part, attrs.precision, -1);
  l.materialize(part);
  l.add_sum_step(sum, part, y);
}

constexpr auto einsum_accumulate_op = make_op_kind<EinsumAttrs>(
    "einsum_accumulate", {FlopClass::einsum}, lower_einsum_accumulate, einsum_accumulate_grad);

}  // namespace

Tensor einsum(const std::vector<Tensor>& xs, const Shape& out_shape) {
  return einsum(xs, out_shape, graph_of(xs, "mtk::einsum").contraction_precision());
}

Tensor einsum(const std::vector<Tensor>& xs, const Shape& out_shape, Precision precision) {
  const char* where = "mtk::einsum";
  Graph& g = graph_of(xs, where);
  for (const auto& x : xs)
    require_float(x, where);
  Shape all = union_shape(xs, where);
  for (const auto& d : out_shape.dims()) {
    int j = all.index_of(d.name);
    std::string list;
    for (const auto& x : xs)
      list += " " + describe(x);
    if (j < 0)
      fail(where, cat("output dimension '", d.name, "' of ", out_shape.to_string(),
                      " appears in no input:", list, " (use broadcast() to add a dimension)"));
    if (all[j].size != d.size)
      fail(where, cat("output dimension '", d.name, "' has size ", d.size, " but ", all[j].size,
                      " in the inputs:", list));
  }
  if (xs.size() <= 2)
    return g.add_op1(einsum_op, xs, out_shape, DType::float32,
                     EinsumAttrs{xs.size() == 2 ? precision : Precision::float32});
  // Contract left to right, keeping every dim still needed later or in the output.
  Tensor acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    if (i + 1 == xs.size())
      return einsum({acc, xs[i]}, out_shape, precision);
    std::vector<Dimension> keep;
    Shape both = union_shape({acc, xs[i]}, where);
    for (const auto& d : both.dims()) {
      bool needed = out_shape.contains(d.name);
      for (size_t j = i + 1; j < xs.size() && !needed; ++j)
        needed = xs[j].shape().contains(d.name);
      if (needed)
        keep.push_back(d);
    }
    acc = einsum({acc, xs[i]}, Shape(keep), precision);
  }
  return acc;
}

Tensor einsum(const std::vector<Tensor>& xs, const std::vector<std::string>& out_dims) {
  Shape all = union_shape(xs, "mtk::einsum");
  std::vector<Dimension> dims;
  for (const auto& n : out_dims) {
    int j = all.index_of(n);
    if (j < 0)
      fail("mtk::einsum", cat("output dimension '", n, "' appears in no input ", all.to_string()));
    dims.push_back(all[j]);
  }
  return einsum(xs, Shape(dims));
}

Tensor einsum_accumulate(const Tensor& sum, const std::vector<Tensor>& xs, Precision precision) {
  const char* where = "mtk::einsum_accumulate";
  if (xs.size() != 2)
    fail(where, cat(xs.size(), " operands for the sum '", sum.name(), "'; give two"));
  std::vector<Tensor> all{sum, xs[0], xs[1]};
  Graph& g = graph_of(all, where);
  for (const auto& x : all)
    require_float(x, where);
  const Shape both = union_shape(xs, where);
  for (const auto& d : sum.shape().dims()) {
    const int j = both.index_of(d.name);
    if (j < 0 || both[j].size != d.size)
      fail(where, cat("the sum ", describe(sum), " has dimension '", d.name, "' of size ", d.size,
                      " but the operands ", describe(xs[0]), " and ", describe(xs[1]),
                      j < 0 ? " lack it" : " disagree"));
  }
  return g.add_op1(einsum_accumulate_op, all, sum.shape(), DType::float32, EinsumAttrs{precision});
}

bool accumulates_into(const Tensor& t, const Tensor& sum) {
  if (!t.valid() || !sum.valid() || &t.graph() != &sum.graph() || t.producer() < 0)
    return false;
  const Operation& op = t.graph().op(t.producer());
  return einsum_accumulate_op.is(op) && op.inputs.at(0) == sum.id();
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape)
    return x;
  return einsum({x}, shape);
}

}  // namespace mtk
