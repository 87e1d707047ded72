// einsum's in-place arrangement (impl/einsum_in_place.hpp).
#include <mtk/kernels/impl/einsum_in_place.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace mtk::kernels::einsum_impl {
namespace {

// Whether `s` holds, for each entry of `batch`, the matrix [rows][cols] in place (see InPlace).
bool in_place(const Shape& s, const Names& batch, const Names& rows, const Names& cols,
              const Sizes& sizes, InPlace& out) {
  if (static_cast<int>(batch.size()) > max_rank)
    return false;
  const auto strides = s.strides();
  auto stride_of = [&](const std::string& n) {
    return strides[static_cast<size_t>(s.index_of(n))];
  };
  // A group collapses when each non-unit dim's stride is the next one's stride times its size.
  auto collapses = [&](const Names& group, std::int64_t& inner_stride) {
    const std::string* prev = nullptr;
    inner_stride = 0;
    for (const auto& n : group) {
      if (sizes.at(n) == 1)
        continue;
      if (prev && stride_of(*prev) != stride_of(n) * sizes.at(n))
        return false;
      prev = &n;
      inner_stride = stride_of(n);
    }
    return true;
  };
  std::int64_t col_stride = 0, row_stride = 0;
  if (!collapses(cols, col_stride) || (col_stride != 0 && col_stride != 1) ||
      !collapses(rows, row_stride))
    return false;
  const std::int64_t ncols = product(cols, sizes);
  out.ld = row_stride != 0 ? row_stride : std::max<std::int64_t>(1, ncols);
  if (out.ld < ncols || out.ld > std::numeric_limits<int>::max())
    return false;
  out.batch.rank = static_cast<int>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    out.batch.extent[i] = sizes.at(batch[i]);
    out.batch.stride[i] = stride_of(batch[i]);
  }
  return true;
}

// Whether `s` holds the matrix [rows][cols] or [cols][rows] in place.
bool fits_in_place(const Shape& s, const Names& batch, const Names& rows, const Names& cols,
                   const Sizes& sizes) {
  InPlace t;
  return in_place(s, batch, rows, cols, sizes, t) || in_place(s, batch, cols, rows, sizes, t);
}

// Operand x as the matrix [rows][cols] per batch entry: 'N' in place, 'T' in place as
// [cols][rows], else 'N' after a transposed copy into [batch][rows][cols] (x, shape updated).
char as_matrix(const ExecSpace& space, Operand& op, const Names& batch, const Names& rows,
               const Names& cols, const Sizes& sizes, InPlace& info) {
  if (in_place(op.shape, batch, rows, cols, sizes, info))
    return 'N';
  if (in_place(op.shape, batch, cols, rows, sizes, info))
    return 'T';
  const Shape s = shape_of(concat({&batch, &rows, &cols}), sizes);
  op.x = permuted(space, op.shape, op.x, s);
  op.shape = s;
  in_place(op.shape, batch, rows, cols, sizes, info);
  return 'N';
}

// K's order: the one that lets more operands stay in place (a's on a tie).
const Names& k_order(const Shape& a, const Shape& b, const Plan& plan, const Sizes& sizes) {
  auto fits = [&](const Names& kk) {
    return (fits_in_place(a, plan.batch, plan.m_dims, kk, sizes) ? 1 : 0) +
           (fits_in_place(b, plan.batch, kk, plan.n_dims, sizes) ? 1 : 0);
  };
  return fits(plan.k_in_a) >= fits(plan.k_in_b) ? plan.k_in_a : plan.k_in_b;
}

}  // namespace

bool stays_in_place(const Shape& a, const Shape& b, const Plan& plan, const Sizes& sizes,
                    bool second) {
  const Names& k_dims = k_order(a, b, plan, sizes);
  return second ? fits_in_place(b, plan.batch, k_dims, plan.n_dims, sizes)
                : fits_in_place(a, plan.batch, plan.m_dims, k_dims, sizes);
}

bool result_in_place(const Shape& out, const Plan& plan, const Sizes& sizes) {
  InPlace t;
  return fits_in_place(out, plan.batch, plan.m_dims, plan.n_dims, sizes) ||
         in_place(out, plan.batch, plan.n_dims, plan.m_dims, sizes, t);
}

InPlaceProduct arrange_in_place(const ExecSpace& space, Operand& a, Operand& b,
                                const Shape& out_shape, const Plan& plan, const Sizes& sizes) {
  const Names &batch = plan.batch, &m_dims = plan.m_dims, &n_dims = plan.n_dims;
  const Names& k_dims = k_order(a.shape, b.shape, plan, sizes);
  InPlaceProduct p;
  p.ta = as_matrix(space, a, batch, m_dims, k_dims, sizes, p.ia);
  p.tb = as_matrix(space, b, batch, k_dims, n_dims, sizes, p.ib);
  // c is [M][N] (direct), [N][M] (swapped) or a temporary [batch][M][N].
  p.c_shape = out_shape;
  if (!in_place(p.c_shape, batch, m_dims, n_dims, sizes, p.ic)) {
    p.swapped = in_place(p.c_shape, batch, n_dims, m_dims, sizes, p.ic);
    if (!p.swapped) {
      p.c_shape = shape_of(concat({&batch, &m_dims, &n_dims}), sizes);
      in_place(p.c_shape, batch, m_dims, n_dims, sizes, p.ic);
    }
  }
  return p;
}

}  // namespace mtk::kernels::einsum_impl
