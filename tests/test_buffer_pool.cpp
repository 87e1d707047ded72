// Buffer reuse across runs (mtk/base/buffer_pool.hpp): a buffer is handed out again only when
// nothing else holds it; a training step allocates nothing after its first run; reuse changes no
// result bitwise, on one rank and on every mesh and layout. Planned sharing
// (mtk/base/buffer_plan.hpp): ranges never shared by overlapping lives, a pool below the per-size
// one, ranges of one arena held apart by their leases (mtk/base/leased_view.hpp), and runs that do
// not match the recorded one still right.

#include <mtk/base/buffer_plan.hpp>
#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/base/leased_view.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "training_fixtures.hpp"
#include <cstring>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

TEST(BufferPool, ReusesOnlyWhatNoOneHolds) {
  BufferPool pool;
  const BufferPoolScope scope(&pool);
  auto a = uninitialized_view<float>("a", 100);
  const float* a_data = a.data();
  auto b = uninitialized_view<float>("b", 100);  // a is held: a new buffer
  EXPECT_NE(b.data(), a_data);
  EXPECT_EQ(pool.allocations(), 2);
  a = Kokkos::View<float*>();
  auto c = uninitialized_view<float>("c", 100);  // a's buffer is free again
  EXPECT_EQ(c.data(), a_data);
  EXPECT_EQ(pool.reuses(), 1);
  auto d = uninitialized_view<int>("d", 100);  // another element type: never a float buffer
  EXPECT_NE(static_cast<const void*>(d.data()), static_cast<const void*>(a_data));
  EXPECT_EQ(pool.allocations(), 3);
  EXPECT_EQ(pool.bytes(), 300 * 4);
}

TEST(BufferPool, LargerFreeBufferWithinTheFitRatio) {
  BufferPool pool;
  EXPECT_EQ(pool.fit_ratio(), 1.0);
  pool.set_fit_ratio(2);
  const BufferPoolScope scope(&pool);
  const float* big = uninitialized_view<float>("big", 100).data();
  auto half = uninitialized_view<float>("half", 60);  // 100 <= 2 x 60: the first 60 of big
  EXPECT_EQ(half.data(), big);
  EXPECT_EQ(half.extent(0), 60u);
  auto small = uninitialized_view<float>("small", 10);  // big is held through half; 100 > 2 x 10
  EXPECT_NE(small.data(), big);
  half = Kokkos::View<float*>();
  auto small2 = uninitialized_view<float>("small2", 10);  // still too large a buffer for 10
  EXPECT_NE(small2.data(), big);
  EXPECT_EQ(pool.allocations(), 3);
}

TEST(BufferPool, EndRunFreesWhatTheRunDidNotUse) {
  BufferPool pool;
  {
    const BufferPoolScope scope(&pool);
    uninitialized_view<float>("x", 64);
    uninitialized_view<float>("y", 1000);
  }
  pool.end_run();  // both were used in this run: kept
  EXPECT_EQ(pool.bytes(), (64 + 1000) * 4);
  {
    const BufferPoolScope scope(&pool);
    uninitialized_view<float>("x again", 64);
  }
  pool.end_run();  // y was not asked for in this run: kept one more run
  EXPECT_EQ(pool.bytes(), (64 + 1000) * 4);
  pool.end_run();  // nor in this one: freed
  EXPECT_EQ(pool.bytes(), 64 * 4);
  auto held = Kokkos::View<float*>();
  {
    const BufferPoolScope scope(&pool);
    held = uninitialized_view<float>("z", 64);
  }
  pool.end_run();
  pool.end_run();
  pool.end_run();  // unused for three runs but held: kept
  EXPECT_EQ(pool.bytes(), 64 * 4);
  held = Kokkos::View<float*>();
  pool.clear();
  EXPECT_EQ(pool.bytes(), 0);
  // Outside a scope: plain allocations, not pooled.
  EXPECT_EQ(BufferPool::active(), nullptr);
  uninitialized_view<float>("plain", 10);
  EXPECT_EQ(pool.allocations(), 2);  // x, y; x again and z reused x's buffer
}

namespace {

// Buffers of one object never overlap in time, are of its type and fit in it; per type the objects
// hold at least the most bytes alive at once.
void expect_valid(const std::vector<PlannedBuffer>& in, const BufferPlan& plan) {
  ASSERT_EQ(plan.object_of.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto o = static_cast<size_t>(plan.object_of[i]);
    ASSERT_LT(o, plan.object_size.size());
    EXPECT_EQ(plan.object_type[o], in[i].type);
    EXPECT_LE(in[i].size, plan.object_size[o]);
    for (size_t j = 0; j < i; ++j)
      if (plan.object_of[j] == plan.object_of[i]) {
        EXPECT_TRUE(in[j].last <= in[i].first || in[i].last <= in[j].first) << i << ", " << j;
      }
  }
}

}  // namespace

