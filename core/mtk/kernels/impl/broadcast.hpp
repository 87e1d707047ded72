#pragma once
// Broadcasting by name for the elementwise kernels (kernels/broadcast.cpp for the planning): how
// the elements of an output reach each operand, and `zip`, the two-operand map over an output
// with the fastest indexing that fits. Fast paths: an operand equal to the output (direct index),
// an operand whose dims end the output's (k % size), one whose dims lead it (k / block); a general
// IndexMap otherwise; on the host, runs of outputs over which each operand is contiguous or
// constant are swept as plain loops that vectorise.

#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/view.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels::broadcast_impl {

template <class T>
void check_buffer(const char* where, const char* what, const Shape& shape, const View<T>& v) {
  if (static_cast<std::int64_t>(v.extent(0)) != shape.num_elements())
    fail(where, cat(what, " buffer holds ", v.extent(0), " elements but its shape ",
                    shape.to_string(), " has ", shape.num_elements()));
}

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
struct Mapped {
  IndexMap map;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t k) const { return map.offset(k); }
};

enum class Access { direct, modulo, divide, block, mapped };

/// How output elements reach one operand.
struct Plan {
  Access access = Access::mapped;
  std::int64_t n = 1;
  std::int64_t period = 1;  // block: outputs per leading-dims index
  IndexMap map;
};

/// The plan of operand `in` for output `out`; validates (by name) that the operand fits the output.
Plan plan_operand(const Shape& out, const Shape& in, const char* where);

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

/// The longest run of trailing output elements over which each operand is contiguous (step 1)
/// or constant (step 0): e.g. the memory rows of logits [b, h, l, m] plus a bias [b, l, m]; and
/// the dim before it, over which each operand moves by a fixed stride: `outer` runs from one
/// offset (pooling's [positions, taps, channels] against [positions, channels]).
struct Run {
  std::int64_t len = 1;
  int step_a = 1, step_b = 1;
  std::int64_t outer = 1, outer_a = 0, outer_b = 0;
};

Run trailing_run(const Plan& pa, const Plan& pb);

template <class Op, class T, class R, class IA, class IB>
void zip_kernel(const ExecSpace& space, const char* label, Op op, const View<T>& a, IA ia,
                const View<T>& b, IB ib, const View<R>& out) {
  Kokkos::parallel_for(
      label, impl::Range(space, 0, static_cast<std::int64_t>(out.extent(0))),
      KOKKOS_LAMBDA(std::int64_t k) { out(k) = op(a(ia(k)), b(ib(k))); });
}

/// Host: one pass per `outer` runs of `len` outputs, each operand's offset computed once per pass
/// and its step a compile-time 0 or 1, so the inner loop vectorises (no division per element).
template <int SA, int SB, class Op, class T, class R>
void zip_runs(const ExecSpace& space, const char* label, Op op, const View<T>& a,
              const IndexMap& ma, const View<T>& b, const IndexMap& mb, const View<R>& out,
              const Run& run) {
  const std::int64_t len = run.len, block = run.len * run.outer;
  const std::int64_t outer = run.outer, oa = run.outer_a, ob = run.outer_b;
  const std::int64_t passes = static_cast<std::int64_t>(out.extent(0)) / block;
  Kokkos::parallel_for(
      label, impl::Range(space, 0, passes), KOKKOS_LAMBDA(std::int64_t r) {
        const T* ap = a.data() + ma.offset(r * block);
        const T* bp = b.data() + mb.offset(r * block);
        R* op_ = out.data() + r * block;
        for (std::int64_t q = 0; q < outer; ++q, ap += oa, bp += ob, op_ += len)
          for (std::int64_t j = 0; j < len; ++j)
            op_[j] = op(ap[j * SA], bp[j * SB]);
      });
}

/// out[out_shape] = op(a, b) with broadcasting by name, choosing the fastest indexing. A given
/// `into` receives the values; it may be an operand of the output's shape (each output reads its
/// own position of it before writing it).
template <class R, class Op, class T>
View<R> zip(const ExecSpace& space, const char* label, Op op, const Shape& a_shape,
            const View<T>& a, const Shape& b_shape, const View<T>& b, const Shape& out_shape,
            const View<R>& into = {}) {
  check_buffer(label, "first operand", a_shape, a);
  check_buffer(label, "second operand", b_shape, b);
  const Plan pa = plan_operand(out_shape, a_shape, label);
  const Plan pb = plan_operand(out_shape, b_shape, label);
  if (into.data())
    check_buffer(label, "given output", out_shape, into);
  auto out = into.data() ? into : impl::alloc<R>(label, out_shape.num_elements());
  if (impl::host_exec && !(pa.access == Access::direct && pb.access == Access::direct) &&
      out_shape.num_elements() > 0) {
    const Run run = trailing_run(pa, pb);
    if (run.len >= 8 || run.len * run.outer >= 32) {
      if (run.step_a == 1 && run.step_b == 1)
        zip_runs<1, 1>(space, label, op, a, pa.map, b, pb.map, out, run);
      else if (run.step_a == 1)
        zip_runs<1, 0>(space, label, op, a, pa.map, b, pb.map, out, run);
      else if (run.step_b == 1)
        zip_runs<0, 1>(space, label, op, a, pa.map, b, pb.map, out, run);
      else
        zip_runs<0, 0>(space, label, op, a, pa.map, b, pb.map, out, run);
      return out;
    }
  }
  with_indexer(pa, [&](auto ia) {
    with_indexer(pb, [&](auto ib) { zip_kernel(space, label, op, a, ia, b, ib, out); });
  });
  return out;
}

}  // namespace mtk::kernels::broadcast_impl
