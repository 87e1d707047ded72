#pragma once
// Local kernels: the work each processor does on its own slice. Every tensor is a flat row-major
// Kokkos View described by a Shape (the *local* slice shape). Kernels never communicate; the
// lowering adds collectives around them. All kernels are labelled ("mtk::kernels::<name>") and
// device-safe. Results are freshly allocated Views unless stated otherwise.
//
// Where a kernel needs to know where its slice sits in the global tensor (one_hot, gather,
// scatter_add, range, random), it takes the slice origin of the relevant dim(s).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <vector>

namespace mtk::kernels {

template <class T>
using View = Kokkos::View<T*>;
using FView = View<float>;
using IView = View<std::int32_t>;

// ---------------------------------------------------------------- elementwise (elementwise.cpp)

/// A View of `n` elements all equal to `value`.
template <class T>
View<T> fill(const ExecSpace& space, std::int64_t n, T value);
/// y = f(x); `p` is the scalar of pow_scalar / add_scalar / mul_scalar.
template <class T>
View<T> unary(const ExecSpace& space, UnaryFn fn, const View<T>& x, double p = 0.0);
/// z[out] = f(a[a_shape], b[b_shape]), broadcasting by name: every dim of a and b is in out_shape
/// with the same size.
template <class T>
View<T> binary(const ExecSpace& space, BinaryFn fn, const Shape& a_shape, const View<T>& a,
               const Shape& b_shape, const View<T>& b, const Shape& out_shape);
/// z[out] = (a cmp b) ? 1.f : 0.f, broadcasting by name.
template <class T>
FView compare(const ExecSpace& space, CompareFn fn, const Shape& a_shape, const View<T>& a,
              const Shape& b_shape, const View<T>& b, const Shape& out_shape);
/// z[out] = cond != 0 ? a : b, broadcasting by name.
FView where(const ExecSpace& space, const Shape& cond_shape, const FView& cond,
            const Shape& a_shape, const FView& a, const Shape& b_shape, const FView& b,
            const Shape& out_shape);
/// Elementwise conversion (float -> int32 truncates toward zero).
template <class To, class From>
View<To> cast(const ExecSpace& space, const View<From>& x);
/// y += alpha * x, in place.
template <class T>
void axpy(const ExecSpace& space, T alpha, const View<T>& x, const View<T>& y);
/// z = a*x + b*y elementwise with the same shape (fused; used for optimizer updates).
FView axpby(const ExecSpace& space, float a, const FView& x, float b, const FView& y);
/// One fused Adam step (see mtk::adam_update); step_size is a one-element View.
void adam_update(const ExecSpace& space, const FView& p, const FView& m, const FView& v,
                 const FView& g, const FView& step_size, float beta1, float beta2, float epsilon,
                 FView& new_p, FView& new_m, FView& new_v);
/// out[...] = origin + position along `dim` (the global index when the dim is split).
template <class T>
View<T> range(const ExecSpace& space, const Shape& out_shape, int dim, std::int64_t origin);

// ---------------------------------------------------------------- layout (layout.cpp)

/// Reorders dims: out_shape has the same dims as in_shape (by name) in another order.
template <class T>
View<T> transpose(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                  const Shape& out_shape);
/// Repeats x along the dims of out_shape that in_shape lacks (in_shape dims all in out_shape).
template <class T>
View<T> broadcast(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                  const Shape& out_shape);
/// Positions [begin, begin + size) of `dim`.
template <class T>
View<T> slice(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
              std::int64_t begin, std::int64_t size);
/// Concatenation along `dim` (other dims equal).
template <class T>
View<T> concat(const ExecSpace& space, const std::vector<Shape>& shapes,
               const std::vector<View<T>>& xs, int dim);
/// Pads `dim` with `before` and `after` positions of `value`.
template <class T>
View<T> pad(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
            std::int64_t before, std::int64_t after, T value);
/// out[i] = x[i - offset] along `dim`; positions with no source are 0 unless `wrap`.
template <class T>
View<T> shift(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
              std::int64_t offset, bool wrap);

// ---------------------------------------------------------------- reductions (reduce.cpp)

/// Reduces the dims of in_shape that out_shape lacks; out_shape's dims are a subset of in_shape's
/// in any order.
template <class T>
View<T> reduce(const ExecSpace& space, ReduceFn fn, const Shape& in_shape, const View<T>& x,
               const Shape& out_shape);
/// Softmax (or log-softmax) along `dim`, which is whole locally.
FView softmax(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool log);
/// Gradient of softmax / log-softmax along `dim` given its output y and dy.
FView softmax_grad(const ExecSpace& space, const Shape& shape, const FView& y, const FView& dy,
                   int dim, bool log);
/// Inclusive (or exclusive) cumulative sum along `dim`.
FView cumsum(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool exclusive);
/// Max along `dim` (whole locally) and its position; out_shape = shape without `dim`.
void top_1(const ExecSpace& space, const Shape& shape, const FView& x, int dim, FView& values,
           IView& indices);

// ---------------------------------------------------------------- contractions (einsum.cpp)

/// out = einsum over names: dims shared by the inputs and absent from out_shape are summed
/// (contracted); dims of one input only and absent from out_shape are summed first; out dims
/// present in both inputs are batch dims. Two operands go through KokkosBlas::gemm (strided batch
/// loop over batch dims), with no transpose copy when an operand's dim order already fits.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& b_shape,
             const FView& b, const Shape& out_shape);
