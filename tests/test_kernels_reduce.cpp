// Reductions, softmax, cumsum and top-1 against host references.

#include "kernel_contract_util.hpp"

namespace {

using namespace mtk::test::contract;

// ---------------------------------------------------------------- reduce

// f(kept dims) for every subset of in's dims, in in's order.
template <class F>
void for_each_subset(const Shape& in, F&& f) {
  const int r = in.rank();
  for (int mask = 0; mask < (1 << r); ++mask) {
    std::vector<Dimension> kept;
    for (int i = 0; i < r; ++i)
      if (mask & (1 << i))
        kept.push_back(in[i]);
    f(kept);
  }
}

template <class T>
void check_reduce_all(ReduceFn fn, const Shape& in, const std::vector<double>& x) {
  // Every subset of dims, in in-order and in reversed order.
  for_each_subset(in, [&](std::vector<Dimension> kept) {
    for (int rev = 0; rev < 2; ++rev) {
      if (rev)
        std::reverse(kept.begin(), kept.end());
      const Shape out(kept);
      SCOPED_TRACE(std::string(mtk::reduce_name(fn)) + " " + in.to_string() + " -> " +
                   out.to_string());
      const double init = fn == ReduceFn::sum   ? 0.0
                          : fn == ReduceFn::max ? -std::numeric_limits<double>::infinity()
                                                : std::numeric_limits<double>::infinity();
      std::vector<double> ref(static_cast<size_t>(out.num_elements()), init);
      for_each_index(in.dims(), [&](const Index& idx) {
        double& o = ref[static_cast<size_t>(offset_of(out, idx))];
        const double v = x[static_cast<size_t>(offset_of(in, idx))];
        o = fn == ReduceFn::sum ? o + v : fn == ReduceFn::max ? std::max(o, v) : std::min(o, v);
      });
      const auto got = to_vector(k::reduce<T>(mtk::ExecSpace(), fn, in, to_view<T>(x), out));
      if (fn == ReduceFn::sum && std::is_floating_point_v<T>) {
        EXPECT_LE(rel_error(got, ref), 1e-6);
      } else {
        EXPECT_EQ(got, ref);
      }
    }
  });
}

TEST(Reduce, EverySubsetOfDimsEveryFunction) {
  const Shape in{{"a", 3}, {"b", 4}, {"c", 5}, {"d", 2}};
  const auto x = random_values(in.num_elements(), 11);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min})
    check_reduce_all<float>(fn, in, x);
  const auto ids = random_ids(in.num_elements(), 12, -50, 50);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min})
    check_reduce_all<std::int32_t>(fn, in, ids);
}

// The GPU's forms (kernels::impl::device_paths) forced on the host: a team per row where rows are
// contiguous, otherwise chunks of rows (b: 40 and d: 33 make several chunks and teams of a row).
TEST(Reduce, DevicePathsEverySubsetOfDimsEveryFunction) {
  const DevicePaths device(true);
  const Shape in{{"a", 3}, {"b", 40}, {"c", 5}, {"d", 33}};
  const auto x = random_values(in.num_elements(), 17);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min})
    check_reduce_all<float>(fn, in, x);
  const auto ids = random_ids(in.num_elements(), 18, -50, 50);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min})
    check_reduce_all<std::int32_t>(fn, in, ids);
}

TEST(Reduce, SumOfSquaresIsTheSumOfTheSquaresBitwise) {
  // Every subset of dims and the blocked full sum: reduce(sum_squares, x) == reduce(sum,
  // square(x)) bit for bit (each square rounded to float, summed in the same order).
  const mtk::ExecSpace space;
  for (const Shape& in :
       {Shape{{"a", 3}, {"b", 4}, {"c", 5}, {"d", 2}}, Shape{{"a", 1000}, {"b", 301}}}) {
    const auto x = random_values(in.num_elements(), 21);
    const auto sq = k::unary(space, mtk::UnaryFn::square, to_view<float>(x));
    for_each_subset(in, [&](const std::vector<Dimension>& kept) {
      const Shape out(kept);
      SCOPED_TRACE(in.to_string() + " -> " + out.to_string());
      EXPECT_EQ(
          to_vector(k::reduce<float>(space, ReduceFn::sum_squares, in, to_view<float>(x), out)),
          to_vector(k::reduce<float>(space, ReduceFn::sum, in, sq, out)));
    });
  }
  const Shape small{{"a", 3}};
  EXPECT_THROW(
      k::reduce<std::int32_t>(space, ReduceFn::sum_squares, small,
                              to_view<std::int32_t>(std::vector<double>{1, 2, 3}), Shape{}),
      mtk::Error);
}

