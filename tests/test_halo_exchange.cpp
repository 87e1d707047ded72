// halo_exchange and its adjoint halo_reduce: the values against a direct reference on one
// processor (zero and periodic boundaries, halos on either side, blocks dim before or after the
// block dim), the same values and gradients with the blocks split over every mesh of 1 to 8
// ranks, the gradient against the reference adjoint, and the errors.
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/node_halo.hpp>
#include <mtk/version.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "mtk_invariance_check.hpp"
#include "option_scope.hpp"
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace mtk::test {
namespace {

// Halo strips go through a node's shared memory only where they lie in host memory and MPI reads
// them there (HaloSite::shared_channel); a GPU build's strips go through MPI.
constexpr bool kSharedMemoryHalo =
    MTK_CUDA_AWARE_MPI == 0 &&
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, mtk::MemSpace>::accessible;

// x[o][blocks][c][block][i] -> the halo-widened value at (o, b, c, j, i), in double.
struct HaloRef {
  std::int64_t outer, nb, mid, n, inner, left, right;
  bool periodic;
  double fill;
  std::int64_t at(std::int64_t o, std::int64_t b, std::int64_t c, std::int64_t j, std::int64_t i,
                  std::int64_t width) const {
    return (((o * nb + b) * mid + c) * width + j) * inner + i;
  }
  std::vector<double> forward(const std::vector<double>& x) const {
    const std::int64_t w = n + left + right, total = nb * n;
    std::vector<double> y(static_cast<size_t>(outer * nb * mid * w * inner));
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::int64_t c = 0; c < mid; ++c)
          for (std::int64_t j = 0; j < w; ++j)
            for (std::int64_t i = 0; i < inner; ++i) {
              std::int64_t g = b * n + j - left;  // global position along the unblocked dim
              if (periodic)
                g = (g % total + total) % total;
              y[static_cast<size_t>(at(o, b, c, j, i, w))] =
                  g >= 0 && g < total ? x[static_cast<size_t>(at(o, g / n, c, g % n, i, n))] : fill;
            }
    return y;
  }
  // The adjoint of forward() (fill contributes nothing).
  std::vector<double> adjoint(const std::vector<double>& dy) const {
    const std::int64_t w = n + left + right, total = nb * n;
    std::vector<double> dx(static_cast<size_t>(outer * nb * mid * n * inner), 0.0);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::int64_t c = 0; c < mid; ++c)
          for (std::int64_t j = 0; j < w; ++j)
            for (std::int64_t i = 0; i < inner; ++i) {
              std::int64_t g = b * n + j - left;
              if (periodic)
                g = (g % total + total) % total;
              if (g >= 0 && g < total)
                dx[static_cast<size_t>(at(o, g / n, c, g % n, i, n))] +=
                    dy[static_cast<size_t>(at(o, b, c, j, i, w))];
            }
    return dx;
  }
};

std::vector<double> pattern(std::int64_t n, double scale) {
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = scale * std::sin(0.37 * static_cast<double>(k) + 0.1);
  return v;
}

HostTensor floats_of(const Shape& s, const std::vector<double>& v) {
  return HostTensor::floats(s, std::vector<float>(v.begin(), v.end()));
}

void expect_near_all(const HostTensor& got, const std::vector<double>& want, const std::string& w) {
  ASSERT_EQ(got.size(), static_cast<std::int64_t>(want.size())) << w;
  for (std::int64_t e = 0; e < got.size(); ++e)
    ASSERT_NEAR(got.at(e), want[static_cast<size_t>(e)], 1e-5) << w << " at " << e;
}

struct Variant {
  std::int64_t left, right;
  HaloBoundary boundary;
  double fill;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {{1, 1, HaloBoundary::zero, 0.0},
                                         {2, 1, HaloBoundary::periodic, 0.0},
                                         {0, 2, HaloBoundary::zero, -3.0},
                                         {2, 0, HaloBoundary::periodic, 0.0}};
  return v;
}

