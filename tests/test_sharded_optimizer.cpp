// The sharded optimizer update (mtk/optim/zero.hpp, docs/sharded-optimizer.md): training with it
// equals training without it, Adam bitwise on 1 and 2 ranks (the reduce-scatter sums the same two
// values as the allreduce) and within 1e-5 of the scale on 4 and 8 (MPI may sum in another
// order); Adafactor within 1e-5 everywhere (its whole-variable means become sums of per-shard
// partial sums); on data-parallel and model- plus data-parallel layouts. The gradients are
// reduce-scattered (overlapped or blocking), the slots are stored split over the batch's mesh dim
// and read back whole, the overlapped allgather of the new variables equals the blocking one, a
// checkpoint written with the option on restores with it off and the other way round, and small
// variables keep the full update. bfloat16 variables and slots, rounded to nearest or
// stochastically, store the same values with and without it.

#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "temp_dir.hpp"
#include "training_fixtures.hpp"
#include <memory>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

struct Trained {
  std::vector<float> losses;
  std::vector<float> weights;  // every variable's (and slot's) global value after the last step
  std::vector<float> norms;    // the gradient norm of each step
  std::string explain;
  std::string slot_layout;  // the layout of one slot of the first layer's d_ff weight
  std::map<Collective, std::int64_t> comm_bytes;  // Counters::comm_bytes
};

struct Options {
  std::string optimizer = "adam";
  bool shard = false;
  std::int64_t min_bytes = 0;    // the tiny model's variables are all small
  int microbatches = 0;          // > 0: nn::build_training with that many slices, else minimize()
  DType state = DType::float32;  // how variables and slots are stored
  Rounding rounding = Rounding::nearest;  // of bfloat16 variables (train.variable_rounding)
  ProgramOptions program = {};            // built and lowered with (program.*)
};

// A lowered tiny Transformer with its optimizer and its one batch of feeds.
struct Job {
  Graph g;
  nn::ModelGraph m;
  Tensor norm;
  std::map<int, HostTensor> feeds;
  LayoutRules rules;  // the optimizer's: the slots' per-tensor rules added
  std::unique_ptr<Program> program;
};

std::unique_ptr<Job> make_job(const Mesh& mesh, const LayoutRules& rules, const Options& o) {
  auto j = std::make_unique<Job>();
  j->g.set_options(o.program);
  const auto c = tiny_transformer();
  std::unique_ptr<optim::Optimizer> opt;
  if (o.optimizer == "adam")
    opt = std::make_unique<optim::Adam>();
  else
    opt = std::make_unique<optim::Adafactor>();
  opt->set_state_dtypes(o.state, o.state, o.rounding);
  if (o.shard)
    opt->set_sharding({rules, mesh.shape(), "batch", o.min_bytes});
  if (o.microbatches > 0) {
    const auto t = nn::build_training(j->g, c, o.microbatches, *opt, test_learning_rate(), 5);
    j->m = t.model;
    j->norm = t.gradient_norm;
  } else {
    j->m = nn::build_transformer(j->g, c, /*training=*/true, /*seed=*/5);
    optim::minimize(j->m.loss, *opt, test_learning_rate(), &j->norm);
  }
  j->feeds = lm_feeds(
      j->m, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 7 + l * 3 + 4) % 31 + 1; });
  j->rules = opt->layout_rules(rules);
  j->program = lower(j->g, mesh, j->rules);
  return j;
}

void run_steps(Job& j, int steps, Trained& t) {
  for (int k = 0; k < steps; ++k) {
    const auto out = j.program->run(j.feeds, {j.m.loss, j.norm});
    t.losses.push_back(static_cast<float>(out[0].at(0)));
    t.norms.push_back(static_cast<float>(out[1].at(0)));
  }
  t.weights = global_weights(*j.program);
}

Trained train(const Mesh& mesh, const LayoutRules& rules, const Options& o, int steps = 3) {
  auto j = make_job(mesh, rules, o);
  Trained t;
  run_steps(*j, steps, t);
  t.explain = j->program->explain();
  t.comm_bytes = j->program->counters().comm_bytes;
  for (const auto& name : j->program->variable_names())
    if (t.slot_layout.empty() && name.find("/adam_v") != std::string::npos)
      t.slot_layout = j->program->variable_layout(name).to_string();
  return t;
}

// Bitwise where a sum of two cannot change order, else within 1e-5 of the scale.
void expect_same(const Trained& a, const Trained& b, const std::string& what, bool bitwise) {
  if (bitwise && world_size() <= 2)
    return expect_bitwise(a, b, what);
  expect_close(a, b, what, 1e-5);
}

