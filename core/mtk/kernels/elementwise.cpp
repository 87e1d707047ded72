// mtk::kernels elementwise kernels — see elementwise.hpp.
//
// Every kernel is a labelled Kokkos::parallel_for over a RangePolicy<std::int64_t>. The function
// (UnaryFn, BinaryFn, CompareFn) is a template parameter of the kernel's functor (UnaryOp,
// BinaryOp, CompareOp), so the per-element work is branch-free; the host picks the instantiation
// once per call (dispatch). Broadcasting by name is impl/broadcast.hpp.

#include <mtk/base/error.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/impl/broadcast.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace mtk::kernels {
namespace elementwise_detail {

// Kokkos' math functions, overloaded for float and double (std:: on the host: expf for a float,
// exp for a double), callable on every device.
#if KOKKOS_VERSION >= 40000
namespace math = ::Kokkos;
#else
namespace math = ::Kokkos::Experimental;
#endif

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

/// x^e for integers, exactly, saturated to the int32 range and truncated toward zero for e < 0:
/// what to_int32(pow(x, e)) gives with a correctly rounded pow. (A GPU's pow is not correctly
/// rounded: 202^2 came out as 40803.99..., truncated to 40803.)
KOKKOS_INLINE_FUNCTION std::int32_t int_pow(std::int64_t x, std::int64_t e) {
  const bool negative = x < 0 && (e % 2 != 0);
  if (e < 0) {
    if (x == 0)
      return 2147483647;  // 1 / 0 = inf
    return x == 1 || x == -1 ? (negative ? -1 : 1) : 0;
  }
  if (e == 0)
    return 1;
  if (x == 0 || x == 1)
    return static_cast<std::int32_t>(x);
  if (x == -1)
    return negative ? -1 : 1;
  const std::int64_t limit = std::int64_t(1) << 31;
  std::int64_t r = 1;
  for (std::int64_t i = 0; i < e; ++i) {  // |x| >= 2: out of range within 31 factors
    r *= x;
    if (r >= limit || r <= -limit)
      return negative ? -2147483647 - 1 : 2147483647;
  }
  return static_cast<std::int32_t>(r);
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

/// Calls f(std::integral_constant<E, F>{}) for the F of `Fs` equal to `fn` and returns its
/// result: one switch for every function table.
template <auto... Fs, class E, class F>
auto dispatch(const char* where, E fn, F&& f) {
  decltype(f(std::integral_constant<E, E{}>{})) out{};
  const bool found = ((fn == Fs ? (out = f(std::integral_constant<E, Fs>{}), true) : false) || ...);
  if (!found)
    fail(where, cat("unknown function ", static_cast<int>(fn)));
  return out;
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
    return math::fabs(x);
  } else if constexpr (F == UnaryFn::exp) {
    return math::exp(x);
  } else if constexpr (F == UnaryFn::log) {
    return math::log(x);
  } else if constexpr (F == UnaryFn::sqrt) {
    return math::sqrt(x);
  } else if constexpr (F == UnaryFn::rsqrt) {
    return one / math::sqrt(x);
  } else if constexpr (F == UnaryFn::square) {
    return x * x;
  } else if constexpr (F == UnaryFn::reciprocal) {
    return one / x;
  } else if constexpr (F == UnaryFn::relu) {
    return x > zero ? x : zero;
  } else if constexpr (F == UnaryFn::gelu) {
    return half * x * (one + math::tanh(c * (x + k * x * x * x)));
  } else if constexpr (F == UnaryFn::gelu_grad) {
    const R t = math::tanh(c * (x + k * x * x * x));
    return half * (one + t) + half * x * (one - t * t) * c * (one + 3 * k * x * x);
  } else if constexpr (F == UnaryFn::tanh) {
    return math::tanh(x);
  } else if constexpr (F == UnaryFn::sigmoid) {
    if (x >= zero)
      return one / (one + math::exp(-x));
    const R e = math::exp(x);
    return e / (one + e);
  } else if constexpr (F == UnaryFn::sign) {
    return x > zero ? one : (x < zero ? -one : zero);
  } else if constexpr (F == UnaryFn::pow_scalar) {
    return math::pow(x, p);
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
    } else if constexpr (F == UnaryFn::pow_scalar) {
      if (p == static_cast<double>(static_cast<std::int64_t>(p)) && p > -2147483648.0 &&
          p < 2147483648.0)
        return int_pow(w, static_cast<std::int64_t>(p));
      return to_int32(unary_real<F, double>(static_cast<double>(x), p));
    } else {
      // add_scalar, mul_scalar, pow_scalar and the transcendental functions: computed in double.
      return to_int32(unary_real<F, double>(static_cast<double>(x), p));
    }
  }
};