TEST(HaloExchange, EqualsTheReferenceOnOneProcessor) {
  // x [o=2, hb=4, c=3, h=2, i=2]: blocks dim before the block dim, another dim between.
  const Shape s{{"o", 2}, {"hb", 4}, {"c", 3}, {"h", 2}, {"i", 2}};
  for (const auto& v : variants()) {
    Graph g;
    Tensor x = placeholder(g, "x", s);
    Tensor y = halo_exchange(x, "hb", "h", v.left, v.right, v.boundary, v.fill);
    Tensor dy = placeholder(g, "dy", y.shape());
    Tensor back = halo_reduce(dy, "hb", "h", v.left, v.right, v.boundary);
    const HaloRef ref{2, 4, 3, 2, 2, v.left, v.right, v.boundary == HaloBoundary::periodic, v.fill};
    const auto xv = pattern(s.num_elements(), 1.0), dyv = pattern(y.shape().num_elements(), 2.0);
    auto p = lower(g, single_processor_mesh(), LayoutRules());
    auto out =
        p->run({{x.id(), floats_of(s, xv)}, {dy.id(), floats_of(y.shape(), dyv)}}, {y, back});
    const std::string w = cat("halo (", v.left, ", ", v.right, ")");
    expect_near_all(out[0], ref.forward(xv), w + " forward");
    expect_near_all(out[1], ref.adjoint(dyv), w + " adjoint");
  }
}

TEST(HaloExchange, BlocksDimAfterTheBlockDim) {
  // x [h=3, hb=4]: the block dim first.
  const Shape s{{"h", 3}, {"hb", 4}};
  Graph g;
  Tensor x = placeholder(g, "x", s);
  Tensor y = halo_exchange(x, "hb", "h", 1, 2, HaloBoundary::periodic);
  const auto xv = pattern(s.num_elements(), 1.0);
  auto out =
      lower(g, single_processor_mesh(), LayoutRules())->run({{x.id(), floats_of(s, xv)}}, {y});
  // Reference: transpose to [hb, h], widen, transpose back.
  for (std::int64_t b = 0; b < 4; ++b)
    for (std::int64_t j = 0; j < 6; ++j) {
      const std::int64_t g = ((b * 3 + j - 1) % 12 + 12) % 12;
      EXPECT_NEAR(out[0].at(j * 4 + b), xv[static_cast<size_t>((g % 3) * 4 + g / 3)], 1e-6);
    }
}

TEST(HaloExchange, GradientIsTheAdjoint) {
  const Shape s{{"b", 2}, {"hb", 8}, {"h", 3}};
  for (const auto& v : variants()) {
    Graph g;
    Tensor x = variable(g, "x", s, Initializer::normal(1.0f));
    Tensor y = halo_exchange(x, "hb", "h", v.left, v.right, v.boundary, v.fill);
    Tensor w = placeholder(g, "w", y.shape());
    Tensor dx = gradients(reduce_sum(y * w), {x})[0];
    const auto wv = pattern(y.shape().num_elements(), 1.5);
    const HaloRef ref{2, 8, 1, 3, 1, v.left, v.right, v.boundary == HaloBoundary::periodic, v.fill};
    auto out = lower(g, single_processor_mesh(), LayoutRules())
                   ->run({{w.id(), floats_of(y.shape(), wv)}}, {dx});
    expect_near_all(out[0], ref.adjoint(wv), cat("gradient, halo (", v.left, ", ", v.right, ")"));
  }
}

GraphCase halo_case(const Variant& v) {
  return {
      cat("halo_", v.left, "_", v.right, v.boundary == HaloBoundary::periodic ? "_periodic" : ""),
      [v](Graph& g) {
        const Shape s{{"b", 4}, {"hb", 8}, {"h", 2}, {"wb", 8}, {"w", 3}, {"c", 4}};
        Tensor x = var(g, "x", s);
        Tensor y = halo_exchange(x, "hb", "h", v.left, v.right, v.boundary, v.fill);
        Tensor z = halo_exchange(y, "wb", "w", v.right, v.left, v.boundary);
        Tensor r = halo_reduce(z * z, "hb", "h", v.left, v.right, v.boundary);
        return BuiltGraph{{y, z, r}, weighted_loss(g, {z, r}), {}};
      },
      {"hb:@0", "hb:@0;wb:@1", "wb:@0;b:@1", "hb:@0;c:@1", "hb:@0;wb:@1;c:@2"}};
}

TEST(HaloExchange, SplitBlocksEqualOneProcessor) {
  for (const auto& v : variants()) {
    const GraphCase c = halo_case(v);
    const Result want = run_case(c, single_processor_mesh(), LayoutRules());
    for (const auto& mshape : meshes_of_size(world_size())) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const auto& layout : c.layouts) {
        const LayoutRules rules = instantiate(layout, mshape);
        expect_close(run_case(c, mesh, rules), want,
                     c.name + " on " + mshape.to_string() + " under " + rules.to_string());
      }
    }
  }
}

