// Every collective against a reference computed from the global tensor, on every mesh of the
// current rank count (1-D, 2-D, 3-D), every mesh axis or axis subset, tensors of rank 1 to 4.

#include <mtk/base/error.hpp>
#include <mtk/parallel/collectives.hpp>

#include <gtest/gtest.h>

#include "mtk_test_util.hpp"
#include <numeric>

using namespace mtk;
using namespace mtk::test;

namespace {

// Global shapes of rank 1..4 whose dims divide by every mesh size used (<= 8).
std::vector<Shape> test_shapes() {
  return {Shape{{"i", 16}}, Shape{{"i", 8}, {"j", 16}}, Shape{{"i", 8}, {"j", 3}, {"k", 16}},
          Shape{{"i", 8}, {"j", 16}, {"k", 2}, {"l", 8}}};
}

double value_of(std::int64_t g) {
  return 0.5 * static_cast<double>(g) + 1.0;
}

// Maps mesh axes other than `skip` onto the tensor dims other than `skip_dim`, where divisible.
std::vector<int> other_axes_layout(const Shape& s, const MeshShape& mesh, int skip_axis,
                                   int skip_dim, int fixed_axis_for_dim = -1) {
  std::vector<int> axes(static_cast<size_t>(s.rank()), -1);
  if (skip_dim >= 0)
    axes[static_cast<size_t>(skip_dim)] = fixed_axis_for_dim;
  int next = 0;
  for (int d = 0; d < s.rank(); ++d) {
    if (d == skip_dim)
      continue;
    while (next < mesh.ndims() && (next == skip_axis || next == fixed_axis_for_dim))
      ++next;
    if (next < mesh.ndims() && s[d].size % mesh[next].size == 0)
      axes[static_cast<size_t>(d)] = next++;
  }
  return axes;
}

void expect_equal(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << what << " at " << i;
}

template <class T>
void check_allreduce(const Mesh& mesh) {
  for (const auto& axes : axis_subsets(mesh.ndims()))
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
      const std::int64_t n = 37;
      auto contribution = [](int p, std::int64_t k) {
        return static_cast<double>((p * 7 + k * 3) % 11);
      };
      std::vector<double> mine(static_cast<size_t>(n)), want(static_cast<size_t>(n));
      const auto group = mesh.group_processors(axes);
      for (std::int64_t k = 0; k < n; ++k) {
        mine[static_cast<size_t>(k)] = contribution(mesh.rank(), k);
        double r = op == ReduceOp::sum ? 0 : contribution(group[0], k);
        for (int p : group) {
          double c = contribution(p, k);
          r = op == ReduceOp::sum ? r + c : op == ReduceOp::max ? std::max(r, c) : std::min(r, c);
        }
        want[static_cast<size_t>(k)] = r;
      }
      auto v = to_view<T>(mine);
      allreduce<T>(mesh, axes, v, op);
      expect_equal(to_vector(v), want, "allreduce on " + mesh.shape().to_string());
    }
}

}  // namespace

TEST(Collectives, AllreduceSumMaxMinOverEveryAxisSubset) {
  for (const auto& shape : meshes_of_size(world_size())) {
    Mesh mesh(shape, MPI_COMM_WORLD);
    check_allreduce<float>(mesh);
    check_allreduce<double>(mesh);
    check_allreduce<std::int32_t>(mesh);
    check_allreduce<std::int64_t>(mesh);
  }
}

TEST(Collectives, AllconcatEqualsTheGlobalSlice) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& s : test_shapes())
      for (int axis = 0; axis < mesh.ndims(); ++axis)
        for (int dim = 0; dim < s.rank(); ++dim) {
          if (s[dim].size % mshape[axis].size)
            continue;
          auto before_axes = other_axes_layout(s, mshape, axis, dim, axis);
          TensorLayout before(s, before_axes, mshape);
          auto after_axes = before_axes;
          after_axes[static_cast<size_t>(dim)] = -1;
          TensorLayout after(s, after_axes, mshape);
          auto local = to_view<float>(slice_of(before, mesh.coordinates(), value_of));
          auto got = allconcat<float>(mesh, axis, before.slice_shape(), dim, local);
          expect_equal(to_vector(got), slice_of(after, mesh.coordinates(), value_of),
                       "allconcat " + before.to_string() + " -> " + after.to_string());
        }
  }
}