TEST(Reduce, SizeOneDimsAndPermutations) {
  const Shape in{{"a", 1}, {"b", 4}, {"c", 1}, {"d", 3}, {"e", 2}};
  const auto x = random_values(in.num_elements(), 13);
  for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max})
    check_reduce_all<float>(fn, in, x);
}

TEST(Reduce, HighRankCollapsesNeighbouringDims) {
  // Rank 10 exceeds the kernels' index rank, but neighbouring dims that stay neighbours merge.
  std::vector<Dimension> dims;
  for (int i = 0; i < 10; ++i)
    dims.push_back({"d" + std::to_string(i), 2});
  const Shape in(dims);
  const auto x = random_values(in.num_elements(), 15);
  for (const Shape& out : {Shape(std::vector<Dimension>(dims.begin() + 3, dims.end())),
                           Shape(std::vector<Dimension>(dims.begin(), dims.begin() + 4)),
                           Shape{dims[5], dims[6], dims[0], dims[1], dims[2]}}) {
    SCOPED_TRACE(out.to_string());
    std::vector<double> ref(static_cast<size_t>(out.num_elements()), 0.0);
    for_each_index(in.dims(), [&](const Index& idx) {
      ref[static_cast<size_t>(offset_of(out, idx))] += x[static_cast<size_t>(offset_of(in, idx))];
    });
    EXPECT_LE(rel_error(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in,
                                                   to_view<float>(x), out)),
                        ref),
              1e-6);
  }
}

TEST(Reduce, EmptyDims) {
  const Shape in{{"a", 3}, {"b", 0}};
  const auto empty = to_view<float>({});
  EXPECT_EQ(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, empty, {{"a", 3}})),
            std::vector<double>(3, 0.0));
  EXPECT_EQ(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::max, in, empty, {{"a", 3}})),
            std::vector<double>(3, -std::numeric_limits<double>::infinity()));
  EXPECT_EQ(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, empty, {{"b", 0}}).extent(0), 0u);
}

TEST(Reduce, LargeFullSum) {
  const Shape in{{"a", 1000}, {"b", 300}};
  const auto x = random_values(in.num_elements(), 14, 0.0, 1.0);
  double ref = 0;
  for (double v : x)
    ref += v;
  EXPECT_LE(rel_error(to_vector(k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in,
                                                 to_view<float>(x), Shape{})),
                      {ref}),
            1e-6);
}

TEST(Reduce, LeadingDimsSummedOverManyColumns) {
  // [reduced][kept] and [kept][reduced][kept] with kept sizes around the host kernel's 256-column
  // blocks: every function, the sum equal to a float64 column sum in row order rounded once.
  // Also in the GPU's form (chunks of 32 rows merged in order; double partial sums of 37 floats
  // are exact, so bitwise too).
  for (const bool device : {false, true})
    for (std::int64_t outer : {1, 3})
      for (std::int64_t cols : {1, 255, 256, 257, 700}) {
        const DevicePaths paths(device);
        const Shape in{{"o", outer}, {"r", 37}, {"k", cols}};
        const auto x = random_values(in.num_elements(), 16);
        for (ReduceFn fn : {ReduceFn::sum, ReduceFn::max, ReduceFn::min}) {
          SCOPED_TRACE(std::string(mtk::reduce_name(fn)) + " " + in.to_string());
          std::vector<double> ref(static_cast<size_t>(outer * cols));
          for (std::int64_t o = 0; o < outer; ++o)
            for (std::int64_t k = 0; k < cols; ++k) {
              auto at = [&](std::int64_t r) {
                return static_cast<double>(
                    static_cast<float>(x[static_cast<size_t>((o * 37 + r) * cols + k)]));
              };
              double a = fn == ReduceFn::sum ? 0.0 : at(0);
              for (std::int64_t r = fn == ReduceFn::sum ? 0 : 1; r < 37; ++r)
                a = fn == ReduceFn::sum   ? a + at(r)
                    : fn == ReduceFn::max ? std::max(a, at(r))
                                          : std::min(a, at(r));
              ref[static_cast<size_t>(o * cols + k)] = static_cast<float>(a);
            }
          EXPECT_EQ(to_vector(k::reduce<float>(mtk::ExecSpace(), fn, in, to_view<float>(x),
                                               Shape{{"o", outer}, {"k", cols}})),
                    ref);
        }
      }
}

