// Overlapped reductions of pending sums (mtk/lower/overlap.hpp, program.overlap_collectives): the
// plan starts each reduction after its tensor's last touch and waits before its first reader,
// sharing buckets under the size threshold; a shared storage touched under another name waits
// first; training with overlap on equals training with it off (bitwise on 1 and 2 ranks, where a
// sum of two is the same in any order; within 1e-5 on 4 and 8, where MPI may sum in another
// order), data-parallel and model- plus data-parallel; every rank runs the same collectives in
// the same order. The sharded optimizer's in-place allgathers start where they were and are
// waited for before their next touch, else at the end of the run.

#include <mtk/base/runtime_options.hpp>
#include <mtk/lower/overlap.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "program_fixtures.hpp"
#include "training_fixtures.hpp"
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

// A step of a synthetic program: reads and writes, and for an allreduce the axes it sums over.
Program::Step step(std::vector<int> reads, std::vector<int> writes, std::vector<int> sum = {}) {
  Program::Step s = synthetic_step(reduction_wait_kind(), std::move(reads), std::move(writes));
  s.sum_axes = std::move(sum);
  return s;
}

}  // namespace

TEST(OverlapPlan, StartsAfterTheLastTouchWaitsBeforeTheFirstReaderBucketsSmallTensors) {
  const MeshShape shape = MeshShape::parse("b:2");
  // Tensors 1, 2: 100 floats; 3: 1000 floats; 4: 100 floats, read once more after its write.
  auto elements = [](int t) -> std::int64_t { return t == 3 ? 1000 : 100; };
  std::vector<Program::Step> steps = {
      step({}, {1}),        // 0
      step({}, {2}),        // 1
      step({}, {3}),        // 2
      step({}, {4}),        // 3
      step({4}, {5}),       // 4: the last touch of 4
      step({5}, {6}),       // 5
      step({1}, {1}, {0}),  // 6: allreduce 1
      step({2}, {2}, {0}),  // 7
      step({3}, {3}, {0}),  // 8
      step({4}, {4}, {0}),  // 9
      step({5}, {5}, {0}),  // 10
      step({6}, {6}, {0}),  // 11
  };
  const auto plan = plan_reductions(steps, shape, elements, 1000);  // bytes: 400 + 400 < 1000
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{1, 2}));  // one bucket, after 2's write
  EXPECT_EQ(plan[0].start_after, 1);
  EXPECT_EQ(plan[0].wait_before, 6);
  EXPECT_EQ(plan[0].bytes, 800);
  EXPECT_EQ(plan[1].tensors, (std::vector<int>{3}));  // 4000 bytes: alone
  EXPECT_EQ(plan[1].start_after, 2);
  EXPECT_EQ(plan[1].wait_before, 8);
  EXPECT_EQ(plan[2].tensors, (std::vector<int>{4, 5}));  // 1 and 2's bucket is full
  EXPECT_EQ(plan[2].start_after, 5);
  EXPECT_EQ(plan[2].wait_before, 9);
  EXPECT_EQ(plan[3].tensors, (std::vector<int>{6}));  // bucket {4, 5} is full
  EXPECT_EQ(plan[3].start_after, 5);
  EXPECT_EQ(plan[3].wait_before, 11);
  // No buckets: every tensor alone, in order of readiness.
  const auto alone = plan_reductions(steps, shape, elements, 0);
  ASSERT_EQ(alone.size(), 6u);
  for (const auto& b : alone)
    EXPECT_EQ(b.tensors.size(), 1u);
  // One processor along the axis: nothing to overlap.
  EXPECT_TRUE(plan_reductions(steps, MeshShape::parse("b:1"), elements, 1000).empty());
  // Ready only after the bucket's first reader: a bucket of its own.
  const std::vector<Program::Step> late = {step({}, {1}),  step({}, {9}), step({1}, {1}, {0}),
                                           step({9}, {9}), step({}, {8}), step({9}, {9}, {0})};
  const auto two = plan_reductions(late, shape, elements, 1 << 20);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].tensors, (std::vector<int>{1}));
  EXPECT_EQ(two[1].tensors, (std::vector<int>{9}));
  EXPECT_EQ(two[1].start_after, 3);
  // Read right before its allreduce: stays where it is.
  const std::vector<Program::Step> tight = {step({}, {1}), step({1}, {1}, {0})};
  EXPECT_TRUE(plan_reductions(tight, shape, elements, 1000).empty());
}

