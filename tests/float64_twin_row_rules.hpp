#pragma once
// The float64 twin's rules for the contractions and the ops that work along a row: einsum,
// softmax and its gradient, the fused cross-entropy and its gradient, layer norm and its gradient
// (the elementwise, shape, indexing and reduction rules and the helpers: float64_twin_rules.hpp).

#include "float64_twin_rules.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::test {
namespace twin_impl {

// ----------------------------------------------------------------------------- contractions

/// einsum (operands) and einsum_accumulate (sum, a, c): every dim of the operands that the output
/// lacks summed, the output's dims that an operand lacks broadcast.
inline void einsum(const Operation& op, const Ins& in, Outs& out, bool accumulate) {
  if (attrs<ops_impl::EinsumAttrs>(op).precision != Precision::float32)
    fail(op.name + " contracts in reduced precision");
  TwinTensor& y = out[0];
  const Ins xs(in.begin() + (accumulate ? 1 : 0), in.end());
  std::vector<Dimension> dims = y.shape.dims();
  for (const TwinTensor* x : xs)
    for (const Dimension& d : x->shape.dims())
      if (std::none_of(dims.begin(), dims.end(),
                       [&](const Dimension& q) { return q.name == d.name; }))
        dims.push_back(d);
  const Shape space(dims);
  const std::int64_t n = y.shape.num_elements();
  const std::int64_t terms = n > 0 ? space.num_elements() / n : 0;
  const auto oy = offsets_into(space, y.shape);
  std::vector<std::vector<std::int64_t>> ox;
  for (const TwinTensor* x : xs)
    ox.push_back(offsets_into(space, x->shape));
  std::vector<double> abs(y.value.size(), 0.0);
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
    y.value[o] += prod;
    abs[o] += prod_abs;
    y.bound[o] += prod_hi - prod_abs;  // the operands' bounds carried through the product
  }
  // Any order and blocking of the products and their sum; einsum_accumulate adds the sum.
  std::int64_t depth = terms + static_cast<std::int64_t>(xs.size());
  if (accumulate) {
    const TwinTensor& s = *in[0];
    const auto os = offsets_into(y.shape, s.shape);
    for (size_t o = 0; o < y.value.size(); ++o) {
      const size_t j = static_cast<size_t>(os[o]);
      y.value[o] += s.value[j];
      y.bound[o] += s.bound[j];
      abs[o] += std::fabs(s.value[j]);
    }
    ++depth;
  }
  for (size_t o = 0; o < y.value.size(); ++o)
    y.bound[o] += rounding_bound(abs[o], depth);
}

// ----------------------------------------------------------------------- softmax and losses

/// A row's log-sum-exp and softmax, with the bound of the log-sum-exp: the row's bounds carried
/// (sum_j p_j e_j) and the roundings of x - max, exp (<= 2 ulp), the sum and the log.
struct RowSoftmax {
  std::vector<double> p;
  double max = 0, lse = 0, lse_bound = 0, sum_rel = 0;
  template <class At>
  RowSoftmax(const TwinTensor& x, std::int64_t length, At at) : p(static_cast<size_t>(length)) {
    max = -kInf;
    for (std::int64_t j = 0; j < length; ++j)
      max = std::max(max, x.value[at(j)]);
    double sum = 0;
    for (std::int64_t j = 0; j < length; ++j) {
      p[static_cast<size_t>(j)] = std::exp(x.value[at(j)] - max);
      sum += p[static_cast<size_t>(j)];
    }
    double carried = 0, terms_rel = 0;  // each term's rounding weighs by its share of the sum
    for (std::int64_t j = 0; j < length; ++j) {
      const double pj = p[static_cast<size_t>(j)] /= sum;
      carried += pj * x.bound[at(j)];
      terms_rel += pj * u * (std::fabs(x.value[at(j)] - max) + 5);
    }
    sum_rel = terms_rel + rounding_gamma(length);
    lse = max + std::log(sum);
    lse_bound = carried + sum_rel + 4 * u * std::fabs(std::log(sum)) + u * std::fabs(lse);
  }
};

