#pragma once
// Direct float64 reference loops for the spatial tests: convolution (with the gradients of its
// input and filter, which also give the transposed convolution) and pooling over 1 to 3 spatial
// dims, on tensors laid out [batch, spatial..., channels] row-major. Each result comes with the
// sum of its terms' magnitudes and their count, from which a test bounds float32 rounding
// (rounding_bound.hpp) instead of taking a constant tolerance.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mtk::test {

struct ConvGeom {
  int rank = 1;
  std::int64_t batch = 1, cin = 1, cout = 1;
  std::int64_t n[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1},
               pb[3] = {0, 0, 0}, m[3] = {1, 1, 1};

  /// TensorFlow's output sizes and padding.
  void plan(bool same) {
    for (int a = 0; a < rank; ++a) {
      const std::int64_t span = d[a] * (k[a] - 1) + 1;
      if (same) {
        m[a] = (n[a] + s[a] - 1) / s[a];
        pb[a] = std::max<std::int64_t>((m[a] - 1) * s[a] + span - n[a], 0) / 2;
      } else {
        m[a] = (n[a] - span) / s[a] + 1;
        pb[a] = 0;
      }
    }
  }
  std::int64_t points(const std::int64_t* e) const {
    std::int64_t p = 1;
    for (int a = 0; a < rank; ++a)
      p *= e[a];
    return p;
  }
  // Multi-index `idx` of flat position `f` over extents `e`.
  void unflat(std::int64_t f, const std::int64_t* e, std::int64_t* idx) const {
    for (int a = rank - 1; a >= 0; --a) {
      idx[a] = f % e[a];
      f /= e[a];
    }
  }
  // The input position of output o and tap t (-1 when it is padding).
  std::int64_t input_of(std::int64_t o, std::int64_t t) const {
    std::int64_t oi[3], ti[3], f = 0;
    unflat(o, m, oi);
    unflat(t, k, ti);
    for (int a = 0; a < rank; ++a) {
      const std::int64_t i = oi[a] * s[a] + ti[a] * d[a] - pb[a];
      if (i < 0 || i >= n[a])
        return -1;
      f = f * n[a] + i;
    }
    return f;
  }
};

/// y = conv(x, f); dx, df: the gradients of sum(y * w). *_abs: the sum of the magnitudes of each
/// value's terms; *_terms: the most terms any value of the array sums.
struct ConvRef {
  std::vector<double> y, dx, df;
  std::vector<double> y_abs, dx_abs, df_abs;
  std::int64_t y_terms = 1, dx_terms = 1, df_terms = 1;
};

inline ConvRef conv_reference(const ConvGeom& g, const std::vector<double>& x,
                              const std::vector<double>& f, const std::vector<double>& w) {
  const std::int64_t in = g.points(g.n), out = g.points(g.m), taps = g.points(g.k);
  ConvRef r;
  r.y.assign(static_cast<size_t>(g.batch * out * g.cout), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.df.assign(f.size(), 0.0);
  r.y_abs.assign(r.y.size(), 0.0);
  r.dx_abs.assign(r.dx.size(), 0.0);
  r.df_abs.assign(r.df.size(), 0.0);
  // Every tap and input channel (padding included: a kernel may add its zeros).
  r.y_terms = taps * g.cin;
  r.dx_terms = taps * g.cout;
  r.df_terms = g.batch * out;
  for (std::int64_t b = 0; b < g.batch; ++b)
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t t = 0; t < taps; ++t) {
        const std::int64_t i = g.input_of(o, t);
        if (i < 0)
          continue;
        for (std::int64_t ci = 0; ci < g.cin; ++ci)
          for (std::int64_t co = 0; co < g.cout; ++co) {
            const size_t xi = static_cast<size_t>((b * in + i) * g.cin + ci);
            const size_t fi = static_cast<size_t>((t * g.cin + ci) * g.cout + co);
            const size_t yi = static_cast<size_t>((b * out + o) * g.cout + co);
            r.y[yi] += x[xi] * f[fi];
            r.dx[xi] += w[yi] * f[fi];
            r.df[fi] += w[yi] * x[xi];
            r.y_abs[yi] += std::fabs(x[xi] * f[fi]);
            r.dx_abs[xi] += std::fabs(w[yi] * f[fi]);
            r.df_abs[fi] += std::fabs(w[yi] * x[xi]);
          }
      }
  return r;
}

/// Max (or average, padding not counted) pooling per channel (g.cin); dx: the gradient of
/// sum(y * w).
inline ConvRef pool_reference(const ConvGeom& g, const std::vector<double>& x,
                              const std::vector<double>& w, bool max) {
  const std::int64_t in = g.points(g.n), out = g.points(g.m), taps = g.points(g.k);
  ConvRef r;
  r.y.assign(static_cast<size_t>(g.batch * out * g.cin), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.y_abs.assign(r.y.size(), 0.0);
  r.dx_abs.assign(r.dx.size(), 0.0);
  // An average divides a sum of the taps (one more rounding); an input sits in up to `taps`
  // windows, whose dy it sums.
  r.y_terms = taps + 1;
  r.dx_terms = taps + 1;
  for (std::int64_t b = 0; b < g.batch; ++b)
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t c = 0; c < g.cin; ++c) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        std::int64_t count = 0;
        for (std::int64_t t = 0; t < taps; ++t) {
          const std::int64_t i = g.input_of(o, t);
          if (i < 0)
            continue;
          const double v = x[static_cast<size_t>((b * in + i) * g.cin + c)];
          sum += v;
          r.y_abs[static_cast<size_t>((b * out + o) * g.cin + c)] += std::fabs(v);
          ++count;
          best = std::max(best, v);
        }
        const size_t yi = static_cast<size_t>((b * out + o) * g.cin + c);
        r.y[yi] = max ? best : sum / static_cast<double>(count);
        r.y_abs[yi] = max ? std::fabs(best) : r.y_abs[yi] / static_cast<double>(count);
        for (std::int64_t t = 0; t < taps && !max; ++t) {
          const std::int64_t i = g.input_of(o, t);
          if (i >= 0) {
            r.dx[static_cast<size_t>((b * in + i) * g.cin + c)] +=
                w[yi] / static_cast<double>(count);
            r.dx_abs[static_cast<size_t>((b * in + i) * g.cin + c)] +=
                std::fabs(w[yi]) / static_cast<double>(count);
          }
        }
        // Max: dy to every tap tied with the max up to rounding (CompareFn::near_equal, 2^-13).
        for (std::int64_t t = 0; t < taps && max; ++t) {
          const std::int64_t i = g.input_of(o, t);
          if (i < 0)
            continue;
          const double v = x[static_cast<size_t>((b * in + i) * g.cin + c)];
          if (std::fabs(v - best) <= std::max(std::fabs(v), std::fabs(best)) / 8192.0) {
            r.dx[static_cast<size_t>((b * in + i) * g.cin + c)] += w[yi];
            r.dx_abs[static_cast<size_t>((b * in + i) * g.cin + c)] += std::fabs(w[yi]);
          }
        }
      }
  return r;
}

/// Test values, each exactly a float32 (so the float64 references see what the graphs are fed).
inline std::vector<double> wave(std::int64_t n, double scale, double phase = 0.1) {
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>(scale * std::sin(0.731 * static_cast<double>(k) + phase +
                                               0.013 * static_cast<double>(k * k % 17)));
  return v;
}

}  // namespace mtk::test
