// Microbatch gradients contracted into their running sums (einsum_accumulate, gradients() with
// `initial`): the op gives sum + einsum on every layout, fused where the sum and the product carry
// the same pending partial sum (a split contracted dim: the sum stays partial and is reduced once)
// and through the unfused path where they do not; the fused step writes into the sum's buffer;
// microbatched training with it equals training without it (within float32 reassociation: a BLAS
// that splits K into blocks adds each into the sum) on every mesh and layout, and holds less.

#include <mtk/autodiff/gradients.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "training_fixtures.hpp"
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

// Sets whether gradients() fuses for one scope, back on after it.
struct FusedScope {
  explicit FusedScope(bool on) { set_fused_gradient_sums(on); }
  ~FusedScope() { set_fused_gradient_sums(true); }
};

int count_ops(const Graph& g, const std::string& kind) {
  int n = 0;
  for (int i = 0; i < g.num_ops(); ++i)
    n += std::string(g.op(i).kind()) == kind;
  return n;
}

// Feeds every placeholder in `feeds_of` (floats; int32 ids in [0, 8)) and fetches t.
std::vector<float> values_of(const Tensor& t, const std::vector<Tensor>& feeds_of, Program& p) {
  std::map<int, HostTensor> feeds;
  unsigned seed = 1;
  for (const auto& f : feeds_of) {
    const std::int64_t n = f.shape().num_elements();
    if (f.dtype() == DType::int32) {
      std::vector<std::int32_t> ids(static_cast<size_t>(n));
      for (std::int64_t i = 0; i < n; ++i)
        ids[static_cast<size_t>(i)] = static_cast<std::int32_t>((i * 7 + seed) % 8);
      feeds[f.id()] = HostTensor::ints(f.shape(), ids);
    } else {
      feeds[f.id()] = HostTensor::floats(f.shape(), normal_values(n, seed));
    }
    ++seed;
  }
  return p.run(feeds, {t})[0].values<float>();
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << what << " " << i;
}

// out1 = (x1 . y1) + x2 . y2 (the first sum pending where batch is split: fused) and
// out2 = 2 w + x2 . y2 (2 w complete, the product pending there: the unfused path), each fetched
// through a transpose so that the sums may be written in place; `reference`: the same by einsum
// and add instead.
struct Case {
  Graph g;
  std::vector<Tensor> feeds;
  Tensor out1, out2;
};

std::unique_ptr<Case> build_case(Precision p, bool reference) {
  auto c = std::make_unique<Case>();
  Graph& g = c->g;
  const Dimension batch{"batch", 8}, d{"d", 8}, e{"e", 16};
  const Shape de{d, e}, ed{e, d};
  const Tensor x1 = placeholder(g, "x1", Shape{batch, d}),
               y1 = placeholder(g, "y1", Shape{batch, e});
  const Tensor x2 = placeholder(g, "x2", Shape{batch, d}),
               y2 = placeholder(g, "y2", Shape{batch, e});
  const Tensor w = placeholder(g, "w", de);
  c->feeds = {x1, y1, x2, y2, w};
  const Tensor s1 = einsum({x1, y1}, de, p), w2 = w + w;
  if (reference) {
    c->out1 = einsum({s1 + einsum({x2, y2}, de, p)}, ed);
    c->out2 = einsum({w2 + einsum({x2, y2}, de, p)}, ed);
  } else {
    c->out1 = einsum({einsum_accumulate(s1, {x2, y2}, p)}, ed);
    c->out2 = einsum({einsum_accumulate(w2, {x2, y2}, p)}, ed);
  }
  return c;
}

}  // namespace

TEST(EinsumAccumulate, SumPlusProductOnEveryLayout) {
  for (const Precision p : {Precision::float32, Precision::bfloat16}) {
    auto one = build_case(p, /*reference=*/true);
    auto single = lower(one->g, single_processor_mesh(), LayoutRules());
    const auto want1 = values_of(one->out1, one->feeds, *single);
    const auto want2 = values_of(one->out2, one->feeds, *single);
    for (const auto& mshape : meshes_of_size(world_size())) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const std::string layout : {"batch:@0", "d:@0", "batch:@0;e:@1", "e:@0;d:@1"}) {
        const std::string what = mshape.to_string() + " layout " + layout +
                                 (p == Precision::bfloat16 ? " bf16" : " fp32");
        auto c = build_case(p, /*reference=*/false);
        auto program = lower(c->g, mesh, instantiate(layout, mshape));
        EXPECT_GE(program->in_place_activations(), 2) << what;
        expect_near_all(values_of(c->out1, c->feeds, *program), want1, what + " fused");
        expect_near_all(values_of(c->out2, c->feeds, *program), want2, what + " unfused");
      }
    }
  }
}

