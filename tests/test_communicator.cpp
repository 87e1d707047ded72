// mtk::Communicator on 1..8 ranks: every operation against what one rank computes alone from
// the values every rank contributes (value_of(r)), with busy and yielding waits; error agreement,
// split, lifetime; the wait policy's choice.

#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/mpi_interop.hpp>
#include <mtk/parallel/node_reducer.hpp>

#include <gtest/gtest.h>

#include "mtk_test_util.hpp"
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

// What rank r contributes; distinct per rank, not in rank order, negative for some.
double value_of(int r) {
  return (r * 7 % 5) - 1.5 + r * 0.25;
}
std::int64_t int_of(int r) {
  return (std::int64_t(r) * 37 % 11 - 4) * (std::int64_t(1) << 33);
}
std::string string_of(int r) {
  return r % 3 == 1 ? std::string() : "rank " + std::to_string(r) + std::string(r, 'x');
}
std::vector<double> vector_of(int r) {
  return {value_of(r), -value_of(r), double(r)};
}

// Runs `check` with the MPI library's blocking collectives and with the yielding waits
// (mtk/parallel/collective_wait.hpp), whatever this run's default; restores the policy.
template <class F>
void for_each_wait_mode(F check) {
  const CollectiveWait before = collective_wait();
  for (CollectiveWait w : {CollectiveWait::spin, CollectiveWait::yield}) {
    SCOPED_TRACE(to_string(w));
    set_collective_wait(w);
    check();
    Communicator::world().barrier();
  }
  set_collective_wait(before);
}

// Lives until after MPI_Finalize: its destructor must not call MPI then.
std::optional<Communicator> g_outlives_mpi;

}  // namespace

TEST(Communicator, RankAndSizeAreThoseOfTheWorld) {
  Communicator world = Communicator::world();
  EXPECT_EQ(world.rank(), world_rank());
  EXPECT_EQ(world.size(), world_size());
  world.barrier();
  // Its own communicator, not MPI_COMM_WORLD itself.
  int cmp = MPI_IDENT;
  MPI_Comm_compare(mpi_comm(world), MPI_COMM_WORLD, &cmp);
  EXPECT_EQ(cmp, MPI_CONGRUENT);
  EXPECT_EQ(borrow(MPI_COMM_WORLD).size(), world_size());
}

TEST(Communicator, CopiesShareOneCommunicator) {
  Communicator a = Communicator::world();
  Communicator b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(mpi_comm(a), mpi_comm(b));
  Communicator c = Communicator::world();
  EXPECT_NE(a, c);
  g_outlives_mpi = c;  // freed at exit, after MPI_Finalize: must not touch MPI
}

static void check_broadcast_from_every_root() {
  const Communicator world = Communicator::world();
  for (int root = 0; root < world.size(); ++root) {
    const int me = world.rank();
    EXPECT_EQ(world.broadcast(value_of(me), root), value_of(root));
    EXPECT_EQ(world.broadcast(static_cast<float>(value_of(me)), root),
              static_cast<float>(value_of(root)));
    EXPECT_EQ(world.broadcast(int_of(me), root), int_of(root));
    EXPECT_EQ(world.broadcast(static_cast<int>(me * 3), root), root * 3);
    EXPECT_EQ(world.broadcast(static_cast<std::uint8_t>(200 + me), root),
              static_cast<std::uint8_t>(200 + root));
    EXPECT_EQ(world.broadcast(me == 1, root), root == 1);
    EXPECT_EQ(world.broadcast(vector_of(me), root), vector_of(root));
    EXPECT_EQ(world.broadcast(std::vector<int>(static_cast<size_t>(me), me), root),
              std::vector<int>(static_cast<size_t>(root), root));
    EXPECT_EQ(world.broadcast(string_of(me), root), string_of(root));
    std::vector<std::string> strings = {string_of(me), "", string_of(me + 1)};
    std::vector<std::string> expected = {string_of(root), "", string_of(root + 1)};
    EXPECT_EQ(world.broadcast(strings, root), expected);
  }
}