TEST(BufferPlan, NoObjectHoldsTwoLiveBuffers) {
  std::vector<PlannedBuffer> in;
  std::uint32_t r = 12345;  // a small LCG: the same buffers every time
  auto next = [&](std::int64_t m) {
    r = r * 1664525u + 1013904223u;
    return static_cast<std::int64_t>(r >> 8) % m;
  };
  for (int i = 0; i < 300; ++i) {
    const int type = static_cast<int>(next(2));
    const std::int64_t size = (next(9) + 1) * 64, first = next(200);
    in.push_back({type, size, first, first + 1 + next(30)});
  }
  const BufferPlan plan = plan_buffers(in);
  expect_valid(in, plan);
  for (int type : {0, 1}) {
    std::vector<PlannedBuffer> of_type;
    std::int64_t total = 0;
    for (const auto& b : in)
      if (b.type == type)
        of_type.push_back(b);
    for (size_t o = 0; o < plan.object_size.size(); ++o)
      total += plan.object_type[o] == type ? plan.object_size[o] : 0;
    EXPECT_GE(total, most_live(of_type));
    EXPECT_LT(total, most_live(of_type) * 3 / 2);  // far below one object per buffer
  }
}

TEST(BufferPlan, SimpleLivesNeedOnlyTheMostLive) {
  // A chain of equal buffers, each alive with the next: two objects.
  const std::vector<PlannedBuffer> chain = {{0, 4, 0, 2}, {0, 4, 1, 3}, {0, 4, 2, 4}, {0, 4, 3, 5}};
  BufferPlan plan = plan_buffers(chain);
  expect_valid(chain, plan);
  EXPECT_EQ(plan.total(), 8);
  EXPECT_EQ(most_live(chain), 8);
  // A large buffer, a small one alive with it and with a second large one: the large share.
  const std::vector<PlannedBuffer> mixed = {{0, 10, 0, 2}, {0, 6, 1, 3}, {0, 10, 2, 4}};
  plan = plan_buffers(mixed);
  expect_valid(mixed, plan);
  EXPECT_EQ(plan.total(), 16);
  EXPECT_EQ(plan.object_of[0], plan.object_of[2]);
  // Types never share, even one after the other.
  const std::vector<PlannedBuffer> typed = {{0, 8, 0, 1}, {1, 8, 1, 2}};
  plan = plan_buffers(typed);
  EXPECT_EQ(plan.object_size.size(), 2u);
}

TEST(BufferPlan, OffsetsKeepLiveBuffersApartAndPackTighterThanObjects) {
  std::vector<PlannedBuffer> in;
  std::uint32_t r = 777;
  auto next = [&](std::int64_t m) {
    r = r * 1664525u + 1013904223u;
    return static_cast<std::int64_t>(r >> 8) % m;
  };
  for (int i = 0; i < 300; ++i) {
    const std::int64_t size = (next(9) + 1) * 64, first = next(200);
    in.push_back({static_cast<int>(next(2)), size, first, first + 1 + next(30)});
  }
  const OffsetPlan plan = plan_offsets(in);
  ASSERT_EQ(plan.offset.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    std::int64_t arena = -1;
    for (const auto& [type, size] : plan.arenas)
      arena = type == in[i].type ? size : arena;
    EXPECT_LE(plan.offset[i] + in[i].size, arena);
    for (size_t j = 0; j < i; ++j) {
      const bool in_time = in[i].first < in[j].last && in[j].first < in[i].last;
      const bool in_space = plan.offset[i] < plan.offset[j] + in[j].size &&
                            plan.offset[j] < plan.offset[i] + in[i].size;
      EXPECT_FALSE(in[i].type == in[j].type && in_time && in_space) << i << ", " << j;
    }
  }
  EXPECT_GE(plan.total(), most_live(in));
  EXPECT_LE(plan.total(), plan_buffers(in).total());
  // A large buffer, then two small ones alive together: both fit into the large one's range.
  const std::vector<PlannedBuffer> after = {{0, 10, 0, 2}, {0, 4, 2, 4}, {0, 6, 3, 5}};
  EXPECT_EQ(plan_offsets(after).total(), 10);
  EXPECT_EQ(plan_buffers(after).total(), 14);  // objects hold one buffer at a time
  // The placement takes the smaller: the offsets here, the objects where they tie.
  const Placement placed = plan_placement(after);
  EXPECT_EQ(placed.total(), 10);
  EXPECT_EQ(placed.arenas.size(), 1u);
  EXPECT_EQ(placed.offset[1] + 4 <= placed.offset[2] || placed.offset[2] + 6 <= placed.offset[1],
            true);
  const std::vector<PlannedBuffer> chain = {{0, 10, 0, 2}, {0, 10, 2, 4}, {1, 3, 0, 4}};
  const Placement objects = plan_placement(chain);
  EXPECT_EQ(objects.total(), 13);
  EXPECT_EQ(objects.arenas.size(), 2u);
  EXPECT_EQ(objects.arena_of[0], objects.arena_of[1]);
}