TEST(Collectives, AlltoallMovesTheSplitToAnotherDim) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& s : test_shapes())
      for (int axis = 0; axis < mesh.ndims(); ++axis)
        for (int from = 0; from < s.rank(); ++from)
          for (int to = 0; to < s.rank(); ++to) {
            const auto P = mshape[axis].size;
            if (from == to || s[from].size % P || s[to].size % P)
              continue;
            auto before_axes = other_axes_layout(s, mshape, axis, from, axis);
            if (before_axes[static_cast<size_t>(to)] >= 0)
              before_axes[static_cast<size_t>(to)] = -1;
            TensorLayout before(s, before_axes, mshape);
            auto after_axes = before_axes;
            after_axes[static_cast<size_t>(from)] = -1;
            after_axes[static_cast<size_t>(to)] = axis;
            TensorLayout after(s, after_axes, mshape);
            auto local = to_view<double>(slice_of(before, mesh.coordinates(), value_of));
            // split_dim `to` becomes split; concat_dim `from` becomes whole.
            auto got = alltoall<double>(mesh, axis, before.slice_shape(), to, from, local);
            expect_equal(to_vector(got), slice_of(after, mesh.coordinates(), value_of),
                         "alltoall " + before.to_string() + " -> " + after.to_string());
          }
  }
}

TEST(Collectives, ReduceScatterSumsAndSplits) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& s : test_shapes())
      for (int axis = 0; axis < mesh.ndims(); ++axis)
        for (int dim = 0; dim < s.rank(); ++dim) {
          const auto P = mshape[axis].size;
          if (s[dim].size % P)
            continue;
          // Each processor holds the whole tensor scaled by (its pnum + 1).
          auto whole_axes = other_axes_layout(s, mshape, axis, dim, -1);
          TensorLayout whole(s, whole_axes, mshape);
          auto scaled = [&](int p) {
            return [p](std::int64_t g) { return (p + 1) * value_of(g); };
          };
          auto local = to_view<double>(slice_of(whole, mesh.coordinates(), scaled(mesh.rank())));
          auto got = reduce_scatter<double>(mesh, axis, whole.slice_shape(), dim, local);
          double factor = 0;
          for (int p : mesh.group_processors({axis}))
            factor += p + 1;
          auto split_axes = whole_axes;
          split_axes[static_cast<size_t>(dim)] = axis;
          TensorLayout split(s, split_axes, mshape);
          auto want = slice_of(split, mesh.coordinates(),
                               [&](std::int64_t g) { return factor * value_of(g); });
          expect_equal(to_vector(got), want, "reduce_scatter " + split.to_string());
        }
  }
}

TEST(Collectives, AllgatherInPlaceBlockingAndStarted) {
  // P blocks of k floats, this member's own at its coordinate: afterwards every block, whether
  // blocking or started (with a blocking allreduce posted while it is in flight), bitwise.
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (int axis = 0; axis < mesh.ndims(); ++axis)
      for (const std::int64_t k : {1, 5, 1000}) {
        const std::int64_t P = mshape[axis].size, me = mesh.coordinates()[axis];
        auto filled = [&]() {
          Kokkos::View<float*> v("v", P * k);
          auto h = Kokkos::create_mirror_view(v);
          for (std::int64_t i = 0; i < P * k; ++i)
            h(i) = i / k == me ? 0.25f * static_cast<float>(i) + 1 : -1.f;
          Kokkos::deep_copy(v, h);
          return v;
        };
        auto blocking = filled(), started = filled();
        allgather_in_place<float>(mesh, axis, blocking);
        auto f = start_allgather_in_place<float>(mesh, axis, started);
        Kokkos::View<float*> other("other", 3);
        allreduce<float>(mesh, {axis}, other);
        f.progress();
        f.finish();
        EXPECT_FALSE(f.active());
        std::vector<double> want;
        for (std::int64_t i = 0; i < P * k; ++i)
          want.push_back(0.25 * static_cast<double>(i) + 1);
        const std::string what = cat(mshape.to_string(), " axis ", axis, " k ", k);
        expect_equal(to_vector(Kokkos::View<float*>(blocking)), want, "blocking " + what);
        expect_equal(to_vector(Kokkos::View<float*>(started)), want, "started " + what);
      }
  }
}