/// One operand: sums the dims out_shape lacks and reorders the rest.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& out_shape);
/// Multiply-add count of einsum(a, b) -> out: the product of the sizes of all distinct dims.
std::int64_t einsum_macs(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape);

// ---------------------------------------------------------------- indexing (indexing.cpp)

/// out[ids dims + dim] = (ids == origin + position along dim) ? on : off. out_shape is ids_shape
/// with one more dim (at position `dim`), whose local slice starts at global `origin`.
FView one_hot(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
              const Shape& out_shape, int dim, std::int64_t origin, float on, float off);
/// Embedding lookup: out[...] = table[ids[...] - origin, ...] along table dim `table_dim`, or 0
/// when the id falls outside this slice [origin, origin + local size). out_shape's dims are
/// ids_shape's plus table_shape's without table_dim, in any order.
FView gather(const ExecSpace& space, const Shape& table_shape, const FView& table, int table_dim,
             std::int64_t origin, const Shape& ids_shape, const IView& ids, const Shape& out_shape);
/// Gradient of gather: table[ids - origin, ...] += updates[...] for ids inside this slice.
/// Returns a new table-shaped View (zeros plus the scattered updates).
FView scatter_add(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
                  const Shape& updates_shape, const FView& updates, const Shape& table_shape,
                  int table_dim, std::int64_t origin);

// ---------------------------------------------------------------- randomness (random.cpp)

/// Counter-based random values: element g (global row-major index in global_shape) depends only
/// on (seed, g), so every mesh and layout produces the same numbers. The local slice has shape
/// local_shape and starts at `origin` in the global tensor.
FView random_uniform(const ExecSpace& space, const Shape& global_shape, const Shape& local_shape,
                     const std::vector<std::int64_t>& origin, std::uint64_t seed, float low,
                     float high);
/// Normal(mean, stddev); `truncated` redraws values beyond 2 stddev (as tf.truncated_normal).
FView random_normal(const ExecSpace& space, const Shape& global_shape, const Shape& local_shape,
                    const std::vector<std::int64_t>& origin, std::uint64_t seed, float mean,
                    float stddev, bool truncated);
/// A stable 64-bit hash of a string (variable names become seeds).
std::uint64_t hash_name(const std::string& name);

}  // namespace mtk::kernels

namespace mtk::kernels {

// ---------------------------------------------------------- fused cross-entropy (loss.cpp)
// Rows are the positions of every dim but `dim` (the vocabulary); row tensors have the shape
// without `dim`, in the same order. With the vocabulary split, each rank computes partial
// statistics of its slice (vocabulary positions origin .. origin + local size) and the lowering
// combines them with allreduces.

/// sum_j exp(x[row, j] - shift[row]) over this slice.
FView sum_exp_shifted(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                      const FView& shift);
/// x[row, target[row]] when the target falls in this slice (else 0) and sum_j x[row, j].
void target_logit_and_sum(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                          const IView& targets, std::int64_t origin, FView& target_logit,
                          FView& logit_sum);
/// loss = lse - (1 - ls) x_t - ls / V sum_j x_j + z lse^2, elementwise over rows.
FView cross_entropy_from_stats(const ExecSpace& space, const FView& lse, const FView& target_logit,
                               const FView& logit_sum, double label_smoothing,
                               std::int64_t vocab_size, double z_loss);
/// d loss / d x[row, j] = dy[row] (p_j (1 + 2 z lse) - (1 - ls) [j == t] - ls / V), p = exp(x -
/// lse).
FView cross_entropy_grad(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                         const IView& targets, std::int64_t origin, const FView& lse,
                         const FView& dy, double label_smoothing, std::int64_t vocab_size,
                         double z_loss);

}  // namespace mtk::kernels
