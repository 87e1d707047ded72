// Elementwise ops: unary, binary, compare, where, cast.
#include <mtk/base/error.hpp>
#include <mtk/graph/gradient_context.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/lower/lowering_context.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/sources.hpp>

namespace mtk {
namespace {

using namespace ops_impl;

// --------------------------------------------------------------------------------- unary
Tensor unary_gradient(const UnaryAttrs& a, const Tensor& x, const Tensor& y, const Tensor& dy) {
  const double p = a.p;
  switch (a.fn) {
    case UnaryFn::identity:
    case UnaryFn::add_scalar:
      return dy;
    case UnaryFn::negative:
      return negative(dy);
    case UnaryFn::mul_scalar:
      return multiply(dy, p);
    case UnaryFn::abs:
      return dy * unary(UnaryFn::sign, x);
    case UnaryFn::exp:
      return dy * y;
    case UnaryFn::log:
      return dy / x;
    case UnaryFn::sqrt:
      return multiply(dy / y, 0.5);
    case UnaryFn::rsqrt:
      return multiply(dy * pow(y, 3.0), -0.5);
    case UnaryFn::square:
      return multiply(dy * x, 2.0);
    case UnaryFn::reciprocal:
      return negative(dy * square(y));
    case UnaryFn::relu:  // from y, as y > 0 exactly where x > 0: x need not live to the backward
      return dy * unary(UnaryFn::relu_mask, y);
    case UnaryFn::gelu:
      return dy * unary(UnaryFn::gelu_grad, x);
    case UnaryFn::tanh:
      return dy * add(negative(square(y)), 1.0);
    case UnaryFn::sigmoid:
      return dy * y * add(negative(y), 1.0);
    case UnaryFn::pow_scalar:
      return multiply(dy * pow(x, p - 1.0), p);
    case UnaryFn::sign:
    case UnaryFn::relu_mask:
    case UnaryFn::gelu_grad:
      return Tensor();
  }
  return Tensor();
}

void unary_grad(GradientContext& c, const UnaryAttrs& attrs) {
  c.add(0, unary_gradient(attrs, c.input(0), c.output(0), c.dy()));
}

void lower_unary(Lowering& l, const UnaryAttrs& attrs) {
  const Operation& o = l.op();
  const int x = o.inputs[0], y = o.outputs[0];
  const UnaryFn fn = attrs.fn;
  const double p = attrs.p;
  // Linear functions pass a pending partial sum through.
  const bool linear =
      fn == UnaryFn::negative || fn == UnaryFn::mul_scalar || fn == UnaryFn::identity;
  if (linear)
    l.pending(y) = l.pending(x);
  else
    l.materialize(x);
  l.add_typed_step(
      l.label(), {x}, y, l.dtype(x),
      [=](auto e, const Buffers& b, const ExecSpace& space) {
        using T = decltype(e);
        return kernels::unary<T>(space, fn, view_of<T>(b, x), p, in_place_output<T>(b, y, {x}));
      },
      static_cast<double>(l.local(y).num_elements()));
  if (l.local(y) == l.local(x) && l.dtype(y) == l.dtype(x))
    l.allow_overwrite(y, x);
}

constexpr auto unary_op =
    make_op_kind<UnaryAttrs>("unary", {FlopClass::elementwise}, lower_unary, unary_grad);

// -------------------------------------------------------------------------------- binary
void binary_grad(GradientContext& c, const BinaryAttrs& attrs) {
  const Tensor a = c.input(0), b = c.input(1), y = c.output(0), dy = c.dy();
  const bool da = c.needs(0), db = c.needs(1);  // e.g. no op for a mask's or a bias's gradient
  switch (attrs.fn) {
    case BinaryFn::add:
      if (da)
        c.add(0, sum_to(dy, a.shape()));
      if (db)
        c.add(1, sum_to(dy, b.shape()));
      break;
    case BinaryFn::subtract:
      if (da)
        c.add(0, sum_to(dy, a.shape()));
      if (db)
        c.add(1, negative(sum_to(dy, b.shape())));
      break;
    case BinaryFn::multiply:
      if (da)
        c.add(0, einsum_to({dy, b}, a.shape()));
      if (db)
        c.add(1, einsum_to({dy, a}, b.shape()));
      break;
    case BinaryFn::divide:
      if (da)
        c.add(0, sum_to(dy / b, a.shape()));
      if (db)
        c.add(1, sum_to(negative(dy * y / b), b.shape()));
      break;
    case BinaryFn::maximum:
      if (da)
        c.add(0, sum_to(dy * compare(CompareFn::greater_equal, a, b), a.shape()));
      if (db)
        c.add(1, sum_to(dy * compare(CompareFn::less, a, b), b.shape()));
      break;
    case BinaryFn::minimum:
      if (da)
        c.add(0, sum_to(dy * compare(CompareFn::less_equal, a, b), a.shape()));
      if (db)
        c.add(1, sum_to(dy * compare(CompareFn::greater, a, b), b.shape()));
      break;
    case BinaryFn::pow:
      if (da)
        c.add(0, sum_to(dy * b * binary(BinaryFn::pow, a, add(b, -1.0)), a.shape()));
      if (db)
        c.add(1, sum_to(dy * y * log(a), b.shape()));
      break;
  }
}

// Which pending partial sums the result inherits; the others are summed first.
std::vector<int> binary_pending(Lowering& l, BinaryFn fn, int a, int c) {
  auto& pa = l.pending(a);
  auto& pc = l.pending(c);
  if ((fn == BinaryFn::add || fn == BinaryFn::subtract) && !pa.empty() && pa == pc)
    return pa;
  if ((fn == BinaryFn::multiply || fn == BinaryFn::divide) && !pa.empty() && pc.empty() &&
      !Lowering::intersects(pa, l.split_axes_of(c)))
    return pa;
  if (fn == BinaryFn::multiply && !pc.empty() && pa.empty() &&
      !Lowering::intersects(pc, l.split_axes_of(a)))
    return pc;
  l.materialize(a);
  l.materialize(c);
  return {};
}

void lower_binary(Lowering& l, const BinaryAttrs& attrs) {
  const Operation& o = l.op();
  const int a = o.inputs[0], c = o.inputs[1], y = o.outputs[0];
  const BinaryFn fn = attrs.fn;
  l.pending(y) = binary_pending(l, fn, a, c);
  const Shape la = l.local(a), lc = l.local(c), ly = l.local(y);
  l.add_typed_step(
      l.label(), {a, c}, y, l.dtype(a),
      [=](auto e, const Buffers& b, const ExecSpace& space) {
        using T = decltype(e);
        return kernels::binary<T>(space, fn, la, view_of<T>(b, a), lc, view_of<T>(b, c), ly,
                                  in_place_output<T>(b, y, {a, c}));
      },
      static_cast<double>(ly.num_elements()));
  // An operand of the output's shape may take the output when it dies here.
  for (int x : {a, c})
    if (l.local(x) == ly && l.dtype(x) == l.dtype(y))
      l.allow_overwrite(y, x);
}

constexpr auto binary_op =
    make_op_kind<BinaryAttrs>("binary", {FlopClass::elementwise}, lower_binary, binary_grad);

// ------------------------------------------------------------------------------- compare
void lower_compare(Lowering& l, const CompareAttrs& attrs) {
  const Operation& o = l.op();
  const int a = o.inputs[0], c = o.inputs[1], y = o.outputs[0];
  l.materialize(a);
  l.materialize(c);
  const CompareFn fn = attrs.fn;
  const Shape la = l.local(a), lc = l.local(c), ly = l.local(y);
  const DType dt = l.dtype(a);
  l.add_step(
      l.label(), {a, c}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        // The result is float32 whatever the inputs' type.
        b[static_cast<size_t>(y)] = visit_dtype(dt, [&](auto e) {
          using T = decltype(e);
          return kernels::compare<T>(space, fn, la, view_of<T>(b, a), lc, view_of<T>(b, c), ly);
        });
      },
      static_cast<double>(ly.num_elements()));
}

constexpr auto compare_op =
    make_op_kind<CompareAttrs>("compare", {FlopClass::elementwise}, lower_compare);

// --------------------------------------------------------------------------------- where
void where_grad(GradientContext& c, const NoAttrs&) {
  Tensor zero = constant(c.graph(), Shape(), 0.0);
  if (c.needs(1))
    c.add(1, sum_to(where(c.input(0), c.dy(), zero), c.input(1).shape()));
  if (c.needs(2))
    c.add(2, sum_to(where(c.input(0), zero, c.dy()), c.input(2).shape()));
}

void lower_where(Lowering& l, const NoAttrs&) {
  const Operation& o = l.op();
  const int c = o.inputs[0], a = o.inputs[1], d = o.inputs[2], y = o.outputs[0];
  for (int t : {c, a, d})
    l.materialize(t);
  const Shape lc = l.local(c), la = l.local(a), ld = l.local(d), ly = l.local(y);
  l.add_step(
      l.label(), {c, a, d}, {y},
      [=](Buffers& b, const ExecSpace& space) {
        b[static_cast<size_t>(y)] =
            kernels::where(space, lc, view_of<float>(b, c), la, view_of<float>(b, a), ld,
                           view_of<float>(b, d), ly);
      },
      static_cast<double>(ly.num_elements()));
}

constexpr auto where_op =
    make_op_kind<NoAttrs>("where", {FlopClass::elementwise}, lower_where, where_grad);

// ---------------------------------------------------------------------------------- cast
// float <-> int: no gradient.
void lower_cast(Lowering& l, const NoAttrs&) {
  const int x = l.op().inputs[0], y = l.op().outputs[0];
  l.materialize(x);
  const DType from = l.dtype(x);
  l.add_typed_step(
      l.label(), {x}, y, l.dtype(y),
      [=](auto t, const Buffers& b, const ExecSpace& space) {
        return visit_dtype(from, [&](auto f) {
          using From = decltype(f);
          return kernels::cast<decltype(t), From>(space, view_of<From>(b, x));
        });
      },
      static_cast<double>(l.local(y).num_elements()));
}

constexpr auto cast_op = make_op_kind<NoAttrs>("cast", {FlopClass::elementwise}, lower_cast);

}  // namespace

