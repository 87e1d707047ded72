// mtk::kernels elementwise kernels — see elementwise.hpp.
//
// Every kernel is a labelled Kokkos::parallel_for over a RangePolicy<std::int64_t>. The function
// (UnaryFn, BinaryFn, CompareFn) is a template parameter of the kernel, so the per-element work is
// branch-free; the host switches once per call. Broadcasting by name has fast paths (operand equal
// to the output shape: direct index; operand dims a suffix of the output dims: index k % size) and
// a general IndexMap path.

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/kernels.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace mtk::kernels {
namespace elementwise_detail {

using impl::alloc;
using Policy = impl::Range;

template <class T>
void check_buffer(const char* where, const char* what, const Shape& shape, const View<T>& v) {
  if (static_cast<std::int64_t>(v.extent(0)) != shape.num_elements())
    fail(where, cat(what, " buffer holds ", v.extent(0), " elements but its shape ",
                    shape.to_string(), " has ", shape.num_elements()));
}

// ------------------------------------------------------------------ device math helpers

KOKKOS_INLINE_FUNCTION float m_exp(float x) {
  return ::expf(x);
}
KOKKOS_INLINE_FUNCTION float m_log(float x) {
  return ::logf(x);
}
KOKKOS_INLINE_FUNCTION float m_sqrt(float x) {
  return ::sqrtf(x);
}
KOKKOS_INLINE_FUNCTION float m_tanh(float x) {
  return ::tanhf(x);
}
KOKKOS_INLINE_FUNCTION float m_pow(float x, float y) {
  return ::powf(x, y);
}
KOKKOS_INLINE_FUNCTION float m_fabs(float x) {
  return ::fabsf(x);
}
KOKKOS_INLINE_FUNCTION double m_exp(double x) {
  return ::exp(x);
}
KOKKOS_INLINE_FUNCTION double m_log(double x) {
  return ::log(x);
}
KOKKOS_INLINE_FUNCTION double m_sqrt(double x) {
  return ::sqrt(x);
}
KOKKOS_INLINE_FUNCTION double m_tanh(double x) {
  return ::tanh(x);
}
KOKKOS_INLINE_FUNCTION double m_pow(double x, double y) {
  return ::pow(x, y);
}
KOKKOS_INLINE_FUNCTION double m_fabs(double x) {
  return ::fabs(x);
}

/// double -> int32 truncating toward zero; NaN becomes 0 and out-of-range values saturate.
KOKKOS_INLINE_FUNCTION std::int32_t to_int32(double v) {
  if (!(v == v))
    return 0;
  if (v >= 2147483647.0)
    return 2147483647;
  if (v <= -2147483648.0)
    return -2147483647 - 1;
  return static_cast<std::int32_t>(v);
}

KOKKOS_INLINE_FUNCTION std::int32_t to_int32(float v) {
  return to_int32(static_cast<double>(v));
}

/// One element of cast<To, From>; outside the kernel's lambda because nvcc's extended lambdas
/// cannot first-capture a variable inside `if constexpr`.
template <class To, class From>
KOKKOS_INLINE_FUNCTION To convert(From v) {
  if constexpr (std::is_same_v<To, std::int32_t> && std::is_floating_point_v<From>)
    return to_int32(v);
  else
    return static_cast<To>(v);
}

// ------------------------------------------------------------------ unary

/// f(x) for a floating-point type R (float or double).
template <UnaryFn F, class R>
KOKKOS_INLINE_FUNCTION R unary_real(R x, R p) {
  const R zero = 0, one = 1, half = static_cast<R>(0.5);
  const R c = static_cast<R>(0.7978845608028654);  // sqrt(2 / pi)
  const R k = static_cast<R>(0.044715);
  if constexpr (F == UnaryFn::identity) {
    return x;
  } else if constexpr (F == UnaryFn::negative) {
    return -x;
  } else if constexpr (F == UnaryFn::abs) {
    return m_fabs(x);
  } else if constexpr (F == UnaryFn::exp) {
    return m_exp(x);
  } else if constexpr (F == UnaryFn::log) {
    return m_log(x);
  } else if constexpr (F == UnaryFn::sqrt) {
    return m_sqrt(x);
  } else if constexpr (F == UnaryFn::rsqrt) {
    return one / m_sqrt(x);
  } else if constexpr (F == UnaryFn::square) {
    return x * x;
  } else if constexpr (F == UnaryFn::reciprocal) {
    return one / x;
  } else if constexpr (F == UnaryFn::relu) {
    return x > zero ? x : zero;
  } else if constexpr (F == UnaryFn::gelu) {
    return half * x * (one + m_tanh(c * (x + k * x * x * x)));
  } else if constexpr (F == UnaryFn::gelu_grad) {
    const R t = m_tanh(c * (x + k * x * x * x));
    return half * (one + t) + half * x * (one - t * t) * c * (one + 3 * k * x * x);
  } else if constexpr (F == UnaryFn::tanh) {
    return m_tanh(x);
  } else if constexpr (F == UnaryFn::sigmoid) {
    if (x >= zero)
      return one / (one + m_exp(-x));
    const R e = m_exp(x);
    return e / (one + e);
  } else if constexpr (F == UnaryFn::sign) {
    return x > zero ? one : (x < zero ? -one : zero);
  } else if constexpr (F == UnaryFn::pow_scalar) {
    return m_pow(x, p);
  } else if constexpr (F == UnaryFn::add_scalar) {
    return x + p;
  } else if constexpr (F == UnaryFn::mul_scalar) {
    return x * p;
  } else {
    static_assert(F == UnaryFn::relu_mask, "unhandled UnaryFn");
    return x > zero ? one : zero;
  }
}

template <UnaryFn F>
struct UnaryOp {
  double p;
  KOKKOS_INLINE_FUNCTION float operator()(float x) const {
    return unary_real<F, float>(x, static_cast<float>(p));
  }
  KOKKOS_INLINE_FUNCTION std::int32_t operator()(std::int32_t x) const {
    const std::int64_t w = x;
    if constexpr (F == UnaryFn::identity) {
      return x;
    } else if constexpr (F == UnaryFn::negative) {
      return static_cast<std::int32_t>(-w);
    } else if constexpr (F == UnaryFn::abs) {
      return static_cast<std::int32_t>(w < 0 ? -w : w);
    } else if constexpr (F == UnaryFn::square) {
      return static_cast<std::int32_t>(w * w);
    } else if constexpr (F == UnaryFn::sign) {
      return x > 0 ? 1 : (x < 0 ? -1 : 0);
    } else if constexpr (F == UnaryFn::relu) {
      return x > 0 ? x : 0;
    } else if constexpr (F == UnaryFn::relu_mask) {
      return x > 0 ? 1 : 0;
    } else {
      // add_scalar, mul_scalar, pow_scalar and the transcendental functions: computed in double.
      return to_int32(unary_real<F, double>(static_cast<double>(x), p));
    }
  }
};

template <UnaryFn F, class T>
View<T> unary_kernel(const ExecSpace& space, const View<T>& x, double p) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  auto y = alloc<T>("mtk::kernels::unary", n);
  const UnaryOp<F> op{p};
  Kokkos::parallel_for(
      "mtk::kernels::unary", Policy(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i) { y(i) = op(x(i)); });
  return y;
}

// ------------------------------------------------------------------ binary and compare

template <BinaryFn F>
struct BinaryOp {
  KOKKOS_INLINE_FUNCTION float operator()(float a, float b) const {
    if constexpr (F == BinaryFn::add) {
      return a + b;
    } else if constexpr (F == BinaryFn::subtract) {
      return a - b;
    } else if constexpr (F == BinaryFn::multiply) {
      return a * b;
    } else if constexpr (F == BinaryFn::divide) {
      return a / b;
    } else if constexpr (F == BinaryFn::maximum) {
      return a > b ? a : b;
    } else if constexpr (F == BinaryFn::minimum) {
      return a < b ? a : b;
    } else {
      static_assert(F == BinaryFn::pow, "unhandled BinaryFn");
      return m_pow(a, b);
    }
  }
  KOKKOS_INLINE_FUNCTION std::int32_t operator()(std::int32_t a, std::int32_t b) const {
    const std::int64_t x = a, y = b;
    if constexpr (F == BinaryFn::add) {
      return static_cast<std::int32_t>(x + y);
    } else if constexpr (F == BinaryFn::subtract) {
      return static_cast<std::int32_t>(x - y);
    } else if constexpr (F == BinaryFn::multiply) {
      return static_cast<std::int32_t>(x * y);
    } else if constexpr (F == BinaryFn::divide) {
      return y == 0 ? 0 : static_cast<std::int32_t>(x / y);  // truncating; x / 0 is 0
    } else if constexpr (F == BinaryFn::maximum) {
      return a > b ? a : b;
    } else if constexpr (F == BinaryFn::minimum) {
      return a < b ? a : b;
    } else {
      static_assert(F == BinaryFn::pow, "unhandled BinaryFn");
      return to_int32(m_pow(static_cast<double>(a), static_cast<double>(b)));
    }
  }
};

template <CompareFn F>
struct CompareOp {
  template <class T>
  KOKKOS_INLINE_FUNCTION float operator()(T a, T b) const {
    bool r;
    if constexpr (F == CompareFn::less) {
      r = a < b;
    } else if constexpr (F == CompareFn::less_equal) {
      r = a <= b;
    } else if constexpr (F == CompareFn::greater) {
      r = a > b;
    } else if constexpr (F == CompareFn::greater_equal) {
      r = a >= b;
    } else if constexpr (F == CompareFn::equal) {
      r = a == b;
    } else {
      static_assert(F == CompareFn::not_equal, "unhandled CompareFn");
      r = a != b;
    }
    return r ? 1.f : 0.f;
  }
};

// Operand indexers: the offset into an operand of output element k.
struct Direct {
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const { return k; }
};
struct Modulo {
  std::int64_t n;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const { return k % n; }
};
struct Divide {  // the operand's dims lead the output's: one offset per block of `n` outputs
  std::int64_t n;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const { return k / n; }
};
struct Block {  // operand = leading dims + trailing dims of the output, broadcast in between
  std::int64_t inner, period;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const {
    return (k / period) * inner + k % inner;
  }
};
struct Mapped {
  IndexMap map;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const { return map.offset(k); }
};

enum class Access { direct, modulo, divide, block, mapped };

/// How output elements reach one operand. Validates (by name) that the operand fits the output.
struct Plan {
  Access access = Access::mapped;
  std::int64_t n = 1;
  std::int64_t period = 1;  // block: outputs per leading-dims index
  IndexMap map;
};

Plan plan_operand(const Shape& out, const Shape& in, const char* where) {
  Plan p;
  p.map = map_by_name(out, in, where);
  p.n = in.num_elements();
  if (in == out) {
    p.access = Access::direct;
    return p;
  }
  const int shift = out.rank() - in.rank();
  bool suffix = shift >= 0, prefix = shift >= 0;
  for (int i = 0; suffix && i < in.rank(); ++i)
    suffix = in[i] == out[i + shift];
  for (int i = 0; prefix && i < in.rank(); ++i)
    prefix = in[i] == out[i];
  if (suffix) {
    p.access = Access::modulo;
  } else if (prefix && p.n > 0) {
    p.access = Access::divide;
    p.n = out.num_elements() / p.n;  // outputs per operand element
  } else {
    p.access = Access::mapped;
    // Leading dims of `in` lead `out`, its remaining dims end `out` (e.g. an attention bias
    // [batch, length, memory] added to logits [batch, heads, length, memory]).
    for (int a = 1; a < in.rank(); ++a) {
      bool ok = true;
      for (int i = 0; ok && i < a; ++i)
        ok = in[i] == out[i];
      const int tail = in.rank() - a;
      for (int i = 0; ok && i < tail; ++i)
        ok = in[a + i] == out[out.rank() - tail + i];
      if (!ok)
        continue;
      std::int64_t inner = 1, period = 1;
      for (int i = a; i < in.rank(); ++i)
        inner *= in[i].size;
      for (int i = a; i < out.rank(); ++i)
        period *= out[i].size;
      if (inner == 0 || period == 0)
        break;
      p.access = Access::block;
      p.n = inner;
      p.period = period;
      break;
    }
  }
  return p;
}

/// Calls f with the compile-time indexer that fits `p`.
template <class F>
void with_indexer(const Plan& p, F&& f) {
  switch (p.access) {
    case Access::direct:
      f(Direct{});
      break;
    case Access::modulo:
      f(Modulo{p.n});
      break;
    case Access::divide:
      f(Divide{p.n});
      break;
    default:
      f(Mapped{p.map});
      break;
  }
}

/// A runtime-dispatched indexer (used by where, whose three operands would multiply the fast
/// paths); the branch is uniform across the kernel.
struct AnyAccess {
  Access access;
  std::int64_t n, period;
  IndexMap map;
  explicit AnyAccess(const Plan& p) : access(p.access), n(p.n), period(p.period), map(p.map) {}
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const {
    if (access == Access::direct)
      return k;
    if (access == Access::modulo)
      return k % n;
    if (access == Access::divide)
      return k / n;
    if (access == Access::block)
      return (k / period) * n + k % n;
    return map.offset(k);
  }
};

template <class Op, class T, class R, class IA, class IB>
void zip_kernel(const ExecSpace& space, const char* label, Op op, const View<T>& a, IA ia,
                const View<T>& b, IB ib, const View<R>& out) {
  Kokkos::parallel_for(
      label, Policy(space, 0, static_cast<std::int64_t>(out.extent(0))),
      KOKKOS_LAMBDA(std::int64_t k) { out(k) = op(a(ia(k)), b(ib(k))); });
}

/// The longest run of trailing output elements over which each operand is contiguous (step 1)
/// or constant (step 0): e.g. the memory rows of logits [b, h, l, m] plus a bias [b, l, m].
struct Run {
  std::int64_t len = 1;
  int step_a = 1, step_b = 1;
};

Run trailing_run(const Plan& pa, const Plan& pb) {
  Run run;
  const IndexMap& ma = pa.map;
  int mode[2] = {-1, -1};           // -1 undecided, 0 constant, 1 contiguous
  std::int64_t expect[2] = {1, 1};  // a contiguous operand's next stride
  for (int i = ma.rank - 1; i >= 0; --i) {
    const std::int64_t ext = ma.extent[i];
    if (ext == 1)
      continue;
    int next_mode[2];
    bool ok = true;
    for (int o = 0; o < 2 && ok; ++o) {
      const std::int64_t st = (o == 0 ? pa : pb).map.stride[i];
      next_mode[o] = mode[o];
      if (mode[o] == -1)
        next_mode[o] = st == 0 ? 0 : (st == 1 ? 1 : -2);
      ok = next_mode[o] == 0 ? st == 0 : (next_mode[o] == 1 && st == expect[o]);
    }
    if (!ok)
      break;
    for (int o = 0; o < 2; ++o) {
      mode[o] = next_mode[o];
      if (mode[o] == 1)
        expect[o] *= ext;
    }
    run.len *= ext;
  }
  run.step_a = mode[0] == 0 ? 0 : 1;
  run.step_b = mode[1] == 0 ? 0 : 1;
  return run;
}

/// Host: one pass per run of `len` outputs, each operand's offset computed once per run and its
/// step a compile-time 0 or 1, so the inner loop vectorises (no division per element).
template <int SA, int SB, class Op, class T, class R>
void zip_runs(const ExecSpace& space, const char* label, Op op, const View<T>& a,
              const IndexMap& ma, const View<T>& b, const IndexMap& mb, const View<R>& out,
              std::int64_t len) {
  const std::int64_t runs = static_cast<std::int64_t>(out.extent(0)) / len;
  Kokkos::parallel_for(
      label, Policy(space, 0, runs), KOKKOS_LAMBDA(std::int64_t r) {
        const T* ap = a.data() + ma.offset(r * len);
        const T* bp = b.data() + mb.offset(r * len);
        R* op_ = out.data() + r * len;
        for (std::int64_t j = 0; j < len; ++j)
          op_[j] = op(ap[j * SA], bp[j * SB]);
      });
}

/// out[out_shape] = op(a, b) with broadcasting by name, choosing the fastest indexing.
template <class R, class Op, class T>
View<R> zip(const ExecSpace& space, const char* label, Op op, const Shape& a_shape,
            const View<T>& a, const Shape& b_shape, const View<T>& b, const Shape& out_shape) {
  check_buffer(label, "first operand", a_shape, a);
  check_buffer(label, "second operand", b_shape, b);
  const Plan pa = plan_operand(out_shape, a_shape, label);
  const Plan pb = plan_operand(out_shape, b_shape, label);
  auto out = alloc<R>(label, out_shape.num_elements());
  if (impl::host_exec && !(pa.access == Access::direct && pb.access == Access::direct) &&
      out_shape.num_elements() > 0) {
    const Run run = trailing_run(pa, pb);
    if (run.len >= 8) {
      if (run.step_a == 1 && run.step_b == 1)
        zip_runs<1, 1>(space, label, op, a, pa.map, b, pb.map, out, run.len);
      else if (run.step_a == 1)
        zip_runs<1, 0>(space, label, op, a, pa.map, b, pb.map, out, run.len);
      else if (run.step_b == 1)
        zip_runs<0, 1>(space, label, op, a, pa.map, b, pb.map, out, run.len);
      else
        zip_runs<0, 0>(space, label, op, a, pa.map, b, pb.map, out, run.len);
      return out;
    }
  }
  with_indexer(pa, [&](auto ia) {
    with_indexer(pb, [&](auto ib) { zip_kernel(space, label, op, a, ia, b, ib, out); });
  });
  return out;
}

}  // namespace elementwise_detail