TEST(Communicator, BroadcastFromEveryRoot) {
  for_each_wait_mode(check_broadcast_from_every_root);
}

static void check_allreduce_scalars_and_vectors() {
  const Communicator world = Communicator::world();
  const int me = world.rank(), n = world.size();
  double sum = 0, max = value_of(0), min = value_of(0);
  std::int64_t isum = 0, imax = int_of(0), imin = int_of(0);
  std::vector<double> vsum(3, 0.0), vmax = vector_of(0), vmin = vector_of(0);
  for (int r = 0; r < n; ++r) {
    sum += value_of(r);
    max = std::max(max, value_of(r));
    min = std::min(min, value_of(r));
    isum += int_of(r);
    imax = std::max(imax, int_of(r));
    imin = std::min(imin, int_of(r));
    for (size_t i = 0; i < 3; ++i) {
      vsum[i] += vector_of(r)[i];
      vmax[i] = std::max(vmax[i], vector_of(r)[i]);
      vmin[i] = std::min(vmin[i], vector_of(r)[i]);
    }
  }
  // Values are multiples of 1/4: sums are exact in any order.
  EXPECT_EQ(world.sum(value_of(me)), sum);
  EXPECT_EQ(world.max(value_of(me)), max);
  EXPECT_EQ(world.min(value_of(me)), min);
  EXPECT_EQ(world.allreduce(int_of(me), ReduceOp::sum), isum);
  EXPECT_EQ(world.max(int_of(me)), imax);
  EXPECT_EQ(world.min(int_of(me)), imin);
  EXPECT_EQ(world.sum(vector_of(me)), vsum);
  EXPECT_EQ(world.max(vector_of(me)), vmax);
  EXPECT_EQ(world.min(vector_of(me)), vmin);
  EXPECT_EQ(world.max(me == n - 1), true);
  EXPECT_EQ(world.min(me == n - 1), n == 1);
  EXPECT_EQ(world.sum(1), n);
}

TEST(Communicator, AllreduceScalarsAndVectors) {
  for_each_wait_mode(check_allreduce_scalars_and_vectors);
}

static void check_allgather_and_gather() {
  const Communicator world = Communicator::world();
  const int me = world.rank(), n = world.size();
  std::vector<double> values;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
  for (int r = 0; r < n; ++r) {
    values.push_back(value_of(r));
    ints.push_back(int_of(r));
    strings.push_back(string_of(r));
  }
  EXPECT_EQ(world.allgather(value_of(me)), values);
  EXPECT_EQ(world.allgather(int_of(me)), ints);
  EXPECT_EQ(world.allgather(string_of(me)), strings);
  for (int root = 0; root < n; ++root)
    EXPECT_EQ(world.gather(string_of(me), root), me == root ? strings : std::vector<std::string>());
}

TEST(Communicator, AllgatherAndGather) {
  for_each_wait_mode(check_allgather_and_gather);
}

