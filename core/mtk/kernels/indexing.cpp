// mtk::kernels indexing: one_hot, gather (embedding lookup) and scatter_add (its gradient).
// See indexing.hpp for the contracts.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/indexing.hpp>

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
  // The output's trailing dims that ids lack and the table holds contiguously (an embedding's
  // d_model): each id copies a run of that many values. On the host the offsets are then
  // computed once per run (their divisions cost more than the copy), not once per value.
  std::int64_t run = 1;
  for (int i = tm.rank - 1; i >= 0 && im.stride[i] == 0 && tm.stride[i] == run; --i)
    run *= tm.extent[i];
  if (impl::host_exec && run > 1) {
    Kokkos::parallel_for(
        where, impl::Range(space, 0, out_shape.num_elements() / run),
        KOKKOS_LAMBDA(std::int64_t q) {
          const std::int64_t k = q * run;
          const std::int64_t id = static_cast<std::int64_t>(ids(im.offset(k))) - origin;
          float* o = out.data() + k;
          if (id < 0 || id >= id_size) {
            for (std::int64_t e = 0; e < run; ++e)
              o[e] = 0.f;
            return;
          }
          const float* t = table.data() + tm.offset(k) + id * id_stride;
          for (std::int64_t e = 0; e < run; ++e)
            o[e] = t[e];
        });
    return out;
  }
  Kokkos::parallel_for(
      where, impl::Range(space, 0, out_shape.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t id = static_cast<std::int64_t>(ids(im.offset(k))) - origin;
        out(k) = id >= 0 && id < id_size ? table(tm.offset(k) + id * id_stride) : 0.f;
      });
  return out;
}