namespace ed = elementwise_detail;

// ------------------------------------------------------------------ public API

template <class T>
View<T> fill(const ExecSpace& space, std::int64_t n, T value) {
  if (n < 0)
    fail("mtk::kernels::fill", cat("negative element count ", n));
  auto out = impl::alloc<T>("mtk::kernels::fill", n);
  Kokkos::parallel_for(
      "mtk::kernels::fill", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i) { out(i) = value; });
  return out;
}

template <class T>
View<T> unary(const ExecSpace& space, UnaryFn fn, const View<T>& x, double p) {
  using F = UnaryFn;
  switch (fn) {
    case F::identity:
      return ed::unary_kernel<F::identity>(space, x, p);
    case F::negative:
      return ed::unary_kernel<F::negative>(space, x, p);
    case F::abs:
      return ed::unary_kernel<F::abs>(space, x, p);
    case F::exp:
      return ed::unary_kernel<F::exp>(space, x, p);
    case F::log:
      return ed::unary_kernel<F::log>(space, x, p);
    case F::sqrt:
      return ed::unary_kernel<F::sqrt>(space, x, p);
    case F::rsqrt:
      return ed::unary_kernel<F::rsqrt>(space, x, p);
    case F::square:
      return ed::unary_kernel<F::square>(space, x, p);
    case F::reciprocal:
      return ed::unary_kernel<F::reciprocal>(space, x, p);
    case F::relu:
      return ed::unary_kernel<F::relu>(space, x, p);
    case F::gelu:
      return ed::unary_kernel<F::gelu>(space, x, p);
    case F::gelu_grad:
      return ed::unary_kernel<F::gelu_grad>(space, x, p);
    case F::tanh:
      return ed::unary_kernel<F::tanh>(space, x, p);
    case F::sigmoid:
      return ed::unary_kernel<F::sigmoid>(space, x, p);
    case F::sign:
      return ed::unary_kernel<F::sign>(space, x, p);
    case F::pow_scalar:
      return ed::unary_kernel<F::pow_scalar>(space, x, p);
    case F::add_scalar:
      return ed::unary_kernel<F::add_scalar>(space, x, p);
    case F::mul_scalar:
      return ed::unary_kernel<F::mul_scalar>(space, x, p);
    case F::relu_mask:
      return ed::unary_kernel<F::relu_mask>(space, x, p);
  }
  fail("mtk::kernels::unary", cat("unknown function ", static_cast<int>(fn)));
}