TEST(OverlapPlan, RewrittenProgramStartsAndWaitsEveryBucketOnce) {
  const MeshShape shape = MeshShape::parse("b:1");
  Mesh mesh(shape, MPI_COMM_SELF);
  std::vector<Program::Step> steps = {step({}, {1}), step({}, {2}), step({}, {7}),
                                      step({1}, {1}, {0}), step({2}, {2}, {0})};
  // One processor: nothing moves.
  EXPECT_EQ(overlap_reductions(
                steps, mesh, shape, [](int) { return 10; }, 1 << 20, true),
            nullptr);
  EXPECT_EQ(steps.size(), 5u);
  // Planned for two (dry: no communicator made): one start after step 1, one wait before step 3.
  auto state = overlap_reductions(
      steps, mesh, MeshShape::parse("b:2"), [](int) { return 10; }, 1 << 20, true);
  ASSERT_NE(state, nullptr);
  ASSERT_EQ(steps.size(), 5u);  // 5 - 2 allreduces + start + wait
  EXPECT_EQ(steps[2].what.rfind("allreduce(sum) start 0 (2 tensors, 80 bytes) over b", 0), 0u)
      << steps[2].what;
  EXPECT_EQ(steps[3].writes, (std::vector<int>{7}));
  EXPECT_EQ(steps[4].what.rfind("allreduce(sum) wait 0", 0), 0u) << steps[4].what;
  EXPECT_EQ(steps[4].kind, reduction_wait_kind());
  EXPECT_EQ(steps[4].reads, (std::vector<int>{1, 2}));
}

TEST(OverlapPlan, AllgathersStartInPlaceAndWaitBeforeTheNextTouchOrAtTheEnd) {
  const MeshShape shape = MeshShape::parse("b:2");
  Mesh mesh(MeshShape::parse("b:1"), MPI_COMM_SELF);
  // Variables 1 and 2, their new shards 3 and 4, the gathers' outputs 5 and 6.
  std::vector<Program::Step> steps = {step({1}, {3}), step({3, 1}, {5}), step({2}, {4}),
                                      step({4, 2}, {6}), step({5}, {7})};
  Program::Buffer storage;
  const GatherSpecs gathers{{5, {1, 3, 0, &storage, 0, 10}}, {6, {2, 4, 0, &storage, 0, 10}}};
  const auto plan = plan_reductions(
      steps, shape, [](int) { return 10; }, 0, {}, gathers);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].gather_out, 5);
  EXPECT_EQ(plan[0].start_after, 1);  // where the blocking step was
  EXPECT_EQ(plan[0].wait_before, 4);  // step 4 reads the new value
  EXPECT_EQ(plan[1].gather_out, 6);
  EXPECT_EQ(plan[1].wait_before, 5);  // nothing reads it: the end of the run
  auto state = overlap_reductions(
      steps, mesh, shape, [](int) { return 10; }, 0, true, {}, gathers);
  ASSERT_NE(state, nullptr);
  ASSERT_EQ(steps.size(), 7u);
  EXPECT_EQ(steps[1].what.rfind("allgather start 0 (1 tensor, 40 bytes) over b", 0), 0u)
      << steps[1].what;
  EXPECT_EQ(steps[1].reads, (std::vector<int>{3, 1}));
  EXPECT_EQ(steps[3].what.rfind("allgather start 1", 0), 0u) << steps[3].what;
  EXPECT_EQ(steps[4].kind, gather_wait_kind());
  EXPECT_EQ(steps[4].writes, (std::vector<int>{5}));
  EXPECT_EQ(steps[5].reads, (std::vector<int>{5}));
  EXPECT_EQ(steps[6].what.rfind("allgather wait 1", 0), 0u) << steps[6].what;
  // The last step of the run: nothing to overlap with.
  const std::vector<Program::Step> last = {step({1}, {3}), step({3, 1}, {5})};
  EXPECT_TRUE(plan_reductions(
                  last, shape, [](int) { return 10; }, 0, {}, gathers)
                  .empty());
}

