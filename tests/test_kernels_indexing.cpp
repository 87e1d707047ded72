// Indexing kernels (one_hot, gather, scatter_add) against host references.

#include "kernel_contract_util.hpp"

namespace {

using namespace mtk::test::contract;

// ---------------------------------------------------------------- indexing

TEST(OneHot, WithOrigin) {
  const Shape ids_shape{{"b", 3}, {"l", 4}};
  const auto ids = random_ids(ids_shape.num_elements(), 61, -1, 12);
  const std::int64_t origin = 5;
  for (int dim = 0; dim < 3; ++dim) {
    std::vector<Dimension> dims = ids_shape.dims();
    dims.insert(dims.begin() + dim, Dimension{"vocab", 4});
    const Shape out(dims);
    SCOPED_TRACE(out.to_string());
    const auto got = to_vector(k::one_hot(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids),
                                          out, dim, origin, 2.f, -1.f));
    std::vector<double> ref(static_cast<size_t>(out.num_elements()));
    for_each_index(out.dims(), [&](const Index& idx) {
      const double id = ids[static_cast<size_t>(offset_of(ids_shape, idx))];
      ref[static_cast<size_t>(offset_of(out, idx))] = id == origin + idx.at("vocab") ? 2.0 : -1.0;
    });
    EXPECT_EQ(got, ref);
  }
  expect_error(
      [&] {
        k::one_hot(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), {{"b", 3}, {"v", 2}}, 1,
                   0, 1.f, 0.f);
      },
      {"mtk::kernels::one_hot", "[b=3, l=4]", "[b=3, v=2]"});
}

// What gather must give: out[idx] = table[idx with vocab = id - origin], 0 outside the slice.
std::vector<double> gather_reference(const Shape& ids_shape, const std::vector<double>& ids,
                                     const Shape& table_shape, const std::vector<double>& table,
                                     const Shape& out, std::int64_t origin, std::int64_t id_size) {
  std::vector<double> ref(static_cast<size_t>(out.num_elements()), 0.0);
  for_each_index(out.dims(), [&](const Index& idx) {
    const auto id = static_cast<std::int64_t>(ids[static_cast<size_t>(offset_of(ids_shape, idx))]);
    if (id < origin || id >= origin + id_size)
      return;
    Index t = idx;
    t["vocab"] = id - origin;
    ref[static_cast<size_t>(offset_of(out, idx))] =
        table[static_cast<size_t>(offset_of(table_shape, t))];
  });
  return ref;
}

TEST(Gather, WithOriginAndOddOutputOrder) {
  const Shape ids_shape{{"b", 2}, {"l", 5}};
  const auto ids = random_ids(ids_shape.num_elements(), 71, 0, 12);
  const std::int64_t origin = 4;  // this slice holds vocab ids [4, 10)
  for (int table_dim = 0; table_dim < 2; ++table_dim) {
    const Shape table_shape =
        table_dim == 0 ? Shape{{"vocab", 6}, {"d", 3}} : Shape{{"d", 3}, {"vocab", 6}};
    const auto table = random_values(table_shape.num_elements(), 72);
    for (const Shape& out :
         {Shape{{"b", 2}, {"l", 5}, {"d", 3}}, Shape{{"d", 3}, {"l", 5}, {"b", 2}},
          Shape{{"l", 5}, {"d", 3}, {"b", 2}}}) {
      SCOPED_TRACE(table_shape.to_string() + " -> " + out.to_string());
      const auto got =
          to_vector(k::gather(mtk::ExecSpace(), table_shape, to_view<float>(table), table_dim,
                              origin, ids_shape, to_view<std::int32_t>(ids), out));
      EXPECT_EQ(got, gather_reference(ids_shape, ids, table_shape, table, out, origin, 6));
    }
  }
}

