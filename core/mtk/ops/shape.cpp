// Shape and layout ops: reshape, broadcast, slice, concat, pad, shift.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/shape.hpp>
#include <mtk/kernels/view.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/shape.hpp>

namespace mtk {
namespace {

using namespace ops_impl;

// ------------------------------------------------------------------------------- reshape
void reshape_grad(GradientContext& c, const NoAttrs&) {
  c.add(0, reshape(c.dy(), c.input(0).shape()));
}

std::int64_t prefix_size(const Shape& s, int i) {
  std::int64_t p = 1;
  for (int k = 0; k < i; ++k)
    p *= s[k].size;
  return p;
}

void lower_reshape(Lowering& l, const NoAttrs&) {
  const int x = l.op().inputs[0], y = l.op().outputs[0];
  l.materialize(x);
  const Shape& xs = l.layout(x).shape();
  const Shape& ys = l.layout(y).shape();
  // A split dim survives a local reshape when a dim of y starts at the same row-major position
  // (the same product of the dims before it) and its size is divisible by the mesh dim: a rank's
  // elements are then the same block of the flat data whatever the sizes (so [batch, length] ->
  // [batch * k, length / k] stays local). The same name is preferred. Others are gathered first.
  std::vector<int> keep_axes(static_cast<size_t>(xs.rank()), -1);
  std::vector<int> y_axes_mid(static_cast<size_t>(ys.rank()), -1);
  for (int i = 0; i < xs.rank(); ++i) {
    int a = l.layout(x).mesh_axis(i);
    if (a < 0)
      continue;
    const std::int64_t m = l.layout(x).mesh()[a].size;
    auto fits = [&](int k) {
      return y_axes_mid[static_cast<size_t>(k)] < 0 && ys[k].size % m == 0 &&
             prefix_size(ys, k) == prefix_size(xs, i);
    };
    int j = ys.index_of(xs[i].name);
    if (j < 0 || !fits(j)) {
      j = -1;
      for (int k = 0; k < ys.rank() && j < 0; ++k)
        if (fits(k) && !xs.contains(ys[k].name))
          j = k;
    }
    if (j >= 0) {
      keep_axes[static_cast<size_t>(i)] = a;
      y_axes_mid[static_cast<size_t>(j)] = a;
    }
  }
  const int xin = l.relayout(x, keep_axes);
  // Local reshape: same data, new shape.
  const int mid = l.new_temp(ys, y_axes_mid, l.dtype(x));
  l.add_step(l.label(), {xin}, {mid}, [=](Buffers& b, const ExecSpace&) {
    b[static_cast<size_t>(mid)] = b[static_cast<size_t>(xin)];
  });
  l.add_alias(l.relayout(mid, l.axes(y)), y);
}

constexpr auto reshape_op = make_op_kind<NoAttrs>("reshape", {FlopClass::none, true, false, true},
                                                  lower_reshape, reshape_grad);

// ----------------------------------------------------------------------------- broadcast
void broadcast_grad(GradientContext& c, const NoAttrs&) {
  c.add(0, sum_to(c.dy(), c.input(0).shape()));
}

void lower_broadcast(Lowering& l, const NoAttrs&) {
  const int x = l.op().inputs[0], y = l.op().outputs[0];
  l.materialize(x);
  const Shape lx = l.local(x), ly = l.local(y);
  l.add_typed_step(l.label(), {x}, y, l.dtype(x),
                   [=](auto e, const Buffers& b, const ExecSpace& space) {
                     using T = decltype(e);
                     return kernels::broadcast<T>(space, lx, view_of<T>(b, x), ly);
                   });
}

constexpr auto broadcast_op =
    make_op_kind<NoAttrs>("broadcast", {FlopClass::none}, lower_broadcast, broadcast_grad);

// ------------------------------------------------------------- slice, pad, shift, concat
// These work on a whole dim: a split input dim is gathered first (an allconcat, listed by
// explain()), the result is sliced again if the output splits its dim. `kernel(T{}, space, shapes,
// inputs, d)` computes the local result from the local input Views.
template <class Kernel>
void lower_along_dim(Lowering& l, const std::string& dim, Kernel kernel) {
  const Operation& o = l.op();
  const int y = o.outputs[0];
  std::vector<int> ins;
  for (int t : o.inputs) {
    l.materialize(t);
    ins.push_back(l.gather_dims(t, {dim}));
  }
  const int d = l.layout(ins[0]).shape().index_of(dim);
  const DType dt = l.dtype(y);
  const int mid = l.new_temp(l.layout(y).shape(), l.axes(ins[0]), dt);
  std::vector<Shape> lin;
  for (int t : ins)
    lin.push_back(l.local(t));
  l.add_typed_step(
      l.label(), ins, mid, dt,
      [=](auto e, const Buffers& b, const ExecSpace& space) {
        using T = decltype(e);
        std::vector<kernels::View<T>> xs;
        for (int t : ins)
          xs.push_back(view_of<T>(b, t));
        return kernel(e, space, lin, xs, d);
      },
      static_cast<double>(l.local(mid).num_elements()));
  l.add_alias(l.relayout(mid, l.axes(y)), y);
}

void slice_grad(GradientContext& c, const SliceAttrs& a) {
  const Shape& xs = c.input(0).shape();
  const std::int64_t full = xs.size_of(a.dim);
  const std::string out_dim = c.output(0).shape()[xs.index_of(a.dim)].name;
  c.add(0, pad(c.dy(), out_dim, a.begin, full - a.begin - a.size, a.dim));
}

void lower_slice(Lowering& l, const SliceAttrs& a) {
  lower_along_dim(l, a.dim,
                  [a](auto e, const ExecSpace& space, const auto& lin, const auto& xs, int d) {
                    using T = decltype(e);
                    return kernels::slice<T>(space, lin[0], xs[0], d, a.begin, a.size);
                  });
}

constexpr auto slice_op =
    make_op_kind<SliceAttrs>("slice", {FlopClass::elementwise}, lower_slice, slice_grad);

void pad_grad(GradientContext& c, const PadAttrs& a) {
  const int i = c.input(0).shape().index_of(a.dim);
  c.add(0, slice(c.dy(), c.output(0).shape()[i].name, a.before, c.input(0).shape()[i].size, a.dim));
}

void lower_pad(Lowering& l, const PadAttrs& a) {
  lower_along_dim(l, a.dim,
                  [a](auto e, const ExecSpace& space, const auto& lin, const auto& xs, int d) {
                    using T = decltype(e);
                    return kernels::pad<T>(space, lin[0], xs[0], d, a.before, a.after, T(0));
                  });
}

constexpr auto pad_op =
    make_op_kind<PadAttrs>("pad", {FlopClass::elementwise}, lower_pad, pad_grad);

void shift_grad(GradientContext& c, const ShiftAttrs& a) {
  c.add(0, shift(c.dy(), a.dim, -a.offset, a.wrap));
}

void lower_shift(Lowering& l, const ShiftAttrs& a) {
  lower_along_dim(l, a.dim,
                  [a](auto e, const ExecSpace& space, const auto& lin, const auto& xs, int d) {
                    using T = decltype(e);
                    return kernels::shift<T>(space, lin[0], xs[0], d, a.offset, a.wrap);
                  });
}

constexpr auto shift_op =
    make_op_kind<ShiftAttrs>("shift", {FlopClass::elementwise}, lower_shift, shift_grad);

void concat_grad(GradientContext& c, const ConcatAttrs& attrs) {
  const std::string& dim = attrs.dim;
  const int i = c.input(0).shape().index_of(dim);
  const std::string out_dim = c.output(0).shape()[i].name;
  std::int64_t offset = 0;
  for (size_t k = 0; k < c.op().inputs.size(); ++k) {
    const std::int64_t n = c.input(k).shape()[i].size;
    c.add(k, slice(c.dy(), out_dim, offset, n, dim));
    offset += n;
  }
}

void lower_concat(Lowering& l, const ConcatAttrs& attrs) {
  lower_along_dim(l, attrs.dim,
                  [](auto e, const ExecSpace& space, const auto& lin, const auto& xs, int d) {
                    using T = decltype(e);
                    return kernels::concat<T>(space, lin, xs, d);
                  });
}

constexpr auto concat_op =
    make_op_kind<ConcatAttrs>("concat", {FlopClass::elementwise}, lower_concat, concat_grad);

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  graph_of({x}, "mtk::reshape");
  if (shape.num_elements() != x.shape().num_elements())
    fail("mtk::reshape", cat("cannot reshape ", describe(x), " (", x.shape().num_elements(),
                             " elements) to ", shape.to_string(), " (", shape.num_elements(), ")"));
  if (shape == x.shape())
    return x;
  return x.graph().add_op1(reshape_op, {x}, shape, x.dtype());
}

Tensor rename_dimension(const Tensor& x, const std::string& old_name, const std::string& new_name) {
  int i = dim_index(x, old_name, "mtk::rename_dimension");
  return reshape(x, replace_dim(x.shape(), i, {new_name, x.shape()[i].size}));
}

Tensor replace_dimensions(const Tensor& x, const std::vector<std::string>& old_names,
                          const std::vector<Dimension>& new_dims) {
  if (old_names.empty())
    fail("mtk::replace_dimensions", "no dimensions to replace");
  int first = dim_index(x, old_names.front(), "mtk::replace_dimensions");
  for (size_t k = 0; k < old_names.size(); ++k)
    if (dim_index(x, old_names[k], "mtk::replace_dimensions") != first + static_cast<int>(k))
      fail("mtk::replace_dimensions",
           cat("dimensions to replace must be consecutive in ", describe(x)));
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + first, dims.begin() + first + static_cast<long>(old_names.size()));
  dims.insert(dims.begin() + first, new_dims.begin(), new_dims.end());
  return reshape(x, Shape(dims));
}