// Outputs and gradients (not the loss: a sum over split dims may add in another order).
TEST(HaloExchange, SplitResultsAreBitwiseThoseOfOneProcessor) {
  const GraphCase c = halo_case(variants()[1]);
  const Result want = run_case(c, single_processor_mesh(), LayoutRules());
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  const Result got = run_case(c, Mesh(mshape, MPI_COMM_WORLD), instantiate("hb:@0", mshape));
  for (size_t t = 0; t < got.values.size(); ++t)
    for (std::int64_t e = 0; want.labels[t] != "loss" && e < got.values[t].size(); ++e)
      ASSERT_EQ(got.values[t].at(e), want.values[t].at(e)) << want.labels[t] << " at " << e;
}

// program.overlap_halo: each split exchange is a start step and a finish step moved apart; the same
// kernels run on the same values, so every value (the loss too: the same layout sums in the same
// order) is bitwise that of the blocking exchange: a periodic halo wider than half a block and a
// one-sided one with a fill, on three layouts (blocks split, both blocks dims, with the batch).
TEST(HaloExchange, OverlappedIsBitwiseBlocking) {
  auto with = [](bool overlap, const GraphCase& c, const Mesh& mesh, const LayoutRules& r) {
    return run_case(c, mesh, r, overlap_halo(overlap));
  };
  for (const size_t k : {1, 2}) {
    const GraphCase c = halo_case(variants()[k]);
    for (const auto& mshape : meshes_of_size(world_size())) {
      const Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const auto& layout :
           std::vector<std::string>(c.layouts.begin(), c.layouts.begin() + 3)) {
        const LayoutRules rules = instantiate(layout, mshape);
        const Result on = with(true, c, mesh, rules), off = with(false, c, mesh, rules);
        for (size_t t = 0; t < on.values.size(); ++t)
          for (std::int64_t e = 0; e < on.values[t].size(); ++e)
            ASSERT_EQ(on.values[t].at(e), off.values[t].at(e))
                << c.name << " on " << mshape.to_string() << " under " << rules.to_string() << ": "
                << on.labels[t] << " at " << e;
      }
    }
  }
}

// The exchange itself: along each mesh dim, every rank receives its neighbours' coordinates
// (MPI_Cart_shift's ranks), the ends of a non-periodic dim keep what the receive buffer held.
TEST(HaloExchange, NeighboursOnTheCartesianMesh) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (int axis = 0; axis < mesh.ndims(); ++axis) {
      const int n = static_cast<int>(mshape[axis].size), c = mesh.coordinate(axis);
      for (bool periodic : {false, true}) {
        const Neighbours nb = neighbours(mesh, axis, periodic);
        const int want_left = c > 0 ? c - 1 : (periodic ? n - 1 : -1);
        const int want_right = c + 1 < n ? c + 1 : (periodic ? 0 : -1);
        EXPECT_EQ(nb.left, want_left) << mshape.to_string() << " axis " << axis;
        EXPECT_EQ(nb.right, want_right) << mshape.to_string() << " axis " << axis;
        if (n == 1)
          continue;
        Kokkos::View<double*> to_left("to_left", 2), to_right("to_right", 3),
            from_left("from_left", 3), from_right("from_right", 2);
        Kokkos::deep_copy(to_left, 100.0 + c);
        Kokkos::deep_copy(to_right, 200.0 + c);
        Kokkos::deep_copy(from_left, -1.0);
        Kokkos::deep_copy(from_right, -1.0);
        HaloExchange<double> h(mesh, axis, periodic, to_left, to_right, from_left, from_right);
        h.finish();
        auto l = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from_left);
        auto r = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from_right);
        EXPECT_EQ(l(2), want_left >= 0 ? 200.0 + want_left : -1.0);
        EXPECT_EQ(r(1), want_right >= 0 ? 100.0 + want_right : -1.0);
      }
    }
  }
}

