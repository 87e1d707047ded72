// In-place optimizer updates (program.in_place_updates, mtk/lower/in_place_updates.hpp): an update
// step writes a float32 variable's and its slots' new values into their storage when nothing later
// in the run reads the old values. The results are bitwise those of new buffers swapped in at the
// end of the run, on every mesh, for every optimizer and model kind; a run that fetches a variable
// or a step that reads it after its update keeps the old value; the memory prediction loses the
// optimizer's second copy of its state. Elementwise steps write over an input that dies there
// (mtk/lower/in_place_activations.hpp): a fetched intermediate keeps its value, and the logits'
// gradient takes the logits' buffer. bfloat16 variables are widened again at distant readers
// (mtk/lower/bf16_rewiden.hpp), bitwise the same.

#include <mtk/base/error.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

struct UpdateSetup {
  std::string name;
  std::string optimizer = "adam";
  bool moe = false, encoder_decoder = false;
  DType slots = DType::float32;
  nn::Recompute recompute = nn::Recompute::none;
  int microbatches = 1;
  DType variables = DType::float32;
};

std::unique_ptr<optim::Optimizer> make_optimizer(const UpdateSetup& s) {
  std::unique_ptr<optim::Optimizer> o;
  if (s.optimizer == "adam") {
    o = std::make_unique<optim::Adam>();
  } else {
    optim::AdafactorOptions a;
    a.beta1 = 0.5;                  // a momentum slot
    a.min_dim_size_to_factor = 16;  // factored and unfactored second moments on the tiny model
    o = std::make_unique<optim::Adafactor>(a);
  }
  o->set_state_dtypes(s.variables, s.slots);
  return o;
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> variables;
  int in_place = 0;
};

