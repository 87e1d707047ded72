// bfloat16 training (model.activation_dtype: bfloat16): every contraction of the model and of its
// gradients rounds its operands to bf16; the loss of a small model follows the float32 loss
// within bf16 tolerance, and is the same on every mesh and layout.

#include <mtk/base/error.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/lower/bf16_activations.hpp>
#include <mtk/lower/bf16_reuse.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/runtime/reductions_in_flight.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

nn::TransformerConfig small_config(const std::string& dtype) {
  nn::TransformerConfig c = test::tiny_transformer();
  c.activation_dtype = dtype;
  return c;
}

void feed(const nn::ModelGraph& m, const nn::TransformerConfig& c,
          std::map<int, HostTensor>& feeds) {
  const Shape s{{"batch", c.batch}, {"length", c.length}};
  std::vector<std::int32_t> in, tg, seg, pos;
  auto token = [&](std::int64_t b, std::int64_t l) {
    return static_cast<std::int32_t>((b * 7 + l * l * 3 + 1) % (c.vocab_size - 1) + 1);
  };
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      in.push_back(token(b, l));
      tg.push_back(l + 1 == c.length ? 0 : token(b, l + 1));
      seg.push_back(1);
      pos.push_back(static_cast<std::int32_t>(l));
    }
  feeds[m.inputs.id()] = HostTensor::ints(s, in);
  feeds[m.targets.id()] = HostTensor::ints(s, tg);
  feeds[m.segments.id()] = HostTensor::ints(s, seg);
  feeds[m.positions.id()] = HostTensor::ints(s, pos);
}

// Losses of `steps` SGD steps of the small model on `mesh` under `rules`; `inspect` sees the
// program after them.
std::vector<double> train(const std::string& dtype, const Mesh& mesh, const LayoutRules& rules,
                          int steps = 8, const std::function<void(Program&)>& inspect = nullptr,
                          const ProgramOptions& options = {}) {
  Graph g(options);
  const auto c = small_config(dtype);
  nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/3);
  optim::Sgd opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.2;  // a steady descent: no step where the loss jumps and amplifies differences
  optim::minimize(m.loss, opt, lr);
  std::map<int, HostTensor> feeds;
  feed(m, c, feeds);
  auto p = lower(g, mesh, rules);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(p->run(feeds, {m.loss})[0].at(0));
  if (inspect)
    inspect(*p);
  return losses;
}

// A bf16 run with activations stored as bf16 (program.bf16_activations: `stored` "1" always, "0"
// never) or not: its losses, every variable after it, and the value of `fetch` (a graph tensor; -1:
// none) in its last step.
struct Bf16Run {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  std::vector<float> fetched;
  std::vector<int> stored;
  int bits_only = 0, weight_conversions = 0;
  std::int64_t peak = 0, copies_left = 0;
};

Bf16Run run_bf16(const Mesh& mesh, const LayoutRules& rules, const char* stored, int fetch = -1,
                 int steps = 3, std::int64_t loss_chunks = 1) {
  // program.bf16_activations: "1" always, "0" never, "auto"
  ProgramOptions options;
  options.bf16_activations = std::string(stored) == "1"   ? Bf16Activations::on
                             : std::string(stored) == "0" ? Bf16Activations::off
                                                          : Bf16Activations::automatic;
  Graph g(options);
  auto c = small_config("bfloat16");
  c.loss_chunks = loss_chunks;
  nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/3);
  optim::Adam opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.01;
  optim::minimize(m.loss, opt, lr);
  std::map<int, HostTensor> feeds;
  feed(m, c, feeds);
  auto p = lower(g, mesh, rules);
  Bf16Run r;
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensor> fetches{m.loss};
    if (fetch >= 0 && s + 1 == steps)
      fetches.emplace_back(&g, fetch);
    const auto out = p->run(feeds, fetches);
    r.losses.push_back(out[0].at(0));
    if (fetches.size() > 1)
      r.fetched = out[1].values<float>();
  }
  for (const auto& name : p->variable_names())
    r.weights.push_back(p->variable_value(name).values<float>());
  r.stored = p->bf16_stored_activations();
  r.bits_only = p->bf16_bits_only_tensors();
  r.weight_conversions = p->bf16_weight_conversions();
  r.peak = p->counters().peak_bytes;
  r.copies_left = p->bf16_copies().bytes();
  return r;
}