// Processors the layout splits dim batch over.
int batch_ways(const LayoutRules& rules, const MeshShape& mesh) {
  const int a = rules.mesh_axis_for("batch", mesh);
  return a < 0 ? 1 : static_cast<int>(mesh[a].size);
}

void check_layouts(const std::string& optimizer, bool bitwise_possible) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"}) {
      const auto rules = instantiate(layout, mshape);
      const std::string what = optimizer + " " + mshape.to_string() + " layout " + layout;
      const Trained off = train(mesh, rules, {optimizer, false});
      const Trained on = train(mesh, rules, {optimizer, true});
      const bool sharded = batch_ways(rules, mshape) > 1;
      EXPECT_EQ(on.explain.find("reduce_scatter") != std::string::npos, sharded) << what;
      EXPECT_EQ(off.explain.find("reduce_scatter"), std::string::npos) << what;
      if (optimizer == "adam" && sharded) {  // the slot is stored split over the batch's mesh dim
        const std::string at = "@" + mshape[rules.mesh_axis_for("batch", mshape)].name;
        EXPECT_NE(on.slot_layout.find(at), std::string::npos) << what << ": " << on.slot_layout;
      }
      expect_same(on, off, what + ": sharded vs full update", bitwise_possible);
      EXPECT_EQ(on.comm_bytes.count(Collective::reduce_scatter) > 0, sharded) << what;
      if (sharded && batch_ways(rules, mshape) == 2 && layout == "batch:@0") {
        // Each gradient's allreduce (n bytes) becomes a reduce-scatter and an allgather of n/2;
        // the scalar allreduces of the sharded norm (and Adafactor's means) add a little. (A dim
        // split over a model axis of size 1 is not reduce-scattered: allreduced and sliced.)
        auto total = [](const Trained& t) {
          std::int64_t b = 0;
          for (const auto& [kind, bytes] : t.comm_bytes)
            b += bytes;
          return b;
        };
        auto kinds = [](const Trained& t) {
          std::string k;
          for (const auto& [kind, bytes] : t.comm_bytes)
            k += cat(" ", to_string(kind), " ", bytes);
          return k;
        };
        EXPECT_NEAR(static_cast<double>(total(on)), static_cast<double>(total(off)), 4096.0)
            << what << ": on" << kinds(on) << ", off" << kinds(off);
      }
      EXPECT_LT(on.losses.back(), on.losses.front()) << what;
    }
  }
}

}  // namespace

TEST(ShardedOptimizer, AdamEqualsTheFullUpdateOnEveryMeshAndLayout) {
  check_layouts("adam", true);
}

TEST(ShardedOptimizer, AdafactorEqualsTheFullUpdateWithinReassociation) {
  check_layouts("adafactor", false);
}

TEST(ShardedOptimizer, SmallVariablesKeepTheFullUpdate) {
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  Mesh mesh(mshape, MPI_COMM_WORLD);
  const auto rules = instantiate("batch:@0", mshape);
  // Default threshold 64 KiB: every variable of the tiny model is smaller.
  const Trained on = train(mesh, rules, {"adam", true, 64 << 10}, 1);
  EXPECT_EQ(on.explain.find("reduce_scatter"), std::string::npos);
  const Trained off = train(mesh, rules, {"adam", false}, 1);
  expect_bitwise(on, off, "64 KiB threshold");
}

TEST(ShardedOptimizer, BlockingReduceScatterEqualsTheOverlappedOne) {
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  Mesh mesh(mshape, MPI_COMM_WORLD);
  const auto rules = instantiate("batch:@0", mshape);
  const Trained overlapped = train(mesh, rules, {"adam", true});
  Options o{"adam", true};
  o.program.overlap_collectives = false;
  const Trained blocking = train(mesh, rules, o);
  expect_same(blocking, overlapped, "program.overlap_collectives false vs true", true);
  if (world_size() > 1) {
    EXPECT_NE(overlapped.explain.find("reduce_scatter(sum) start"), std::string::npos);
  }
}

TEST(ShardedOptimizer, BlockingAllgatherEqualsTheOverlappedOne) {
  // The allgather moves bytes only: bitwise on every mesh, with Adafactor's blocking allreduces
  // posted while the gathers are in flight.
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  Mesh mesh(mshape, MPI_COMM_WORLD);
  const auto rules = instantiate("batch:@0", mshape);
  for (const std::string optimizer : {"adam", "adafactor"}) {
    const Trained overlapped = train(mesh, rules, {optimizer, true});
    Options o{optimizer, true};
    o.program.overlap_allgather = false;
    const Trained blocking = train(mesh, rules, o);
    expect_bitwise(blocking, overlapped, optimizer + ": program.overlap_allgather false vs true");
    EXPECT_EQ(overlapped.explain.find("allgather start") != std::string::npos, world_size() > 1)
        << optimizer;
    EXPECT_EQ(blocking.explain.find("allgather start"), std::string::npos) << optimizer;
  }
}

