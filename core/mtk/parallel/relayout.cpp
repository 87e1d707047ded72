#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/shape.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/relayout.hpp>

namespace mtk {

Shape local_shape(const Shape& shape, const std::vector<int>& axes, const MeshShape& mesh) {
  auto dims = shape.dims();
  for (size_t i = 0; i < dims.size(); ++i)
    if (axes[i] >= 0)
      dims[i].size /= mesh[axes[i]].size;
  return Shape(dims);
}

std::vector<RelayoutMove> plan_relayout(const Shape& shape, const std::vector<int>& from,
                                        const std::vector<int>& to, const MeshShape& mesh) {
  std::vector<RelayoutMove> plan;
  std::vector<int> cur = from;
  auto push = [&](RelayoutMove::Kind k, int axis, int dim, int concat_dim) {
    plan.push_back({k, axis, dim, concat_dim, local_shape(shape, cur, mesh)});
  };
  const int n = shape.rank();
  // A dim moving between two axes is first gathered.
  for (int d = 0; d < n; ++d)
    if (cur[d] >= 0 && to[d] >= 0 && cur[d] != to[d]) {
      push(RelayoutMove::Kind::allconcat, cur[d], d, -1);
      cur[d] = -1;
    }
  auto holder = [&](int axis) {
    for (int d = 0; d < n; ++d)
      if (cur[d] == axis)
        return d;
    return -1;
  };
  // Slices onto free axes.
  for (int d = 0; d < n; ++d)
    if (cur[d] < 0 && to[d] >= 0 && holder(to[d]) < 0) {
      push(RelayoutMove::Kind::slice, to[d], d, -1);
      cur[d] = to[d];
    }
  // Alltoalls: dim d arrives on an axis another dim leaves.
  for (int d = 0; d < n; ++d)
    if (cur[d] < 0 && to[d] >= 0) {
      int o = holder(to[d]);
      push(RelayoutMove::Kind::alltoall, to[d], d, o);
      cur[o] = -1;
      cur[d] = to[d];
    }
  // Allconcats of dims leaving their axis.
  for (int d = 0; d < n; ++d)
    if (cur[d] >= 0 && to[d] < 0) {
      push(RelayoutMove::Kind::allconcat, cur[d], d, -1);
      cur[d] = -1;
    }
  return plan;
}

template <class T>
Kokkos::View<T*> run_relayout(const ExecSpace& space, const Mesh& mesh,
                              const std::vector<RelayoutMove>& plan, Kokkos::View<T*> x) {
  const Kokkos::View<T*> input = x;
  for (const auto& m : plan) {
    // A move along a mesh dim of one processor leaves the slice as it is (a 1-rank run of a
    // layout that names mesh dims): no MPI call, no packing.
    if (mesh.shape()[m.axis].size == 1)
      continue;
    switch (m.kind) {
      case RelayoutMove::Kind::slice: {
        const std::int64_t part = m.local_before[m.dim].size / mesh.shape()[m.axis].size;
        x = kernels::slice<T>(space, m.local_before, x, m.dim, mesh.coordinate(m.axis) * part,
                              part);
        break;
      }
      case RelayoutMove::Kind::allconcat:
        x = allconcat<T>(mesh, m.axis, m.local_before, m.dim, x);
        break;
      case RelayoutMove::Kind::alltoall:
        x = alltoall<T>(mesh, m.axis, m.local_before, m.dim, m.concat_dim, x);
        break;
    }
  }
  if (x.data() == input.data()) {  // the output is a buffer of its own, as the lowering assumes
    x = uninitialized_view<T>("mtk::relayout::copy", static_cast<std::int64_t>(input.extent(0)));
    Kokkos::deep_copy(space, x, input);
  }
  return x;
}

template Kokkos::View<float*> run_relayout<float>(const ExecSpace&, const Mesh&,
                                                  const std::vector<RelayoutMove>&,
                                                  Kokkos::View<float*>);
template Kokkos::View<std::int32_t*> run_relayout<std::int32_t>(const ExecSpace&, const Mesh&,
                                                                const std::vector<RelayoutMove>&,
                                                                Kokkos::View<std::int32_t*>);

std::string describe_relayout(const std::vector<RelayoutMove>& plan, const MeshShape& mesh) {
  std::string s;
  for (const auto& m : plan) {
    if (!s.empty())
      s += ", ";
    const char* k = m.kind == RelayoutMove::Kind::slice       ? "slice"
                    : m.kind == RelayoutMove::Kind::allconcat ? "allconcat"
                                                              : "alltoall";
    s += cat(k, " ", m.local_before[m.dim].name, " on ", mesh[m.axis].name);
  }
  return s;
}

}  // namespace mtk