Tensor broadcast(const Tensor& x, const Shape& shape) {
  graph_of({x}, "mtk::broadcast");
  for (const auto& d : x.shape().dims()) {
    int j = shape.index_of(d.name);
    if (j < 0 || shape[j].size != d.size)
      fail("mtk::broadcast", cat("cannot broadcast ", describe(x), " to ", shape.to_string()));
  }
  if (shape == x.shape())
    return x;
  return x.graph().add_op1(broadcast_op, {x}, shape, x.dtype());
}

Tensor slice(const Tensor& x, const std::string& dim, std::int64_t begin, std::int64_t size,
             const std::string& new_name) {
  int i = dim_index(x, dim, "mtk::slice");
  if (begin < 0 || size < 0 || begin + size > x.shape()[i].size)
    fail("mtk::slice", cat("range [", begin, ", ", begin + size, ") outside dimension '", dim,
                           "' of ", describe(x)));
  Shape out = replace_dim(x.shape(), i, {new_name.empty() ? dim : new_name, size});
  return x.graph().add_op1(slice_op, {x}, out, x.dtype(), SliceAttrs{dim, begin, size});
}

Tensor concat(const std::vector<Tensor>& xs, const std::string& dim, const std::string& new_name) {
  Graph& g = graph_of(xs, "mtk::concat");
  int i = dim_index(xs[0], dim, "mtk::concat");
  std::int64_t total = 0;
  for (const auto& x : xs) {
    require_same_dtype(xs[0], x, "mtk::concat");
    if (x.shape().rank() != xs[0].shape().rank() || dim_index(x, dim, "mtk::concat") != i)
      fail("mtk::concat", cat("inputs ", describe(xs[0]), " and ", describe(x), " do not match"));
    for (int j = 0; j < x.shape().rank(); ++j)
      if (j != i && x.shape()[j] != xs[0].shape()[j])
        fail("mtk::concat", cat("inputs ", describe(xs[0]), " and ", describe(x),
                                " differ outside dimension '", dim, "'"));
    total += x.shape()[i].size;
  }
  Shape out = replace_dim(xs[0].shape(), i, {new_name.empty() ? dim : new_name, total});
  return g.add_op1(concat_op, xs, out, xs[0].dtype(), ConcatAttrs{dim});
}

Tensor pad(const Tensor& x, const std::string& dim, std::int64_t before, std::int64_t after,
           const std::string& new_name) {
  int i = dim_index(x, dim, "mtk::pad");
  if (before < 0 || after < 0)
    fail("mtk::pad", cat("negative padding of '", dim, "' in ", describe(x)));
  Shape out = replace_dim(x.shape(), i,
                          {new_name.empty() ? dim : new_name, x.shape()[i].size + before + after});
  return x.graph().add_op1(pad_op, {x}, out, x.dtype(), PadAttrs{dim, before, after});
}

Tensor shift(const Tensor& x, const std::string& dim, std::int64_t offset, bool wrap) {
  dim_index(x, dim, "mtk::shift");
  return x.graph().add_op1(shift_op, {x}, x.shape(), x.dtype(), ShiftAttrs{dim, offset, wrap});
}

}  // namespace mtk