TEST(Reduce, Errors) {
  const Shape in{{"a", 3}, {"b", 4}};
  const auto x = to_view<float>(random_values(12, 1));
  expect_error(
      [&] {
        k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, x, {{"c", 3}});
      },
      {"mtk::kernels::reduce", "'c'", "[c=3]", "[a=3, b=4]"});
  expect_error(
      [&] {
        k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, in, x, {{"a", 2}});
      },
      {"mtk::kernels::reduce", "'a'", "[a=2]", "[a=3, b=4]"});
  expect_error(
      [&] {
        k::reduce<float>(mtk::ExecSpace(), ReduceFn::sum, {{"a", 5}}, x, Shape{});
      },
      {"mtk::kernels::reduce", "12 elements", "[a=5]"});
}

// ---------------------------------------------------------------- softmax

// mtk::Around with the offset of element i of row `row`.
struct Around : mtk::Around {
  using mtk::Around::Around;
  size_t at(std::int64_t row, std::int64_t i) const {
    return static_cast<size_t>((row / inner) * n * inner + row % inner + i * inner);
  }
  std::int64_t rows() const { return outer * inner; }
};

std::vector<double> ref_softmax(const Shape& s, const std::vector<double>& x, int dim, bool log) {
  const Around a(s, dim);
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::int64_t i = 0; i < a.n; ++i)
      m = std::max(m, x[a.at(r, i)]);
    for (std::int64_t i = 0; i < a.n; ++i)
      sum += std::exp(x[a.at(r, i)] - m);
    for (std::int64_t i = 0; i < a.n; ++i)
      y[a.at(r, i)] = log ? x[a.at(r, i)] - m - std::log(sum) : std::exp(x[a.at(r, i)] - m) / sum;
  }
  return y;
}

TEST(Softmax, MatchesReferenceAlongEveryDim) {
  const Shape s{{"a", 3}, {"b", 7}, {"c", 4}};
  for (double scale : {1.0, 100.0}) {  // 100: exp would overflow without the max shift
    auto x = random_values(s.num_elements(), 21);
    for (auto& v : x)
      v *= scale;
    for (int dim = 0; dim < 3; ++dim)
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dim " << dim << " log " << log << " scale " << scale);
        const auto got = to_vector(k::softmax(mtk::ExecSpace(), s, to_view<float>(x), dim, log));
        const auto ref = ref_softmax(s, x, dim, log);
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_TRUE(std::isfinite(got[i]));
          EXPECT_NEAR(got[i], ref[i], 1e-5 * std::max(1.0, std::abs(ref[i])));
        }
      }
  }
}

TEST(Softmax, LongRows) {
  const Shape s{{"rows", 3}, {"vocab", 5000}};
  const auto x = random_values(s.num_elements(), 22, -20, 20);
  for (bool log : {false, true}) {
    const auto got = to_vector(k::softmax(mtk::ExecSpace(), s, to_view<float>(x), 1, log));
    const auto ref = ref_softmax(s, x, 1, log);
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(got[i], ref[i], log ? 1e-4 : 1e-5 * std::max(1e-3, ref[i]));
  }
}

TEST(Softmax, GradientMatchesFiniteDifferences) {
  // L(x) = sum(w * f(x)) with f = softmax or log-softmax along dim; dL/dx = softmax_grad(y, w).
  const Shape s{{"a", 2}, {"b", 5}, {"c", 3}};
  const auto x = random_values(s.num_elements(), 31, -2, 2);
  const auto w = random_values(s.num_elements(), 32);
  for (int dim = 0; dim < 3; ++dim)
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " log " << log);
      const auto y = k::softmax(mtk::ExecSpace(), s, to_view<float>(x), dim, log);
      const auto dx =
          to_vector(k::softmax_grad(mtk::ExecSpace(), s, y, to_view<float>(w), dim, log));
      auto loss = [&](const std::vector<double>& xx) {
        const auto f = ref_softmax(s, xx, dim, log);
        double l = 0;
        for (size_t i = 0; i < f.size(); ++i)
          l += w[i] * f[i];
        return l;
      };
      const double h = 1e-5;
      for (size_t i = 0; i < x.size(); ++i) {
        auto xp = x, xm = x;
        xp[i] += h;
        xm[i] -= h;
        EXPECT_NEAR(dx[i], (loss(xp) - loss(xm)) / (2 * h), 2e-5) << "element " << i;
      }
    }
}

