// Local attention with a split length dim (nn::local_self_attention, model.attention_window;
// docs/spatial.md): the layer against a float64 host reference and against full attention under
// the same band mask, forward and gradients; split over the length (with batch and heads) on 1,
// 2, 4 and 8 ranks against one; a window of the whole length is full causal attention; a tiny
// language model with a window trains alike on every layout, and in blocks wider than the window
// (model.local_attention_block) as in blocks of the window; with the overlap every exchange has a
// product between its start and finish; the errors.

#include <mtk/base/error.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mtk::test {
namespace {

// Sizes every mesh of the tests divides: 64 positions in blocks of 4 or 8 give 16 or 8 blocks.
const Dimension kBatch{"batch", 8}, kLength{"length", 64}, kModel{"d_model", 8}, kHeads{"heads", 8},
    kKv{"d_kv", 4};
const Shape kTokens{kBatch, kLength};

// Packed rows: segments of 7 positions shifted by the row (boundaries inside blocks), the last
// positions of odd rows padding (0).
std::vector<std::int32_t> segment_ids() {
  std::vector<std::int32_t> s;
  for (std::int64_t b = 0; b < kBatch.size; ++b)
    for (std::int64_t l = 0; l < kLength.size; ++l)
      s.push_back(b % 2 == 1 && l >= 59 ? 0 : static_cast<std::int32_t>(1 + (l + b) / 7));
  return s;
}

bool allowed(const std::vector<std::int32_t>& seg, std::int64_t b, std::int64_t i, std::int64_t j,
             std::int64_t window) {
  const auto at = [&](std::int64_t l) { return seg[static_cast<size_t>(b * kLength.size + l)]; };
  return j <= i && j > i - window && at(i) == at(j);
}

enum class Kind { local, band, causal };

// x (a variable, so its gradient is compared too) through local attention, or through full
// attention under the equivalent band mask fed from the host (`band`), or the causal mask of
// attention_bias (`causal`). Outputs: y, then x and the weights for the host reference.
GraphCase attention_case(const std::string& name, Kind kind, std::int64_t window,
                         std::int64_t block, std::vector<std::string> layouts) {
  return {name,
          [=](Graph& g) {
            nn::LayerContext ctx{&g, true, 0.0, 1};
            Tensor x = var(g, "x", Shape{kBatch, kLength, kModel});
            Tensor seg = placeholder(g, "segments", kTokens, DType::int32);
            BuiltGraph r;
            r.feeds[seg.id()] = HostTensor::ints(kTokens, segment_ids());
            Tensor y;
            if (kind == Kind::local) {
              y = nn::local_self_attention(ctx, "att", x, seg, kModel, kHeads, kKv, "length",
                                           window, block);
            } else {
              const Dimension mem{"memory_length", kLength.size};
              Tensor bias;
              if (kind == Kind::causal) {
                bias = nn::attention_bias(g, kLength, mem, true, seg,
                                          rename_dimension(seg, "length", "memory_length"));
              } else {
                const Shape s{kBatch, kLength, mem};
                bias = placeholder(g, "band", s);
                const auto ids = segment_ids();
                std::vector<float> v;
                for (std::int64_t b = 0; b < kBatch.size; ++b)
                  for (std::int64_t i = 0; i < kLength.size; ++i)
                    for (std::int64_t j = 0; j < kLength.size; ++j)
                      v.push_back(allowed(ids, b, i, j, window) ? 0.0f : -1e9f);
                r.feeds[bias.id()] = HostTensor::floats(s, v);
              }
              y = nn::multihead_attention(ctx, "att", x, x, bias, kModel, kHeads, kKv, "length",
                                          "memory_length");
            }
            r.outputs = {y, x};
            for (const char* w : {"att/q", "att/k", "att/v", "att/o"})
              r.outputs.push_back(g.variable(w));
            r.loss = weighted_loss(g, {y});
            return r;
          },
          std::move(layouts)};
}

// The layer in float64 from the fetched x and weights (values 1 .. 5 of `r`).
std::vector<double> host_reference(const Result& r, std::int64_t window) {
  const auto x = r.values[1].values<float>(), wq = r.values[2].values<float>(),
             wk = r.values[3].values<float>(), wv = r.values[4].values<float>(),
             wo = r.values[5].values<float>();
  const std::int64_t L = kLength.size, D = kModel.size, H = kHeads.size, K = kKv.size;
  const auto seg = segment_ids();
  std::vector<double> y(static_cast<size_t>(kBatch.size * L * D), 0.0);
  auto proj = [&](const std::vector<float>& w, std::int64_t b, std::int64_t l, std::int64_t h,
                  std::int64_t k) {
    double s = 0;
    for (std::int64_t d = 0; d < D; ++d)
      s += double(x[size_t((b * L + l) * D + d)]) * w[size_t((d * H + h) * K + k)];
    return s;
  };
  for (std::int64_t b = 0; b < kBatch.size; ++b)
    for (std::int64_t i = 0; i < L; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        std::vector<double> logit(size_t(L), -1e300), o(size_t(K), 0.0);
        double top = -1e300, total = 0;
        for (std::int64_t j = 0; j < L; ++j) {
          if (!allowed(seg, b, i, j, window))
            continue;
          double s = 0;
          for (std::int64_t k = 0; k < K; ++k)
            s += proj(wq, b, i, h, k) * proj(wk, b, j, h, k);
          logit[size_t(j)] = s / std::sqrt(double(K));
          top = std::max(top, logit[size_t(j)]);
        }
        for (std::int64_t j = 0; j < L; ++j) {
          if (!allowed(seg, b, i, j, window))
            continue;
          const double p = std::exp(logit[size_t(j)] - top);
          total += p;
          for (std::int64_t k = 0; k < K; ++k)
            o[size_t(k)] += p * proj(wv, b, j, h, k);
        }
        for (std::int64_t k = 0; k < K; ++k)
          for (std::int64_t d = 0; d < D; ++d)
            y[size_t((b * L + i) * D + d)] +=
                o[size_t(k)] / total * wo[size_t((h * K + k) * D + d)];
      }
  return y;
}

// Layouts: the length split alone, with the batch, with the heads (rules naming a mesh dim the
// mesh lacks are dropped).
const std::vector<std::string> kLayouts = {"length:@0", "length:@0;batch:@1", "heads:@0;length:@1",
                                           "batch:@0;length:@1;heads:@2"};

void expect_layout_invariant(const GraphCase& c, const Result& ref) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : c.layouts)
      expect_close(run_case(c, mesh, instantiate(layout, mshape)), ref,
                   c.name + " on " + mshape.to_string() + " layout " + layout);
  }
}

