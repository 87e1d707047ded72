#pragma once
// A float64 twin of a graph: every op, the gradient ops autodiff added included, evaluated on the
// host in double, each value with a bound on how far a float32 evaluation of the same op may be
// from it in any summation order and on any CPU (running error analysis, Higham ch. 3): a sum of
// n terms adds gamma(n) * sum |terms| (tests/rounding_bound.hpp), an elementwise function its
// input's bound carried through the function (the function's values at x +- bound) plus a few
// float32 roundings of its result, a comparison whose operands are closer than their bounds an
// uncertain 0/1. The sources (variables, placeholders, constants, random tensors) are taken from
// a float32 run, so the twin and MTK start from the same numbers.
//
// The twin evaluates the op kinds of the elementwise, reduction, contraction, softmax, scan and
// shape families; unsupported_op() names the first op of a graph it cannot evaluate (a test then
// keeps its float32 comparison for that graph).

#include <mtk/graph/graph.hpp>
#include <mtk/ops/impl/attributes.hpp>
#include <mtk/runtime/host_tensor.hpp>

#include <gtest/gtest.h>

#include "rounding_bound.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
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

inline bool is_source(const std::string& kind) {
  return kind == "variable" || kind == "placeholder" || kind == "constant" || kind == "range" ||
         kind == "random_uniform" || kind == "random_normal";
}

inline bool is_evaluated(const std::string& kind) {
  static const char* const kinds[] = {"unary",   "binary",         "compare",  "where",
                                      "reduce",  "einsum",         "einsum_accumulate",
                                      "softmax", "log_softmax",    "softmax_grad",
                                      "cumsum",  "reshape",        "broadcast",
                                      "stop_gradient"};
  for (const char* k : kinds)
    if (kind == k)
      return true;
  return false;
}