namespace detail::indexing_impl {

using I64View = Kokkos::View<std::int64_t*, ExecSpace::memory_space>;

// scatter_add's index maps. Position p enumerates the ids elements in the order their dims have
// in `updates`: pos_ids maps p to the ids offset, pos_upd to the updates offset of (p, table
// position 0). table_upd maps a table element to the updates offset of (ids position 0, its other
// dims).
struct ScatterMaps {
  IndexMap pos_ids, pos_upd, table_upd;
};

ScatterMaps scatter_maps(const TableMaps& m, const Shape& ids_shape, const Shape& updates_shape,
                         const Shape& table_shape, int table_dim) {
  ScatterMaps s;
  IndexMap &pos_ids = s.pos_ids, &pos_upd = s.pos_upd, &table_upd = s.table_upd;
  const auto upd_strides = updates_shape.strides();
  for (int i = 0; i < updates_shape.rank(); ++i) {
    if (ids_shape.index_of(updates_shape[i].name) < 0)
      continue;
    pos_ids.extent[pos_ids.rank] = pos_upd.extent[pos_upd.rank] = updates_shape[i].size;
    pos_ids.stride[pos_ids.rank++] = m.ids.stride[i];
    pos_upd.stride[pos_upd.rank++] = upd_strides[static_cast<size_t>(i)];
  }
  table_upd.rank = table_shape.rank();
  for (int j = 0; j < table_shape.rank(); ++j) {
    table_upd.extent[j] = table_shape[j].size;
    const int u = j == table_dim ? -1 : updates_shape.index_of(table_shape[j].name);
    table_upd.stride[j] = u >= 0 ? upd_strides[static_cast<size_t>(u)] : 0;
  }
  return s;
}

// The in-range positions grouped by id, each group in increasing position order: group `id` is
// order[start(id), start(id + 1)).
struct Buckets {
  I64View start, order;
};

// A counting sort: counts per id (integer atomics give the same counts in any order), an
// exclusive scan, slots taken in any order, then each bucket heapsorted by position.
Buckets bucket_positions(const ExecSpace& space, const IView& ids, const IndexMap& pos_ids,
                         std::int64_t n_pos, std::int64_t id_size, std::int64_t origin) {
  // Bucket starts per id: counts, then an exclusive scan (start(id_size) = in-range positions).
  I64View start("mtk::kernels::scatter_add::start", static_cast<size_t>(id_size + 1));
  Kokkos::parallel_for(
      "mtk::kernels::scatter_add::count", impl::Range(space, 0, n_pos),
      KOKKOS_LAMBDA(std::int64_t p) {
        const std::int64_t id = static_cast<std::int64_t>(ids(pos_ids.offset(p))) - origin;
        if (id >= 0 && id < id_size)
          Kokkos::atomic_add(&start(id), std::int64_t(1));  // integer: order-independent
      });
  Kokkos::parallel_scan(
      "mtk::kernels::scatter_add::offsets", impl::Range(space, 0, id_size + 1),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & partial, bool final) {
        const std::int64_t c = start(i);
        if (final)
          start(i) = partial;
        partial += c;
      });
  I64View cursor("mtk::kernels::scatter_add::cursor", static_cast<size_t>(id_size));
  Kokkos::deep_copy(space, cursor, Kokkos::subview(start, Kokkos::make_pair(0l, id_size)));
  I64View order(Kokkos::view_alloc(Kokkos::WithoutInitializing, "mtk::kernels::scatter_add::order"),
                static_cast<size_t>(n_pos));  // [start(id), start(id + 1)) written per id
  Kokkos::parallel_for(
      "mtk::kernels::scatter_add::bucket", impl::Range(space, 0, n_pos),
      KOKKOS_LAMBDA(std::int64_t p) {
        const std::int64_t id = static_cast<std::int64_t>(ids(pos_ids.offset(p))) - origin;
        if (id >= 0 && id < id_size)  // integer: order-independent slots, sorted below
          order(Kokkos::atomic_fetch_add(&cursor(id), std::int64_t(1))) = p;
      });
  // Heapsort each bucket by position (threads filled it in any order).
  Kokkos::parallel_for(
      "mtk::kernels::scatter_add::sort", impl::Range(space, 0, id_size),
      KOKKOS_LAMBDA(std::int64_t id) {
        const std::int64_t b = start(id), n = start(id + 1) - b;
        auto sift = [&](std::int64_t root, std::int64_t end) {
          while (2 * root + 1 < end) {
            std::int64_t c = 2 * root + 1;
            if (c + 1 < end && order(b + c) < order(b + c + 1))
              ++c;
            if (order(b + root) >= order(b + c))
              return;
            const std::int64_t t = order(b + root);
            order(b + root) = order(b + c);
            order(b + c) = t;
            root = c;
          }
        };
        for (std::int64_t r = n / 2 - 1; r >= 0; --r)
          sift(r, n);
        for (std::int64_t end = n - 1; end > 0; --end) {
          const std::int64_t t = order(b);
          order(b) = order(b + end);
          order(b + end) = t;
          sift(0, end);
        }
      });
  return {start, order};
}

}  // namespace detail::indexing_impl