template <class T>
View<T> binary(const ExecSpace& space, BinaryFn fn, const Shape& a_shape, const View<T>& a,
               const Shape& b_shape, const View<T>& b, const Shape& out_shape) {
  using F = BinaryFn;
  const char* w = "mtk::kernels::binary";
  switch (fn) {
    case F::add:
      return ed::zip<T>(space, w, ed::BinaryOp<F::add>{}, a_shape, a, b_shape, b, out_shape);
    case F::subtract:
      return ed::zip<T>(space, w, ed::BinaryOp<F::subtract>{}, a_shape, a, b_shape, b, out_shape);
    case F::multiply:
      return ed::zip<T>(space, w, ed::BinaryOp<F::multiply>{}, a_shape, a, b_shape, b, out_shape);
    case F::divide:
      return ed::zip<T>(space, w, ed::BinaryOp<F::divide>{}, a_shape, a, b_shape, b, out_shape);
    case F::maximum:
      return ed::zip<T>(space, w, ed::BinaryOp<F::maximum>{}, a_shape, a, b_shape, b, out_shape);
    case F::minimum:
      return ed::zip<T>(space, w, ed::BinaryOp<F::minimum>{}, a_shape, a, b_shape, b, out_shape);
    case F::pow:
      return ed::zip<T>(space, w, ed::BinaryOp<F::pow>{}, a_shape, a, b_shape, b, out_shape);
  }
  fail(w, cat("unknown function ", static_cast<int>(fn)));
}