inline void softmax(const Operation& op, const Ins& in, Outs& out, bool log) {
  const auto& a = attrs<ops_impl::SoftmaxAttrs>(op);
  const TwinTensor& x = *in[0];
  TwinTensor& y = out[0];
  const Along ax = along(x.shape, a.dim);
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    const auto at = [&](std::int64_t j) { return ax.at(o, j, i); };
    const RowSoftmax r(x, ax.length, at);
    double carried = 0;
    for (std::int64_t j = 0; j < ax.length; ++j)
      carried += r.p[static_cast<size_t>(j)] * x.bound[at(j)];
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = at(j);
      const double pj = r.p[static_cast<size_t>(j)], zj = std::fabs(x.value[k] - r.max);
      if (!log) {
        y.value[k] = pj;
        y.bound[k] = pj * (x.bound[k] + carried) + pj * (u * (zj + 6) + r.sum_rel);
      } else {
        y.value[k] = x.value[k] - r.lse;
        y.bound[k] = x.bound[k] + r.lse_bound + u * (zj + 2 * std::fabs(y.value[k]));
      }
    }
  });
}

/// softmax_grad (y, dy): y (dy - sum y dy), or for log_softmax dy - exp(y) sum dy.
inline void softmax_grad(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::SoftmaxGradAttrs>(op);
  const TwinTensor &yy = *in[0], &dy = *in[1];
  TwinTensor& dx = out[0];
  const Along ax = along(yy.shape, a.dim);
  const double g_n = rounding_gamma(ax.length + 1);
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    double s = 0, se = 0, sabs = 0;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = ax.at(o, j, i);
      if (a.log) {
        s += dy.value[k];
        se += dy.bound[k];
        sabs += std::fabs(dy.value[k]);
      } else {
        const double yv = std::fabs(yy.value[k]), dv = std::fabs(dy.value[k]);
        s += yy.value[k] * dy.value[k];
        se += yv * dy.bound[k] + dv * yy.bound[k] + yy.bound[k] * dy.bound[k];
        sabs += yv * dv;
      }
    }
    se += g_n * sabs;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = ax.at(o, j, i);
      const double yv = yy.value[k], ye = yy.bound[k], dv = dy.value[k], de = dy.bound[k];
      if (a.log) {
        const double ey = std::exp(yv);
        dx.value[k] = dv - ey * s;
        dx.bound[k] =
            de + ey * (se + std::fabs(s) * (std::expm1(ye) + 6 * u)) + u * std::fabs(dx.value[k]);
      } else {
        dx.value[k] = yv * (dv - s);
        dx.bound[k] = ye * (std::fabs(dv - s) + de + se) + std::fabs(yv) * (de + se) +
                      std::fabs(yv) * u * (std::fabs(dv) + std::fabs(s)) +
                      u * std::fabs(dx.value[k]);
      }
    }
  });
}

/// softmax_cross_entropy (logits, targets -> loss, lse): lse - keep x_t - spread sum x + z lse^2.
inline void cross_entropy(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::CrossEntropyAttrs>(op);
  const TwinTensor &x = *in[0], &t = *in[1];
  const Along ax = along(x.shape, a.dim);
  const double keep = 1 - a.label_smoothing,
               spread = a.label_smoothing / static_cast<double>(ax.length), z = a.z_loss;
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    const auto at = [&](std::int64_t j) { return ax.at(o, j, i); };
    const RowSoftmax s(x, ax.length, at);
    const size_t row = static_cast<size_t>(o * ax.inner + i);
    if (t.bound[row] > 0)
      fail(op.name + ": a target may differ in float32");
    const double target = t.value[row];
    double xt = 0, xt_e = 0, sum = 0, sum_e = 0, sum_abs = 0;
    if (target >= 0 && target < static_cast<double>(ax.length)) {
      xt = x.value[at(static_cast<std::int64_t>(target))];
      xt_e = x.bound[at(static_cast<std::int64_t>(target))];
    }
    for (std::int64_t j = 0; j < ax.length; ++j) {
      sum += x.value[at(j)];
      sum_e += x.bound[at(j)];
      sum_abs += std::fabs(x.value[at(j)]);
    }
    sum_e += rounding_bound(sum_abs, ax.length);
    const double loss = s.lse - keep * xt - spread * sum + z * s.lse * s.lse;
    out[0].value[row] = loss;
    out[0].bound[row] =
        s.lse_bound * (1 + 2 * z * std::fabs(s.lse)) + keep * xt_e + spread * sum_e +
        3 * u * (std::fabs(s.lse) + keep * std::fabs(xt) + spread * sum_abs + z * s.lse * s.lse) +
        u * std::fabs(loss);
    out[1].value[row] = s.lse;
    out[1].bound[row] = s.lse_bound;
  });
}