namespace detail::indexing_impl {
namespace {

// The scatter into `table`: written whole (zeros plus the rows' sums), or with `add` each hit
// element's sum of its rows (from 0, in the same order) added to what `table` holds, the others
// left alone: bitwise table + scatter_add(...).
void scatter_into(const char* where, const ExecSpace& space, const Shape& ids_shape,
                  const IView& ids, const Shape& updates_shape, const FView& updates,
                  const Shape& table_shape, int table_dim, std::int64_t origin, const FView& table,
                  bool add) {
  check_size(where, ids_shape, ids, "ids");
  check_size(where, updates_shape, updates, "updates");
  const TableMaps m =
      table_maps(where, table_shape, table_dim, ids_shape, updates_shape, "updates");
  const std::int64_t id_stride = m.id_stride, id_size = m.id_size;
  const std::int64_t n_table = table_shape.num_elements();
  const ScatterMaps maps = scatter_maps(m, ids_shape, updates_shape, table_shape, table_dim);
  const IndexMap pos_upd = maps.pos_upd, table_upd = maps.table_upd;
  const std::int64_t n_pos = ids_shape.num_elements();
  if (n_table == 0 || (add && n_pos == 0))
    return;
  if (n_pos == 0) {
    Kokkos::deep_copy(space, table, 0.f);
    return;
  }
  const Buckets buckets = bucket_positions(space, ids, maps.pos_ids, n_pos, id_size, origin);
  const I64View start = buckets.start, order = buckets.order;
  // Whether a table row's elements lie contiguously in the updates too (an embedding's d_model
  // last in both): the host then adds each contribution as a run, its offsets computed once per
  // position instead of once per value; the same sums in the same order.
  std::int64_t run = 1;
  for (int i = table_upd.rank - 1; i > table_dim && table_upd.stride[i] == run; --i)
    run *= table_upd.extent[i];
  if (impl::device_paths()) {
    // A thread per table element, consecutive threads on consecutive elements of a row (coalesced
    // where the updates hold the row contiguously): a thread per row gives a GPU one thread per
    // vocabulary entry, serial over d_model. Each element sums its bucket in the same order as
    // below, so the result is bitwise the host's.
    Kokkos::parallel_for(
        where, impl::Range(space, 0, n_table), KOKKOS_LAMBDA(std::int64_t t) {
          const std::int64_t id = fast_mod(fast_div(t, id_stride), id_size);
          const std::int64_t first = start(id), last = start(id + 1);
          if (first == last) {
            if (!add)
              table(t) = 0.f;
            return;
          }
          const std::int64_t base = table_upd.offset(t);
          float sum = 0.f;
          for (std::int64_t s = first; s < last; ++s)
            sum += updates(base + pos_upd.offset(order(s)));
          table(t) = add ? table(t) + sum : sum;
        });
    return;
  }
  if (run == id_stride && id_stride > 1 && !add) {
    Kokkos::parallel_for(
        where, impl::Range(space, 0, n_table / id_stride), KOKKOS_LAMBDA(std::int64_t r) {
          const std::int64_t id = r % id_size, t0 = r * id_stride;
          float* row = table.data() + t0;
          for (std::int64_t j = 0; j < id_stride; ++j)
            row[j] = 0.f;
          const std::int64_t row_base = table_upd.offset(t0);
          for (std::int64_t s = start(id); s < start(id + 1); ++s) {
            const float* u = updates.data() + row_base + pos_upd.offset(order(s));
            for (std::int64_t j = 0; j < id_stride; ++j)
              row[j] += u[j];
          }
        });
    return;
  }
  // One table row (id_stride contiguous elements of one id) per iteration: rows of ids that no
  // position hit (most of a vocabulary) are zero-filled (or left) without index arithmetic; the
  // others sum their bucket in position order, so the result does not depend on the thread count.
  Kokkos::parallel_for(
      where, impl::Range(space, 0, n_table / id_stride), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t id = r % id_size, t0 = r * id_stride;
        const std::int64_t first = start(id), last = start(id + 1);
        if (first == last) {
          if (!add)
            for (std::int64_t j = 0; j < id_stride; ++j)
              table(t0 + j) = 0.f;
          return;
        }
        for (std::int64_t j = 0; j < id_stride; ++j) {
          const std::int64_t base = table_upd.offset(t0 + j);
          float sum = 0.f;
          for (std::int64_t s = first; s < last; ++s)
            sum += updates(base + pos_upd.offset(order(s)));
          table(t0 + j) = add ? table(t0 + j) + sum : sum;
        }
      });
}

}  // namespace
}  // namespace detail::indexing_impl

// Deterministic: each table element sums its contributions sequentially from 0, in increasing
// order of the updates' element index (what a serial loop over the updates gives), whatever the
// backend and thread count. No float atomics: a counting sort groups the ids positions by id
// (bucket_positions), and each table element then reads its bucket in order.
FView scatter_add(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
                  const Shape& updates_shape, const FView& updates, const Shape& table_shape,
                  int table_dim, std::int64_t origin) {
  const char* where = "mtk::kernels::scatter_add";
  FView table = impl::alloc<float>(where, table_shape.num_elements());  // every element written
  detail::indexing_impl::scatter_into(where, space, ids_shape, ids, updates_shape, updates,
                                      table_shape, table_dim, origin, table, false);
  return table;
}

void scatter_add_into(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
                      const Shape& updates_shape, const FView& updates, const Shape& table_shape,
                      int table_dim, std::int64_t origin, const FView& into) {
  const char* where = "mtk::kernels::scatter_add_into";
  detail::indexing_impl::check_size(where, table_shape, into, "the sum 'into'");
  detail::indexing_impl::scatter_into(where, space, ids_shape, ids, updates_shape, updates,
                                      table_shape, table_dim, origin, into, true);
}

}  // namespace mtk::kernels
