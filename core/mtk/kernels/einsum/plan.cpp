// einsum's planning: sizes, dim classes, memory orders, presums, transposed copies
// (impl/einsum_plan.hpp).
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/einsum_plan.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/reduce.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <limits>

namespace mtk::kernels::einsum_impl {

void check_size(const char* where, const Shape& s, const FView& v, const char* what) {
  if (static_cast<std::int64_t>(v.extent(0)) != s.num_elements())
    fail(where, cat(what, " holds ", v.extent(0), " elements but its shape ", s.to_string(),
                    " has ", s.num_elements()));
}

Sizes sizes_of(const char* where, const std::vector<const Shape*>& shapes) {
  Sizes sizes;
  std::map<std::string, const Shape*> first;
  for (const Shape* s : shapes)
    for (const auto& d : s->dims()) {
      auto it = sizes.find(d.name);
      if (it == sizes.end()) {
        sizes[d.name] = d.size;
        first[d.name] = s;
      } else if (it->second != d.size) {
        fail(where, cat("dimension '", d.name, "' has size ", it->second, " in ",
                        first[d.name]->to_string(), " but ", d.size, " in ", s->to_string()));
      }
    }
  return sizes;
}

Shape shape_of(const Names& names, const Sizes& sizes) {
  std::vector<Dimension> dims;
  for (const auto& n : names)
    dims.push_back({n, sizes.at(n)});
  return Shape(dims);
}

Names concat(std::initializer_list<const Names*> parts) {
  Names out;
  for (const Names* p : parts)
    out.insert(out.end(), p->begin(), p->end());
  return out;
}

std::int64_t product(const Names& names, const Sizes& sizes) {
  std::int64_t p = 1;
  for (const auto& n : names)
    p *= sizes.at(n);
  return p;
}

bool stored_as(const Shape& s, const Names& names) {
  Names a, b;
  for (const auto& d : s.dims())
    if (d.size != 1)
      a.push_back(d.name);
  for (const auto& n : names)
    if (s.size_of(n) != 1)
      b.push_back(n);
  return a == b;
}

void presum(const ExecSpace& space, Operand& op, const Shape& other, const Shape& out) {
  std::vector<Dimension> keep;
  for (const auto& d : op.shape.dims())
    if (other.contains(d.name) || out.contains(d.name))
      keep.push_back(d);
  if (static_cast<int>(keep.size()) == op.shape.rank())
    return;
  Shape kept(keep);
  op.x = reduce(space, ReduceFn::sum, op.shape, op.x, kept);
  op.shape = kept;
}

Plan make_plan(const Shape& a, const Shape& b, const Shape& out, const Sizes& sizes) {
  Plan p;
  for (const auto& d : out.dims()) {
    const bool in_a = a.contains(d.name), in_b = b.contains(d.name);
    (in_a && in_b ? p.batch : in_a ? p.m_dims : p.n_dims).push_back(d.name);
  }
  for (const auto& d : a.dims())
    if (b.contains(d.name) && !out.contains(d.name))
      p.k_in_a.push_back(d.name);
  for (const auto& d : b.dims())
    if (a.contains(d.name) && !out.contains(d.name))
      p.k_in_b.push_back(d.name);
  p.nb = product(p.batch, sizes);
  p.m = product(p.m_dims, sizes);
  p.n = product(p.n_dims, sizes);
  p.k = product(p.k_in_a, sizes);
  return p;
}

// The trailing dims both orders share form contiguous runs copied as such, so the index
// arithmetic is per run (an attention operand [b, m, h, d] -> [b, h, m, d] moves runs of d), not
// per element. Without a shared trailing dim, out's last dim is the run, read at its stride in x.
FView permuted(const ExecSpace& space, const Shape& in, const FView& x, const Shape& out) {
  const char* label = "mtk::kernels::einsum transposed copy";
  FView y = impl::alloc<float>(label, out.num_elements());
  if (out.num_elements() == 0)
    return y;
  int common = 0;
  while (common < out.rank() &&
         out[out.rank() - 1 - common].name == in[in.rank() - 1 - common].name)
    ++common;
  const auto in_strides = in.strides();
  const int lead = std::max(0, out.rank() - std::max(common, 1));  // out's dims before the run
  std::int64_t run = 1, step = 1;
  for (int i = lead; i < out.rank(); ++i)
    run *= out[i].size;
  if (common == 0 && out.rank() > 0)
    step = in_strides[static_cast<size_t>(in.index_of(out[lead].name))];
  IndexMap rows;  // row-major row index over out's leading dims -> offset in x
  rows.rank = lead;
  for (int i = 0; i < rows.rank; ++i) {
    rows.extent[i] = out[i].size;
    rows.stride[i] = in_strides[static_cast<size_t>(in.index_of(out[i].name))];
  }
  if (impl::device_paths()) {  // a thread per element: consecutive threads write consecutively
    Kokkos::parallel_for(
        label, impl::Range(space, 0, out.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
          y(k) = x(rows.offset(fast_div(k, run)) + fast_mod(k, run) * step);
        });
    return y;
  }
  Kokkos::parallel_for(
      label, impl::Range(space, 0, out.num_elements() / run), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t src = rows.offset(r), dst = r * run;
        for (std::int64_t j = 0; j < run; ++j)
          y(dst + j) = x(src + j * step);
      });
  return y;
}

int blas_int(const char* where, std::int64_t n, const char* what) {
  if (n > std::numeric_limits<int>::max())
    fail(where, cat(what, " size ", n, " exceeds the BLAS int range"));
  return static_cast<int>(n);
}

}  // namespace mtk::kernels::einsum_impl