TEST(LeasedView, CountsItsOwnCopiesAndKeepsItsArena) {
  Kokkos::View<float*> arena("arena", 100);
  Kokkos::deep_copy(arena, 1.0f);
  auto a = leased_view(arena, 0, 40, "a");
  auto b = leased_view(arena, 40, 60, "b");
  EXPECT_EQ(a.data(), arena.data());
  EXPECT_EQ(b.data(), arena.data() + 40);
  EXPECT_EQ(b.extent(0), 60u);
  EXPECT_EQ(a.use_count(), 1);
  {
    const auto copy = a;
    const auto part = Kokkos::subview(a, std::make_pair(0, 10));
    EXPECT_EQ(a.use_count(), 3);  // its own copies only
    EXPECT_EQ(b.use_count(), 1);
  }
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(a.label(), "a");
  // The arena lives on while a range of it is held.
  arena = Kokkos::View<float*>();
  a = Kokkos::View<float*>();
  Kokkos::deep_copy(b, 2.0f);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  EXPECT_EQ(h(59), 2.0f);
}

namespace {

// One run of three acquires: a (100), b (60) while a lives, then c (80), with a freed first unless
// `hold_a`. Returns whether the pool gave c a's memory (a new allocation at a's freed address, as
// a GPU's allocator returns, is not the pool sharing); c is written after a, a then checked.
bool three_acquires(BufferPool& pool, bool hold_a, std::int64_t a_size = 100,
                    std::int64_t c_size = 80) {
  pool.begin_run();
  bool shared = false;
  {
    const BufferPoolScope scope(&pool);
    auto a = uninitialized_view<float>("a", a_size);
    Kokkos::deep_copy(a, 1.0f);
    auto b = uninitialized_view<float>("b", 60);
    const float* a_data = a.data();
    if (!hold_a)
      a = Kokkos::View<float*>();
    const std::int64_t allocations = pool.allocations();
    auto c = uninitialized_view<float>("c", c_size);
    Kokkos::deep_copy(c, 2.0f);
    shared = c.data() == a_data && pool.allocations() == allocations;
    if (hold_a) {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
      EXPECT_EQ(h(a_size - 1), 1.0f);  // c did not take a's memory while a lived
    }
  }
  pool.end_run();
  return shared;
}

}  // namespace

namespace {

bool all_equal(const Kokkos::View<float*>& v, float x) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  for (size_t i = 0; i < h.extent(0); ++i)
    if (h(i) != x)
      return false;
  return true;
}

// One run: a (1024 floats, written 1), then, a dropped unless `hold_a`, b and c (512 each,
// written 2 and 3) alive together; `keep_c` takes c past the run. Returns how many of b and c lay
// in a's memory.
int arena_run(BufferPool& pool, bool hold_a, Kokkos::View<float*>* keep_c = nullptr) {
  pool.begin_run();
  int inside = 0;
  {
    const BufferPoolScope scope(&pool);
    auto a = uninitialized_view<float>("a", 1024);
    Kokkos::deep_copy(a, 1.0f);
    const float* a_data = a.data();
    if (!hold_a)
      a = Kokkos::View<float*>();
    auto b = uninitialized_view<float>("b", 512);
    auto c = uninitialized_view<float>("c", 512);
    Kokkos::deep_copy(b, 2.0f);
    Kokkos::deep_copy(c, 3.0f);
    for (const float* p : {b.data(), c.data()})
      inside += p >= a_data && p < a_data + 1024 ? 1 : 0;
    EXPECT_TRUE(all_equal(b, 2.0f) && all_equal(c, 3.0f));
    if (hold_a) {
      EXPECT_TRUE(all_equal(a, 1.0f));  // nothing was handed a range over a while it lived
    }
    if (keep_c)
      *keep_c = c;
  }
  pool.end_run();
  return inside;
}

}  // namespace