template <UnaryFn F, class T>
View<T> unary_kernel(const ExecSpace& space, const View<T>& x, double p, const View<T>& into) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  if (into.data() && static_cast<std::int64_t>(into.extent(0)) != n)
    fail("mtk::kernels::unary",
         cat("the given output holds ", into.extent(0), " elements but the operand ", n));
  auto y = into.data() ? into : impl::alloc<T>("mtk::kernels::unary", n);
  const UnaryOp<F> op{p};
  Kokkos::parallel_for(
      "mtk::kernels::unary", impl::Range(space, 0, n),
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
      return math::pow(a, b);
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
      return int_pow(x, y);
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
    } else if constexpr (F == CompareFn::near_equal) {
      if constexpr (std::is_floating_point_v<T>) {
        const T d = a > b ? a - b : b - a, ma = a < 0 ? -a : a, mb = b < 0 ? -b : b;
        const T m = ma > mb ? ma : mb;  // m - m != 0: an infinity, equal only to itself
        r = a == b || (d <= static_cast<T>(kNearEqualRelative) * m && m - m == 0);
      } else {
        r = a == b;
      }
    } else {
      static_assert(F == CompareFn::not_equal, "unhandled CompareFn");
      r = a != b;
    }
    return r ? 1.f : 0.f;
  }
};

// Every function of each table, for dispatch.
template <class F>
auto with_unary(UnaryFn fn, F&& f) {
  using U = UnaryFn;
  return dispatch<U::identity, U::negative, U::abs, U::exp, U::log, U::sqrt, U::rsqrt, U::square,
                  U::reciprocal, U::relu, U::gelu, U::gelu_grad, U::tanh, U::sigmoid, U::sign,
                  U::pow_scalar, U::add_scalar, U::mul_scalar, U::relu_mask>("mtk::kernels::unary",
                                                                             fn, f);
}

template <class F>
auto with_binary(BinaryFn fn, F&& f) {
  using B = BinaryFn;
  return dispatch<B::add, B::subtract, B::multiply, B::divide, B::maximum, B::minimum, B::pow>(
      "mtk::kernels::binary", fn, f);
}

template <class F>
auto with_compare(CompareFn fn, F&& f) {
  using C = CompareFn;
  return dispatch<C::less, C::less_equal, C::greater, C::greater_equal, C::equal, C::not_equal,
                  C::near_equal>("mtk::kernels::compare", fn, f);
}

}  // namespace elementwise_detail

namespace ed = elementwise_detail;
namespace bc = broadcast_impl;

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
View<T> unary(const ExecSpace& space, UnaryFn fn, const View<T>& x, double p, const View<T>& into) {
  return ed::with_unary(
      fn, [&](auto f) { return ed::unary_kernel<decltype(f)::value>(space, x, p, into); });
}

template <class T>
View<T> binary(const ExecSpace& space, BinaryFn fn, const Shape& a_shape, const View<T>& a,
               const Shape& b_shape, const View<T>& b, const Shape& out_shape,
               const View<T>& into) {
  return ed::with_binary(fn, [&](auto f) {
    return bc::zip<T>(space, "mtk::kernels::binary", ed::BinaryOp<decltype(f)::value>{}, a_shape, a,
                      b_shape, b, out_shape, into);
  });
}

template <class T>
FView compare(const ExecSpace& space, CompareFn fn, const Shape& a_shape, const View<T>& a,
              const Shape& b_shape, const View<T>& b, const Shape& out_shape) {
  return ed::with_compare(fn, [&](auto f) {
    return bc::zip<float>(space, "mtk::kernels::compare", ed::CompareOp<decltype(f)::value>{},
                          a_shape, a, b_shape, b, out_shape);
  });
}

FView where(const ExecSpace& space, const Shape& cond_shape, const FView& cond,
            const Shape& a_shape, const FView& a, const Shape& b_shape, const FView& b,
            const Shape& out_shape) {
  const char* w = "mtk::kernels::where";
  bc::check_buffer(w, "condition", cond_shape, cond);
  bc::check_buffer(w, "first operand", a_shape, a);
  bc::check_buffer(w, "second operand", b_shape, b);
  const bc::AnyAccess ic(bc::plan_operand(out_shape, cond_shape, w));
  const bc::AnyAccess ia(bc::plan_operand(out_shape, a_shape, w));
  const bc::AnyAccess ib(bc::plan_operand(out_shape, b_shape, w));
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

#define MTK_ELEMENTWISE_INSTANTIATE(T)                                                          \
  template View<T> fill<T>(const ExecSpace&, std::int64_t, T);                                  \
  template View<T> unary<T>(const ExecSpace&, UnaryFn, const View<T>&, double, const View<T>&); \
  template View<T> binary<T>(const ExecSpace&, BinaryFn, const Shape&, const View<T>&,          \
                             const Shape&, const View<T>&, const Shape&, const View<T>&);       \
  template FView compare<T>(const ExecSpace&, CompareFn, const Shape&, const View<T>&,          \
                            const Shape&, const View<T>&, const Shape&);                        \
  template void axpy<T>(const ExecSpace&, T, const View<T>&, const View<T>&);                   \
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