// Kokkos kernel and region counts while alive: bf16 rounding passes and two-operand einsums.
struct EinsumCounter {
  static int& roundings() {
    static int n = 0;
    return n;
  }
  static int& einsums() {
    static int n = 0;
    return n;
  }
  EinsumCounter() {
    roundings() = einsums() = 0;
    Kokkos::Tools::Experimental::set_push_region_callback([](const char* name) {
      if (std::string(name) == "mtk::kernels::einsum")
        ++einsums();
    });
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(
        [](const char* name, std::uint32_t, std::uint64_t*) {
          // Rounded to bf16 values (fp32 bodies) or converted to bf16 storage (oneDNN's).
          if (std::string(name) == "mtk::kernels::einsum bf16 rounding" ||
              std::string(name) == "mtk::kernels::einsum bf16 conversion")
            ++roundings();
        });
  }
  ~EinsumCounter() {
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  }
};

}  // namespace

TEST(Bf16Training, EveryContractionOfTheStepIsBf16) {
  for (const std::string dtype : {"float32", "bfloat16"}) {
    EinsumCounter count;
    std::int64_t kept_copies_used = 0;
    train(dtype, single_processor_mesh(), LayoutRules(), 1,
          [&](Program& p) { kept_copies_used = p.bf16_copies().hits(); });
    ASSERT_GT(EinsumCounter::einsums(), 20) << dtype;
    // Forward, backward (einsum and multiply gradients) and no contraction in the SGD update:
    // each two-operand einsum rounds both operands in bf16 (or takes the bf16 copy an earlier
    // contraction of the step kept, program.bf16_copies) and none in float32.
    EXPECT_EQ(EinsumCounter::roundings() + kept_copies_used,
              dtype == "bfloat16" ? 2 * EinsumCounter::einsums() : 0)
        << dtype << ": " << EinsumCounter::einsums() << " einsums, " << kept_copies_used
        << " kept copies used";
  }
}