template <class T>
FView compare(const ExecSpace& space, CompareFn fn, const Shape& a_shape, const View<T>& a,
              const Shape& b_shape, const View<T>& b, const Shape& out_shape) {
  using F = CompareFn;
  const char* w = "mtk::kernels::compare";
  switch (fn) {
    case F::less:
      return ed::zip<float>(space, w, ed::CompareOp<F::less>{}, a_shape, a, b_shape, b, out_shape);
    case F::less_equal:
      return ed::zip<float>(space, w, ed::CompareOp<F::less_equal>{}, a_shape, a, b_shape, b,
                            out_shape);
    case F::greater:
      return ed::zip<float>(space, w, ed::CompareOp<F::greater>{}, a_shape, a, b_shape, b,
                            out_shape);
    case F::greater_equal:
      return ed::zip<float>(space, w, ed::CompareOp<F::greater_equal>{}, a_shape, a, b_shape, b,
                            out_shape);
    case F::equal:
      return ed::zip<float>(space, w, ed::CompareOp<F::equal>{}, a_shape, a, b_shape, b, out_shape);
    case F::not_equal:
      return ed::zip<float>(space, w, ed::CompareOp<F::not_equal>{}, a_shape, a, b_shape, b,
                            out_shape);
  }
  fail(w, cat("unknown function ", static_cast<int>(fn)));
}