TEST(ShardedOptimizer, AnalysisCountsWhatTheRunHolds) {
  // analyze() with the optimizer's rules (mtk-layout, --dry-run, the memory check): the slots
  // split, the gathers in the variables' storage, the same collectives as the lowered program.
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  Mesh mesh(mshape, MPI_COMM_WORLD);
  const auto rules = instantiate("batch:@0", mshape);
  for (const bool shard : {false, true}) {
    auto j = make_job(mesh, rules, {"adam", shard});
    const auto plan = analyze(j->g, mshape, j->rules, world_rank());
    const Counters &want = j->program->counters(), &got = plan->counters();
    const std::string what = shard ? "sharded" : "full update";
    EXPECT_EQ(got.variable_bytes, want.variable_bytes) << what;
    EXPECT_EQ(got.live_peak_bytes, want.live_peak_bytes) << what;
    EXPECT_EQ(got.comm_bytes, want.comm_bytes) << what;
  }
}

TEST(ShardedOptimizer, CheckpointsRestoreWithTheOptionOnOrOff) {
  // 2 steps, a checkpoint, 1 more step with the option the other way: the run of 3 steps.
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    const auto rules = instantiate("vocab:@0;d_ff:@0;heads:@0;batch:@1", mshape);
    const Trained straight = train(mesh, rules, {"adam", false});
    for (const bool first_sharded : {true, false}) {
      const std::string what =
          mshape.to_string() + (first_sharded ? ": sharded, then full" : ": full, then sharded");
      TempDir dir(MPI_COMM_WORLD);
      const std::string path = dir.path() + "/step-2";
      Trained resumed;
      {
        auto first = make_job(mesh, rules, {"adam", first_sharded});
        run_steps(*first, 2, resumed);
        write_checkpoint_directory(*first->program, path, CheckpointMetadata());
      }
      auto second = make_job(mesh, rules, {"adam", !first_sharded});
      restore_checkpoint(*second->program, path);
      EXPECT_EQ(second->program->step(), 2) << what;
      run_steps(*second, 1, resumed);
      expect_same(resumed, straight, what, true);
    }
  }
}

TEST(ShardedOptimizer, MicrobatchesAndTheGradientNorm) {
  // build_training with slices reads whole gradients (its norm allreduces them): the update is
  // sharded all the same. The norm from shards equals the whole one within reassociation.
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  Mesh mesh(mshape, MPI_COMM_WORLD);
  const auto rules = instantiate("batch:@0", mshape);
  for (const int k : {0, 2}) {
    if (k * world_size() > tiny_transformer().batch)
      continue;  // each slice's batch must divide over the ranks
    const std::string what = "microbatches " + std::to_string(k);
    const Trained off = train(mesh, rules, {"adam", false, 0, k});
    const Trained on = train(mesh, rules, {"adam", true, 0, k});
    expect_same(on, off, what, true);
    ASSERT_EQ(on.norms.size(), off.norms.size());
    for (size_t s = 0; s < on.norms.size(); ++s)
      EXPECT_NEAR(on.norms[s], off.norms[s], 1e-5 * off.norms[s]) << what << " step " << s;
  }
}

TEST(ShardedOptimizer, Bfloat16VariablesAndSlots) {
  // bfloat16 storage: the variable is gathered into a new buffer and rounded by its assignment,
  // so stochastic rounding draws each element's bits by its index in the whole variable, as
  // without sharding.
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    const auto rules = instantiate("vocab:@0;d_ff:@0;heads:@0;batch:@1", mshape);
    for (const std::string optimizer : {"adam", "adafactor"}) {
      std::vector<float> nearest;  // the weights rounded to nearest, unsharded
      for (const Rounding rounding : {Rounding::nearest, Rounding::stochastic}) {
        const std::string what = cat(optimizer, " bfloat16 state ", mshape.to_string(),
                                     rounding == Rounding::stochastic ? " stochastic" : "");
        const Trained off = train(mesh, rules, {optimizer, false, 0, 0, DType::bfloat16, rounding});
        const Trained on = train(mesh, rules, {optimizer, true, 0, 0, DType::bfloat16, rounding});
        // Adafactor's reassociated means may round a value the other way: within bf16's step.
        if (optimizer == "adam")
          expect_same(on, off, what, true);
        else
          expect_close(on, off, what, 1e-2);
        if (rounding == Rounding::nearest)
          nearest = off.weights;
        else  // the option took effect
          EXPECT_NE(off.weights, nearest) << what;
      }
    }
  }
}