TEST(OverlapInFlight, BucketsAndInPlaceReductionsSumOverTheRanks) {
  const int n = world_size(), r = world_rank();
  Mesh mesh(MeshShape::parse("b:" + std::to_string(n)), MPI_COMM_WORLD);
  auto filled = [&](std::int64_t len, float base) {
    Kokkos::View<float*> v("v", len);
    auto h = Kokkos::create_mirror_view(v);
    for (std::int64_t i = 0; i < len; ++i)
      h(i) = base + static_cast<float>(i + r);
    Kokkos::deep_copy(v, h);
    return v;
  };
  auto expect_sum = [&](const Kokkos::View<float*>& v, float base, const std::string& what) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(h.extent(0)); ++i)
      ASSERT_EQ(h(i), n * (base + static_cast<float>(i)) + static_cast<float>(n * (n - 1) / 2))
          << what << " element " << i;
  };
  Program::Buffers b(4);
  b[0] = Program::Buffer(filled(1000, 1));
  b[1] = b[0];  // the same storage under another name, without an alias step
  b[2] = Program::Buffer(filled(7, 2));
  b[3] = Program::Buffer(filled(5, 3));
  auto bucket = [](std::vector<int> tensors, std::vector<std::int64_t> counts, std::int64_t bytes) {
    ReductionBucket r;  // allreduces over axis 0, started after step 0, waited for before step 5
    r.tensors = std::move(tensors);
    r.counts = std::move(counts);
    r.axes = {0};
    r.start_after = 0;
    r.wait_before = 5;
    r.bytes = bytes;
    return r;
  };
  std::vector<ReductionBucket> plan = {bucket({0}, {1000}, 4000), bucket({2, 3}, {7, 5}, 48)};
  ReductionsInFlight flights(mesh, plan);
  for (int run = 0; run < 2; ++run) {  // the bucket buffer is reused by the second run
    if (run == 1) {
      b[0] = Program::Buffer(filled(1000, 1));
      b[1] = b[0];
      b[2] = Program::Buffer(filled(7, 2));
      b[3] = Program::Buffer(filled(5, 3));
    }
    flights.start(0, b);
    flights.start(1, b);
    flights.progress();
    EXPECT_FALSE(flights.before_step(step({0}, {}), b));  // its own name: the wait step's job
    // A step reading tensor 1 waits for the in-place reduction of 0 first.
    EXPECT_TRUE(flights.before_step(step({1}, {}), b));
    EXPECT_FALSE(flights.before_step(step({1}, {}), b));
    flights.wait(1, b);
    flights.wait(0, b);  // done already: nothing to do
    expect_sum(b[0].view<float>(), 1, "in place");
    expect_sum(b[2].view<float>(), 2, "bucket member 2");
    expect_sum(b[3].view<float>(), 3, "bucket member 3");
  }
}

TEST(OverlapInFlight, ReductionsLargerThanOnePieceBlockingOrNot) {
  // Communicator reductions go in pieces of 8 MiB: 2.5M floats take two.
  const int n = world_size(), r = world_rank();
  Mesh mesh(MeshShape::parse("b:" + std::to_string(n)), MPI_COMM_WORLD);
  const std::int64_t len = 2500000;
  Kokkos::View<float*> a("a", len), b("b", len);
  auto h = Kokkos::create_mirror_view(a);
  for (std::int64_t i = 0; i < len; ++i)
    h(i) = static_cast<float>(i % 7 + r);
  Kokkos::deep_copy(a, h);
  Kokkos::deep_copy(b, h);
  auto started = start_allreduce(mesh, {0}, a);
  allreduce(mesh, {0}, b);  // a blocking one while the other is in flight
  started.finish();
  for (const auto& v : {a, b}) {
    const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    for (std::int64_t i = 0; i < len; i += 9973)
      ASSERT_EQ(got(i), static_cast<float>(n * (i % 7) + n * (n - 1) / 2)) << i;
    ASSERT_EQ(got(len - 1), static_cast<float>(n * ((len - 1) % 7) + n * (n - 1) / 2));
  }
}

