// The processor mesh on 1..8 ranks: coordinates, sub-communicators, groups, bad input, and
// collective agreement on failure.

#include <mtk/base/error.hpp>
#include <mtk/parallel/mesh.hpp>

#include <gtest/gtest.h>

#include "mtk_test_util.hpp"
#include <algorithm>

using namespace mtk;
using namespace mtk::test;

TEST(Mesh, CoordinatesMatchRowMajorRankOrder) {
  for (const auto& shape : meshes_of_size(world_size())) {
    Mesh mesh(shape, MPI_COMM_WORLD);
    EXPECT_EQ(mesh.rank(), world_rank()) << shape.to_string();
    EXPECT_EQ(mesh.coordinates(), shape.coordinates_of(world_rank())) << shape.to_string();
    // The mesh communicates on its own communicator, not the user's.
    int cmp = MPI_IDENT;
    MPI_Comm_compare(mpi_comm(mesh.comm()), MPI_COMM_WORLD, &cmp);
    EXPECT_NE(cmp, MPI_IDENT);
  }
}

TEST(Mesh, SubCommunicatorsHoldTheRightProcessors) {
  for (const auto& shape : meshes_of_size(world_size())) {
    Mesh mesh(shape, MPI_COMM_WORLD);
    for (const auto& axes : axis_subsets(shape.ndims())) {
      MPI_Comm comm = mpi_comm(mesh.axes_comm(axes));
      EXPECT_EQ(comm, mpi_comm(mesh.axes_comm(axes))) << "sub-communicators are cached";
      int size = 0, rank = 0;
      MPI_Comm_size(comm, &size);
      MPI_Comm_rank(comm, &rank);
      EXPECT_EQ(size, mesh.group_size(axes));
      EXPECT_EQ(rank, mesh.rank_in_group(axes));
      // Gather the members' processor numbers and compare with group_processors().
      std::vector<int> members(static_cast<size_t>(size));
      int me = mesh.rank();
      MPI_Allgather(&me, 1, MPI_INT, members.data(), 1, MPI_INT, comm);
      EXPECT_EQ(members, mesh.group_processors(axes)) << shape.to_string();
      for (int p : members) {
        auto c = shape.coordinates_of(p);
        for (int a = 0; a < shape.ndims(); ++a)
          if (std::find(axes.begin(), axes.end(), a) == axes.end()) {
            EXPECT_EQ(c[static_cast<size_t>(a)], mesh.coordinate(a));
          }
      }
    }
  }
}

TEST(Mesh, WrongSizeFailsOnEveryRank) {
  auto shape = MeshShape::parse("batch:" + std::to_string(world_size() + 1));
  try {
    Mesh mesh(shape, MPI_COMM_WORLD);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("mtk::Mesh"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(world_size()) + " ranks"), std::string::npos) << m;
  }
}

TEST(Mesh, CopiesShareTheCommunicator) {
  Mesh a(meshes_of_size(world_size()).front(), MPI_COMM_WORLD);
  Mesh b = a;
  EXPECT_EQ(a.comm(), b.comm());
  EXPECT_EQ(a.axes_comm({0}), b.axes_comm({0}));
}

TEST(ErrorAgreement, OneRankFailsAllRanksThrowTheSameMessage) {
  const int last = world_size() - 1;
  try {
    agree_on_failure(MPI_COMM_WORLD, [&] {
      if (world_rank() == last)
        fail("mtk::test", "tensor 'w' [d_ff=6] broke");
    });
    FAIL() << "no error on rank " << world_rank();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("tensor 'w' [d_ff=6] broke"), std::string::npos) << m;
    if (world_rank() != last) {
      EXPECT_NE(m.find("rank " + std::to_string(last)), std::string::npos);
    }
  }
  // Afterwards the ranks are still in step: a plain collective completes.
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, world_size());
  EXPECT_EQ(agree_on_failure(MPI_COMM_WORLD, [] { return 7; }), 7);
}

TEST(ErrorAgreement, LowestFailingRankWins) {
  try {
    agree_on_failure(MPI_COMM_WORLD,
                     [] { fail("mtk::test", "rank " + std::to_string(world_rank())); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtk::test: rank 0"), std::string::npos) << e.what();
  }
}
