#pragma once
// Size arithmetic that cannot wrap: element counts, bytes, FLOPs and communication figures are
// products of user-chosen dims, and a wrapped 64-bit product would pass every later check.

#include <mtk/base/error.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace mtk {

/// The most elements one tensor may have: its bytes in the widest dtype (8) and sums of a few such
/// figures (peak memory) stay far inside int64.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 56;

namespace detail {
// `what` is a string, or a callable building it only when an error is raised (hot paths).
template <class What>
std::string describe(const What& what) {
  if constexpr (std::is_invocable_v<const What&>)
    return what();
  else
    return std::string(what);
}
}  // namespace detail

/// a * b; throws mtk::Error("<where>: <what> overflows 64-bit sizes (a x b)") when it wraps.
template <class What>
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* where, const What& what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    fail(where, cat(detail::describe(what), " overflows 64-bit sizes (", a, " x ", b, ")"));
  return r;
}

/// a + b; throws like checked_mul when it wraps.
template <class What>
std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* where, const What& what) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    fail(where, cat(detail::describe(what), " overflows 64-bit sizes (", a, " + ", b, ")"));
  return r;
}

}  // namespace mtk