struct WindowAndBlock {
  std::int64_t window, block;
};

class LocalAttention : public ::testing::TestWithParam<WindowAndBlock> {};

TEST_P(LocalAttention, EqualsBandMaskedFullAttentionAndTheHostReference) {
  const auto [window, block] = GetParam();
  const std::string name = "local w" + std::to_string(window) + " b" + std::to_string(block);
  const GraphCase local = attention_case(name, Kind::local, window, block, kLayouts);
  const Result ref = run_case(local, single_processor_mesh(), LayoutRules());
  // Forward and every gradient (x and the four weights) as full attention with the band mask.
  expect_close(ref,
               run_case(attention_case("band", Kind::band, window, block, {}),
                        single_processor_mesh(), LayoutRules()),
               name + " against full attention with the band mask");
  const std::vector<double> want = host_reference(ref, window);
  double scale = 0, diff = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    scale = std::max(scale, std::fabs(want[e]));
    diff = std::max(diff, std::fabs(ref.values[0].at(std::int64_t(e)) - want[e]));
  }
  EXPECT_LE(diff, 1e-5 * scale) << name << " against the float64 reference (scale " << scale << ")";
  expect_layout_invariant(local, ref);
}

// No halo (window 1), a partial halo, a halo of the whole previous block (Mesh-TF's
// masked_local_attention_1d with block_length 4), blocks wider than the window
// (model.local_attention_block).
INSTANTIATE_TEST_SUITE_P(Windows, LocalAttention,
                         ::testing::Values(WindowAndBlock{1, 4}, WindowAndBlock{3, 4},
                                           WindowAndBlock{5, 4}, WindowAndBlock{2, 8},
                                           WindowAndBlock{4, 8}));