// Kept bf16 copies (program.bf16_copies, mtk/lower/bf16_reuse.hpp) hold the values a conversion
// would give: training with and without them is bitwise the same, on the mesh at hand too.
TEST(Bf16Training, KeptCopiesChangeNothing) {
  try {
    kernels::set_bf16_gemm(kernels::Bf16Gemm::onednn);
  } catch (const Error& e) {
    kernels::set_bf16_gemm(kernels::Bf16Gemm::automatic);
    GTEST_SKIP() << e.what();
  }
  if (!kernels::bf16_copies_used()) {
    kernels::reset_bf16_gemm();
    GTEST_SKIP() << "no bf16 copies to keep on this CPU: " << kernels::bf16_gemm_description();
  }
  const Mesh mesh(MeshShape::parse("b:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const LayoutRules rules = LayoutRules::parse("batch:b");
  auto run = [&](const char* copies, std::int64_t& hits, std::int64_t& peak) {
    ProgramOptions options;
    options.bf16_copies = std::string(copies) == "1";
    return train(
        "bfloat16", mesh, rules, 4,
        [&](Program& p) {
          hits = p.bf16_copies().hits();
          peak = p.counters().peak_bytes;
          EXPECT_EQ(p.bf16_copies().bytes(), 0) << "copies outlived the run";
          if (std::string(copies) == "1") {
            EXPECT_GT(p.bf16_kept_tensors(), 0);
            EXPECT_GT(p.bf16_copies().peak_bytes(), 0);
          } else {
            EXPECT_EQ(p.bf16_kept_tensors(), 0);
          }
        },
        options);
  };
  std::int64_t hits_off = 0, hits_on = 0, peak_off = 0, peak_on = 0;
  const auto off = run("0", hits_off, peak_off);
  const auto on = run("1", hits_on, peak_on);
  kernels::reset_bf16_gemm();
  EXPECT_EQ(on, off);
  EXPECT_EQ(hits_off, 0);
  EXPECT_GT(hits_on, 0);
  EXPECT_GT(peak_on, peak_off) << "the prediction does not count the kept copies";
}

// The plan: which tensors keep their copy and for how long (synthetic steps).
TEST(Bf16Reuse, KeepsVariablesAndCloseReadersOnly) {
  auto step = [](std::vector<int> bf16_reads, std::vector<int> writes = {}) {
    Program::Step s{reduction_wait_kind(),
                    "step",
                    Program::Category::compute,
                    false,
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {}};
    s.reads = bf16_reads;
    s.writes = std::move(writes);
    s.bf16_reads = std::move(bf16_reads);
    return s;
  };
  // Tensors: 0 a variable read at 0 and 30; 1 read at 2 and 4; 2 read at 3 and 20; 3 read once;
  // 4 read at 5 and 7 but rewritten at 6.
  std::vector<Program::Step> steps;
  for (int s = 0; s < 32; ++s)
    steps.push_back(step({}));
  steps[0] = step({0, 3});
  steps[30] = step({0});
  steps[2] = step({1});
  steps[4] = step({1});
  steps[3] = step({2});
  steps[20] = step({2});
  steps[5] = step({4});
  steps[6] = step({}, {4});
  steps[7] = step({4});
  steps[1].bf16_writes = {1};  // tensor 1's producer writes its copy: held from step 1
  const std::vector<std::int64_t> elements{1000, 300, 50, 10, 10};
  const Bf16ReusePlan plan = plan_bf16_reuse(steps, 5, {0}, elements);
  EXPECT_EQ(plan.keep, (std::vector<bool>{true, true, false, false, false}));
  EXPECT_EQ(plan.kept_tensors, 2);
  EXPECT_EQ(plan.variable_copy_bytes, 2000);
  // Tensor 1's copy, 300 bf16 values as 150 float32 words, is scratch of the steps it spans, from
  // its producer's; an operand without a kept copy is converted into scratch of its step (3 at
  // step 0, 2 at 3 and 20, 4 at 5 and 7).
  auto scratch = [&](const std::vector<std::pair<int, std::int64_t>>& spans, size_t s) {
    std::vector<std::pair<DType, std::int64_t>> v;
    for (const auto& [step, words] : spans)
      if (static_cast<size_t>(step) == s)
        v.emplace_back(DType::float32, words);
    return v;
  };
  const std::vector<std::pair<int, std::int64_t>> expected{
      {1, 150}, {2, 150}, {3, 150}, {4, 150}, {0, 5}, {3, 25}, {20, 25}, {5, 5}, {7, 5}};
  for (size_t s = 0; s < steps.size(); ++s) {
    EXPECT_EQ(plan.drop_after[s], s == 4 ? std::vector<int>{1} : std::vector<int>{}) << s;
    EXPECT_EQ(steps[s].scratch, scratch(expected, s)) << s;
  }
  EXPECT_EQ(plan.bits_only, std::vector<bool>(5, false));
  EXPECT_EQ(plan.variable_conversions, 1);
  {
    // Windows for variables: tensor 0, read at 0 and 30, gets a copy at each reader, dropped after
    // it (500 words of scratch there), none held between, and nothing in variable_copy_bytes.
    auto fresh = steps;
    for (auto& st : fresh)
      st.scratch.clear();
    const Bf16ReusePlan w = plan_bf16_reuse(fresh, 5, {0}, elements, {}, nullptr, true);
    EXPECT_EQ(w.keep, plan.keep);
    EXPECT_EQ(w.variable_copy_bytes, 0);
    EXPECT_EQ(w.variable_conversions, 2);
    auto with_windows = expected;
    with_windows.insert(with_windows.end(), {{0, 500}, {30, 500}});
    for (size_t s = 0; s < fresh.size(); ++s) {
      std::vector<int> drops = plan.drop_after[s];
      if (s == 0 || s == 30)
        drops.push_back(0);
      EXPECT_EQ(w.drop_after[s], drops) << s;
      auto want = scratch(with_windows, s);
      std::sort(want.begin(), want.end());
      auto got = fresh[s].scratch;
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << s;
    }
  }
  // Tensor 1 read only through its rounding, its producer able to write the bits alone: with
  // bits allowed (a set of fixed tensors given) and 1 not fixed, its copy is its buffer (no
  // scratch); fixed (fetched, a feed) or not allowed, as above.
  for (auto& st : steps)
    st.bf16_exact_reads = st.bf16_reads;
  steps[1].writes = {1};  // its producer
  steps[1].bf16_bits_only = {1};
  for (const std::set<int>& fixed : {std::set<int>{}, std::set<int>{1}}) {
    auto fresh = steps;
    for (auto& st : fresh)
      st.scratch.clear();
    const Bf16ReusePlan p = plan_bf16_reuse(fresh, 5, {0}, elements, {}, &fixed);
    const bool alone = fixed.empty();
    EXPECT_EQ(p.keep, plan.keep);
    EXPECT_EQ(p.bits_only, (std::vector<bool>{false, alone, false, false, false}));
    EXPECT_EQ(p.drop_after, plan.drop_after);
    for (size_t s = 0; s < fresh.size(); ++s) {
      auto want = scratch(expected, s);
      if (alone && s >= 1 && s <= 4)  // no copy beside tensor 1's buffer
        want.erase(want.begin());
      EXPECT_EQ(fresh[s].scratch, want) << s;
    }
  }
}

TEST(Bf16Training, LossFollowsFloat32WithinBf16Tolerance) {
  const auto fp32 = train("float32", single_processor_mesh(), LayoutRules());
  const auto bf16 = train("bfloat16", single_processor_mesh(), LayoutRules());
  ASSERT_EQ(fp32.size(), bf16.size());
  double max_rel = 0;
  for (size_t s = 0; s < fp32.size(); ++s) {
    const double rel = std::fabs(bf16[s] - fp32[s]) / fp32[s];
    max_rel = std::max(max_rel, rel);
    EXPECT_LE(rel, 1e-2) << "step " << s << ": bf16 " << bf16[s] << " fp32 " << fp32[s];
  }
  EXPECT_GT(max_rel, 1e-7) << "bf16 gave exactly the float32 losses: nothing was rounded";
  EXPECT_LT(bf16.back(), 0.9 * bf16.front()) << "bf16 training does not learn";
}

TEST(Bf16Training, OneDnnAndEmulatedPathsAgree) {
  kernels::set_bf16_gemm(kernels::Bf16Gemm::emulate);
  const auto emulated = train("bfloat16", single_processor_mesh(), LayoutRules());
  try {
    kernels::set_bf16_gemm(kernels::Bf16Gemm::onednn);
  } catch (const Error& e) {
    kernels::set_bf16_gemm(kernels::Bf16Gemm::automatic);
    GTEST_SKIP() << e.what();
  }
  const auto onednn = train("bfloat16", single_processor_mesh(), LayoutRules());
  kernels::set_bf16_gemm(kernels::Bf16Gemm::automatic);
  for (size_t s = 0; s < emulated.size(); ++s)
    EXPECT_NEAR(onednn[s], emulated[s], 4e-3 * emulated[s]) << "step " << s;
}

TEST(Bf16Training, SameLossOnEveryMeshAndLayout) {
  const auto ref = train("bfloat16", single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout :
         {"batch:@0", "vocab:@0;d_ff:@0;heads:@0", "batch:@0;vocab:@1;d_ff:@1;heads:@1"}) {
      const auto got = train("bfloat16", mesh, instantiate(layout, mshape));
      double max_rel = 0;
      for (size_t s = 0; s < ref.size(); ++s) {
        max_rel = std::max(max_rel, std::fabs(got[s] - ref[s]) / ref[s]);
        // Layouts change only the order of float32 sums; a changed last bit can move a bf16
        // rounding in the next contraction, so the tolerance is bf16's (2^-8), not float32's.
        EXPECT_NEAR(got[s], ref[s], 4e-3 * ref[s])
            << mshape.to_string() << " layout " << layout << " step " << s;
      }
      EXPECT_LT(max_rel, 4e-3);
    }
  }
}

TEST(Bf16Training, ConfigNamesTheAllowedDtypes) {
  auto c = small_config("float16");
  try {
    c.validate();
    ADD_FAILURE() << "float16 accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* part : {"model.activation_dtype", "'float16'", "float32", "bfloat16"})
      EXPECT_NE(what.find(part), std::string::npos) << what;
  }
  EXPECT_EQ(small_config("bfloat16").contraction_precision(), Precision::bfloat16);
  EXPECT_EQ(small_config("float32").contraction_precision(), Precision::float32);
  EXPECT_NE(small_config("bfloat16").to_string().find("bfloat16"), std::string::npos);
}

// Activations kept as bf16 between the forward and the backward (program.bf16_activations,
// mtk/lower/bf16_activations.hpp) are read only by bf16 contractions, which round them anyway:
// training is bitwise the same with and without, on each bf16 path, every mesh of the world and
// data and model parallel layouts. Forced (1) they are stored everywhere; under `auto` only where
// the predicted peak falls, so it never rises.
TEST(Bf16Activations, StoredActivationsChangeNothing) {
  std::vector<kernels::Bf16Gemm> paths{kernels::Bf16Gemm::emulate};
  try {
    kernels::set_bf16_gemm(kernels::Bf16Gemm::onednn);
    if (kernels::bf16_copies_used())
      paths.push_back(kernels::Bf16Gemm::onednn);
  } catch (const Error&) {
  }
  kernels::reset_bf16_gemm();
  int remade = 0;  // runs whose weights' copies were made again in the backward
  for (const auto path : paths) {
    kernels::set_bf16_gemm(path);
    for (const auto& mshape : meshes_of_size(world_size())) {
      const Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0"}) {
        const std::string where =
            kernels::bf16_gemm_description() + ", " + mshape.to_string() + " layout " + layout;
        const Bf16Run off = run_bf16(mesh, instantiate(layout, mshape), "0");
        const Bf16Run on = run_bf16(mesh, instantiate(layout, mshape), "1");
        const Bf16Run automatic = run_bf16(mesh, instantiate(layout, mshape), "auto");
        EXPECT_TRUE(off.stored.empty()) << where;
        EXPECT_FALSE(on.stored.empty()) << where;
        EXPECT_EQ(on.losses, off.losses) << where;
        EXPECT_EQ(on.weights, off.weights) << where;
        EXPECT_EQ(automatic.losses, off.losses) << where;
        EXPECT_EQ(automatic.weights, off.weights) << where;
        // Stored activations only where they lower the peak; the logits' gradient as its bits
        // alone where the copies are kept, never raising it (no float32 copy beside them).
        if (!automatic.stored.empty())
          EXPECT_LT(automatic.peak, off.peak) << where;
        else if (automatic.bits_only > 0)
          EXPECT_LE(automatic.peak, off.peak) << where;
        else
          EXPECT_EQ(automatic.peak, off.peak) << where;
        EXPECT_EQ(off.bits_only, 0) << where;
        // A weight's copy is held through the run, or under `auto` made again by its backward
        // readers where that lowers the peak (at most three copies per run), bitwise the same.
        const int held = kernels::bf16_copies_used() ? 1 : 0;
        EXPECT_EQ(off.weight_conversions, held) << where;
        EXPECT_EQ(on.weight_conversions, held) << where;
        EXPECT_GE(automatic.weight_conversions, held) << where;
        EXPECT_LE(automatic.weight_conversions, 3 * held) << where;
        remade += automatic.weight_conversions > 1 ? 1 : 0;
        EXPECT_EQ(on.copies_left, 0) << where << ": copies outlived the run";
      }
    }
    kernels::reset_bf16_gemm();
  }
  if (paths.size() > 1) {
    EXPECT_GT(remade, 0) << "no run made the weights' copies again: the bitwise check missed it";
  }
  // On one rank the tiny model's stored activations lower its peak: `auto` keeps them.
  const Bf16Run off = run_bf16(single_processor_mesh(), LayoutRules(), "0");
  const Bf16Run automatic = run_bf16(single_processor_mesh(), LayoutRules(), "auto");
  EXPECT_FALSE(automatic.stored.empty());
  EXPECT_LT(automatic.peak, off.peak);
}