static void check_buffer_collectives() {
  const Communicator world = Communicator::world();
  const int me = world.rank(), n = world.size();
  const size_t un = static_cast<size_t>(n);
  // allgather_into: 2 values per rank.
  std::vector<float> mine = {float(me), float(-me)}, all(2 * un), expected;
  for (int r = 0; r < n; ++r)
    expected.insert(expected.end(), {float(r), float(-r)});
  world.allgather_into(mine.data(), all.data(), 2);
  EXPECT_EQ(all, expected);
  // alltoall_into: block r of rank s holds 100 * s + r; rank me receives 100 * r + me from r.
  std::vector<std::int32_t> send(un), recv(un), want(un);
  for (int r = 0; r < n; ++r) {
    send[static_cast<size_t>(r)] = 100 * me + r;
    want[static_cast<size_t>(r)] = 100 * r + me;
  }
  world.alltoall_into(send.data(), recv.data(), 1);
  EXPECT_EQ(recv, want);
  // reduce_scatter_into: block b of rank s holds s + b; rank me keeps sum_s (s + me).
  std::vector<double> blocks(un), mine_sum(1);
  for (int b = 0; b < n; ++b)
    blocks[static_cast<size_t>(b)] = me + b;
  world.reduce_scatter_into(blocks.data(), mine_sum.data(), 1, ReduceOp::sum);
  EXPECT_EQ(mine_sum[0], n * (n - 1) / 2.0 + n * me);
  // sendrecv around the ring, and with no partner.
  std::int64_t from = -1, out = int_of(me);
  world.sendrecv(&out, (me + 1) % n, &from, (me + n - 1) % n, 1);
  EXPECT_EQ(from, int_of((me + n - 1) % n));
  std::int64_t untouched = 42;
  world.sendrecv(&out, -1, &untouched, -1, 1);
  EXPECT_EQ(untouched, 42);
  // broadcast_in_place and allreduce_in_place.
  std::vector<double> v = vector_of(me);
  world.broadcast_in_place(v.data(), v.size(), n - 1);
  EXPECT_EQ(v, vector_of(n - 1));
  world.allreduce_in_place(v.data(), v.size(), ReduceOp::max);
  EXPECT_EQ(v, vector_of(n - 1));
}

TEST(Communicator, BufferCollectives) {
  for_each_wait_mode(check_buffer_collectives);
}

TEST(Communicator, SplitGroupsByColorOrdersByKey) {
  const Communicator world = Communicator::world();
  const int me = world.rank(), n = world.size();
  const Communicator half = world.split(me % 2, -me);  // descending world rank
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == me % 2)
      members.push_back(r);
  EXPECT_EQ(half.size(), static_cast<int>(members.size()));
  EXPECT_EQ(half.allgather(me), members);
  EXPECT_EQ(members[static_cast<size_t>(half.rank())], me);
  try {
    world.split(-1);
    FAIL() << "negative color accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtk::Communicator::split"), std::string::npos);
  }
}

TEST(Communicator, AgreementThrowsTheLowestFailingRanksMessageEverywhere) {
  const Communicator world = Communicator::world();
  const int n = world.size();
  for (int first = 0; first < n; ++first) {
    std::string mine;
    if (world.rank() >= first && world.rank() % 2 == first % 2)
      mine = "mtk::test: tensor 'w' broke on rank " + std::to_string(world.rank());
    try {
      agree(world, mine);
      FAIL() << "no error";
    } catch (const AgreedError& e) {
      const std::string expected = "mtk::test: tensor 'w' broke on rank " + std::to_string(first);
      EXPECT_EQ(std::string(e.what()),
                world.rank() == first
                    ? expected
                    : "[failed on rank " + std::to_string(first) + "] " + expected);
    }
  }
  EXPECT_NO_THROW(world.agree(""));
  EXPECT_EQ(agree_on_failure(world, [] { return 5; }), 5);
  EXPECT_THROW(agree_on_failure(world,
                                [&] {
                                  if (world.rank() == n - 1)
                                    fail("mtk::test", "last");
                                }),
               AgreedError);
  // Still in step afterwards.
  EXPECT_EQ(world.sum(1), n);
}