// A lowered exchange's site goes through shared memory from its (kSharedMemoryAfter + 1)-th run
// on, its strips packed straight into the sender's slot and read from there in place: outputs
// and gradients stay bitwise those of one processor, blocking and overlapped, for a wide periodic
// halo and a one-sided one with a fill (a missing neighbour keeps the fill), on every mesh.
TEST(HaloExchange, LoweredExchangesThroughSharedMemoryAreBitwiseOneProcessor) {
  const int runs = HaloSite::kSharedMemoryAfter + 3;
  const std::uint64_t before = detail::NodeHaloChannel::posted_total();
  for (const size_t k : {1, 2}) {
    const GraphCase c = halo_case(variants()[k]);
    // The loss's random weights are drawn afresh each run: the same number of runs.
    const Result want = run_case(c, single_processor_mesh(), LayoutRules(), runs);
    for (const bool overlap : {false, true}) {
      for (const auto& mshape : meshes_of_size(world_size())) {
        const Mesh mesh(mshape, MPI_COMM_WORLD);
        for (const auto& layout :
             std::vector<std::string>(c.layouts.begin(), c.layouts.begin() + 3)) {
          const LayoutRules rules = instantiate(layout, mshape);
          const Result got = run_case(c, mesh, rules, overlap_halo(overlap), runs);
          for (size_t t = 0; t < got.values.size(); ++t)
            for (std::int64_t e = 0; want.labels[t] != "loss" && e < got.values[t].size(); ++e)
              ASSERT_EQ(got.values[t].at(e), want.values[t].at(e))
                  << c.name << " on " << mshape.to_string() << " under " << rules.to_string()
                  << ", overlap " << overlap << ": " << want.labels[t] << " at " << e;
        }
      }
    }
  }
  if (world_size() > 1 && kSharedMemoryHalo) {
    EXPECT_GT(detail::NodeHaloChannel::posted_total() - before, 0u) << "no shared-memory exchange";
  }
}

// The same with the blocks dim after the block dim ([h, hb, c]: each strip is `c`-long runs
// strided by the blocks), through MPI and, from each site's 9th run, the shared slots.
TEST(HaloExchange, SplitBlocksDimAfterTheBlockDimIsBitwiseOneProcessor) {
  const GraphCase c{"halo_block_first",
                    [](Graph& g) {
                      Tensor x = var(g, "x", Shape{{"h", 3}, {"hb", 8}, {"c", 2}});
                      Tensor y = halo_exchange(x, "hb", "h", 1, 2, HaloBoundary::periodic);
                      Tensor r = halo_reduce(y * y, "hb", "h", 1, 2, HaloBoundary::zero);
                      return BuiltGraph{{y, r}, weighted_loss(g, {y, r}), {}};
                    },
                    {"hb:@0"}};
  const int runs = HaloSite::kSharedMemoryAfter + 3;
  const Result want = run_case(c, single_processor_mesh(), LayoutRules(), runs);
  for (const auto& mshape : meshes_of_size(world_size())) {
    const Mesh mesh(mshape, MPI_COMM_WORLD);
    const LayoutRules rules = instantiate(c.layouts[0], mshape);
    const Result got = run_case(c, mesh, rules, runs);
    for (size_t t = 0; t < got.values.size(); ++t)
      for (std::int64_t e = 0; want.labels[t] != "loss" && e < got.values[t].size(); ++e)
        ASSERT_EQ(got.values[t].at(e), want.values[t].at(e))
            << mshape.to_string() << " under " << rules.to_string() << ": " << want.labels[t]
            << " at " << e;
  }
}

// Where the axis's ranks share a node and the exchange has a HaloSite, it goes through shared
// memory (node_halo.hpp) once it exchanged HaloSite::kSharedMemoryAfter times through MPI: the same
// values as MPI's, round after round through the channel's two slots, on every mesh dim, periodic
// or not; a strip is there as soon as its sender posted it (no rank need be inside MPI: after a
// barrier every test() is true); with program.node_allreduce off, through MPI.
TEST(HaloExchange, ThroughSharedMemoryAsThroughMpi) {
  for (bool shared_memory : {true, false}) {
    SCOPED_TRACE(shared_memory ? "shared memory" : "MPI");
    const NodeAllreduceScope o(shared_memory);
    for (const auto& mshape : meshes_of_size(world_size())) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (int axis = 0; axis < mesh.ndims(); ++axis) {
        const int n = static_cast<int>(mshape[axis].size), c = mesh.coordinate(axis);
        if (n == 1)
          continue;
        for (bool periodic : {false, true}) {
          const Neighbours nb = neighbours(mesh, axis, periodic);
          HaloSite site;
          const std::uint64_t before = detail::NodeHaloChannel::posted_total();
          const int first = HaloSite::kSharedMemoryAfter, rounds = first + 5;
          for (int round = 0; round < rounds; ++round) {
            Kokkos::View<float*> to_left("to_left", 5000), to_right("to_right", 3),
                from_left("from_left", 3), from_right("from_right", 5000);
            Kokkos::deep_copy(to_left, 1000.0f * round + 100.0f + c);
            Kokkos::deep_copy(to_right, 1000.0f * round + 200.0f + c);
            Kokkos::deep_copy(from_left, -1.0f);
            Kokkos::deep_copy(from_right, -1.0f);
            HaloExchange<float> h(mesh, axis, periodic, to_left, to_right, from_left, from_right,
                                  &site);
            mesh.axes_comm({axis}).barrier();
            if (shared_memory && kSharedMemoryHalo && round >= first) {
              EXPECT_TRUE(h.test()) << "posted before the barrier, yet not arrived";
            }
            h.finish();
            auto l = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from_left);
            auto r = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from_right);
            for (int e : {0, 2})
              EXPECT_EQ(l(e), nb.left >= 0 ? 1000.0f * round + 200.0f + nb.left : -1.0f)
                  << mshape.to_string() << " axis " << axis << " round " << round;
            for (int e : {0, 4999})
              EXPECT_EQ(r(e), nb.right >= 0 ? 1000.0f * round + 100.0f + nb.right : -1.0f)
                  << mshape.to_string() << " axis " << axis << " round " << round;
          }
          EXPECT_EQ(detail::NodeHaloChannel::posted_total() - before,
                    shared_memory && kSharedMemoryHalo ? 5u : 0u);
        }
      }
    }
  }
}