/// softmax_cross_entropy_grad (logits, targets, lse, dy): dy (exp(x - lse) (1 + 2 z lse) -
/// spread - keep [j = t]).
inline void cross_entropy_grad(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::CrossEntropyAttrs>(op);
  const TwinTensor &x = *in[0], &t = *in[1], &lse = *in[2], &dy = *in[3];
  TwinTensor& dx = out[0];
  const Along ax = along(x.shape, a.dim);
  const double keep = 1 - a.label_smoothing,
               spread = a.label_smoothing / static_cast<double>(ax.length), z2 = 2 * a.z_loss;
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    const size_t row = static_cast<size_t>(o * ax.inner + i);
    if (t.bound[row] > 0)
      fail(op.name + ": a target may differ in float32");
    const double l = lse.value[row], le = lse.bound[row], d = dy.value[row], de = dy.bound[row];
    const double gs = d * (1 + z2 * l);
    const double gs_e = de * std::fabs(1 + z2 * l) + std::fabs(d) * z2 * le + 3 * u * std::fabs(gs);
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = ax.at(o, j, i);
      const double arg = x.value[k] - l, p = std::exp(arg);
      const double p_e = p * (std::expm1(x.bound[k] + le) + u * (std::fabs(arg) + 5));
      const double hot = t.value[row] == static_cast<double>(j) ? keep : 0;
      const double v = p * gs - d * spread - d * hot;
      dx.value[k] = v;
      dx.bound[k] = std::fabs(gs) * p_e + p * gs_e + (spread + hot) * de +
                    3 * u * (std::fabs(p * gs) + std::fabs(d) * (spread + hot)) + u * std::fabs(v);
    }
  });
}

// --------------------------------------------------------------------------- normalisation

/// layer_norm (x, scale, bias -> y, mean, rstd): (x - mean) rstd scale + bias, rstd = 1 /
/// sqrt(mean of the centred squares + epsilon).
inline void layer_norm(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::LayerNormAttrs>(op);
  const TwinTensor &x = *in[0], &scale = *in[1], &bias = *in[2];
  const Along ax = along(x.shape, a.dim);
  const double D = static_cast<double>(ax.length);
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    const auto at = [&](std::int64_t j) { return ax.at(o, j, i); };
    const size_t row = static_cast<size_t>(o * ax.inner + i);
    double s1 = 0, s1_e = 0, s1_abs = 0;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      s1 += x.value[at(j)];
      s1_e += x.bound[at(j)];
      s1_abs += std::fabs(x.value[at(j)]);
    }
    const double m = s1 / D;
    const double m_e = (s1_e + rounding_bound(s1_abs, ax.length)) / D + 2 * u * std::fabs(m);
    double s2 = 0, s2_e = 0;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const double c = x.value[at(j)] - m, c_e = x.bound[at(j)] + m_e + u * std::fabs(c);
      s2 += c * c;
      s2_e += 2 * std::fabs(c) * c_e + c_e * c_e;
    }
    s2_e += rounding_bound(s2, ax.length + 1);
    const double var = s2 / D + a.epsilon;
    const double r = 1 / std::sqrt(var);
    const double r_e = r * (0.5 * (s2_e / D) / var + 4 * u);
    out[1].value[row] = m;
    out[1].bound[row] = m_e;
    out[2].value[row] = r;
    out[2].bound[row] = r_e;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = at(j), sj = static_cast<size_t>(j);
      const double c = x.value[k] - m, c_e = x.bound[k] + m_e + u * std::fabs(c);
      const double sc = scale.value[sj], xh = c * r;
      const double y = xh * sc + bias.value[sj];
      out[0].value[k] = y;
      out[0].bound[k] = std::fabs(r * sc) * c_e + std::fabs(c * sc) * r_e +
                        std::fabs(xh) * scale.bound[sj] + bias.bound[sj] +
                        u * (2 * std::fabs(xh * sc) + std::fabs(y));
    }
  });
}