// Three steps of the tiny model with in-place updates `on` or off.
Trained train(const UpdateSetup& s, const Mesh& mesh, const LayoutRules& rules, bool on) {
  ProgramOptions options;
  options.in_place_updates = on;
  Graph g(options);
  nn::TransformerConfig c = tiny_transformer(s.moe, s.encoder_decoder);
  c.recompute = s.recompute;
  auto opt = make_optimizer(s);
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.01;
  const nn::TrainingGraph tg = nn::build_training(g, c, s.microbatches, *opt, lr, 3);
  auto feeds = lm_feeds(
      tg.model, c, [](std::int64_t b, std::int64_t l) { return (b * 7 + l * l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 2) % 31 + 1; });
  if (s.encoder_decoder) {
    std::vector<std::int32_t> src(static_cast<size_t>(c.batch * c.length));
    for (size_t k = 0; k < src.size(); ++k)
      src[k] = static_cast<std::int32_t>((k * 11 + 3) % 31 + 1);
    feeds[tg.model.encoder_inputs.id()] =
        HostTensor::ints(Shape{{"batch", c.batch}, {"length", c.length}}, src);
    feeds[tg.model.encoder_segments.id()] = feeds[tg.model.segments.id()];
    feeds[tg.model.encoder_positions.id()] = feeds[tg.model.positions.id()];
  }
  auto p = lower(g, mesh, rules);
  Trained t;
  t.in_place = p->in_place_updates();
  for (int k = 0; k < 3; ++k)
    t.losses.push_back(p->run(feeds, {tg.model.loss})[0].at(0));
  for (const auto& name : p->variable_names())
    t.variables[name] = p->variable_value(name).values<float>();
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(InPlaceUpdates, BitwiseEqualToNewBuffersOnEveryMesh) {
  const std::vector<UpdateSetup> setups = {
      {"adam"},
      {"adafactor", "adafactor"},
      {"moe, bf16 slots", "adam", true, false, DType::bfloat16},
      {"encoder-decoder, layer recompute", "adam", false, true, DType::float32,
       nn::Recompute::layer},
      {"adafactor, 2 microbatches", "adafactor", false, false, DType::float32, nn::Recompute::none,
       2},
      // bf16 variables: widened again at distant readers (mtk/lower/bf16_rewiden.hpp) when on
      {"bf16 variables and slots, layer recompute", "adam", false, false, DType::bfloat16,
       nn::Recompute::layer, 1, DType::bfloat16},
      {"bf16 variables, 2 microbatches", "adafactor", false, false, DType::float32,
       nn::Recompute::none, 2, DType::bfloat16},
  };
  const auto shapes = meshes_of_size(world_size());
  const MeshShape& mshape = shapes.back();  // the most mesh dims
  Mesh mesh(mshape, MPI_COMM_WORLD);
  for (const UpdateSetup& s : setups) {
    const Trained ref = train(s, single_processor_mesh(), LayoutRules(), true);
    for (const std::string layout :
         {"batch:@0;experts:@0;d_ff:@1;heads:@1", "vocab:@0;d_model:@1"}) {
      const LayoutRules rules = instantiate(layout, mshape);
      const std::string where = s.name + " on " + mshape.to_string() + " " + layout;
      const Trained on = train(s, mesh, rules, true), off = train(s, mesh, rules, false);
      EXPECT_GT(on.in_place, 0) << where;
      EXPECT_EQ(off.in_place, 0) << where;
      for (size_t k = 0; k < on.losses.size(); ++k) {
        EXPECT_EQ(on.losses[k], off.losses[k]) << where << " step " << k;
        EXPECT_NEAR(on.losses[k], ref.losses[k], 1e-4 * ref.losses[k]) << where << " step " << k;
      }
      ASSERT_EQ(on.variables.size(), off.variables.size()) << where;
      for (const auto& [name, values] : on.variables)
        EXPECT_TRUE(same_bits(values, off.variables.at(name))) << where << ": " << name;
    }
  }
}

namespace {

// One weight w [d] trained by Adam on loss = sum(w * x); `later` adds a step that reads w after
// the update (built after minimize, so lowered after it) and returns it.
struct Small {
  Graph g;
  Tensor w, x, loss, doubled;
  std::unique_ptr<Program> p;
  explicit Small(bool later) {
    const Shape s{{"d", 8}};
    w = variable(g, "w", s, Initializer::constant(1.0), true);
    x = placeholder(g, "x", s);
    loss = reduce_sum(w * x);
    optim::Adam adam;
    optim::LearningRateSchedule lr;
    lr.kind = optim::LearningRateSchedule::Kind::constant;
    lr.value = 0.5;
    optim::minimize(loss, adam, lr);
    if (later)
      doubled = multiply(w, 2.0);
    p = lower(g, single_processor_mesh(), LayoutRules());
  }
  std::map<int, HostTensor> feeds() const {
    return {{x.id(), HostTensor::floats(Shape{{"d", 8}}, std::vector<float>(8, 1.f))}};
  }
};

}  // namespace

TEST(InPlaceUpdates, AFetchedVariableKeepsItsOldValue) {
  Small m(false);
  EXPECT_EQ(m.p->in_place_updates(), 3) << "w, w/adam_m and w/adam_v";
  // Fetched under its own name and under a reshape's: the run returns the value it read.
  Tensor renamed = reshape(m.w, Shape{{"e", 8}});
  auto q = lower(m.g, single_processor_mesh(), LayoutRules());
  const auto got = q->run(m.feeds(), {m.w, renamed});
  for (const HostTensor& h : got)
    for (float v : h.values<float>())
      EXPECT_EQ(v, 1.f) << "the fetched variable holds its value before the update";
  const float after = q->variable_value("w").at(0);
  EXPECT_LT(after, 1.f) << "the update still applies";
  // Unfetched, the next run updates in place and matches the out-of-place program.
  q->run(m.feeds());
  ProgramOptions off;
  off.in_place_updates = false;
  auto r = lower(m.g, single_processor_mesh(), LayoutRules(), off);
  EXPECT_EQ(r->in_place_updates(), 0);
  r->run(m.feeds(), {m.w});
  r->run(m.feeds());
  EXPECT_TRUE(
      same_bits(q->variable_value("w").values<float>(), r->variable_value("w").values<float>()));
}

TEST(InPlaceUpdates, AReaderAfterTheUpdateKeepsItOutOfPlace) {
  Small m(true);
  EXPECT_EQ(m.p->in_place_updates(), 2) << "w is read after its update; its slots are not";
  const auto got = m.p->run(m.feeds(), {m.doubled});
  for (float v : got[0].values<float>())
    EXPECT_EQ(v, 2.f) << "the later step reads the value before the update";
  EXPECT_LT(m.p->variable_value("w").at(0), 1.f);
}

TEST(InPlaceUpdates, ThePeakLosesTheOptimizersSecondCopy) {
  auto analyzed = [](bool on, bool planned = true) {
    ProgramOptions options;
    options.in_place_updates = on;
    options.buffer_plan = planned;
    Graph g(options);
    nn::TransformerConfig c = tiny_transformer();
    c.d_model = 64;  // the variables, not the activations, dominate
    c.d_ff = 256;
    c.vocab_size = 256;
    optim::Adam adam;
    optim::LearningRateSchedule lr;
    nn::build_training(g, c, 1, adam, lr, 3);
    return analyze(g, MeshShape::parse("a:2"), LayoutRules::parse("d_ff:a"))->counters();
  };
  const Counters on = analyzed(true), off = analyzed(false);
  // Adam's state is three copies of the variables (parameter, m, v): without in-place updates the
  // new values of all three are alive at the end next to the old ones.
  EXPECT_LT(on.live_peak_bytes, off.live_peak_bytes - off.variable_bytes / 2)
      << "variables " << off.variable_bytes;
  EXPECT_LT(on.peak_bytes, off.peak_bytes - off.variable_bytes / 2)
      << "variables " << off.variable_bytes;
}

TEST(InPlaceActivations, AFetchedIntermediateKeepsItsValue) {
  // y = 2 x dies at z = exp(y), z at w = z + x: both may write over their input (x is fed).
  Graph g;
  const Shape s{{"d", 8}};
  const Tensor x = placeholder(g, "x", s);
  const Tensor y = multiply(x, 2.0);
  const Tensor z = exp(y);
  const Tensor w = z + x;
  std::vector<float> xs(8);
  for (size_t k = 0; k < xs.size(); ++k)
    xs[k] = 0.1f * static_cast<float>(k);
  const std::map<int, HostTensor> feeds{{x.id(), HostTensor::floats(s, xs)}};
  auto p = lower(g, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(p->in_place_activations(), 2) << "exp over y, the add over z";
  const auto got = p->run(feeds, {y, z, w});
  const auto only = p->run(feeds, {w});
  for (size_t k = 0; k < xs.size(); ++k) {
    const float yk = 2.f * xs[k];
    EXPECT_EQ(got[0].data<float>()[k], yk) << "y fetched: the exp left it alone";
    // Within 4 ulps: a GPU's exp is not the host's bit for bit; an overwrite would be far off.
    EXPECT_FLOAT_EQ(got[1].data<float>()[k], std::exp(yk)) << "z fetched";
    EXPECT_FLOAT_EQ(got[2].data<float>()[k], std::exp(yk) + xs[k]);
    EXPECT_EQ(only[0].data<float>()[k], got[2].data<float>()[k]) << "in place, w alone";
  }
}

TEST(InPlaceActivations, TheLogitsGradientTakesTheLogitsBuffer) {
  // A vocabulary of 2048 and 64 positions: the logits [batch, length, vocab] are the largest
  // activation; with in-place steps their gradient no longer lives beside them.
  auto analyzed = [](bool on, bool planned = true) {
    ProgramOptions options;
    options.in_place_updates = on;
    options.buffer_plan = planned;
    Graph g(options);
    nn::TransformerConfig c = tiny_transformer();
    c.vocab_size = 2048;
    c.length = 64;
    optim::Adafactor opt;
    nn::build_training(g, c, 1, opt, optim::LearningRateSchedule());
    auto p = analyze(g, MeshShape::parse("b:1"), LayoutRules());
    return std::make_pair(p->counters(), c.batch * c.length * c.vocab_size * 4);
  };
  const auto [on, logits] = analyzed(true);
  const auto [off, unused] = analyzed(false);
  // The most live bytes fall by nearly the logits' size (the peak moves to the step after), the
  // planned pool's as much, the per-size pool's (program.buffer_plan false) by more.
  EXPECT_LE(on.live_peak_bytes, off.live_peak_bytes - 0.9 * logits) << "logits " << logits;
  EXPECT_LE(on.peak_bytes, off.peak_bytes - 0.85 * logits) << "logits " << logits;
  const auto per_size_on = analyzed(true, false).first;
  const auto per_size_off = analyzed(false, false).first;
  EXPECT_LE(per_size_on.peak_bytes, per_size_off.peak_bytes - logits) << "logits " << logits;
}