namespace {

// The same with scatters: out1 = scatter(ids1, u1) + scatter(ids2, u2) (the table small against
// the rows, so a split batch leaves the scatters pending: fused) and out2 = 2 w + scatter(ids2,
// u2) (the unfused path there).
std::unique_ptr<Case> build_scatter_case(bool reference) {
  auto c = std::make_unique<Case>();
  Graph& g = c->g;
  const Dimension batch{"batch", 8}, length{"length", 4}, vocab{"vocab", 8}, d{"d", 8};
  const Shape table{vocab, d}, ids_shape{batch, length}, rows{batch, length, d};
  const Tensor ids1 = placeholder(g, "ids1", ids_shape, DType::int32);
  const Tensor ids2 = placeholder(g, "ids2", ids_shape, DType::int32);
  const Tensor u1 = placeholder(g, "u1", rows), u2 = placeholder(g, "u2", rows);
  const Tensor w = placeholder(g, "w", table);
  c->feeds = {ids1, ids2, u1, u2, w};
  const Tensor s1 = scatter_add(ids1, u1, table, "vocab"), w2 = w + w;
  const Shape back{d, vocab};
  if (reference) {
    c->out1 = einsum({s1 + scatter_add(ids2, u2, table, "vocab")}, back);
    c->out2 = einsum({w2 + scatter_add(ids2, u2, table, "vocab")}, back);
  } else {
    c->out1 = einsum({scatter_add_into(s1, ids2, u2, "vocab")}, back);
    c->out2 = einsum({scatter_add_into(w2, ids2, u2, "vocab")}, back);
  }
  return c;
}

}  // namespace

// Bitwise the scatter then the add on the same mesh; within reassociation of one processor.
TEST(ScatterAddInto, SumPlusScatterOnEveryLayout) {
  auto one = build_scatter_case(/*reference=*/true);
  auto single = lower(one->g, single_processor_mesh(), LayoutRules());
  const auto want1 = values_of(one->out1, one->feeds, *single);
  const auto want2 = values_of(one->out2, one->feeds, *single);
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0", "batch:@0;vocab:@1", "d:@0"}) {
      const std::string what = mshape.to_string() + " layout " + layout;
      const auto rules = instantiate(layout, mshape);
      auto c = build_scatter_case(/*reference=*/false);
      auto ref = build_scatter_case(/*reference=*/true);
      auto program = lower(c->g, mesh, rules);
      auto ref_program = lower(ref->g, mesh, rules);
      EXPECT_GE(program->in_place_activations(), 2) << what;
      const auto got1 = values_of(c->out1, c->feeds, *program);
      const auto got2 = values_of(c->out2, c->feeds, *program);
      expect_near_all(got1, want1, what + " fused");
      expect_near_all(got2, want2, what + " unfused");
      EXPECT_EQ(got1, values_of(ref->out1, ref->feeds, *ref_program)) << what;
      EXPECT_EQ(got2, values_of(ref->out2, ref->feeds, *ref_program)) << what;
    }
  }
}

TEST(EinsumAccumulate, BuilderErrorsNameTheTensors) {
  Graph g;
  const Tensor x = placeholder(g, "x", Shape{{"b", 2}, {"d", 3}});
  const Tensor y = placeholder(g, "y", Shape{{"b", 2}, {"e", 4}});
  const Tensor bad = placeholder(g, "bad", Shape{{"d", 3}, {"f", 4}});
  try {
    einsum_accumulate(bad, {x, y}, Precision::float32);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mtk::einsum_accumulate"), std::string::npos) << what;
    EXPECT_NE(what.find("'bad'"), std::string::npos) << what;
    EXPECT_NE(what.find("'f'"), std::string::npos) << what;
  }
}