TEST(LocalAttentionWindow, OfTheWholeLengthIsFullCausalAttention) {
  for (std::int64_t window : {kLength.size, kLength.size + 1}) {
    const GraphCase local = attention_case("local whole", Kind::local, window, kLength.size, {});
    expect_close(run_case(local, single_processor_mesh(), LayoutRules()),
                 run_case(attention_case("causal", Kind::causal, window, 0, {}),
                          single_processor_mesh(), LayoutRules()),
                 "window " + std::to_string(window) + " against causal attention");
  }
  // The model builds a window of the length or more as full causal attention.
  nn::TransformerConfig c = tiny_transformer();
  c.attention_window = c.length;
  EXPECT_FALSE(c.local_attention());
}

// ------------------------------------------------------------------- a language model
struct Trained {
  std::vector<double> losses, weights;
};

// A feed's rows of this rank's slice of `batch` (dim 0), every position kept: what the apps feed.
HostTensor batch_rows(const HostTensor& global, const Mesh& mesh, const LayoutRules& rules) {
  const int axis = rules.mesh_axis_for("batch", mesh.shape());
  if (axis < 0)
    return global;
  const std::int64_t n = mesh.shape()[axis].size, rows = global.shape()[0].size / n;
  const std::int64_t row = global.size() / global.shape()[0].size;
  auto dims = global.shape().dims();
  dims[0].size = rows;
  const auto all = global.values<std::int32_t>();
  const auto first = all.begin() + mesh.coordinate(axis) * rows * row;
  return HostTensor::ints(Shape(dims), std::vector<std::int32_t>(first, first + rows * row));
}

// Three Adafactor steps of the tiny model with a window of 4 over 32 positions (8 blocks); with
// `rows`, each rank feeds only its batch rows (whole along a split length, as the apps do).
Trained train(const nn::TransformerConfig& c, const Mesh& mesh, const LayoutRules& rules,
              bool rows = false) {
  Graph g;
  optim::Adafactor opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.05;
  const nn::TrainingGraph t = nn::build_training(g, c, 1, opt, lr, /*seed=*/5);
  auto feeds = lm_feeds(
      t.model, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) {
        return b % 3 == 2 && l > 20 ? 0 : (b * 7 + l) % 31 + 1;
      });
  if (t.model.encoder_inputs.valid()) {
    feeds[t.model.encoder_inputs.id()] = feeds[t.model.targets.id()];
    feeds[t.model.encoder_segments.id()] = feeds[t.model.segments.id()];
    feeds[t.model.encoder_positions.id()] = feeds[t.model.positions.id()];
  }
  auto program = lower(g, mesh, rules);
  std::map<int, HostTensor> local;
  if (rows)
    for (auto& [id, feed] : feeds)
      local[id] = batch_rows(feed, mesh, rules);
  Trained r;
  for (int s = 0; s < 3; ++s)
    r.losses.push_back(
        (rows ? program->run({}, {t.model.loss}, local) : program->run(feeds, {t.model.loss}))[0]
            .at(0));
  for (const auto& name : program->variable_names())
    for (float v : program->variable_value(name).values<float>())
      r.weights.push_back(v);
  return r;
}