FView where(const ExecSpace& space, const Shape& cond_shape, const FView& cond,
            const Shape& a_shape, const FView& a, const Shape& b_shape, const FView& b,
            const Shape& out_shape) {
  const char* w = "mtk::kernels::where";
  ed::check_buffer(w, "condition", cond_shape, cond);
  ed::check_buffer(w, "first operand", a_shape, a);
  ed::check_buffer(w, "second operand", b_shape, b);
  const ed::AnyAccess ic(ed::plan_operand(out_shape, cond_shape, w));
  const ed::AnyAccess ia(ed::plan_operand(out_shape, a_shape, w));
  const ed::AnyAccess ib(ed::plan_operand(out_shape, b_shape, w));
  auto out = impl::alloc<float>(w, out_shape.num_elements());
  Kokkos::parallel_for(
      w, impl::Range(space, 0, out_shape.num_elements()),
      KOKKOS_LAMBDA(std::int64_t k) { out(k) = cond(ic(k)) != 0.f ? a(ia(k)) : b(ib(k)); });
  return out;
}

template <class To, class From>
View<To> cast(const ExecSpace& space, const View<From>& x) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  auto y = impl::alloc<To>("mtk::kernels::cast", n);
  Kokkos::parallel_for(
      "mtk::kernels::cast", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i) { y(i) = ed::convert<To>(x(i)); });
  return y;
}