TEST(Softmax, GradientInPlaceAndItsBf16BitsEqualTheOutOfPlaceGradient) {
  // The lowering writes the gradient over dy when dy dies there, and its bf16 copy beside it.
  // Rows long enough for the vectorised blocks and a tail (259 = 256 + 3).
  const Shape s{{"a", 3}, {"b", 259}, {"c", 2}};
  const auto x = random_values(s.num_elements(), 33, -3, 3);
  const auto w = random_values(s.num_elements(), 34);
  for (int dim = 0; dim < 3; ++dim)
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " log " << log);
      const auto y = k::softmax(mtk::ExecSpace(), s, to_view<float>(x), dim, log);
      const auto ref =
          to_vector(k::softmax_grad(mtk::ExecSpace(), s, y, to_view<float>(w), dim, log));
      for (bool in_place : {false, true})
        for (bool bf16 : {false, true}) {
          const auto dy = to_view<float>(w);
          Kokkos::View<std::uint16_t*> bits;
          if (bf16)
            bits = Kokkos::View<std::uint16_t*>("bits", dy.extent(0));
          const auto dx = k::softmax_grad(mtk::ExecSpace(), s, y, dy, dim, log,
                                          in_place ? dy : k::FView(), bits);
          if (in_place) {
            ASSERT_EQ(dx.data(), dy.data());
          }
          const auto got = to_vector(dx);
          ASSERT_EQ(got, ref) << "in place " << in_place << " bf16 " << bf16;
          if (!bf16)
            continue;
          auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bits);
          for (size_t e = 0; e < got.size(); ++e)
            ASSERT_EQ(hb(e), k::to_bfloat16_bits(static_cast<float>(got[e]))) << e;
        }
    }
}

TEST(Softmax, LabelsAndErrors) {
  const Shape s{{"a", 2}, {"b", 3}};
  const auto x = to_view<float>(random_values(6, 1));
  {
    Recorder rec;
    k::softmax(mtk::ExecSpace(), s, x, 1, false);
    k::softmax(mtk::ExecSpace(), s, x, 0, true);
    k::softmax_grad(mtk::ExecSpace(), s, x, x, 1, false);
    EXPECT_TRUE(std::count(Recorder::kernels().begin(), Recorder::kernels().end(),
                           "mtk::kernels::softmax") >= 1);
    EXPECT_TRUE(std::count(Recorder::kernels().begin(), Recorder::kernels().end(),
                           "mtk::kernels::log_softmax") >= 1);
    EXPECT_TRUE(Recorder::all_kernels_start_with("mtk::kernels::"));
  }
  expect_error([&] { k::softmax(mtk::ExecSpace(), s, x, 2, false); },
               {"mtk::kernels::softmax", "[a=2, b=3]"});
  expect_error([&] { k::softmax(mtk::ExecSpace(), s, x, -1, true); },
               {"mtk::kernels::softmax", "[a=2, b=3]"});
  expect_error(
      [&] {
        k::softmax(mtk::ExecSpace(), {{"a", 4}}, x, 0, false);
      },
      {"mtk::kernels::softmax", "6 elements", "[a=4]"});
  expect_error(
      [&] {
        k::softmax_grad(mtk::ExecSpace(), s, x, to_view<float>({1, 2}), 0, false);
      },
      {"mtk::kernels::softmax_grad", "2 elements", "[a=2, b=3]"});
}

// ---------------------------------------------------------------- cumsum, top_1