void expect_close(const Trained& a, const Trained& b, const std::string& what) {
  ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    scale = std::max(scale, std::fabs(b.weights[i]));
    diff = std::max(diff, std::fabs(a.weights[i] - b.weights[i]));
  }
  EXPECT_LE(diff, 1e-5 * scale) << what << ": weights differ by " << diff;
  for (size_t s = 0; s < a.losses.size(); ++s)
    EXPECT_NEAR(a.losses[s], b.losses[s], 1e-5 * std::fabs(b.losses[s])) << what << " step " << s;
}

nn::TransformerConfig windowed(bool encoder_decoder) {
  nn::TransformerConfig c = tiny_transformer(false, encoder_decoder);
  c.length = 32;
  c.attention_window = 4;
  return c;
}

TEST(LocalAttentionModel, TrainingWithASplitLengthEqualsOneProcessor) {
  for (bool encdec : {false, true}) {
    const nn::TransformerConfig c = windowed(encdec);
    const Trained ref = train(c, single_processor_mesh(), LayoutRules());
    ASSERT_LT(ref.losses.back(), ref.losses.front()) << "the model learns";
    const std::vector<std::string> layouts =
        encdec
            ? std::vector<std::string>{"length:@0;batch:@1"}
            : std::vector<std::string>{"length:@0", "length:@0;batch:@1",
                                       "length:@0;heads:@1;d_ff:@1", "batch:@0;length:@1;vocab:@2"};
    for (const auto& mshape : meshes_of_size(world_size())) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const auto& layout : layouts)
        expect_close(train(c, mesh, instantiate(layout, mshape)), ref,
                     std::string(encdec ? "encoder-decoder" : "LM") + " on " + mshape.to_string() +
                         " layout " + layout);
    }
  }
}

TEST(LocalAttentionModel, MixtureOfExpertsWithASplitLengthEqualsOneProcessor) {
  // Routing scans the length (each token's place in its expert's buffer: a cumsum), which a split
  // length scans part by part from the parts before.
  nn::TransformerConfig c = tiny_transformer(/*moe=*/true);
  c.length = 32;
  c.attention_window = 4;
  const Trained ref = train(c, single_processor_mesh(), LayoutRules());
  ASSERT_LT(ref.losses.back(), ref.losses.front()) << "the model learns";
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout :
         {"length:@0", "length:@0;experts:@1", "batch:@0;length:@1;experts:@2"})
      expect_close(train(c, mesh, instantiate(layout, mshape)), ref,
                   "MoE on " + mshape.to_string() + " layout " + layout);
  }
}

TEST(LocalAttentionModel, FeedsOfTheRanksBatchRowsAreSlicedAlongASplitLength) {
  // The apps feed each rank its batch rows with every position; a split length is sliced by the
  // program: the same run, bitwise, as global feeds.
  const nn::TransformerConfig c = windowed(false);
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const std::string layout : {"length:@0", "batch:@0;length:@1", "length:@0;batch:@1"}) {
      const LayoutRules rules = instantiate(layout, mshape);
      const Trained global = train(c, mesh, rules), rows = train(c, mesh, rules, true);
      EXPECT_EQ(rows.losses, global.losses) << mshape.to_string() << " layout " << layout;
      EXPECT_EQ(rows.weights, global.weights) << mshape.to_string() << " layout " << layout;
    }
  }
}

TEST(LocalAttentionModel, BlocksWiderThanTheWindowEqualBlocksOfTheWindow) {
  // model.local_attention_block 8 with a window of 4 over 64 positions (8 blocks): the blocks of
  // the window's run, and the same on every layout that splits the length.
  nn::TransformerConfig c = windowed(false);
  c.length = 64;
  nn::TransformerConfig b8 = c;
  b8.local_attention_block = 8;
  // The blocks are 8 wide: keys of 8 + 3 positions (the block and the window's halo).
  Graph g;
  nn::build_transformer(g, b8, false);
  bool widened = false;
  for (int t = 0; t < g.num_tensors(); ++t) {
    const Shape& s = g.tensor(t).shape();
    widened = widened || (s.contains(nn::kLocalMemoryDim) && s.size_of(nn::kLocalMemoryDim) == 11);
  }
  EXPECT_TRUE(widened) << "no [attention_memory=11] tensor: the block is not 8";
  const Trained ref = train(b8, single_processor_mesh(), LayoutRules());
  expect_close(train(c, single_processor_mesh(), LayoutRules()), ref, "blocks of 4 against 8");
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : {"length:@0", "length:@0;batch:@1", "length:@0;heads:@1;d_ff:@1"})
      expect_close(train(b8, mesh, instantiate(layout, mshape)), ref,
                   "blocks of 8 on " + mshape.to_string() + " layout " + layout);
  }
}