/// For each element of `out` (row-major), the offset of the element of `in` with the same
/// coordinates in in's dims (in's dims a subset of out's, by name; the others broadcast).
inline std::vector<std::int64_t> offsets_into(const Shape& out, const Shape& in) {
  const auto in_strides = in.strides();
  std::vector<std::int64_t> stride(static_cast<size_t>(out.rank()), 0);
  for (int d = 0; d < out.rank(); ++d) {
    const int k = in.index_of(out[d].name);
    if (k >= 0)
      stride[static_cast<size_t>(d)] = in_strides[static_cast<size_t>(k)];
  }
  for (int k = 0; k < in.rank(); ++k)
    if (!out.contains(in[k].name))
      throw std::runtime_error("float64 twin: dim " + in[k].name + " of " + in.to_string() +
                               " is not in " + out.to_string());
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

/// The rows of `s` along `dim`: each row's first offset, and the stride between its elements.
struct Rows {
  std::vector<std::int64_t> starts;
  std::int64_t stride = 1, length = 1;
};
inline Rows rows_along(const Shape& s, const std::string& dim) {
  const int d = s.index_of(dim);
  if (d < 0)
    throw std::runtime_error("float64 twin: no dim " + dim + " in " + s.to_string());
  Rows r;
  r.stride = s.strides()[static_cast<size_t>(d)];
  r.length = s[d].size;
  const std::int64_t outer = s.num_elements() / (r.length * r.stride);
  for (std::int64_t a = 0; a < outer; ++a)
    for (std::int64_t b = 0; b < r.stride; ++b)
      r.starts.push_back(a * r.length * r.stride + b);
  return r;
}

inline double unary_value(UnaryFn f, double x, double p) {
  const double c = 0.7978845608028654, k = 0.044715;
  switch (f) {
    case UnaryFn::identity: return x;
    case UnaryFn::negative: return -x;
    case UnaryFn::abs: return std::fabs(x);
    case UnaryFn::exp: return std::exp(x);
    case UnaryFn::log: return std::log(x);
    case UnaryFn::sqrt: return std::sqrt(x);
    case UnaryFn::rsqrt: return 1 / std::sqrt(x);
    case UnaryFn::square: return x * x;
    case UnaryFn::reciprocal: return 1 / x;
    case UnaryFn::relu: return x > 0 ? x : 0;
    case UnaryFn::gelu: return 0.5 * x * (1 + std::tanh(c * (x + k * x * x * x)));
    case UnaryFn::gelu_grad: {
      const double t = std::tanh(c * (x + k * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * k * x * x);
    }
    case UnaryFn::tanh: return std::tanh(x);
    case UnaryFn::sigmoid: return 1 / (1 + std::exp(-x));
    case UnaryFn::sign: return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case UnaryFn::pow_scalar: return std::pow(x, p);
    case UnaryFn::add_scalar: return x + p;
    case UnaryFn::mul_scalar: return x * p;
    case UnaryFn::relu_mask: return x > 0 ? 1 : 0;
  }
  throw std::runtime_error("float64 twin: unknown unary function");
}

/// What float32 rounding adds to f's result y (x its operand): a few units of y for the library
/// functions (<= 1-2 ulp each) and compositions, more where a composition cancels.
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
    case UnaryFn::mul_scalar:  // the scalar rounded to float32, then the product
      return 2 * u * std::fabs(y);
    case UnaryFn::add_scalar:
      return u * (std::fabs(y) + std::fabs(p));
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

inline double binary_value(BinaryFn f, double a, double b) {
  switch (f) {
    case BinaryFn::add: return a + b;
    case BinaryFn::subtract: return a - b;
    case BinaryFn::multiply: return a * b;
    case BinaryFn::divide: return a / b;
    case BinaryFn::maximum: return a > b ? a : b;
    case BinaryFn::minimum: return a < b ? a : b;
    case BinaryFn::pow: return std::pow(a, b);
  }
  throw std::runtime_error("float64 twin: unknown binary function");
}

inline double binary_rounding(BinaryFn f, double z) {
  switch (f) {
    case BinaryFn::maximum:
    case BinaryFn::minimum:
      return 0;
    case BinaryFn::pow:
      return 4 * u * std::fabs(z);
    default:
      return u * std::fabs(z);
  }
}

/// 1 where `a fn b` holds, and whether the answer is certain given the operands' bounds.
inline std::pair<double, bool> compare_value(CompareFn f, double a, double ea, double b,
                                             double eb) {
  const double d = a - b, e = ea + eb;
  switch (f) {
    case CompareFn::less: return {d < 0, std::fabs(d) > e};
    case CompareFn::less_equal: return {d <= 0, std::fabs(d) > e};
    case CompareFn::greater: return {d > 0, std::fabs(d) > e};
    case CompareFn::greater_equal: return {d >= 0, std::fabs(d) > e};
    case CompareFn::equal: return {d == 0, e == 0};
    case CompareFn::not_equal: return {d != 0, e == 0};
    case CompareFn::near_equal: {
      const double k = kNearEqualRelative, m = std::max(std::fabs(a), std::fabs(b));
      const double margin = std::fabs(d) - k * m;  // <= 0: near equal
      // the float32 test itself rounds |a - b| and k m
      const double slack = e * (1 + k) + 2 * u * (std::fabs(d) + k * m);
      return {margin <= 0, std::fabs(margin) > slack};
    }
  }
  throw std::runtime_error("float64 twin: unknown comparison");
}

}  // namespace twin_impl

/// The first op of `g` the twin cannot evaluate ("kind 'name'"), or nothing.
inline std::optional<std::string> twin_unsupported_op(const Graph& g) {
  for (int i = 0; i < g.num_ops(); ++i) {
    const Operation& op = g.op(i);
    const std::string kind = op.kind();
    if (twin_impl::is_source(kind))
      continue;
    if (!twin_impl::is_evaluated(kind))
      return kind + " '" + op.name + "'";
    for (int t : op.outputs)
      if (g.tensor_info(t).dtype != DType::float32)
        return kind + " '" + op.name + "' (a " + dtype_name(g.tensor_info(t).dtype) + " output)";
    if (op.precision != Precision::float32)
      return kind + " '" + op.name + "' (contracting in reduced precision)";
  }
  return std::nullopt;
}

/// Every tensor of `g` in float64 with its float32 rounding bound; `sources` holds the values of
/// the source ops' outputs (by tensor id) as a float32 run made them.
inline std::map<int, TwinTensor> evaluate_float64_twin(const Graph& g,
                                                       const std::map<int, HostTensor>& sources) {
  using namespace twin_impl;
  std::map<int, TwinTensor> t;
  const auto in = [&](const Operation& op, size_t k) -> const TwinTensor& {
    return t.at(op.inputs.at(k));
  };
  for (int i = 0; i < g.num_ops(); ++i) {
    const Operation& op = g.op(i);
    const std::string kind = op.kind();
    const int y = op.outputs.at(0);
    TwinTensor out;
    out.shape = g.tensor_info(y).shape;
    const std::int64_t n = out.shape.num_elements();
    out.value.assign(static_cast<size_t>(n), 0.0);
    out.bound.assign(static_cast<size_t>(n), 0.0);
    auto& v = out.value;
    auto& e = out.bound;
    if (is_source(kind)) {
      const auto s = sources.find(y);
      if (s == sources.end())
        throw std::runtime_error("float64 twin: no value for source " + op.name);
      if (s->second.size() != n)
        throw std::runtime_error("float64 twin: the value of " + op.name + " has " +
                                 std::to_string(s->second.size()) + " elements, not " +
                                 std::to_string(n));
      for (std::int64_t k = 0; k < n; ++k)
        v[static_cast<size_t>(k)] = s->second.at(k);
    } else if (kind == "reshape" || kind == "stop_gradient") {
      const TwinTensor& x = in(op, 0);
      v = x.value;
      e = x.bound;
    } else if (kind == "broadcast") {
      const TwinTensor& x = in(op, 0);
      const auto off = offsets_into(out.shape, x.shape);
      for (size_t k = 0; k < off.size(); ++k) {
        v[k] = x.value[static_cast<size_t>(off[k])];
        e[k] = x.bound[static_cast<size_t>(off[k])];
      }
    } else if (kind == "unary") {
      const auto& a = *static_cast<const ops_impl::UnaryAttrs*>(op.attributes.get());
      const TwinTensor& x = in(op, 0);
      for (size_t k = 0; k < v.size(); ++k) {
        const double xv = x.value[k], xe = x.bound[k];
        v[k] = unary_value(a.fn, xv, a.p);
        double spread = 0;
        if (xe > 0)
          for (double c : {xv - xe, xv + xe})
            spread = std::max(spread, std::fabs(unary_value(a.fn, c, a.p) - v[k]));
        e[k] = spread + unary_rounding(a.fn, xv, v[k], a.p);
      }
    } else if (kind == "binary") {
      const auto& a = *static_cast<const ops_impl::BinaryAttrs*>(op.attributes.get());
      const TwinTensor &x = in(op, 0), &z = in(op, 1);
      const auto ox = offsets_into(out.shape, x.shape), oz = offsets_into(out.shape, z.shape);
      for (size_t k = 0; k < v.size(); ++k) {
        const double p = x.value[static_cast<size_t>(ox[k])], pe = x.bound[static_cast<size_t>(ox[k])];
        const double q = z.value[static_cast<size_t>(oz[k])], qe = z.bound[static_cast<size_t>(oz[k])];
        v[k] = binary_value(a.fn, p, q);
        double spread = 0;  // the functions are monotone in each operand where defined
        if (pe > 0 || qe > 0)
          for (double cp : {p - pe, p + pe})
            for (double cq : {q - qe, q + qe}) {
              const double w = binary_value(a.fn, cp, cq);
              spread = std::isfinite(w) ? std::max(spread, std::fabs(w - v[k]))
                                        : std::numeric_limits<double>::infinity();
            }
        if (a.fn == BinaryFn::divide && std::fabs(q) <= qe)
          spread = std::numeric_limits<double>::infinity();
        e[k] = spread + binary_rounding(a.fn, v[k]);
      }
    } else if (kind == "compare") {
      const auto& a = *static_cast<const ops_impl::CompareAttrs*>(op.attributes.get());
      const TwinTensor &x = in(op, 0), &z = in(op, 1);
      const auto ox = offsets_into(out.shape, x.shape), oz = offsets_into(out.shape, z.shape);
      for (size_t k = 0; k < v.size(); ++k) {
        const size_t i = static_cast<size_t>(ox[k]), j = static_cast<size_t>(oz[k]);
        const auto [r, certain] = compare_value(a.fn, x.value[i], x.bound[i], z.value[j], z.bound[j]);
        v[k] = r;
        e[k] = certain ? 0 : 1;
      }
    } else if (kind == "where") {
      const TwinTensor &c = in(op, 0), &a = in(op, 1), &d = in(op, 2);
      const auto oc = offsets_into(out.shape, c.shape), oa = offsets_into(out.shape, a.shape),
                 od = offsets_into(out.shape, d.shape);
      for (size_t k = 0; k < v.size(); ++k) {
        const size_t ic = static_cast<size_t>(oc[k]), ia = static_cast<size_t>(oa[k]),
                     id = static_cast<size_t>(od[k]);
        const bool take_a = c.value[ic] != 0;
        v[k] = take_a ? a.value[ia] : d.value[id];
        e[k] = c.bound[ic] == 0 ? (take_a ? a.bound[ia] : d.bound[id])
                                : std::fabs(a.value[ia] - d.value[id]) +
                                      std::max(a.bound[ia], d.bound[id]);
      }
    } else if (kind == "reduce") {
      const auto& a = *static_cast<const ops_impl::ReduceAttrs*>(op.attributes.get());
      const TwinTensor& x = in(op, 0);
      const auto off = offsets_into(x.shape, out.shape);  // each input element's output slot
      const std::int64_t terms = n > 0 ? x.shape.num_elements() / n : 0;
      std::vector<double> abs(v.size(), 0.0);
      std::vector<bool> first(v.size(), true);
      for (size_t k = 0; k < off.size(); ++k) {
        const size_t o = static_cast<size_t>(off[k]);
        const double xv = x.value[k], xe = x.bound[k];
        switch (a.fn) {
          case ReduceFn::sum:
            v[o] += xv;
            e[o] += xe;
            abs[o] += std::fabs(xv);
            break;
          case ReduceFn::sum_squares:
            v[o] += xv * xv;
            e[o] += 2 * std::fabs(xv) * xe + xe * xe;
            abs[o] += xv * xv;
            break;
          case ReduceFn::max:
          case ReduceFn::min:
            if (first[o] || (a.fn == ReduceFn::max ? xv > v[o] : xv < v[o]))
              v[o] = xv;
            e[o] = std::max(e[o], xe);
            first[o] = false;
            break;
        }
      }
      const std::int64_t rounded = a.fn == ReduceFn::sum_squares ? terms + 1 : terms;
      for (size_t o = 0; o < v.size(); ++o)
        e[o] += rounding_bound(abs[o], rounded);
    } else if (kind == "einsum" || kind == "einsum_accumulate") {
      const auto& a = *static_cast<const ops_impl::EinsumAttrs*>(op.attributes.get());
      if (a.precision != Precision::float32)
        throw std::runtime_error("float64 twin: " + op.name + " contracts in reduced precision");
      const size_t first_factor = kind == "einsum" ? 0 : 1;
      std::vector<const TwinTensor*> xs;
      for (size_t k = first_factor; k < op.inputs.size(); ++k)
        xs.push_back(&in(op, k));
      // The whole index space: the output's dims, then every dim only an operand has.
      std::vector<Dimension> dims = out.shape.dims();
      for (const TwinTensor* x : xs)
        for (const Dimension& d : x->shape.dims())
          if (std::none_of(dims.begin(), dims.end(),
                           [&](const Dimension& q) { return q.name == d.name; }))
            dims.push_back(d);
      const Shape space(dims);
      const std::int64_t terms = n > 0 ? space.num_elements() / n : 0;
      const auto oy = offsets_into(space, out.shape);
      std::vector<std::vector<std::int64_t>> ox;
      for (const TwinTensor* x : xs)
        ox.push_back(offsets_into(space, x->shape));
      std::vector<double> abs(v.size(), 0.0);
      for (size_t p = 0; p < oy.size(); ++p) {
        double prod = 1, prod_abs = 1, prod_hi = 1;
        for (size_t f = 0; f < xs.size(); ++f) {
          const size_t j = static_cast<size_t>(ox[f][p]);
          const double xv = xs[f]->value[j], xe = xs[f]->bound[j];
          prod *= xv;
          prod_abs *= std::fabs(xv);
          prod_hi *= std::fabs(xv) + xe;
        }
        const size_t o = static_cast<size_t>(oy[p]);
        v[o] += prod;
        abs[o] += prod_abs;
        e[o] += prod_hi - prod_abs;  // the operands' bounds carried through the product
      }
      // Any order and blocking of the products and their sum; einsum_accumulate adds the sum.
      std::int64_t depth = terms + static_cast<std::int64_t>(xs.size());
      if (kind == "einsum_accumulate") {
        const TwinTensor& s = in(op, 0);
        const auto os = offsets_into(out.shape, s.shape);
        for (size_t o = 0; o < v.size(); ++o) {
          const size_t j = static_cast<size_t>(os[o]);
          v[o] += s.value[j];
          e[o] += s.bound[j];
          abs[o] += std::fabs(s.value[j]);
        }
        ++depth;
      }
      for (size_t o = 0; o < v.size(); ++o)
        e[o] += rounding_bound(abs[o], depth);
    } else if (kind == "softmax" || kind == "log_softmax") {
      const auto& a = *static_cast<const ops_impl::SoftmaxAttrs*>(op.attributes.get());
      const TwinTensor& x = in(op, 0);
      const Rows r = rows_along(x.shape, a.dim);
      const double g_n = rounding_gamma(r.length);
      std::vector<double> p(static_cast<size_t>(r.length));
      for (std::int64_t s0 : r.starts) {
        const auto at = [&](std::int64_t j) { return static_cast<size_t>(s0 + j * r.stride); };
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < r.length; ++j)
          m = std::max(m, x.value[at(j)]);
        double sum = 0, zmax = 0;
        for (std::int64_t j = 0; j < r.length; ++j) {
          p[static_cast<size_t>(j)] = std::exp(x.value[at(j)] - m);
          sum += p[static_cast<size_t>(j)];
          zmax = std::max(zmax, std::fabs(x.value[at(j)] - m));
        }
        double carried = 0;  // sum_j p_j e_j: the operands' bounds through the normalisation
        for (std::int64_t j = 0; j < r.length; ++j) {
          p[static_cast<size_t>(j)] /= sum;
          carried += p[static_cast<size_t>(j)] * x.bound[at(j)];
        }
        // The sum's relative rounding: its terms' (x - m, exp) and its own.
        const double sum_rel = u * (zmax + 5) + g_n;
        for (std::int64_t j = 0; j < r.length; ++j) {
          const size_t o = at(j);
          const double pj = p[static_cast<size_t>(j)], zj = std::fabs(x.value[o] - m);
          if (kind == "softmax") {
            v[o] = pj;
            e[o] = pj * (x.bound[o] + carried) + pj * (u * (zj + 6) + sum_rel);
          } else {
            v[o] = x.value[o] - m - std::log(sum);
            e[o] = x.bound[o] + carried + u * (zj + std::fabs(v[o])) +
                   (sum_rel + 4 * u * std::fabs(std::log(sum)) + u);
          }
        }
      }
    } else if (kind == "softmax_grad") {
      const auto& a = *static_cast<const ops_impl::SoftmaxGradAttrs*>(op.attributes.get());
      const TwinTensor &yy = in(op, 0), &dy = in(op, 1);
      if (!(yy.shape == dy.shape))
        throw std::runtime_error("float64 twin: softmax_grad operands differ in shape");
      const Rows r = rows_along(yy.shape, a.dim);
      const double g_n = rounding_gamma(r.length + 1);
      for (std::int64_t s0 : r.starts) {
        const auto at = [&](std::int64_t j) { return static_cast<size_t>(s0 + j * r.stride); };
        double s = 0, se = 0, sabs = 0;
        for (std::int64_t j = 0; j < r.length; ++j) {
          const size_t o = at(j);
          if (a.log) {
            s += dy.value[o];
            se += dy.bound[o];
            sabs += std::fabs(dy.value[o]);
          } else {
            const double yv = std::fabs(yy.value[o]), dv = std::fabs(dy.value[o]);
            s += yy.value[o] * dy.value[o];
            se += yv * dy.bound[o] + dv * yy.bound[o] + yy.bound[o] * dy.bound[o];
            sabs += yv * dv;
          }
        }
        se += g_n * sabs;
        for (std::int64_t j = 0; j < r.length; ++j) {
          const size_t o = at(j);
          const double yv = yy.value[o], ye = yy.bound[o], dv = dy.value[o], de = dy.bound[o];
          if (a.log) {  // dy - exp(y) s
            const double ey = std::exp(yv);
            v[o] = dv - ey * s;
            e[o] = de + ey * (se + std::fabs(s) * (std::expm1(ye) + 6 * u)) + u * std::fabs(v[o]);
          } else {  // y (dy - s)
            v[o] = yv * (dv - s);
            e[o] = ye * (std::fabs(dv - s) + de + se) + std::fabs(yv) * (de + se) +
                   std::fabs(yv) * u * (std::fabs(dv) + std::fabs(s)) + u * std::fabs(v[o]);
          }
        }
      }
    } else if (kind == "cumsum") {
      const auto& a = *static_cast<const ops_impl::CumsumAttrs*>(op.attributes.get());
      const TwinTensor& x = in(op, 0);
      const Rows r = rows_along(x.shape, a.dim);
      for (std::int64_t s0 : r.starts) {
        double s = 0, se = 0, sabs = 0;
        for (std::int64_t j = 0; j < r.length; ++j) {
          const size_t o = static_cast<size_t>(s0 + j * r.stride);
          if (!a.exclusive) {
            s += x.value[o];
            se += x.bound[o];
            sabs += std::fabs(x.value[o]);
          }
          v[o] = s;
          e[o] = se + rounding_bound(sabs, j + 2);  // split scans add the parts before in double
          if (a.exclusive) {
            s += x.value[o];
            se += x.bound[o];
            sabs += std::fabs(x.value[o]);
          }
        }
      }
    } else {
      throw std::runtime_error("float64 twin: op kind " + kind + " ('" + op.name +
                               "') is not evaluated");
    }
    if (op.outputs.size() != 1)
      throw std::runtime_error("float64 twin: " + op.name + " has several outputs");
    t.emplace(y, std::move(out));
  }
  return t;
}

/// Every element of `got` within its bound of the twin's value (a non-finite bound fails: the
/// twin could not bound it). Returns the largest |got - twin| / bound, for reports.
inline double expect_within_twin(const HostTensor& got, const TwinTensor& want,
                                 const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape) << what;
  if (got.shape() != want.shape)
    return 0;
  double worst = 0;
  for (std::int64_t k = 0; k < got.size(); ++k) {
    const size_t i = static_cast<size_t>(k);
    const double d = std::fabs(got.at(k) - want.value[i]), b = want.bound[i];
    EXPECT_TRUE(std::isfinite(b)) << what << " at " << k << ": the twin has no finite bound";
    if (d > b) {
      ADD_FAILURE() << what << " at " << k << ": " << got.at(k) << " against float64 "
                    << want.value[i] << ", off by " << d << ", more than float32 rounding may ("
                    << b << ")";
      return d / b;
    }
    if (b > 0)
      worst = std::max(worst, d / b);
  }
  return worst;
}

}  // namespace mtk::test
