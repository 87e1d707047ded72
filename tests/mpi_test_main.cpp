// The shared main of MTK's tests: MPI, then Kokkos, then GoogleTest; finalised in reverse.
// Rank 0 prints the usual report; other ranks print only their failures, prefixed with the rank.
// The exit status is the same on every rank: non-zero when any rank failed.
// --node-allreduce=0|1 sets program.node_allreduce (set_node_allreduce) for every test, as the
// applications set it from their run config (tests/multinode runs test_models both ways).

#include <mtk/base/error.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/parallel/node_reducer.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <optional>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int status = 0;
  {
    std::optional<mtk::Environment> env;
    try {
      env.emplace(argc, argv);
    } catch (const mtk::Error& e) {  // a bad MTK_* run-time option: nothing has started yet
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
    ::testing::InitGoogleTest(&argc, argv);
    for (int i = 1; i < argc; ++i)
      if (std::strncmp(argv[i], "--node-allreduce=", 17) == 0)
        mtk::set_node_allreduce(std::strcmp(argv[i] + 17, "0") != 0);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (rank != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(rank));
    }
    int local = RUN_ALL_TESTS();
    MPI_Allreduce(&local, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  return status;
}