TEST(LocalAttentionModel, WindowChangesTheModelOnlyWhereItMasks) {
  // A window of the whole length is the full model, bitwise; a shorter one differs.
  nn::TransformerConfig full = windowed(false), whole = full, local = full;
  full.attention_window = 0;
  whole.attention_window = whole.length;
  const Trained a = train(full, single_processor_mesh(), LayoutRules());
  const Trained b = train(whole, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_NE(train(local, single_processor_mesh(), LayoutRules()).losses[0], a.losses[0]);
}

TEST(LocalAttentionModel, DropoutOnASplitLengthEqualsOneProcessor) {
  // Dropout masks follow the global position, so they are the same on every layout.
  nn::TransformerConfig c = windowed(false);
  c.dropout = 0.1;
  const Trained ref = train(c, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    expect_close(train(c, mesh, instantiate("length:@0;heads:@1", mshape)), ref,
                 "dropout on " + mshape.to_string());
  }
}

TEST(LocalAttentionModel, RecomputeOnASplitLengthIsBitwiseNone) {
  // The backward runs the attention blocks (their halo exchanges included) again.
  Mesh mesh(MeshShape::parse("x:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const LayoutRules rules = LayoutRules::parse("length:x");
  nn::TransformerConfig c = windowed(false);
  const Trained none = train(c, mesh, rules);
  for (auto r : {nn::Recompute::norms, nn::Recompute::attention, nn::Recompute::layer}) {
    c.recompute = r;
    const Trained again = train(c, mesh, rules);
    EXPECT_EQ(again.losses, none.losses) << nn::to_string(r);
    EXPECT_EQ(again.weights, none.weights) << nn::to_string(r);
  }
}

// The layer (window 3, blocks of 4) and its gradients in `g`, lowered with the length split over
// every rank.
std::unique_ptr<Program> lowered_split_layer(Graph& g) {
  BuiltGraph b = attention_case("split", Kind::local, 3, 4, {}).build(g);
  gradients(b.loss, g.trainable_variables());
  const Mesh mesh(MeshShape::parse("x:" + std::to_string(world_size())), MPI_COMM_WORLD);
  return lower(g, mesh, LayoutRules::parse("length:x"));
}

TEST(LocalAttentionLowering, ASplitLengthStaysSplit) {
  // The blocked reshapes are local and the halo goes to the neighbours: no allconcat or alltoall
  // of the length, forward or backward (halo traffic is not yet counted, docs/spatial.md).
  Graph g;
  const auto p = lowered_split_layer(g);
  const auto& calls = p->counters().comm_calls;
  EXPECT_EQ(calls.count(Collective::allconcat), 0u) << p->explain();
  EXPECT_EQ(calls.count(Collective::alltoall), 0u) << p->explain();
}

// With the overlap (program.overlap_halo) every exchange of the layer, forward and backward, has a
// matrix product between its start and its finish: the keys' runs while the values are
// projected; the values' and the mask's (positions, segment ids) while the logits are made, as a
// finish moves down with the reshapes and elementwise steps on its output to the first product
// that reads it; backward, the halo_reduces while the other gradient products run.
TEST(LocalAttentionLowering, EveryExchangeHasAProductBetween) {
  if (world_size() == 1)
    GTEST_SKIP() << "no exchange to overlap on one rank";
  ProgramOptions overlap;
  overlap.overlap_halo = true;
  Graph g(overlap);
  const auto p = lowered_split_layer(g);
  const auto& records = p->counters().halo_exchanges;
  EXPECT_EQ(records.size(), 6u);  // k, v, positions, segments; the gradients of k and v
  for (const auto& e : records)
    EXPECT_FALSE(e.gemm_between.empty())
        << "exchange of " << e.bytes << " bytes, steps " << e.start << ".." << e.finish;
  EXPECT_EQ(p->overlapped_halos(), 6);
}

// -------------------------------------------------------------------------------- errors
TEST(LocalAttentionErrors, NameTheTensorDimsAndSizes) {
  Graph g;
  nn::LayerContext ctx{&g, false, 0.0, 1};
  Tensor x = var(g, "x", Shape{kBatch, {"length", 30}, kModel});
  auto local = [&](std::int64_t window, std::int64_t block) {
    return error_of([&] {
      nn::local_self_attention(ctx, "att", x, Tensor(), kModel, kHeads, kKv, "length", window,
                               block);
    });
  };
  expect_parts(local(4, 4),
               {"mtk::nn::local_self_attention", "'length'", "'x'", "30 positions", "block of 4"});
  expect_parts(local(0, 4), {"window 0", "at least 1"});
  expect_parts(local(6, 3), {"block of 3", "window 6"});
  expect_parts(error_of([&] {
                 nn::local_self_attention(ctx, "att", x, Tensor(), kModel, kHeads, kKv, "nope", 2,
                                          2);
               }),
               {"'nope'"});
  // The config: a negative window; a length the window does not divide.
  nn::TransformerConfig c = tiny_transformer();
  c.attention_window = -1;
  expect_parts(error_of([&] { c.validate(); }), {"model.attention_window = -1"});
  c.attention_window = 3;
  expect_parts(error_of([&] { c.validate(); }), {"model.length = 8", "model.attention_window = 3"});
  // The block: narrower than the window, not dividing the length, negative, without a window.
  c = tiny_transformer();
  c.attention_window = 4;
  c.local_attention_block = 2;
  expect_parts(error_of([&] { c.validate(); }),
               {"model.local_attention_block = 2", "model.attention_window = 4"});
  c.local_attention_block = 6;
  expect_parts(error_of([&] { c.validate(); }),
               {"model.length = 8", "model.local_attention_block = 6", "window 4"});
  c.local_attention_block = -1;
  expect_parts(error_of([&] { c.validate(); }), {"model.local_attention_block = -1"});
  c.attention_window = 0;
  c.local_attention_block = 8;
  expect_parts(error_of([&] { c.validate(); }),
               {"model.local_attention_block = 8", "model.attention_window"});
  // Blocks the mesh dim does not divide: 32 positions in blocks of 4 over more than 8 ranks is
  // not possible here, so 3 blocks of 4 (length 12) over 2, 4 or 8 ranks; every rank fails alike.
  const int n = world_size();
  if (n > 1) {
    nn::TransformerConfig d = tiny_transformer();
    d.length = 12;
    d.attention_window = 4;
    Graph g2;
    nn::build_transformer(g2, d, true);
    Mesh mesh(MeshShape::parse("m:" + std::to_string(n)), MPI_COMM_WORLD);
    expect_parts(error_of([&] { lower(g2, mesh, LayoutRules::parse("length:m")); }),
                 {"'length'", "not divisible by mesh dimension 'm'"});
    d.length = 24;  // 3 blocks of 8
    d.local_attention_block = 8;
    Graph g3;
    nn::build_transformer(g3, d, true);
    expect_parts(error_of([&] { lower(g3, mesh, LayoutRules::parse("length:m")); }),
                 {"'length' of size 3", "attention_block=8", "mesh dimension 'm'"});
  }
  int one = 1, sum = 0;  // still in step
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, n);
}

}  // namespace
}  // namespace mtk::test