TEST(ScatterAdd, WithOriginAccumulatesDuplicates) {
  const Shape ids_shape{{"b", 3}, {"l", 7}};
  const auto ids = random_ids(ids_shape.num_elements(), 81, 0, 9);  // many duplicates
  const std::int64_t origin = 3;
  for (int table_dim = 0; table_dim < 2; ++table_dim) {
    const Shape table_shape =
        table_dim == 0 ? Shape{{"vocab", 4}, {"d", 2}} : Shape{{"d", 2}, {"vocab", 4}};
    for (const Shape& upd :
         {Shape{{"b", 3}, {"l", 7}, {"d", 2}}, Shape{{"d", 2}, {"l", 7}, {"b", 3}}}) {
      SCOPED_TRACE(table_shape.to_string() + " <- " + upd.to_string());
      const auto u = random_values(upd.num_elements(), 82);
      const auto got =
          to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), upd,
                                   to_view<float>(u), table_shape, table_dim, origin));
      std::vector<double> ref(static_cast<size_t>(table_shape.num_elements()), 0.0);
      for_each_index(upd.dims(), [&](const Index& idx) {
        const auto id =
            static_cast<std::int64_t>(ids[static_cast<size_t>(offset_of(ids_shape, idx))]);
        if (id < origin || id >= origin + 4)
          return;
        Index t = idx;
        t["vocab"] = id - origin;
        ref[static_cast<size_t>(offset_of(table_shape, t))] +=
            u[static_cast<size_t>(offset_of(upd, idx))];
      });
      EXPECT_LE(rel_error(got, ref), 1e-6);
    }
  }
}

// scatter_add sums each table element's contributions in the updates' element order, from 0, in
// float: bitwise what a serial loop gives, on any backend and thread count (issue 15, item 6: with
// float atomics a threaded backend added in thread order). Values of very different magnitudes
// make any other order round differently; a few ids take most positions.
std::vector<float> sequential_scatter_add(const Shape& ids_shape, const std::vector<double>& ids,
                                          const Shape& upd, const std::vector<double>& u,
                                          const Shape& table_shape, std::int64_t origin,
                                          std::int64_t id_size) {
  std::vector<float> ref(static_cast<size_t>(table_shape.num_elements()), 0.f);
  for_each_index(upd.dims(), [&](const Index& idx) {  // row-major over upd: its element order
    const auto id = static_cast<std::int64_t>(ids[static_cast<size_t>(offset_of(ids_shape, idx))]);
    if (id < origin || id >= origin + id_size)
      return;
    Index t = idx;
    t["vocab"] = id - origin;
    ref[static_cast<size_t>(offset_of(table_shape, t))] +=
        static_cast<float>(u[static_cast<size_t>(offset_of(upd, idx))]);
  });
  return ref;
}

std::vector<double> adversarial_values(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> exponent(-24, 24), sign(0, 1);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = static_cast<double>(
        static_cast<float>((sign(gen) ? -1 : 1) * mant(gen) * std::ldexp(1.0, exponent(gen))));
  return v;
}

std::vector<double> skewed_ids(std::int64_t n, unsigned seed, int vocab) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> any(-2, vocab + 1), coin(0, 3);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = coin(gen) == 0 ? any(gen) : coin(gen) % 2;  // 3/4 of them are id 0 or 1
  return v;
}

TEST(ScatterAdd, SumsEachRowInUpdateOrderBitwise) {
  const std::int64_t origin = 1, id_size = 6;
  const Shape ids_shape{{"b", 5}, {"l", 9}};
  const auto ids = skewed_ids(ids_shape.num_elements(), 7, 8);
  for (const bool device : {false, true})  // the GPU's form too: a thread per table element
    for (int table_dim = 0; table_dim < 2; ++table_dim) {
      const DevicePaths paths(device);
      const Shape table_shape = table_dim == 0 ? Shape{{"vocab", id_size}, {"d", 3}}
                                               : Shape{{"d", 3}, {"vocab", id_size}};
      for (const Shape& upd :
           {Shape{{"b", 5}, {"l", 9}, {"d", 3}}, Shape{{"d", 3}, {"l", 9}, {"b", 5}},
            Shape{{"l", 9}, {"d", 3}, {"b", 5}}}) {
        SCOPED_TRACE(table_shape.to_string() + " <- " + upd.to_string());
        const auto u = adversarial_values(upd.num_elements(), 11);
        const auto got =
            to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), upd,
                                     to_view<float>(u), table_shape, table_dim, origin));
        const auto ref =
            sequential_scatter_add(ids_shape, ids, upd, u, table_shape, origin, id_size);
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i)
          EXPECT_EQ(static_cast<float>(got[i]), ref[i]) << "table element " << i;
      }
    }
}