// A run that fetches a stored activation gets its float32 values, not the bf16 ones its distant
// readers see, and the same results.
TEST(Bf16Activations, AFetchedActivationKeepsItsFloat32Values) {
  const Mesh mesh(MeshShape::parse("b:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const LayoutRules rules = LayoutRules::parse("batch:b");
  const std::vector<int> stored = run_bf16(mesh, rules, "1", -1, 1).stored;
  ASSERT_FALSE(stored.empty());
  const int t = *std::min_element(stored.begin(), stored.end());  // a graph tensor
  const Bf16Run off = run_bf16(mesh, rules, "0", t);
  const Bf16Run on = run_bf16(mesh, rules, "1", t);
  ASSERT_FALSE(off.fetched.empty());
  EXPECT_EQ(on.fetched, off.fetched);
  EXPECT_EQ(on.losses, off.losses);
  EXPECT_EQ(on.weights, off.weights);
  std::int64_t inexact = 0;  // a float32 activation holds values bf16 does not
  for (float v : on.fetched)
    inexact += static_cast<float>(kernels::round_to_bfloat16(v)) != v ? 1 : 0;
  EXPECT_GT(inexact, 0);
}

// The id of the logits' gradient in run_bf16's graph.
int logits_gradient() {
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, small_config("bfloat16"), true, 3);
  optim::Adam opt;
  optim::LearningRateSchedule lr;  // as run_bf16's
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.01;
  optim::minimize(m.loss, opt, lr);
  for (int i = 0; i < g.num_ops(); ++i)
    if (std::string(g.op(i).kind()) == "softmax_cross_entropy_grad")
      return g.op(i).outputs[0];
  return -1;
}

// Where oneDNN's bf16 matmul reads kept copies, the logits' gradient, read only by its two bf16
// products, is written as its bf16 bits alone over the logits (no float32 gradient beside its
// copy): the same training; a run that fetches it gets its float32 values.
TEST(Bf16Activations, TheLogitsGradientIsHeldAsItsBitsAlone) {
  try {
    kernels::set_bf16_gemm(kernels::Bf16Gemm::onednn);
  } catch (const Error& e) {
    kernels::reset_bf16_gemm();
    GTEST_SKIP() << e.what();
  }
  if (!kernels::bf16_copies_used()) {
    kernels::reset_bf16_gemm();
    GTEST_SKIP() << "no bf16 copies kept on this CPU: " << kernels::bf16_gemm_description();
  }
  const int dlogits = logits_gradient();
  ASSERT_GE(dlogits, 0);
  for (const auto& mshape : meshes_of_size(world_size())) {
    const Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0"}) {
      const std::string where = mshape.to_string() + " layout " + layout;
      const LayoutRules rules = instantiate(layout, mshape);
      const Bf16Run off = run_bf16(mesh, rules, "0", dlogits);
      const Bf16Run bits = run_bf16(mesh, rules, "auto", -1);
      const Bf16Run fetched = run_bf16(mesh, rules, "auto", dlogits);
      EXPECT_GE(bits.bits_only, 1) << where;
      EXPECT_EQ(bits.losses, off.losses) << where;
      EXPECT_EQ(bits.weights, off.weights) << where;
      EXPECT_EQ(fetched.losses, off.losses) << where;
      EXPECT_EQ(fetched.fetched, off.fetched) << where;
      ASSERT_FALSE(off.fetched.empty());
      std::int64_t inexact = 0;  // float32 values, not bf16 ones
      for (float v : fetched.fetched)
        inexact += static_cast<float>(kernels::round_to_bfloat16(v)) != v ? 1 : 0;
      EXPECT_GT(inexact, 0) << where;
      // A chunked loss head: each slice's gradient as its bits alone, the same training.
      const Bf16Run chunks_off = run_bf16(mesh, rules, "0", -1, 3, 2);
      const Bf16Run chunks = run_bf16(mesh, rules, "auto", -1, 3, 2);
      EXPECT_GE(chunks.bits_only, 2) << where;
      EXPECT_EQ(chunks.losses, chunks_off.losses) << where;
      EXPECT_EQ(chunks.weights, chunks_off.weights) << where;
    }
  }
  kernels::reset_bf16_gemm();
}