TEST(Cumsum, InclusiveAndExclusiveAlongEveryDim) {
  const Shape s{{"a", 3}, {"b", 4}, {"c", 5}};
  const auto x = random_values(s.num_elements(), 41);
  for (int dim = 0; dim < 3; ++dim)
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " exclusive " << exclusive);
      const Around a(s, dim);
      std::vector<double> ref(x.size());
      for (std::int64_t r = 0; r < a.rows(); ++r) {
        double acc = 0;
        for (std::int64_t i = 0; i < a.n; ++i) {
          if (!exclusive)
            acc += x[a.at(r, i)];
          ref[a.at(r, i)] = acc;
          if (exclusive)
            acc += x[a.at(r, i)];
        }
      }
      const auto got = to_vector(k::cumsum(mtk::ExecSpace(), s, to_view<float>(x), dim, exclusive));
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_NEAR(got[i], ref[i], 1e-6);
    }
  expect_error([&] { k::cumsum(mtk::ExecSpace(), s, to_view<float>(x), -1, false); },
               {"mtk::kernels::cumsum"});
}

TEST(Cumsum, PartsStartedFromTheLeadingPartsTotalsEqualTheWhole) {
  // A split dim: [a, b=6, c] as three parts of 2 along b; each part scanned from the totals of
  // the parts before it (what a split cumsum's ranks do) gives the whole scan.
  const Shape s{{"a", 3}, {"b", 6}, {"c", 5}}, part{{"a", 3}, {"b", 2}, {"c", 5}};
  auto x = random_ids(s.num_elements(), 43, 0, 2);  // counts: exact in every order
  std::vector<double> xf(x.begin(), x.end());
  const mtk::ExecSpace space;
  auto part_of = [&](int p) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 2 * p; j < 2 * p + 2; ++j)
        for (std::int64_t l = 0; l < 5; ++l)
          v.push_back(xf[static_cast<size_t>((i * 6 + j) * 5 + l)]);
    return v;
  };
  const std::int64_t rows = 15;
  Kokkos::View<double*> totals("totals", 3 * rows);
  for (int p = 0; p < 3; ++p) {
    const auto t = k::cumsum_row_totals(space, part, to_view<float>(part_of(p)), 1);
    ASSERT_EQ(static_cast<std::int64_t>(t.extent(0)), rows);
    Kokkos::deep_copy(Kokkos::subview(totals, std::make_pair(p * rows, (p + 1) * rows)), t);
  }
  for (bool exclusive : {false, true}) {
    const auto whole = to_vector(k::cumsum(space, s, to_view<float>(xf), 1, exclusive));
    for (int p = 0; p < 3; ++p) {
      const auto start = k::sum_of_leading_parts(space, totals, rows, p);
      const auto got =
          to_vector(k::cumsum(space, part, to_view<float>(part_of(p)), 1, exclusive, start));
      size_t at = 0;
      for (std::int64_t i = 0; i < 3; ++i)
        for (std::int64_t j = 2 * p; j < 2 * p + 2; ++j)
          for (std::int64_t l = 0; l < 5; ++l, ++at)
            EXPECT_EQ(got[at], whole[static_cast<size_t>((i * 6 + j) * 5 + l)])
                << "part " << p << " exclusive " << exclusive;
    }
  }
  expect_error(
      [&] {
        k::cumsum(space, part, to_view<float>(part_of(0)), 1, false,
                  Kokkos::View<double*>("short", 4));
      },
      {"mtk::kernels::cumsum", "4 values", "15 rows"});
  expect_error([&] { k::sum_of_leading_parts(space, totals, rows, 4); },
               {"mtk::kernels::sum_of_leading_parts"});
}

TEST(Top1, MaxAndFirstPosition) {
  const Shape s{{"a", 3}, {"b", 4}, {"c", 5}};
  auto x = random_ids(s.num_elements(), 51, 0, 3);  // many ties
  for (int dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const Around a(s, dim);
    k::FView values;
    k::IView indices;
    k::top_1(mtk::ExecSpace(), s, to_view<float>(x), dim, values, indices);
    const auto v = to_vector(values), ix = to_vector(indices);
    ASSERT_EQ(static_cast<std::int64_t>(v.size()), a.rows());
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      std::int64_t best = 0;
      for (std::int64_t i = 1; i < a.n; ++i)
        if (x[a.at(r, i)] > x[a.at(r, best)])
          best = i;
      EXPECT_EQ(v[static_cast<size_t>(r)], x[a.at(r, best)]);
      EXPECT_EQ(ix[static_cast<size_t>(r)], best);
    }
  }
}

}  // namespace