// b and c, alive together, share the range a held before them: one arena of a's size, where
// objects (one buffer at a time) would need a's and another for c.
TEST(BufferPool, RangesOfOneArenaAreHandedOutOnlyWhenNothingOverlappingIsHeld) {
  BufferPool pool;
  pool.set_planning(true);
  arena_run(pool, false);  // recorded
  ASSERT_TRUE(pool.planned());
  EXPECT_EQ(pool.bytes(), 1024 * 4);
  EXPECT_EQ(arena_run(pool, false), 2);
  EXPECT_EQ(pool.planned_hits(), 3);
  // c held past its run, then the plan dropped: the arena lives on under c's range.
  Kokkos::View<float*> kept;
  EXPECT_EQ(arena_run(pool, false, &kept), 2);
  pool.set_planning(false);
  pool.clear();
  EXPECT_TRUE(all_equal(kept, 3.0f));
  // a still held when b and c come: both ranges overlap it, so they get buffers of their own.
  BufferPool other;
  other.set_planning(true);
  arena_run(other, false);
  EXPECT_EQ(arena_run(other, true), 0);
  EXPECT_EQ(other.planned_hits(), 1);
}

TEST(BufferPool, PlanSharesOnlyBuffersWhoseLivesDoNotOverlap) {
  BufferPool pool;
  pool.set_planning(true);
  EXPECT_FALSE(three_acquires(pool, false));  // recorded: a was dropped before c came
  // Ranges take whole 64-byte lines (a: 100 -> 112 floats, b: 60 -> 64): the most alive at once.
  EXPECT_EQ(pool.peak_bytes(), (112 + 64) * 4);
  EXPECT_TRUE(pool.planned());
  EXPECT_EQ(pool.bytes(), (112 + 64) * 4);  // c takes a's range, b one of its own
  const auto allocations = pool.allocations();
  EXPECT_TRUE(three_acquires(pool, false));
  EXPECT_EQ(pool.planned_hits(), 3);
  EXPECT_EQ(pool.allocations(), allocations);
  // a still held when c comes: c falls back to the per-size path; the plan stays.
  EXPECT_FALSE(three_acquires(pool, true));
  EXPECT_EQ(pool.planned_hits(), 2);
  EXPECT_TRUE(pool.planned());
  // Most requests differ (a's and c's sizes): the next run is recorded again.
  three_acquires(pool, true, 90, 70);
  EXPECT_FALSE(pool.planned());
  EXPECT_EQ(pool.replans(), 1);
  EXPECT_FALSE(three_acquires(pool, false, 90, 70));
  EXPECT_TRUE(pool.planned());
  EXPECT_TRUE(three_acquires(pool, false, 90, 70));
  EXPECT_EQ(pool.planned_hits(), 3);
  // Runs alternating with another sequence keep the plan once re-recording is spent.
  for (int run = 0; run < 2 * BufferPool::stale_runs(); ++run)
    three_acquires(pool, false, run % 2 ? 90 : 50, run % 2 ? 70 : 30);
  EXPECT_TRUE(pool.planning());
  EXPECT_EQ(pool.replans(), BufferPool::max_replans());
  EXPECT_TRUE(three_acquires(pool, false, 90, 70));
  // A plan no run matches any more (every run different) is dropped for good.
  for (int run = 0; run < BufferPool::stale_runs(); ++run)
    three_acquires(pool, false, 40 + run, 30 + run);
  EXPECT_FALSE(pool.planning());
  EXPECT_FALSE(three_acquires(pool, false, 90, 70));
}