template <class T>
void axpy(const ExecSpace& space, T alpha, const View<T>& x, const View<T>& y) {
  if (x.extent(0) != y.extent(0))
    fail("mtk::kernels::axpy", cat("x holds ", x.extent(0), " elements but y holds ", y.extent(0)));
  Kokkos::parallel_for(
      "mtk::kernels::axpy", impl::Range(space, 0, static_cast<std::int64_t>(x.extent(0))),
      KOKKOS_LAMBDA(std::int64_t i) { y(i) += alpha * x(i); });
}

FView axpby(const ExecSpace& space, float a, const FView& x, float b, const FView& y) {
  if (x.extent(0) != y.extent(0))
    fail("mtk::kernels::axpby",
         cat("x holds ", x.extent(0), " elements but y holds ", y.extent(0)));
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  auto z = impl::alloc<float>("mtk::kernels::axpby", n);
  Kokkos::parallel_for(
      "mtk::kernels::axpby", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i) { z(i) = a * x(i) + b * y(i); });
  return z;
}

template <class T>
View<T> range(const ExecSpace& space, const Shape& out_shape, int dim, std::int64_t origin) {
  const char* w = "mtk::kernels::range";
  if (dim < 0 || dim >= out_shape.rank())
    fail(w, cat("dim ", dim, " outside ", out_shape.to_string()));
  std::int64_t inner = 1;
  for (int i = dim + 1; i < out_shape.rank(); ++i)
    inner *= out_shape[i].size;
  const std::int64_t n = out_shape[dim].size;
  auto out = impl::alloc<T>(w, out_shape.num_elements());
  Kokkos::parallel_for(
      w, impl::Range(space, 0, out_shape.num_elements()),
      KOKKOS_LAMBDA(std::int64_t k) { out(k) = static_cast<T>(origin + (k / inner) % n); });
  return out;
}