Tensor unary(UnaryFn fn, const Tensor& x, double p) {
  graph_of({x}, "mtk::unary");
  return x.graph().add_named_op1(unary_op, unary_name(fn), {x}, x.shape(), x.dtype(),
                                 UnaryAttrs{fn, p});
}

Tensor negative(const Tensor& x) {
  return unary(UnaryFn::negative, x);
}
Tensor abs(const Tensor& x) {
  return unary(UnaryFn::abs, x);
}
Tensor exp(const Tensor& x) {
  return unary(UnaryFn::exp, x);
}
Tensor log(const Tensor& x) {
  return unary(UnaryFn::log, x);
}
Tensor sqrt(const Tensor& x) {
  return unary(UnaryFn::sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return unary(UnaryFn::rsqrt, x);
}
Tensor square(const Tensor& x) {
  return unary(UnaryFn::square, x);
}
Tensor reciprocal(const Tensor& x) {
  return unary(UnaryFn::reciprocal, x);
}
Tensor relu(const Tensor& x) {
  return unary(UnaryFn::relu, x);
}
Tensor gelu(const Tensor& x) {
  return unary(UnaryFn::gelu, x);
}
Tensor tanh(const Tensor& x) {
  return unary(UnaryFn::tanh, x);
}
Tensor sigmoid(const Tensor& x) {
  return unary(UnaryFn::sigmoid, x);
}
Tensor pow(const Tensor& x, double p) {
  return unary(UnaryFn::pow_scalar, x, p);
}
Tensor add(const Tensor& x, double c) {
  return unary(UnaryFn::add_scalar, x, c);
}
Tensor multiply(const Tensor& x, double c) {
  return unary(UnaryFn::mul_scalar, x, c);
}

Tensor binary(BinaryFn fn, const Tensor& a, const Tensor& b, const Shape* out_shape) {
  const char* where = "mtk::binary";
  Graph& g = graph_of({a, b}, where);
  require_same_dtype(a, b, where);
  Shape out = union_shape({a, b}, where);
  if (out_shape) {
    for (const auto& d : out.dims())
      if (!out_shape->contains(d.name))
        fail(where, cat(binary_name(fn), ": output ", out_shape->to_string(), " lacks dimension '",
                        d.name, "' of the inputs ", describe(a), " and ", describe(b)));
    check_within(*out_shape, {a, b}, where);
    out = *out_shape;
  }
  return g.add_named_op1(binary_op, binary_name(fn), {a, b}, out, a.dtype(), BinaryAttrs{fn});
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::add, a, b);
}
Tensor subtract(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::subtract, a, b);
}
Tensor multiply(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::multiply, a, b);
}
Tensor divide(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::divide, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::minimum, a, b);
}
Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return subtract(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return multiply(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return divide(a, b);
}
Tensor operator-(const Tensor& x) {
  return negative(x);
}

Tensor compare(CompareFn fn, const Tensor& a, const Tensor& b) {
  const char* where = "mtk::compare";
  Graph& g = graph_of({a, b}, where);
  require_same_dtype(a, b, where);
  return g.add_named_op1(compare_op, compare_name(fn), {a, b}, union_shape({a, b}, where),
                         DType::float32, CompareAttrs{fn});
}
Tensor less(const Tensor& a, const Tensor& b) {
  return compare(CompareFn::less, a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return compare(CompareFn::greater, a, b);
}
Tensor equal(const Tensor& a, const Tensor& b) {
  return compare(CompareFn::equal, a, b);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const char* where_ = "mtk::where";
  Graph& g = graph_of({cond, a, b}, where_);
  require_float(cond, where_);
  require_float(a, where_);
  require_float(b, where_);
  return g.add_op1(where_op, {cond, a, b}, union_shape({cond, a, b}, where_), DType::float32);
}

Tensor cast(const Tensor& x, DType dtype) {
  graph_of({x}, "mtk::cast");
  if (x.dtype() == dtype)
    return x;
  return x.graph().add_op1(cast_op, {x}, x.shape(), dtype);
}

}  // namespace mtk