// An invalid tensor in `initial` gives its x no running sum: its gradient is the plain one, and
// two xs that receive the same incoming gradient return the same tensor (one buffer), as the
// microbatch slices' embedding gathers use it.
TEST(GradientsInitial, AnInvalidInitialIsNoRunningSum) {
  Graph g;
  const Tensor w = variable(g, "w", Shape{{"d", 3}}, Initializer::normal(1.0f));
  const Tensor a = placeholder(g, "a", Shape{{"d", 3}});
  const Tensor b = placeholder(g, "b", Shape{{"d", 3}});
  const Tensor sum = placeholder(g, "sum", Shape{{"d", 3}});
  const Tensor loss = reduce_sum(square(a + b) * w);
  const std::vector<Tensor> d = gradients(loss, {a, b, w}, {Tensor(), Tensor(), sum});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].id(), d[1].id());  // the add passes one gradient to both
  // Replicated on every rank of the test: each computes the whole result.
  auto program =
      lower(g, Mesh(MeshShape::parse("x:" + std::to_string(world_size())), MPI_COMM_WORLD),
            LayoutRules());
  const std::vector<float> av{1, 2, 3}, bv{0.5f, -1, 2}, sv{10, 20, 30};
  const auto out = program->run({{a.id(), HostTensor::floats(a.shape(), av)},
                                 {b.id(), HostTensor::floats(b.shape(), bv)},
                                 {sum.id(), HostTensor::floats(sum.shape(), sv)}},
                                {d[0], d[2], w});
  for (int i = 0; i < 3; ++i) {
    const float s = av[i] + bv[i], wv = out[2].data<float>()[i];
    EXPECT_FLOAT_EQ(out[0].data<float>()[i], 2 * s * wv) << i;
    EXPECT_FLOAT_EQ(out[1].data<float>()[i], sv[i] + s * s) << i;
  }
}

namespace {

struct Trained {
  std::vector<float> losses, weights;
};

Trained train(int k, bool fused, const Mesh& mesh, const LayoutRules& rules, int* fused_ops,
              bool bf16 = false, std::int64_t loss_chunks = 1) {
  const FusedScope scope(fused);
  nn::TransformerConfig c = tiny_transformer();
  c.batch = 32;
  c.loss_chunks = loss_chunks;
  if (bf16)
    c.activation_dtype = "bfloat16";
  Graph g;
  optim::Adafactor opt;
  const auto t = nn::build_training(g, c, k, opt, test_learning_rate(), /*seed=*/5);
  if (fused_ops)
    *fused_ops = count_ops(g, "einsum_accumulate");
  const auto feeds = lm_feeds(
      t.model, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 7 + l) % 31 + 1; });
  auto program = lower(g, mesh, rules);
  Trained r;
  for (int s = 0; s < 3; ++s)
    r.losses.push_back(static_cast<float>(program->run(feeds, {t.model.loss})[0].at(0)));
  r.weights = global_weights(*program);
  return r;
}

}  // namespace

// Layout invariance of microbatched training with the fused sums: on every mesh and layout, k = 4
// fused against k = 4 unfused and against one processor.
TEST(Microbatches, FusedGradientSumsTrainAsTheUnfused) {
  int fused_ops = 0, unfused_ops = 0;
  const Trained one = train(4, true, single_processor_mesh(), LayoutRules(), &fused_ops);
  train(1, true, single_processor_mesh(), LayoutRules(), &unfused_ops);
  EXPECT_GT(fused_ops, 0);
  EXPECT_EQ(unfused_ops, 0) << "k = 1 has no running sums";
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"}) {
      const auto rules = instantiate(layout, mshape);
      const std::string what = mshape.to_string() + " layout " + layout;
      int off_ops = -1;
      const Trained fused = train(4, true, mesh, rules, nullptr);
      const Trained unfused = train(4, false, mesh, rules, &off_ops);
      EXPECT_EQ(off_ops, 0) << what;
      expect_close(fused, unfused, what + ": fused against unfused", 1e-5);
      if (world_rank() == 0)
        std::printf("%s: fused against unfused %s\n", what.c_str(),
                    fused.weights == unfused.weights && fused.losses == unfused.losses
                        ? "bitwise"
                        : "within float32 reassociation");
      expect_close(fused, one, what + ": against one processor", 1e-5);
    }
  }
}