TEST(CollectiveWait, ChosenFromTheEnvironmentOrTheNodesCores) {
  const Communicator world = Communicator::world();
  const char* had = std::getenv("MTK_COLLECTIVE_WAIT");
  const std::string saved = had ? had : "";
  // mtk::Environment (the test main's) applied the choice for this run
  EXPECT_EQ(collective_wait(), choose_collective_wait(world));
  // The run-time options are read once; a test that changes the variable reloads them.
  auto set = [](const char* value) {
    if (value)
      setenv("MTK_COLLECTIVE_WAIT", value, 1);
    else
      unsetenv("MTK_COLLECTIVE_WAIT");
    reload_runtime_options();
  };
  set("spin");
  EXPECT_EQ(choose_collective_wait(world), CollectiveWait::spin);
  set("yield");
  EXPECT_EQ(choose_collective_wait(world), CollectiveWait::yield);
  // auto: yielding exactly where this node runs more ranks than the cores they may use
  const bool over = node_oversubscribed(world);
  set("auto");
  EXPECT_EQ(choose_collective_wait(world), over ? CollectiveWait::yield : CollectiveWait::spin);
  set(nullptr);
  EXPECT_EQ(choose_collective_wait(world), over ? CollectiveWait::yield : CollectiveWait::spin);
  // this process may run on some set of CPUs; more ranks than CPUs in it means oversubscribed
  const long cpus = static_cast<long>(std::thread::hardware_concurrency());
  if (cpus > 0 && world.split_node().size() > cpus) {
    EXPECT_TRUE(over);
  }
  if (world.split_node().size() == 1) {
    EXPECT_FALSE(over);  // one rank always has a core
  }
  set("spin");
  try {
    set("sometimes");
    ADD_FAILURE() << "MTK_COLLECTIVE_WAIT=sometimes accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MTK_COLLECTIVE_WAIT is 'sometimes'; allowed: auto, spin, yield"),
              std::string::npos)
        << what;
  }
  // the rejected value left the previous ones in force
  EXPECT_EQ(runtime_options().collective_wait(), "spin");
  set(had ? saved.c_str() : nullptr);
  EXPECT_STREQ(to_string(CollectiveWait::yield), "yield");
  EXPECT_STREQ(to_string(CollectiveWait::spin), "spin");
}

