// Buffer reuse across runs (mtk/base/buffer_pool.hpp): a buffer is handed out again only when
// nothing else holds it; a training step allocates nothing after its first run; reuse changes no
// result bitwise, on one rank and on every mesh and layout.

#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/exec_space.hpp>
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

nn::TransformerConfig small_config() {
  return test::tiny_transformer();  // every split dim divisible by 8 ranks
}

struct Trained {
  std::vector<float> losses;
  std::vector<float> weights;  // every variable's global value after the last step
  std::int64_t allocations_after_first = -1;
  std::int64_t pool_bytes = 0;
};

// `steps` Adafactor steps of a small transformer, with or without buffer reuse.
Trained train(bool reuse, const Mesh& mesh, const LayoutRules& rules, int steps = 4) {
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
  p->set_buffer_reuse(reuse);
  Trained t;
  for (int k = 0; k < steps; ++k) {
    t.losses.push_back(static_cast<float>(p->run(feeds, {m.loss})[0].at(0)));
    if (k == 0)
      t.allocations_after_first = p->buffer_pool().allocations();
  }
  t.allocations_after_first = p->buffer_pool().allocations() - t.allocations_after_first;
  t.pool_bytes = p->buffer_pool().bytes();
  t.weights = global_weights(*p);
  return t;
}

}  // namespace

TEST(BufferPool, TrainingStepAllocatesNothingAfterTheFirst) {
  const auto pooled = train(true, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(pooled.allocations_after_first, 0);
  EXPECT_GT(pooled.pool_bytes, 0);
  const auto plain = train(false, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(plain.pool_bytes, 0);
  expect_bitwise(pooled, plain, "1 processor, reuse on vs off");
  EXPECT_LT(pooled.losses.back(), pooled.losses.front());
}

TEST(BufferPool, SameResultsOnEveryMeshAndLayout) {
  const auto ref = train(false, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"}) {
      const auto rules = instantiate(layout, mshape);
      const auto pooled = train(true, mesh, rules);
      const auto plain = train(false, mesh, rules);
      const std::string what = mshape.to_string() + " layout " + layout;
      EXPECT_EQ(pooled.allocations_after_first, 0) << what;
      expect_bitwise(pooled, plain, what + ": reuse on vs off");
      for (size_t k = 0; k < ref.losses.size(); ++k)
        EXPECT_NEAR(pooled.losses[k], ref.losses[k], 1e-5 * std::abs(ref.losses[k]))
            << what << " step " << k;
    }
  }
}