// bfloat16 contractions: the fused sums contract the same bf16 operands (on whichever bf16 path
// this CPU takes), data parallel on every rank count.
TEST(Microbatches, FusedGradientSumsInBf16) {
  const Mesh mesh(MeshShape::parse("b:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const auto rules = LayoutRules::parse("batch:b");
  int fused_ops = 0;
  const Trained fused = train(2, true, mesh, rules, &fused_ops, /*bf16=*/true);
  const Trained unfused = train(2, false, mesh, rules, nullptr, /*bf16=*/true);
  EXPECT_GT(fused_ops, 0);
  expect_close(fused, unfused, "bf16, k = 2: fused against unfused", 1e-5);
}

TEST(Microbatches, FusedGradientSumsLowerThePeak) {
  nn::TransformerConfig c = tiny_transformer();
  c.vocab_size = 512;  // the vocabulary weight's gradient dominates, as on the benchmark model
  c.batch = 16;
  std::int64_t peak[2] = {0, 0};
  for (int fused = 0; fused < 2; ++fused) {
    const FusedScope scope(fused != 0);
    Graph g;
    optim::Adafactor opt;
    nn::build_training(g, c, 4, opt, optim::LearningRateSchedule());
    peak[fused] = analyze(g, MeshShape::parse("b:1"), LayoutRules())->counters().peak_bytes;
  }
  EXPECT_LT(peak[1], peak[0]) << "fused " << peak[1] << " unfused " << peak[0];
}

// The chunked loss head reads the softmax weight once per slice: each later slice's part of its
// gradient is contracted into the sum of the parts before (fan-in, no running sum given), so no
// part has a buffer of its own. The same training as the unfused sums, on every mesh and layout.
TEST(LossChunks, TheSoftmaxWeightsPartsAreContractedIntoOneSum) {
  int fused_ops = 0, unfused_ops = -1;
  const Trained one = train(1, true, single_processor_mesh(), LayoutRules(), &fused_ops, false, 4);
  train(1, false, single_processor_mesh(), LayoutRules(), &unfused_ops, false, 4);
  EXPECT_GE(fused_ops, 3) << "the parts of 3 slices after the first";
  EXPECT_EQ(unfused_ops, 0);
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"}) {
      const auto rules = instantiate(layout, mshape);
      const std::string what = mshape.to_string() + " layout " + layout + ", loss_chunks 4";
      const Trained fused = train(1, true, mesh, rules, nullptr, false, 4);
      expect_close(fused, train(1, false, mesh, rules, nullptr, false, 4),
                   what + ": fused against unfused", 1e-5);
      expect_close(fused, one, what + ": against one processor", 1e-5);
    }
  }
  // The most live bytes fall by a part of the weight's gradient where the head dominates.
  nn::TransformerConfig c = tiny_transformer();
  c.vocab_size = 8192;  // the benchmark model's proportions: the head's weight is d_model x vocab
  c.d_model = 64;
  c.d_ff = 256;
  c.length = 64;
  c.loss_chunks = 4;
  c.recompute = nn::Recompute::layer;
  std::int64_t peak[2] = {0, 0};
  for (int fused = 0; fused < 2; ++fused) {
    const FusedScope scope(fused != 0);
    Graph g;
    optim::Adafactor opt;
    nn::build_training(g, c, 1, opt, optim::LearningRateSchedule());
    peak[fused] = analyze(g, MeshShape::parse("b:1"), LayoutRules())->counters().live_peak_bytes;
  }
  // By at least half a part (vocab x d_model floats), as the peak may then lie elsewhere
  // (measured: a whole part here, both peaks at the head; with a vocabulary of 4096 the fused
  // peak lay in a layer's recomputation, 0.59 of a part below, and 0.43 once `layer` kept fewer
  // tensors through the head; on the benchmark model the pool's peak fell by 46.5 of 62.5 MiB).
  EXPECT_LE(peak[1], peak[0] - 8192 * 64 * 4 / 2) << "fused " << peak[1] << " unfused " << peak[0];
}