// ------------------------------------------------------------------ instantiations

#define MTK_ELEMENTWISE_INSTANTIATE(T)                                                 \
  template View<T> fill<T>(const ExecSpace&, std::int64_t, T);                         \
  template View<T> unary<T>(const ExecSpace&, UnaryFn, const View<T>&, double);        \
  template View<T> binary<T>(const ExecSpace&, BinaryFn, const Shape&, const View<T>&, \
                             const Shape&, const View<T>&, const Shape&);              \
  template FView compare<T>(const ExecSpace&, CompareFn, const Shape&, const View<T>&, \
                            const Shape&, const View<T>&, const Shape&);               \
  template void axpy<T>(const ExecSpace&, T, const View<T>&, const View<T>&);          \
  template View<T> range<T>(const ExecSpace&, const Shape&, int, std::int64_t);

MTK_ELEMENTWISE_INSTANTIATE(float)
MTK_ELEMENTWISE_INSTANTIATE(std::int32_t)
#undef MTK_ELEMENTWISE_INSTANTIATE

template View<float> cast<float, float>(const ExecSpace&, const View<float>&);
template View<std::int32_t> cast<std::int32_t, float>(const ExecSpace&, const View<float>&);
template View<float> cast<float, std::int32_t>(const ExecSpace&, const View<std::int32_t>&);
template View<std::int32_t> cast<std::int32_t, std::int32_t>(const ExecSpace&,
                                                             const View<std::int32_t>&);

}  // namespace mtk::kernels