namespace {

nn::TransformerConfig small_config() {
  return test::tiny_transformer();  // every split dim divisible by 8 ranks
}

enum class Reuse { none, per_size, planned };

struct Trained {
  std::vector<float> losses;
  std::vector<float> weights;  // every variable's global value after the last step
  std::vector<float> logits;   // fetched every other step with fetch_logits
  std::int64_t allocations_after_first = -1;
  std::int64_t pool_bytes = 0, pool_peak = 0, planned_hits = 0;
};

// `steps` Adafactor steps of a small transformer, with or without buffer reuse; with fetch_logits
// every other step also fetches the logits (another sequence of buffers: the logits' gradient
// cannot take their buffer).
Trained train(Reuse reuse, const Mesh& mesh, const LayoutRules& rules, bool fetch_logits = false,
              int steps = 4) {
  Graph g;
  const auto c = small_config();
  nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/5);
  minimize_for_test(m.loss);
  std::map<int, HostTensor> feeds;
  const Shape s{{"batch", c.batch}, {"length", c.length}};
  std::vector<std::int32_t> in, tg, seg, pos;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      in.push_back(static_cast<std::int32_t>((b * 5 + l * 3 + 1) % 31 + 1));
      tg.push_back(static_cast<std::int32_t>((b * 5 + l * 3 + 4) % 31 + 1));
      seg.push_back(1);
      pos.push_back(static_cast<std::int32_t>(l));
    }
  feeds[m.inputs.id()] = HostTensor::ints(s, in);
  feeds[m.targets.id()] = HostTensor::ints(s, tg);
  feeds[m.segments.id()] = HostTensor::ints(s, seg);
  feeds[m.positions.id()] = HostTensor::ints(s, pos);
  auto p = lower(g, mesh, rules);
  p->set_buffer_reuse(reuse != Reuse::none);
  p->set_buffer_plan(reuse == Reuse::planned);
  Trained t;
  for (int k = 0; k < steps; ++k) {
    const bool logits = fetch_logits && k % 2 == 1;
    const auto out =
        p->run(feeds, logits ? std::vector<Tensor>{m.loss, m.logits} : std::vector<Tensor>{m.loss});
    t.losses.push_back(static_cast<float>(out[0].at(0)));
    if (logits)
      for (float v : out[1].values<float>())
        t.logits.push_back(v);
    if (k == 0)
      t.allocations_after_first = p->buffer_pool().allocations();
    t.planned_hits = p->buffer_pool().planned_hits();
  }
  t.allocations_after_first = p->buffer_pool().allocations() - t.allocations_after_first;
  t.pool_bytes = p->buffer_pool().bytes();
  t.pool_peak = p->buffer_pool().peak_bytes();
  t.weights = global_weights(*p);
  return t;
}

}  // namespace

TEST(BufferPool, TrainingStepAllocatesNothingAfterTheFirst) {
  const auto per_size = train(Reuse::per_size, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(per_size.allocations_after_first, 0);
  EXPECT_GT(per_size.pool_bytes, 0);
  const auto planned = train(Reuse::planned, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(planned.allocations_after_first, 0);
  EXPECT_GT(planned.planned_hits, 0);
  EXPECT_LT(planned.pool_peak, per_size.pool_peak);  // shared objects instead of one per size
  const auto plain = train(Reuse::none, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(plain.pool_bytes, 0);
  expect_bitwise(per_size, plain, "1 processor, per-size reuse vs none");
  expect_bitwise(planned, plain, "1 processor, planned reuse vs none");
  EXPECT_LT(planned.losses.back(), planned.losses.front());
}

// Runs that fetch the logits every other step (their own sequence of buffers) give the same
// results as without reuse: requests that do not match the recorded run fall back safely.
TEST(BufferPool, RunsUnlikeTheRecordedOneStayRight) {
  const auto planned = train(Reuse::planned, single_processor_mesh(), LayoutRules(), true, 6);
  const auto plain = train(Reuse::none, single_processor_mesh(), LayoutRules(), true, 6);
  expect_bitwise(planned, plain, "1 processor, fetching the logits every other step");
  ASSERT_EQ(planned.logits.size(), plain.logits.size());
  ASSERT_FALSE(plain.logits.empty());
  EXPECT_EQ(std::memcmp(planned.logits.data(), plain.logits.data(), 4 * plain.logits.size()), 0);
}

TEST(BufferPool, SameResultsOnEveryMeshAndLayout) {
  const auto ref = train(Reuse::none, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"}) {
      const auto rules = instantiate(layout, mshape);
      const auto pooled = train(Reuse::planned, mesh, rules);
      const auto plain = train(Reuse::none, mesh, rules);
      const std::string what = mshape.to_string() + " layout " + layout;
      EXPECT_EQ(pooled.allocations_after_first, 0) << what;
      EXPECT_GT(pooled.planned_hits, 0) << what;
      expect_bitwise(pooled, plain, what + ": planned reuse vs none");
      for (size_t k = 0; k < ref.losses.size(); ++k)
        EXPECT_NEAR(pooled.losses[k], ref.losses[k], 1e-5 * std::abs(ref.losses[k]))
            << what << " step " << k;
    }
  }
}