// Non-blocking float allreduces, reduce-scatters and allgathers through shared memory
// (mtk/parallel/node_reducer.hpp; every rank of these tests shares one node): several in flight
// at once, of both float types and every op, waited for in an order unlike the start order, over
// rounds that reuse their regions; each element the fold over the ranks in rank order, bitwise, on
// every rank; the same through MPI (program.node_allreduce false) up to the order of the sum.
namespace {

// One rounding of an integer ratio: the same bits wherever the compiler puts it (a sum of
// products could be contracted into FMAs differently at different call sites), and sums that
// depend on their order.
template <class T>
T element_of(int r, std::size_t i) {
  const long long k = static_cast<long long>((i * 31 + static_cast<std::size_t>(r) * 17) % 1013) -
                      300 * r + static_cast<long long>(i % 7);
  return static_cast<T>(k) / static_cast<T>(1013);
}

template <class T>
T rank_ordered(int n, std::size_t i, ReduceOp op) {
  T acc = element_of<T>(0, i);
  for (int q = 1; q < n; ++q) {
    const T v = element_of<T>(q, i);
    acc = op == ReduceOp::sum ? acc + v : op == ReduceOp::max ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

struct Reduction {
  std::vector<float> f;
  std::vector<double> d;
  ReduceOp op;
  Communicator::Request request;
};

void check_node_reductions(bool shared_memory) {
  set_node_allreduce(shared_memory);
  const Communicator world = Communicator::world();
  const int me = world.rank(), n = world.size();
  // float and double; below and above the shared-memory minimum; parts not a multiple of 16
  const std::vector<std::pair<bool, std::size_t>> kinds = {
      {true, 100003}, {false, 3001}, {true, 1000}, {true, 4097}, {false, 250000}, {true, 8}};
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
  const std::uint64_t before = detail::NodeReducer::started_total();
  for (int round = 0; round < 3; ++round) {
    std::vector<Reduction> flights(kinds.size());
    for (size_t k = 0; k < kinds.size(); ++k) {
      Reduction& x = flights[k];
      x.op = ops[(k + static_cast<size_t>(round)) % 3];
      if (kinds[k].first) {
        for (std::size_t i = 0; i < kinds[k].second; ++i)
          x.f.push_back(element_of<float>(me, i));
        x.request = world.start_allreduce_in_place(x.f.data(), x.f.size(), x.op);
      } else {
        for (std::size_t i = 0; i < kinds[k].second; ++i)
          x.d.push_back(element_of<double>(me, i));
        x.request = world.start_allreduce_in_place(x.d.data(), x.d.size(), x.op);
      }
      flights[k / 2].request.test();  // progress while others are in flight
    }
    // a reduce-scatter and an allgather in flight with them (the sharded optimizer's), and a
    // reduce-scatter too small for shared memory
    const std::size_t block = 5003, small = 7;
    std::vector<float> scattered(block * static_cast<size_t>(n)), gathered(scattered.size(), -1.f);
    std::vector<double> tiny(small * static_cast<size_t>(n));
    for (std::size_t i = 0; i < scattered.size(); ++i)
      scattered[i] = element_of<float>(me, i);
    for (std::size_t i = 0; i < block; ++i)
      gathered[block * static_cast<size_t>(me) + i] = element_of<float>(me, i);
    for (std::size_t i = 0; i < tiny.size(); ++i)
      tiny[i] = element_of<double>(me, i);
    std::size_t at = 0, tiny_at = 0;
    auto scatter = world.start_reduce_scatter_in_place(scattered.data(), block, ReduceOp::sum, &at);
    auto gather = world.start_allgather_in_place(gathered.data(), block);
    auto scatter_tiny =
        world.start_reduce_scatter_in_place(tiny.data(), small, ReduceOp::max, &tiny_at);
    for (size_t j = 0; j < flights.size(); ++j) {  // waited for from the middle outwards
      const size_t k = (j + flights.size() / 2 + static_cast<size_t>(round)) % flights.size();
      Reduction& x = flights[k];
      x.request.wait();
      EXPECT_FALSE(x.request.active());
      // shared memory sums in rank order; MPI (small ones too) in its own order past two ranks
      const bool exact = n <= 2 || (shared_memory && (x.f.size() * 4 + x.d.size() * 8) >=
                                                         detail::NodeReducer::min_bytes());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < x.f.size(); ++i) {
        const float want = rank_ordered<float>(n, i, x.op);
        wrong += exact ? x.f[i] != want : std::abs(x.f[i] - want) > 1e-5f * (1 + std::abs(want));
      }
      for (std::size_t i = 0; i < x.d.size(); ++i) {
        const double want = rank_ordered<double>(n, i, x.op);
        wrong += exact ? x.d[i] != want : std::abs(x.d[i] - want) > 1e-12 * (1 + std::abs(want));
      }
      EXPECT_EQ(wrong, 0u) << "round " << round << ", reduction " << k << " of "
                           << (x.f.empty() ? x.d.size() : x.f.size()) << " values";
    }
    gather.wait();
    scatter_tiny.wait();
    scatter.wait();
    std::size_t wrong = 0;
    const std::size_t mine = block * static_cast<size_t>(me);
    for (std::size_t i = 0; i < block; ++i) {
      const float want = rank_ordered<float>(n, mine + i, ReduceOp::sum);
      wrong += n <= 2 || shared_memory
                   ? scattered[at + i] != want
                   : std::abs(scattered[at + i] - want) > 1e-5f * (1 + std::abs(want));
      for (int q = 0; q < n; ++q)
        wrong += gathered[block * static_cast<size_t>(q) + i] != element_of<float>(q, i);
    }
    for (std::size_t i = 0; i < small; ++i)
      wrong += tiny[tiny_at + i] !=
               rank_ordered<double>(n, small * static_cast<size_t>(me) + i, ReduceOp::max);
    EXPECT_EQ(wrong, 0u) << "round " << round << ": reduce-scatter or allgather";
  }
  // four of each round's six allreduces, its large reduce-scatter and its allgather are large
  // enough for shared memory
  EXPECT_EQ(detail::NodeReducer::started_total() - before, shared_memory && n > 1 ? 18u : 0u);
  set_node_allreduce(true);
}

}  // namespace

TEST(Communicator, NonBlockingFloatCollectivesThroughSharedMemoryAndMpi) {
  for (bool shared_memory : {true, false}) {
    SCOPED_TRACE(shared_memory ? "shared memory" : "MPI");
    for_each_wait_mode([&] { check_node_reductions(shared_memory); });
  }
}