// Strips above MPI's eager limit (4 MiB here) move while the ranks test them between steps
// (HalosInFlight::progress, what Program::run calls): the exchange completes before any finish
// waits, and its finish then has the neighbours' values.
TEST(HaloExchange, ProgressCompletesStripsAboveTheEagerLimit) {
  if (world_size() == 1)
    GTEST_SKIP() << "no neighbour";
  Mesh mesh(MeshShape::parse(cat("x:", world_size())), MPI_COMM_WORLD);
  const int c = mesh.coordinate(0), n = world_size();
  const std::int64_t size = std::int64_t(1) << 20;
  Kokkos::View<float*> to_left("to_left", size), to_right("to_right", size),
      from_left("from_left", size), from_right("from_right", size);
  Kokkos::deep_copy(to_left, 100.0f + c);
  Kokkos::deep_copy(to_right, 200.0f + c);
  HaloExchange<float> h(mesh, 0, true, to_left, to_right, from_left, from_right);
  HalosInFlight registry;
  registry.add(&h);
  bool done = false;
  for (int k = 0; k < 1000000 && !done; ++k) {
    registry.progress();
    done = h.test();
  }
  EXPECT_TRUE(done);
  registry.remove(&h);
  EXPECT_FALSE(registry.in_flight());
  h.finish();
  auto l = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from_left);
  auto r = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from_right);
  EXPECT_EQ(l(size - 1), 200.0f + (c + n - 1) % n);
  EXPECT_EQ(r(0), 100.0f + (c + 1) % n);
}

TEST(HaloExchange, ClearErrors) {
  Graph g;
  Tensor x = var(g, "image", {{"b", 2}, {"hb", 4}, {"h", 2}});
  std::string m = error_of([&] { halo_exchange(x, "hb", "h", 3, 1); });
  for (const char* part : {"mtk::halo_exchange", "'image'", "'h'", "halo (left 3, right 1)",
                           "2 positions per block", "4 blocks"})
    EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  m = error_of([&] { halo_exchange(x, "nope", "h", 1, 1); });
  EXPECT_NE(m.find("'nope'"), std::string::npos) << m;
  m = error_of([&] { halo_exchange(x, "h", "h", 1, 1); });
  EXPECT_NE(m.find("both 'h'"), std::string::npos) << m;
  m = error_of([&] { halo_reduce(x, "hb", "h", 1, 1); });
  EXPECT_NE(m.find("mtk::halo_reduce"), std::string::npos) << m;
  // A blocks dim the mesh dim does not divide: every rank fails alike at lowering.
  const int n = world_size();
  if (n > 1) {
    Graph g2;
    Tensor x2 = var(g2, "image", {{"hb", n + 1}, {"h", 4}});
    halo_exchange(x2, "hb", "h", 1, 1);
    Mesh mesh(MeshShape::parse("m:" + std::to_string(n)), MPI_COMM_WORLD);
    m = error_of([&] { lower(g2, mesh, LayoutRules::parse("hb:m")); });
    EXPECT_NE(m.find("'hb'"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(n + 1)), std::string::npos) << m;
  }
  int one = 1, sum = 0;  // still in step
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, n);
}

}  // namespace
}  // namespace mtk::test