namespace {

struct Trained {
  std::vector<float> losses;
  std::vector<float> weights;            // every variable's global value after the last step
  std::int64_t buckets = 0;              // Program::overlapped_reductions()
  std::vector<std::string> collectives;  // explain()'s collectives, in order
};

// `steps` Adafactor steps of the tiny transformer, built and lowered with `options`.
Trained train(const Mesh& mesh, const LayoutRules& rules, const ProgramOptions& options,
              int steps = 3) {
  Graph g(options);
  const auto c = tiny_transformer();
  nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/5);
  minimize_for_test(m.loss);
  const auto feeds = lm_feeds(
      m, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 7 + l * 3 + 4) % 31 + 1; });
  auto p = lower(g, mesh, rules);
  Trained t;
  for (int k = 0; k < steps; ++k)
    t.losses.push_back(static_cast<float>(p->run(feeds, {m.loss})[0].at(0)));
  t.weights = global_weights(*p);
  t.buckets = p->overlapped_reductions();
  const std::string text = p->explain();
  const std::string head = "collectives and relayouts, in order:\n";
  std::size_t at = text.find(head);
  if (at != std::string::npos)
    at += head.size();
  while (at != std::string::npos && at < text.size()) {
    const std::size_t end = text.find('\n', at);
    t.collectives.push_back(text.substr(at, end - at));
    at = end == std::string::npos ? end : end + 1;
  }
  return t;
}

// Bitwise where the sums cannot change order (1 or 2 ranks), else within 1e-5 of the scale.
void expect_same(const Trained& a, const Trained& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  ASSERT_EQ(a.weights.size(), b.weights.size());
  if (world_size() <= 2)
    return expect_bitwise(a, b, what);
  expect_close(a, b, what, 1e-5);
}

// Processors the layout splits dim batch over.
int batch_ways(const LayoutRules& rules, const MeshShape& mesh) {
  for (const auto& [dim, axis] : rules.rules())
    if (dim == "batch")
      return mesh[mesh.axis(axis)].size;
  return 1;
}

// Every rank's list of collectives equals rank 0's.
void expect_same_order_on_every_rank(const Mesh& mesh, const Trained& t, const std::string& what) {
  std::string joined;
  for (const auto& line : t.collectives)
    joined += line + "\n";
  const auto all = mesh.comm().allgather(joined);
  for (size_t r = 1; r < all.size(); ++r)
    EXPECT_EQ(all[r], all[0]) << what << ": rank " << r << "'s collectives differ from rank 0's";
}

}  // namespace

TEST(OverlapCollectives, TrainingEqualsBlockingReductionsOnEveryMeshAndLayout) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"}) {
      const auto rules = instantiate(layout, mshape);
      const std::string what = mshape.to_string() + " layout " + layout;
      Trained off, on, alone;
      ProgramOptions blocking, overlapped, unbucketed;
      blocking.overlap_collectives = false;
      unbucketed.allreduce_bucket_mib = 0;
      off = train(mesh, rules, blocking);
      on = train(mesh, rules, overlapped);
      alone = train(mesh, rules, unbucketed);
      EXPECT_EQ(off.buckets, 0) << what;
      if (batch_ways(rules, mshape) > 1) {  // weight gradients are partial sums over batch
        EXPECT_GT(on.buckets, 0) << what;
        EXPECT_GT(alone.buckets, on.buckets) << what << ": buckets should merge calls";
      }
      expect_same(on, off, what + ": overlap on vs off");
      expect_same(alone, off, what + ": overlap without buckets vs off");
      expect_same_order_on_every_rank(mesh, on, what);
      expect_same_order_on_every_rank(mesh, alone, what);
      EXPECT_LT(on.losses.back(), on.losses.front()) << what;
    }
  }
}