// Table rows of two dims ([vocab, h, d]): where the output keeps them last and in the table's
// order the host copies and adds whole runs; in another order it goes value by value. Both equal
// the serial reference bitwise.
TEST(Indexing, RowsOfSeveralDimsAsRunsOrValueByValue) {
  const std::int64_t origin = 2, id_size = 5;
  const Shape ids_shape{{"b", 3}, {"l", 4}};
  const auto ids = skewed_ids(ids_shape.num_elements(), 19, 8);
  const Shape table_shape{{"vocab", id_size}, {"h", 2}, {"d", 3}};
  const auto table = random_values(table_shape.num_elements(), 23);
  for (const bool device : {false, true})  // the GPU's form too: a thread per element
    for (const Shape& out : {Shape{{"b", 3}, {"l", 4}, {"h", 2}, {"d", 3}},
                             Shape{{"b", 3}, {"l", 4}, {"d", 3}, {"h", 2}},
                             Shape{{"h", 2}, {"b", 3}, {"l", 4}, {"d", 3}}}) {
      const DevicePaths paths(device);
      SCOPED_TRACE(out.to_string() + (device ? " (device paths)" : ""));
      const auto got = to_vector(k::gather(mtk::ExecSpace(), table_shape, to_view<float>(table), 0,
                                           origin, ids_shape, to_view<std::int32_t>(ids), out));
      EXPECT_EQ(got, gather_reference(ids_shape, ids, table_shape, table, out, origin, id_size));
      const auto u = adversarial_values(out.num_elements(), 29);
      const auto sums =
          to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, to_view<std::int32_t>(ids), out,
                                   to_view<float>(u), table_shape, 0, origin));
      const auto sref =
          sequential_scatter_add(ids_shape, ids, out, u, table_shape, origin, id_size);
      ASSERT_EQ(sums.size(), sref.size());
      for (size_t i = 0; i < sref.size(); ++i)
        EXPECT_EQ(static_cast<float>(sums[i]), sref[i]) << "table element " << i;
    }
}

// Large enough for every thread of a threaded backend to take part; repeated, every run must
// equal the serial sum bitwise (15 of 30 embedding-gradient repeats differed with 2 OpenMP
// threads and float atomics). On a serial backend one run checks the order.
TEST(ScatterAdd, RepeatedRunsEqualTheSerialSumBitwise) {
  const std::int64_t vocab = 40;
  const Shape ids_shape{{"b", 16}, {"l", 128}};
  const Shape table_shape{{"vocab", vocab}, {"d", 32}};
  const Shape upd{{"b", 16}, {"l", 128}, {"d", 32}};
  const auto ids = skewed_ids(ids_shape.num_elements(), 3, static_cast<int>(vocab) - 1);
  const auto u = adversarial_values(upd.num_elements(), 5);
  const auto ref = sequential_scatter_add(ids_shape, ids, upd, u, table_shape, 0, vocab);
  const auto idv = to_view<std::int32_t>(ids);
  const auto uv = to_view<float>(u);
  const int repeats = mtk::ExecSpace().concurrency() > 1 ? 30 : 1;
  for (int r = 0; r < repeats; ++r) {
    const auto got =
        to_vector(k::scatter_add(mtk::ExecSpace(), ids_shape, idv, upd, uv, table_shape, 0, 0));
    ASSERT_EQ(got.size(), ref.size());
    int differ = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      differ += static_cast<float>(got[i]) != ref[i];
    ASSERT_EQ(differ, 0) << "run " << r << " of " << repeats << " on "
                         << mtk::ExecSpace().concurrency() << " threads";
  }
}

TEST(Indexing, Errors) {
  const Shape ids_shape{{"b", 2}};
  const auto ids = to_view<std::int32_t>({0, 1});
  const Shape table_shape{{"vocab", 4}, {"d", 3}};
  const auto table = to_view<float>(random_values(12, 1));
  expect_error(
      [&] {
        k::gather(mtk::ExecSpace(), table_shape, table, 0, 0, ids_shape, ids, {{"b", 2}});
      },
      {"mtk::kernels::gather", "'d'", "[vocab=4, d=3]", "[b=2]"});
  expect_error(
      [&] {
        k::gather(mtk::ExecSpace(), table_shape, table, 0, 0, ids_shape, ids, {{"b", 2}, {"d", 4}});
      },
      {"mtk::kernels::gather", "'d'", "[b=2, d=4]"});
  expect_error(
      [&] {
        k::gather(mtk::ExecSpace(), table_shape, table, 2, 0, ids_shape, ids, {{"b", 2}, {"d", 3}});
      },
      {"mtk::kernels::gather", "[vocab=4, d=3]"});
  expect_error(
      [&] {
        k::scatter_add(mtk::ExecSpace(), ids_shape, ids, {{"b", 2}, {"d", 3}}, table, table_shape,
                       0, 0);
      },
      {"mtk::kernels::scatter_add", "12 elements", "[b=2, d=3]"});
}

}  // namespace