/// layer_norm_grad (x, scale, mean, rstd, dy -> dx, dy xhat): rstd (g - mean g - xhat mean(g
/// xhat)), g = dy scale.
inline void layer_norm_grad(const Operation& op, const Ins& in, Outs& out) {
  const auto& a = attrs<ops_impl::LayerNormAttrs>(op);
  const TwinTensor &x = *in[0], &scale = *in[1], &mean = *in[2], &rstd = *in[3], &dy = *in[4];
  const Along ax = along(x.shape, a.dim);
  const double D = static_cast<double>(ax.length);
  std::vector<double> xh(static_cast<size_t>(ax.length)), xh_e(xh.size()), g(xh.size()),
      g_e(xh.size());
  for_rows(ax, [&](std::int64_t o, std::int64_t i) {
    const size_t row = static_cast<size_t>(o * ax.inner + i);
    const double m = mean.value[row], m_e = mean.bound[row], r = rstd.value[row],
                 r_e = rstd.bound[row];
    double sa = 0, sa_e = 0, sa_abs = 0, sb = 0, sb_e = 0, sb_abs = 0;
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = ax.at(o, j, i), sj = static_cast<size_t>(j);
      const double c = x.value[k] - m;
      xh[sj] = c * r;
      xh_e[sj] =
          (x.bound[k] + m_e + u * std::fabs(c)) * r + std::fabs(c) * r_e + u * std::fabs(xh[sj]);
      g[sj] = dy.value[k] * scale.value[sj];
      g_e[sj] = std::fabs(scale.value[sj]) * dy.bound[k] +
                std::fabs(dy.value[k]) * scale.bound[sj] + u * std::fabs(g[sj]);
      sa += g[sj];
      sa_e += g_e[sj];
      sa_abs += std::fabs(g[sj]);
      sb += g[sj] * xh[sj];
      sb_e += std::fabs(g[sj]) * xh_e[sj] + std::fabs(xh[sj]) * g_e[sj];
      sb_abs += std::fabs(g[sj] * xh[sj]);
    }
    const double ma = sa / D, mb = sb / D;
    const double ma_e = (sa_e + rounding_bound(sa_abs, ax.length + 1)) / D + 2 * u * std::fabs(ma);
    const double mb_e = (sb_e + rounding_bound(sb_abs, ax.length + 2)) / D + 2 * u * std::fabs(mb);
    for (std::int64_t j = 0; j < ax.length; ++j) {
      const size_t k = ax.at(o, j, i), sj = static_cast<size_t>(j);
      const double tv = g[sj] - ma - xh[sj] * mb;
      const double t_e = g_e[sj] + ma_e + std::fabs(xh[sj]) * mb_e + std::fabs(mb) * xh_e[sj] +
                         2 * u * (std::fabs(g[sj]) + std::fabs(ma) + std::fabs(xh[sj] * mb));
      out[0].value[k] = r * tv;
      out[0].bound[k] = r * t_e + std::fabs(tv) * r_e + u * std::fabs(r * tv);
      out[1].value[k] = dy.value[k] * xh[sj];
      out[1].bound[k] = std::fabs(xh[sj]) * dy.bound[k] + std::fabs(dy.value[k]) * xh_e[sj] +
                        u * std::fabs(out[1].value[k]);
    }
  });
}

}  // namespace twin_impl
}  // namespace mtk::test