TEST(Collectives, BroadcastFromEveryRootOverEveryAxisSubset) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& axes : axis_subsets(mesh.ndims())) {
      const auto group = mesh.group_processors(axes);
      for (int root = 0; root < static_cast<int>(group.size()); ++root) {
        std::vector<double> mine(13, mesh.rank() * 100.0);
        std::iota(mine.begin(), mine.end(), mesh.rank() * 100.0);
        auto v = to_view<std::int32_t>(mine);
        broadcast<std::int32_t>(mesh, axes, v, root);
        std::vector<double> want(13);
        std::iota(want.begin(), want.end(), group[static_cast<size_t>(root)] * 100.0);
        expect_equal(to_vector(v), want, "broadcast on " + mshape.to_string());
      }
    }
  }
}

TEST(Collectives, ShiftAndPermuteAlongEachAxis) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (int axis = 0; axis < mesh.ndims(); ++axis) {
      const int n = static_cast<int>(mshape[axis].size);
      auto pnum_at = [&](int c) {
        auto coords = mesh.coordinates();
        coords[static_cast<size_t>(axis)] = c;
        return mshape.pnum_of(coords);
      };
      auto data = to_view<float>(std::vector<double>(5, mesh.rank() + 1.0));
      for (int offset : {1, -1, 2}) {
        for (bool wrap : {true, false}) {
          auto got = to_vector(shift<float>(mesh, axis, offset, wrap, data));
          int src = mesh.coordinate(axis) - offset;
          double want = 0;
          if (wrap)
            want = pnum_at(((src % n) + n) % n) + 1.0;
          else if (src >= 0 && src < n)
            want = pnum_at(src) + 1.0;
          expect_equal(got, std::vector<double>(5, want), "shift");
        }
      }
      std::vector<int> reverse(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c)
        reverse[static_cast<size_t>(c)] = n - 1 - c;
      auto got = to_vector(permute<float>(mesh, axis, reverse, data));
      expect_equal(got, std::vector<double>(5, pnum_at(n - 1 - mesh.coordinate(axis)) + 1.0),
                   "permute");
    }
  }
}

TEST(Collectives, BadInputIsRejectedOnEveryRank) {
  Mesh mesh(meshes_of_size(world_size()).front(), MPI_COMM_WORLD);
  Shape s{{"i", 3}};
  auto v = to_view<float>(std::vector<double>(3, 1.0));
  if (mesh.shape()[0].size > 1) {
    EXPECT_THROW(alltoall<float>(mesh, 0, Shape{{"i", 3}, {"j", 1}}, 0, 1,
                                 to_view<float>(std::vector<double>(3, 1.0))),
                 Error);
    EXPECT_THROW(reduce_scatter<float>(mesh, 0, s, 0, v), Error);
  }
  EXPECT_THROW(allconcat<float>(mesh, 0, Shape{{"i", 4}}, 0, v), Error);
  EXPECT_THROW(allconcat<float>(mesh, 5, s, 0, v), Error);
  EXPECT_THROW(permute<float>(
                   mesh, 0, std::vector<int>(static_cast<size_t>(mesh.shape()[0].size) + 1, 0), v),
               Error);
  // Still in step afterwards.
  allreduce<float>(mesh, {0}, v);
  EXPECT_EQ(to_vector(v)[0], static_cast<double>(mesh.shape()[0].size));
}
