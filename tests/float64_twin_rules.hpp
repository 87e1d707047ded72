#pragma once
// The float64 twin's rule for each op kind (tests/float64_twin.hpp): the op's values in double
// from its inputs' values, and the most a float32 evaluation of it may differ, from its inputs'
// bounds carried through the op plus the float32 roundings the op itself makes in any order
// (a sum of n terms: gamma(n) * sum |terms|; a library function: a few units of its result).
// Integer tensors are exact (bound 0); an index whose float32 value may differ (an argmax of
// values closer than their bounds) has bound 1. Here: the helpers and the elementwise, shape,
// indexing and reduction rules; contractions and row ops in float64_twin_row_rules.hpp.

#include <mtk/graph/graph.hpp>
#include <mtk/ops/impl/attributes.hpp>

#include "rounding_bound.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace mtk::test {

/// One tensor of the twin: its values in double and, per element, the most a float32 evaluation
/// may differ from them.
struct TwinTensor {
  Shape shape;
  std::vector<double> value, bound;
};

namespace twin_impl {

constexpr double u = kFloat32Unit;
constexpr double kInf = std::numeric_limits<double>::infinity();

using Ins = std::vector<const TwinTensor*>;
using Outs = std::vector<TwinTensor>;

template <class A>
const A& attrs(const Operation& op) {
  return *static_cast<const A*>(op.attributes.get());
}

[[noreturn]] inline void fail(const std::string& what) {
  throw std::runtime_error("float64 twin: " + what);
}

/// For each element of `out` (row-major), the offset of the element of a tensor of shape `in`
/// with the same coordinates in in's dims (by name; the others broadcast). in's dims but `skip`
/// must be in out.
inline std::vector<std::int64_t> offsets_into(const Shape& out, const Shape& in,
                                              const std::string& skip = "") {
  const auto in_strides = in.strides();
  std::vector<std::int64_t> stride(static_cast<size_t>(out.rank()), 0);
  for (int d = 0; d < out.rank(); ++d) {
    const int k = in.index_of(out[d].name);
    if (k >= 0 && out[d].name != skip)
      stride[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(k)];
  }
  for (int k = 0; k < in.rank(); ++k)
    if (in[k].name != skip && !out.contains(in[k].name))
      fail("dim " + in[k].name + " of " + in.to_string() + " is not in " + out.to_string());
  std::vector<std::int64_t> off(static_cast<size_t>(out.num_elements()));
  std::vector<std::int64_t> idx(static_cast<size_t>(out.rank()), 0);
  std::int64_t o = 0;
  for (auto& slot : off) {
    slot = o;
    for (int d = out.rank() - 1; d >= 0; --d) {  // odometer
      const size_t s = static_cast<size_t>(d);
      o += stride[s];
      if (++idx[s] < out[d].size)
        break;
      o -= stride[s] * idx[s];
      idx[s] = 0;
    }
  }
  return off;
}

/// A tensor seen along one dim: offset (o, j, i) = (o * length + j) * inner + i.
struct Along {
  std::int64_t outer = 1, length = 1, inner = 1;
  Along(const Shape& s, int d) {
    if (d < 0 || d >= s.rank())
      fail("no dim " + std::to_string(d) + " in " + s.to_string());
    length = s[d].size;
    inner = s.strides()[static_cast<size_t>(d)];
    outer = length * inner > 0 ? s.num_elements() / (length * inner) : 0;
  }
  size_t at(std::int64_t o, std::int64_t j, std::int64_t i) const {
    return static_cast<size_t>((o * length + j) * inner + i);
  }
};
inline Along along(const Shape& s, const std::string& dim) {
  const int d = s.index_of(dim);
  if (d < 0)
    fail("no dim " + dim + " in " + s.to_string());
  return Along(s, d);
}

/// Calls f(o, i) for every row (o, ., i) of `a`.
template <class F>
void for_rows(const Along& a, F&& f) {
  for (std::int64_t o = 0; o < a.outer; ++o)
    for (std::int64_t i = 0; i < a.inner; ++i)
      f(o, i);
}

inline TwinTensor zeros(const Shape& s) {
  const size_t n = static_cast<size_t>(s.num_elements());
  return TwinTensor{s, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
}

// ------------------------------------------------------------------------------ elementwise

inline double unary_value(UnaryFn f, double x, double p) {
  const double c = 0.7978845608028654, k = 0.044715;
  switch (f) {
    case UnaryFn::identity:
      return x;
    case UnaryFn::negative:
      return -x;
    case UnaryFn::abs:
      return std::fabs(x);
    case UnaryFn::exp:
      return std::exp(x);
    case UnaryFn::log:
      return std::log(x);
    case UnaryFn::sqrt:
      return std::sqrt(x);
    case UnaryFn::rsqrt:
      return 1 / std::sqrt(x);
    case UnaryFn::square:
      return x * x;
    case UnaryFn::reciprocal:
      return 1 / x;
    case UnaryFn::relu:
      return x > 0 ? x : 0;
    case UnaryFn::gelu:
      return 0.5 * x * (1 + std::tanh(c * (x + k * x * x * x)));
    case UnaryFn::gelu_grad: {
      const double t = std::tanh(c * (x + k * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x);
    }
    case UnaryFn::tanh:
      return std::tanh(x);
    case UnaryFn::sigmoid:
      return 1 / (1 + std::exp(-x));
    case UnaryFn::sign:
      return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case UnaryFn::pow_scalar:
      return std::pow(x, p);
    case UnaryFn::add_scalar:
      return x + p;
    case UnaryFn::mul_scalar:
      return x * p;
    case UnaryFn::relu_mask:
      return x > 0 ? 1 : 0;
  }
  fail("unknown unary function");
}

/// What float32 rounding adds to f's result y (x its operand): a few units of y for the library
/// functions (<= 2 ulp each, MTK's vectorised exp included) and compositions, more where a
/// composition cancels.
inline double unary_rounding(UnaryFn f, double x, double y, double p) {
  switch (f) {
    case UnaryFn::identity:
    case UnaryFn::negative:
    case UnaryFn::abs:
    case UnaryFn::relu:
    case UnaryFn::sign:
    case UnaryFn::relu_mask:
      return 0;
    case UnaryFn::square:
    case UnaryFn::reciprocal:
    case UnaryFn::sqrt:
      return u * std::fabs(y);
    case UnaryFn::rsqrt:
      return 2 * u * std::fabs(y);
    case UnaryFn::mul_scalar:  // the scalar as float32 rounds it (exactly: |p - float(p)|)
      return std::fabs(x) * std::fabs(p - static_cast<float>(p)) + u * std::fabs(y);
    case UnaryFn::add_scalar:
      return std::fabs(p - static_cast<float>(p)) + u * std::fabs(y);
    case UnaryFn::exp:
    case UnaryFn::log:
    case UnaryFn::tanh:
    case UnaryFn::pow_scalar:
      return 4 * u * std::fabs(y);
    case UnaryFn::sigmoid:
      return 8 * u * std::fabs(y);
    case UnaryFn::gelu:
    case UnaryFn::gelu_grad:  // 0.5 (1 + t) cancels where t is near -1: bound by the parts
      return 24 * u * (std::fabs(y) + 1 + std::fabs(x) * (1 + 0.2 * x * x));
  }
  return 0;
}

inline void unary(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::UnaryAttrs>(op);
  const TwinTensor& x = *in[0];
  TwinTensor& y = out[0];
  for (size_t k = 0; k < y.value.size(); ++k) {
    const double xv = x.value[k], xe = x.bound[k];
    y.value[k] = unary_value(a.fn, xv, a.p);
    double spread = 0;  // the function over [x - bound, x + bound], at its ends
    if (xe > 0)
      for (double c : {xv - xe, xv + xe})
        spread = std::max(spread, std::fabs(unary_value(a.fn, c, a.p) - y.value[k]));
    y.bound[k] = spread + unary_rounding(a.fn, xv, y.value[k], a.p);
  }
}

inline double binary_value(BinaryFn f, double a, double b, bool integer) {
  switch (f) {
    case BinaryFn::add:
      return a + b;
    case BinaryFn::subtract:
      return a - b;
    case BinaryFn::multiply:
      return a * b;
    case BinaryFn::divide:
      return integer ? (b == 0 ? 0 : std::trunc(a / b)) : a / b;
    case BinaryFn::maximum:
      return a > b ? a : b;
    case BinaryFn::minimum:
      return a < b ? a : b;
    case BinaryFn::pow:
      return std::pow(a, b);
  }
  fail("unknown binary function");
}

inline void binary(const Operation& op, const Ins& in, Outs& out, bool integer) {
  const auto& a = attrs<ops_impl::BinaryAttrs>(op);
  const TwinTensor &x = *in[0], &z = *in[1];
  TwinTensor& y = out[0];
  const auto ox = offsets_into(y.shape, x.shape), oz = offsets_into(y.shape, z.shape);
  for (size_t k = 0; k < y.value.size(); ++k) {
    const size_t i = static_cast<size_t>(ox[k]), j = static_cast<size_t>(oz[k]);
    const double p = x.value[i], pe = x.bound[i], q = z.value[j], qe = z.bound[j];
    const double v = binary_value(a.fn, p, q, integer);
    y.value[k] = v;
    if (integer) {
      y.bound[k] = pe > 0 || qe > 0 ? 1 : 0;
      continue;
    }
    double spread = 0;  // the functions are monotone in each operand where defined
    if (pe > 0 || qe > 0)
      for (double cp : {p - pe, p + pe})
        for (double cq : {q - qe, q + qe}) {
          const double w = binary_value(a.fn, cp, cq, false);
          spread = std::isfinite(w) ? std::max(spread, std::fabs(w - v)) : kInf;
        }
    if (a.fn == BinaryFn::divide && std::fabs(q) <= qe)
      spread = kInf;
    const double rounding = a.fn == BinaryFn::maximum || a.fn == BinaryFn::minimum ? 0
                            : a.fn == BinaryFn::pow ? 4 * u * std::fabs(v)
                                                    : u * std::fabs(v);
    y.bound[k] = spread + rounding;
  }
}

/// 1 where `a fn b` holds, and whether the answer is certain given the operands' bounds.
inline std::pair<double, bool> compare_value(CompareFn f, double a, double ea, double b,
                                             double eb) {
  const double d = a - b, e = ea + eb;
  const bool decided = e == 0 || std::fabs(d) > e;  // exact operands decide every comparison
  switch (f) {
    case CompareFn::less:
      return {d < 0, decided};
    case CompareFn::less_equal:
      return {d <= 0, decided};
    case CompareFn::greater:
      return {d > 0, decided};
    case CompareFn::greater_equal:
      return {d >= 0, decided};
    case CompareFn::equal:
      return {d == 0, e == 0};
    case CompareFn::not_equal:
      return {d != 0, e == 0};
    case CompareFn::near_equal: {
      const double k = kNearEqualRelative, m = std::max(std::fabs(a), std::fabs(b));
      const double margin = std::fabs(d) - k * m;  // <= 0: near equal
      // the float32 test itself rounds |a - b| and k m
      const double slack = e * (1 + k) + 2 * u * (std::fabs(d) + k * m);
      return {margin <= 0, (d == 0 && e == 0) || std::fabs(margin) > slack};
    }
  }
  fail("unknown comparison");
}

inline void compare(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::CompareAttrs>(op);
  const TwinTensor &x = *in[0], &z = *in[1];
  TwinTensor& y = out[0];
  const auto ox = offsets_into(y.shape, x.shape), oz = offsets_into(y.shape, z.shape);
  for (size_t k = 0; k < y.value.size(); ++k) {
    const size_t i = static_cast<size_t>(ox[k]), j = static_cast<size_t>(oz[k]);
    const auto [r, certain] = compare_value(a.fn, x.value[i], x.bound[i], z.value[j], z.bound[j]);
    y.value[k] = r;
    y.bound[k] = certain ? 0 : 1;
  }
}

inline void where(const Ins& in, Outs& out) {
  const TwinTensor &c = *in[0], &a = *in[1], &d = *in[2];
  TwinTensor& y = out[0];
  const auto oc = offsets_into(y.shape, c.shape), oa = offsets_into(y.shape, a.shape),
             od = offsets_into(y.shape, d.shape);
  for (size_t k = 0; k < y.value.size(); ++k) {
    const size_t ic = static_cast<size_t>(oc[k]), ia = static_cast<size_t>(oa[k]),
                 id = static_cast<size_t>(od[k]);
    const bool take_a = c.value[ic] != 0;
    y.value[k] = take_a ? a.value[ia] : d.value[id];
    y.bound[k] = c.bound[ic] == 0
                     ? (take_a ? a.bound[ia] : d.bound[id])
                     : std::fabs(a.value[ia] - d.value[id]) + std::max(a.bound[ia], d.bound[id]);
  }
}

inline void cast(const Ins& in, Outs& out, bool to_integer) {
  const TwinTensor& x = *in[0];
  TwinTensor& y = out[0];
  for (size_t k = 0; k < y.value.size(); ++k) {
    const double xv = x.value[k], xe = x.bound[k];
    if (to_integer) {
      y.value[k] = std::trunc(xv);
      y.bound[k] = std::trunc(xv - xe) == std::trunc(xv + xe) ? 0 : 1;
    } else {  // integers below 2^24 are exact in float32
      y.value[k] = xv;
      y.bound[k] = xe + (std::fabs(xv) > 16777216.0 ? u * std::fabs(xv) : 0);
    }
  }
}

// ---------------------------------------------------------------------- shapes and indexing

inline void copy(const Ins& in, Outs& out) {  // reshape, stop_gradient
  out[0].value = in[0]->value;
  out[0].bound = in[0]->bound;
}

inline void broadcast(const Ins& in, Outs& out) {
  const TwinTensor& x = *in[0];
  TwinTensor& y = out[0];
  const auto off = offsets_into(y.shape, x.shape);
  for (size_t k = 0; k < off.size(); ++k) {
    y.value[k] = x.value[static_cast<size_t>(off[k])];
    y.bound[k] = x.bound[static_cast<size_t>(off[k])];
  }
}

/// slice, pad and shift: out[o, j, i] = x[o, source(j), i], or 0 where source(j) is outside x.
template <class Source>
void along_copy(const TwinTensor& x, TwinTensor& y, const std::string& dim, Source source) {
  const int d = x.shape.index_of(dim);
  const Along ax(x.shape, d), ay(y.shape, d);
  for_rows(ay, [&](std::int64_t o, std::int64_t i) {
    for (std::int64_t j = 0; j < ay.length; ++j) {
      const std::int64_t s = source(j);
      if (s >= 0 && s < ax.length) {
        y.value[ay.at(o, j, i)] = x.value[ax.at(o, s, i)];
        y.bound[ay.at(o, j, i)] = x.bound[ax.at(o, s, i)];
      }
    }
  });
}

inline void slice(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::SliceAttrs>(op);
  along_copy(*in[0], out[0], a.dim, [&](std::int64_t j) { return a.begin + j; });
}

inline void pad(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::PadAttrs>(op);
  along_copy(*in[0], out[0], a.dim, [&](std::int64_t j) { return j - a.before; });
}

inline void shift(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::ShiftAttrs>(op);
  const std::int64_t n = in[0]->shape.size_of(a.dim);
  along_copy(*in[0], out[0], a.dim, [&](std::int64_t j) {
    const std::int64_t s = j - a.offset;
    return a.wrap ? ((s % n) + n) % n : s;
  });
}

inline void concat(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::ConcatAttrs>(op);
  TwinTensor& y = out[0];
  const int d = in[0]->shape.index_of(a.dim);
  const Along ay(y.shape, d);
  std::int64_t start = 0;
  for (const TwinTensor* x : in) {
    const Along ax(x->shape, d);
    for_rows(ax, [&](std::int64_t o, std::int64_t i) {
      for (std::int64_t j = 0; j < ax.length; ++j) {
        y.value[ay.at(o, start + j, i)] = x->value[ax.at(o, j, i)];
        y.bound[ay.at(o, start + j, i)] = x->bound[ax.at(o, j, i)];
      }
    });
    start += ax.length;
  }
}

inline void one_hot(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::OneHotAttrs>(op);
  const TwinTensor& ids = *in[0];
  TwinTensor& y = out[0];
  const Along ay = along(y.shape, a.dim);
  const auto oi = offsets_into(y.shape, ids.shape, a.dim);
  for_rows(ay, [&](std::int64_t o, std::int64_t i) {
    for (std::int64_t j = 0; j < ay.length; ++j) {
      const size_t k = ay.at(o, j, i), p = static_cast<size_t>(oi[k]);
      const double v = ids.value[p] == static_cast<double>(j) ? a.on : a.off;
      y.value[k] = v;  // on and off rounded to float32
      y.bound[k] = ids.bound[p] > 0 ? std::fabs(a.on - a.off) + u * std::fabs(v) : u * std::fabs(v);
    }
  });
}

inline void gather(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::GatherAttrs>(op);
  const TwinTensor &table = *in[0], &ids = *in[1];
  TwinTensor& y = out[0];
  const int d = table.shape.index_of(a.dim);
  const std::int64_t rows = table.shape[d].size,
                     stride = table.shape.strides()[static_cast<size_t>(d)];
  const auto ot = offsets_into(y.shape, table.shape, a.dim), oi = offsets_into(y.shape, ids.shape);
  for (size_t k = 0; k < y.value.size(); ++k) {
    const size_t p = static_cast<size_t>(oi[k]);
    const double id = ids.value[p];
    if (id >= 0 && id < static_cast<double>(rows)) {
      const size_t t = static_cast<size_t>(ot[k] + static_cast<std::int64_t>(id) * stride);
      y.value[k] = table.value[t];
      y.bound[k] = table.bound[t];
    }
    if (ids.bound[p] > 0)
      y.bound[k] = kInf;
  }
}

/// scatter_add (ids, updates) and scatter_add_into (sum, ids, updates): table rows += updates.
inline void scatter_add(const Operation& op, const Ins& in, Outs& out, bool into) {
  const auto& a = attrs<ops_impl::GatherAttrs>(op);
  const TwinTensor &ids = *in[into ? 1 : 0], &upd = *in[into ? 2 : 1];
  TwinTensor& y = out[0];
  std::vector<double> abs(y.value.size(), 0.0);
  std::vector<std::int64_t> terms(y.value.size(), 0);
  if (into) {
    y.value = in[0]->value;
    y.bound = in[0]->bound;
    for (size_t k = 0; k < abs.size(); ++k) {
      abs[k] = std::fabs(y.value[k]);
      terms[k] = 1;
    }
  }
  // Every update element, each table dim it lacks broadcast: the updates' dims, then the rest.
  std::vector<Dimension> dims = upd.shape.dims();
  for (const auto& dm : y.shape.dims())
    if (dm.name != a.dim && !upd.shape.contains(dm.name))
      dims.push_back(dm);
  const Shape space(dims);
  const int d = y.shape.index_of(a.dim);
  const std::int64_t rows = y.shape[d].size, stride = y.shape.strides()[static_cast<size_t>(d)];
  const auto ou = offsets_into(space, upd.shape), oi = offsets_into(space, ids.shape);
  const auto ot = offsets_into(space, y.shape, a.dim);
  for (size_t p = 0; p < ou.size(); ++p) {
    const size_t i = static_cast<size_t>(oi[p]), j = static_cast<size_t>(ou[p]);
    if (ids.bound[i] > 0)
      fail(op.name + ": an index may differ in float32");
    const double id = ids.value[i];
    if (id < 0 || id >= static_cast<double>(rows))
      continue;
    const size_t t = static_cast<size_t>(ot[p] + static_cast<std::int64_t>(id) * stride);
    y.value[t] += upd.value[j];
    y.bound[t] += upd.bound[j];
    abs[t] += std::fabs(upd.value[j]);
    ++terms[t];
  }
  for (size_t t = 0; t < abs.size(); ++t)
    y.bound[t] += rounding_bound(abs[t], terms[t]);
}

// ------------------------------------------------------------------------------ reductions

inline void reduce(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::ReduceAttrs>(op);
  const TwinTensor& x = *in[0];
  TwinTensor& y = out[0];
  const auto off = offsets_into(x.shape, y.shape);  // each input element's output slot
  const std::int64_t n = y.shape.num_elements();
  const std::int64_t terms = n > 0 ? x.shape.num_elements() / n : 0;
  std::vector<double> abs(y.value.size(), 0.0);
  std::vector<bool> first(y.value.size(), true);
  for (size_t k = 0; k < off.size(); ++k) {
    const size_t o = static_cast<size_t>(off[k]);
    const double xv = x.value[k], xe = x.bound[k];
    switch (a.fn) {
      case ReduceFn::sum:
        y.value[o] += xv;
        y.bound[o] += xe;
        abs[o] += std::fabs(xv);
        break;
      case ReduceFn::sum_squares:
        y.value[o] += xv * xv;
        y.bound[o] += 2 * std::fabs(xv) * xe + xe * xe;
        abs[o] += xv * xv;
        break;
      case ReduceFn::max:
      case ReduceFn::min:
        if (first[o] || (a.fn == ReduceFn::max ? xv > y.value[o] : xv < y.value[o]))
          y.value[o] = xv;
        y.bound[o] = std::max(y.bound[o], xe);
        first[o] = false;
        break;
    }
  }
  const std::int64_t rounded = a.fn == ReduceFn::sum_squares ? terms + 1 : terms;
  for (size_t o = 0; o < y.value.size(); ++o)
    y.bound[o] += rounding_bound(abs[o], rounded);
}

inline void top_1(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::Top1Attrs>(op);
  const TwinTensor& x = *in[0];
  const Along ax = along(x.shape, a.dim);
  // the outputs' rows in x's row order (x's shape without the dim)
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < ax.length; ++j)  // the first maximum wins ties, as MTK's
      if (x.value[ax.at(o, j, i)] > x.value[ax.at(o, best, i)])
        best = j;
    const size_t b = ax.at(o, best, i);
    bool certain = true;
    for (std::int64_t j = 0; j < ax.length; ++j)
      if (j != best && x.value[b] - x.value[ax.at(o, j, i)] <= x.bound[b] + x.bound[ax.at(o, j, i)])
        certain = false;
    double e = 0;
    for (std::int64_t j = 0; j < ax.length; ++j)
      e = std::max(e, x.bound[ax.at(o, j, i)]);
    const size_t k = static_cast<size_t>(o * ax.inner + i);
    out[0].value[k] = x.value[b];
    out[0].bound[k] = e;
    out[1].value[k] = static_cast<double>(best);
    out[1].bound[k] = certain ? 0 : 1;
  });
}

inline void cumsum(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::CumsumAttrs>(op);
  const TwinTensor& x = *in[0];
  TwinTensor& y = out[0];
  const Along ax = along(x.shape, a.dim);
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    double s = 0, se = 0, sabs = 0;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = ax.at(o, j, i);
      if (!a.exclusive) {
        s += x.value[k];
        se += x.bound[k];
        sabs += std::fabs(x.value[k]);
      }
      y.value[k] = s;
      y.bound[k] = se + rounding_bound(sabs, j + 2);  // a split scan adds the parts before
      if (a.exclusive) {
        s += x.value[k];
        se += x.bound[k];
        sabs += std::fabs(x.value[k]);
      }
    }
  });
}

}  // namespace twin_impl
}  // namespace mtk::test