// The plan (synthetic steps): where the bits are made and the float32 values made again.
TEST(Bf16Activations, PlansTheBitsAfterTheLastOtherUseAndReloadsAfterEachGap) {
  auto step = [](std::vector<int> reads, std::vector<int> writes, std::vector<int> exact = {}) {
    Program::Step s{reduction_wait_kind(),
                    "step",
                    Program::Category::compute,
                    false,
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {}};
    s.reads = std::move(reads);
    s.writes = std::move(writes);
    s.bf16_reads = exact;
    s.bf16_exact_reads = std::move(exact);
    return s;
  };
  std::vector<Program::Step> steps(40, step({}, {}));
  // 0: written at 0, read exactly at 1, otherwise at 3, exactly at 20, 22 and 35: bits after 3,
  //    values again before 20 and 35.
  steps[0] = step({}, {0, 1, 2, 3, 4});
  steps[1] = step({0}, {}, {0});
  steps[3] = step({0}, {});
  steps[20] = step({0, 1}, {}, {0, 1});  // 1: read exactly at 20 but otherwise at 21
  steps[21] = step({1}, {});
  steps[22] = step({0}, {}, {0});
  steps[35] = step({0, 2}, {}, {0, 2});  // 2: excluded
  // 3: renamed to 5 at 4 (one buffer); 3 read exactly at 6 and 30, 5 at 7, 29 and 39: bits
  //    after 7, 5's values again before 29 and 39, 3's before 30.
  steps[4] = step({3}, {5});
  steps[6] = step({3}, {}, {3});
  steps[7] = step({5}, {}, {5});
  steps[30] = step({3}, {}, {3});
  steps[29] = step({5}, {}, {5});
  steps[39] = step({5}, {}, {5});
  steps[8] = step({4}, {}, {4});  // 4: readers 8 and 11, each within 8 steps of the use before
  steps[11] = step({4}, {}, {4});
  Bf16ActivationInputs in;
  in.excluded = {2};
  in.renames = [&](const Program::Step& s) { return &s == &steps[4]; };
  const auto plan = plan_bf16_activations(steps, 6, in);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].names, std::vector<int>{0});
  EXPECT_EQ(plan[0].narrow_after, 3);
  EXPECT_EQ(plan[0].widen_before, (std::vector<std::pair<int, int>>{{20, 0}, {35, 0}}));
  EXPECT_EQ(plan[0].readers, (std::vector<int>{20, 22, 35}));
  EXPECT_EQ(plan[1].names, (std::vector<int>{3, 5}));
  EXPECT_EQ(plan[1].narrow_after, 7);
  EXPECT_EQ(plan[1].widen_before, (std::vector<std::pair<int, int>>{{29, 5}, {30, 3}, {39, 5}}));
  EXPECT_EQ(plan[1].readers, (std::vector<int>{29, 30, 39}));
  std::vector<int> at;
  const auto out = apply_bf16_activations(
      steps, {plan[0]}, {6}, [&](std::size_t) { return step({0}, {6}); },
      [&](std::size_t, int name) { return step({6}, {name}); }, at);
  ASSERT_EQ(out.size(), steps.size() + 3);
  EXPECT_EQ(at, std::vector<int>{4});
  EXPECT_EQ(out[4].writes, std::vector<int>{6});          // the bits, after step 3
  EXPECT_EQ(out[21].writes, std::vector<int>{0});         // the values again, before step 20
  EXPECT_EQ(out[22].reads, (std::vector<int>{0, 1, 6}));  // its readers hold the bits
  EXPECT_EQ(out[37].writes, std::vector<int>{0});         // and before step 35
}
