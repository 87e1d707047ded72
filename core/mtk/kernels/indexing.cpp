// mtk::kernels indexing: one_hot, gather (embedding lookup) and scatter_add (its gradient).
// See indexing.hpp for the contracts.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/kernels.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace mtk::kernels {
namespace detail::indexing_impl {

template <class T>
void check_size(const char* where, const Shape& s, const View<T>& v, const char* what) {
  if (static_cast<std::int64_t>(v.extent(0)) != s.num_elements())
    fail(where, cat(what, " holds ", v.extent(0), " elements but its shape ", s.to_string(),
                    " has ", s.num_elements()));
}

// Element k of `elems` (row-major) reads ids at ids.offset(k) and the table at
// table.offset(k) + (id - origin) * id_stride.
struct TableMaps {
  IndexMap ids, table;
  std::int64_t id_stride = 0, id_size = 0;
};

// `elems` (the gather output or the scatter updates) has the dims of ids_shape plus those of
// table_shape except table_dim, in any order.
TableMaps table_maps(const char* where, const Shape& table_shape, int table_dim,
                     const Shape& ids_shape, const Shape& elems, const char* elems_what) {
  if (table_dim < 0 || table_dim >= table_shape.rank())
    fail(where, cat("table dim ", table_dim, " is outside table ", table_shape.to_string()));
  if (elems.rank() > max_rank)
    fail(where, cat(elems_what, " ", elems.to_string(), " exceeds rank ", max_rank));
  const std::string& id_name = table_shape[table_dim].name;
  const auto ids_strides = ids_shape.strides();
  const auto table_strides = table_shape.strides();
  TableMaps m;
  m.ids.rank = m.table.rank = elems.rank();
  for (int i = 0; i < elems.rank(); ++i) {
    const auto& d = elems[i];
    const int ji = ids_shape.index_of(d.name);
    const int jt = d.name == id_name ? -1 : table_shape.index_of(d.name);
    if (ji >= 0 && jt >= 0)
      fail(where, cat("dimension '", d.name, "' is in both ids ", ids_shape.to_string(),
                      " and table ", table_shape.to_string()));
    if (ji < 0 && jt < 0)
      fail(where, cat("dimension '", d.name, "' of ", elems_what, " ", elems.to_string(),
                      " is in neither ids ", ids_shape.to_string(), " nor table ",
                      table_shape.to_string(), " (without its dim '", id_name, "')"));
    const Shape& src = ji >= 0 ? ids_shape : table_shape;
    const int j = ji >= 0 ? ji : jt;
    if (src[j].size != d.size)
      fail(where, cat("dimension '", d.name, "' has size ", d.size, " in ", elems_what, " ",
                      elems.to_string(), " but ", src[j].size, " in ", src.to_string()));
    m.ids.extent[i] = m.table.extent[i] = d.size;
    m.ids.stride[i] = ji >= 0 ? ids_strides[static_cast<size_t>(ji)] : 0;
    m.table.stride[i] = jt >= 0 ? table_strides[static_cast<size_t>(jt)] : 0;
  }
  for (const auto& d : ids_shape.dims())
    if (!elems.contains(d.name))
      fail(where, cat("dimension '", d.name, "' of ids ", ids_shape.to_string(),
                      " is missing from ", elems_what, " ", elems.to_string()));
  for (int i = 0; i < table_shape.rank(); ++i)
    if (i != table_dim && !elems.contains(table_shape[i].name))
      fail(where, cat("dimension '", table_shape[i].name, "' of table ", table_shape.to_string(),
                      " is missing from ", elems_what, " ", elems.to_string()));
  m.id_stride = table_strides[static_cast<size_t>(table_dim)];
  m.id_size = table_shape[table_dim].size;
  return m;
}

}  // namespace detail::indexing_impl

FView one_hot(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
              const Shape& out_shape, int dim, std::int64_t origin, float on, float off) {
  using namespace detail::indexing_impl;
  const char* where = "mtk::kernels::one_hot";
  check_size(where, ids_shape, ids, "ids");
  if (dim < 0 || dim >= out_shape.rank() || out_shape.rank() != ids_shape.rank() + 1 ||
      ids_shape.contains(out_shape[dim].name))
    fail(where, cat("output ", out_shape.to_string(), " must be ids ", ids_shape.to_string(),
                    " plus one new dim at position ", dim));
  const IndexMap m = map_by_name(out_shape, ids_shape, where);
  const std::int64_t n = out_shape[dim].size;
  std::int64_t inner = 1;
  for (int i = dim + 1; i < out_shape.rank(); ++i)
    inner *= out_shape[i].size;
  FView out = impl::alloc<float>(where, out_shape.num_elements());
  Kokkos::parallel_for(
      where, impl::Range(space, 0, out_shape.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t pos = (k / inner) % n;
        out(k) = static_cast<std::int64_t>(ids(m.offset(k))) == origin + pos ? on : off;
      });
  return out;
}

FView gather(const ExecSpace& space, const Shape& table_shape, const FView& table, int table_dim,
             std::int64_t origin, const Shape& ids_shape, const IView& ids,
             const Shape& out_shape) {
  using namespace detail::indexing_impl;
  const char* where = "mtk::kernels::gather";
  check_size(where, table_shape, table, "table");
  check_size(where, ids_shape, ids, "ids");
  const TableMaps m = table_maps(where, table_shape, table_dim, ids_shape, out_shape, "output");
  const IndexMap im = m.ids, tm = m.table;
  const std::int64_t id_stride = m.id_stride, id_size = m.id_size;
  FView out = impl::alloc<float>(where, out_shape.num_elements());
  Kokkos::parallel_for(
      where, impl::Range(space, 0, out_shape.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t id = static_cast<std::int64_t>(ids(im.offset(k))) - origin;
        out(k) = id >= 0 && id < id_size ? table(tm.offset(k) + id * id_stride) : 0.f;
      });
  return out;
}

FView scatter_add(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
                  const Shape& updates_shape, const FView& updates, const Shape& table_shape,
                  int table_dim, std::int64_t origin) {
  using namespace detail::indexing_impl;
  const char* where = "mtk::kernels::scatter_add";
  check_size(where, ids_shape, ids, "ids");
  check_size(where, updates_shape, updates, "updates");
  const TableMaps m =
      table_maps(where, table_shape, table_dim, ids_shape, updates_shape, "updates");
  const IndexMap im = m.ids, tm = m.table;
  const std::int64_t id_stride = m.id_stride, id_size = m.id_size;
  FView table(std::string(where), static_cast<size_t>(table_shape.num_elements()));  // zeros
  Kokkos::parallel_for(
      where, impl::Range(space, 0, updates_shape.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t id = static_cast<std::int64_t>(ids(im.offset(k))) - origin;
        if (id >= 0 && id < id_size)
          Kokkos::atomic_add(&table(tm.offset(k) + id * id_stride), updates(k));
      });
  return table;
}

}  // namespace mtk::kernels
