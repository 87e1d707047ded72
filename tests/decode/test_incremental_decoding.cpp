// The incremental decoder (cached keys and values, one decoder step per token) against full
// re-decoding of the whole prefix: equal logits at every position (with beams reordered), equal
// greedy outputs, beam 1 = greedy, and beam search identical on 1, 2 and 4 ranks under
// data-parallel, model-parallel and 2-D layouts. Weights trained by a few Adafactor steps reach
// the decoder by name: copied from the training program (same or another layout) and restored
// from a checkpoint. With local attention the ring cache of the last W positions decodes as the
// full cache and as full re-decoding (in blocks of W or wider).

#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/decode/decode.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>

namespace {

using namespace mtk;
using decode::BeamSearchOptions;
using decode::FullDecoder;
using decode::Hypothesis;
using decode::IncrementalDecoder;
using test::instantiate;
using test::meshes_of_size;
using test::single_processor_mesh;
using test::world_size;

nn::TransformerConfig config(bool encdec) {
  nn::TransformerConfig c = test::tiny_transformer();
  c.vocab_size = 16;
  c.num_heads = 4;
  c.num_encoder_layers = encdec ? 2 : 0;
  c.batch = 4;
  return c;
}

nn::DecodingShape shape(std::int64_t beam) {
  nn::DecodingShape s;
  s.batch = 4;
  s.beam = beam;
  s.source_length = 6;  // shorter than the model's length: padding is masked either way
  s.max_length = 8;
  return s;
}

// Four sources of 6, 4, 2 and 5 tokens (ids 2..15).
std::vector<std::vector<std::int32_t>> sources() {
  std::vector<std::vector<std::int32_t>> s;
  std::mt19937 rng(7);
  for (int n : {6, 4, 2, 5}) {
    std::vector<std::int32_t> row;
    for (int i = 0; i < n; ++i)
      row.push_back(static_cast<std::int32_t>(2 + rng() % 14));
    s.push_back(row);
  }
  return s;
}

double max_abs(const HostTensor& t) {
  double m = 0;
  for (std::int64_t e = 0; e < t.size(); ++e)
    m = std::max(m, std::fabs(t.at(e)));
  return m;
}

// Walks positions 0..max_length-1 with random tokens and random beam parents through both
// decoders and compares their logits at every position.
template <class A, class B>
void expect_steps_match(A& inc, B& full, bool encdec, std::int64_t beam, const std::string& where) {
  if (encdec) {
    inc.encode(sources());
    full.encode(sources());
  }
  std::mt19937 rng(11);
  const std::int64_t n = 4 * beam;
  for (std::int64_t t = 0; t < 8; ++t) {
    std::vector<std::int32_t> tokens(static_cast<size_t>(n)), parents(static_cast<size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      tokens[static_cast<size_t>(i)] = t == 0 ? 0 : static_cast<std::int32_t>(2 + rng() % 14);
      parents[static_cast<size_t>(i)] =
          t == 0 ? static_cast<std::int32_t>(i % beam) : static_cast<std::int32_t>(rng() % beam);
    }
    const HostTensor a = inc.step(t, tokens, parents);
    const HostTensor b = full.step(t, tokens, parents);
    ASSERT_EQ(a.shape(), b.shape()) << where;
    const double scale = max_abs(b);
    double diff = 0;
    for (std::int64_t e = 0; e < b.size(); ++e)
      diff = std::max(diff, std::fabs(a.at(e) - b.at(e)));
    EXPECT_LE(diff, 1e-5 * scale) << where << ": position " << t << " logits differ by " << diff
                                  << " (scale " << scale << ")";
    EXPECT_GT(scale, 0.1) << where;
  }
}

void expect_same(const std::vector<std::vector<Hypothesis>>& got,
                 const std::vector<std::vector<Hypothesis>>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t b = 0; b < want.size(); ++b) {
    ASSERT_EQ(got[b].size(), want[b].size()) << where << " row " << b;
    for (size_t k = 0; k < want[b].size(); ++k) {
      EXPECT_EQ(got[b][k].tokens, want[b][k].tokens) << where << " row " << b << " hyp " << k;
      EXPECT_EQ(got[b][k].finished, want[b][k].finished) << where;
      EXPECT_NEAR(got[b][k].score, want[b][k].score, 1e-4) << where;
    }
  }
}

BeamSearchOptions options(std::int64_t beam) {
  BeamSearchOptions o;
  o.beam_size = beam;
  o.max_length = 8;
  o.eos_id = 1;
  return o;
}

std::vector<std::vector<Hypothesis>> search(IncrementalDecoder& d, bool encdec, std::int64_t beam) {
  if (encdec)
    d.encode(sources());
  return d.beam_search(options(beam));
}

const std::vector<std::string> kLayouts = {"batch:@0", "heads:@0;vocab:@0;d_ff:@0",
                                           "batch:@0;heads:@1;vocab:@1;d_ff:@1"};

}  // namespace

// (a) The step program's logits at position t equal the full decoder's, on one processor and on
// every mesh and layout of this rank count.
TEST(IncrementalDecoding, StepLogitsEqualFullDecoding) {
  for (bool encdec : {false, true}) {
    const auto c = config(encdec);
    const std::string what = encdec ? "encoder-decoder" : "decoder-only";
    FullDecoder full(c, shape(2), single_processor_mesh(), LayoutRules());
    IncrementalDecoder one(c, shape(2), single_processor_mesh(), LayoutRules());
    expect_steps_match(one, full, encdec, 2, what + " on one processor");
    for (const auto& ms : meshes_of_size(world_size())) {
      Mesh mesh(ms, MPI_COMM_WORLD);
      for (const auto& layout : kLayouts) {
        IncrementalDecoder inc(c, shape(2), mesh, instantiate(layout, ms));
        FullDecoder ref(c, shape(2), single_processor_mesh(), LayoutRules());
        expect_steps_match(inc, ref, encdec, 2,
                           what + " on " + ms.to_string() + " layout " + layout);
      }
    }
  }
}

nn::TransformerConfig windowed(bool encdec) {
  auto c = config(encdec);
  c.attention_window = encdec ? 4 : 2;  // max_length 8: the ring wraps 1 or 3 times
  return c;
}

// The ring cache split over the mesh (sequence-parallel decoding: each rank holds W / P slots)
// where the mesh's first dim divides the window, alone and beside the batch; the step program's
// cache is then split along cache_length (checked), its softmax over the slots spans the ranks.
std::vector<std::string> ring_split_layouts(const nn::TransformerConfig& c, const MeshShape& ms) {
  if (c.attention_window % ms[0].size != 0)
    return {};
  std::vector<std::string> out = {"cache_length:@0"};
  if (ms.ndims() > 1)
    out.push_back("cache_length:@0;batch:@1");
  return out;
}

void expect_ring_split(IncrementalDecoder& d, const std::string& what) {
  const TensorLayout& l =
      d.step_program().variable_layout("decoding/layer_0/self_attention/k_cache");
  EXPECT_TRUE(l.is_split(l.shape().index_of("cache_length"))) << what << ": " << l.to_string();
}

nn::DecodingShape full_cache(nn::DecodingShape s) {
  s.full_cache = true;
  return s;
}

// The positions a step program's caches hold (from the variable's shape).
std::int64_t cache_positions(IncrementalDecoder& d) {
  return d.step_program()
      .variable_value("decoding/layer_0/self_attention/k_cache")
      .shape()
      .size_of("cache_length");
}

// With model.attention_window the full decoder runs local attention (blocks of the window), the
// step program keeps a ring of the last W positions (slot position mod W) and the full-cache
// step program masks cache positions W or more back: the same logits at every position.
TEST(IncrementalDecoding, LocalAttentionWindowStepsEqualFullDecoding) {
  for (bool encdec : {false, true}) {
    const auto c = windowed(encdec);
    const std::string what = std::string(encdec ? "encoder-decoder" : "decoder-only") + " window " +
                             std::to_string(c.attention_window);
    FullDecoder full(c, shape(2), single_processor_mesh(), LayoutRules());
    IncrementalDecoder one(c, shape(2), single_processor_mesh(), LayoutRules());
    EXPECT_EQ(cache_positions(one), c.attention_window) << what;
    EXPECT_EQ(one.shape().cache_length(c), c.attention_window) << what;
    expect_steps_match(one, full, encdec, 2, what + " on one processor");
    IncrementalDecoder whole(c, full_cache(shape(2)), single_processor_mesh(), LayoutRules());
    EXPECT_EQ(cache_positions(whole), 8) << what;
    expect_steps_match(one, whole, encdec, 2, what + ": ring against the full cache");
    auto wide = c;  // full re-decoding in blocks of 8 (model.local_attention_block): the same
    wide.local_attention_block = 8;
    FullDecoder blocks(wide, shape(2), single_processor_mesh(), LayoutRules());
    expect_steps_match(one, blocks, encdec, 2, what + " against blocks of 8");
    for (const auto& ms : meshes_of_size(world_size())) {
      Mesh mesh(ms, MPI_COMM_WORLD);
      for (const auto& layout : {"batch:@0;heads:@1", "heads:@0;vocab:@0;d_ff:@0"}) {
        IncrementalDecoder inc(c, shape(2), mesh, instantiate(layout, ms));
        FullDecoder ref(c, shape(2), single_processor_mesh(), LayoutRules());
        expect_steps_match(inc, ref, encdec, 2,
                           what + " on " + ms.to_string() + " layout " + layout);
      }
      for (const auto& layout : ring_split_layouts(c, ms)) {
        IncrementalDecoder inc(c, shape(2), mesh, instantiate(layout, ms));
        FullDecoder ref(c, shape(2), single_processor_mesh(), LayoutRules());
        const std::string on = what + " on " + ms.to_string() + " layout " + layout;
        if (ms.num_processors() > 1)
          expect_ring_split(inc, on);
        expect_steps_match(inc, ref, encdec, 2, on);
      }
    }
  }
}

// The window's ring cache decodes as the full cache and as full re-decoding: greedy outputs equal
// all three; beam search equals the full cache's on one processor and on every mesh and layout.
TEST(IncrementalDecoding, LocalAttentionRingCacheSearchesEqualTheFullCache) {
  for (bool encdec : {false, true}) {
    const auto c = windowed(encdec);
    const std::string what = encdec ? "encoder-decoder" : "decoder-only";
    IncrementalDecoder ring(c, shape(1), single_processor_mesh(), LayoutRules());
    IncrementalDecoder whole(c, full_cache(shape(1)), single_processor_mesh(), LayoutRules());
    FullDecoder full(c, shape(1), single_processor_mesh(), LayoutRules());
    if (encdec)
      full.encode(sources());
    const auto naive = decode::greedy_search(full.step_function(), 4, c.vocab_size, options(1));
    const auto want = search(whole, encdec, 1);
    expect_same(search(ring, encdec, 1), want, what + " greedy: ring against the full cache");
    for (size_t b = 0; b < 4; ++b) {
      EXPECT_EQ(want[b][0].tokens, naive[b].tokens) << what << " row " << b;
      EXPECT_NEAR(want[b][0].log_prob, naive[b].log_prob, 1e-4) << what << " row " << b;
    }
    IncrementalDecoder whole3(c, full_cache(shape(3)), single_processor_mesh(), LayoutRules());
    const auto beams = search(whole3, encdec, 3);
    IncrementalDecoder ring3(c, shape(3), single_processor_mesh(), LayoutRules());
    expect_same(search(ring3, encdec, 3), beams, what + " beam 3 on one processor");
    for (const auto& ms : meshes_of_size(world_size())) {
      Mesh mesh(ms, MPI_COMM_WORLD);
      std::vector<std::string> layouts = kLayouts;
      for (const auto& l : ring_split_layouts(c, ms))
        layouts.push_back(l);
      for (const auto& layout : layouts) {
        IncrementalDecoder d(c, shape(3), mesh, instantiate(layout, ms));
        expect_same(search(d, encdec, 3), beams,
                    what + " beam 3 on " + ms.to_string() + " layout " + layout);
      }
    }
  }
}

// The ring holds min(W, max_length) positions; without a window, max_length.
TEST(IncrementalDecoding, CacheLengthIsTheWindowAtMost) {
  auto c = windowed(false);
  nn::DecodingShape s = shape(1).resolved(c);
  EXPECT_EQ(s.cache_length(c), 2);
  s.max_length = 1;
  EXPECT_EQ(s.cache_length(c), 1);
  c.attention_window = 0;
  EXPECT_EQ(shape(1).resolved(c).cache_length(c), 8);
  c.attention_window = 4;  // wider than max_length 3: every position fits
  s = shape(1);
  s.max_length = 3;
  IncrementalDecoder d(c, s, single_processor_mesh(), LayoutRules());
  EXPECT_EQ(cache_positions(d), 3);
}

// (a, b) Greedy decoding with the cache equals greedy full re-decoding; beam search with beam 1
// equals greedy search.
TEST(IncrementalDecoding, GreedyEqualsFullDecodingAndBeamOne) {
  for (bool encdec : {false, true}) {
    const auto c = config(encdec);
    IncrementalDecoder inc(c, shape(1), single_processor_mesh(), LayoutRules());
    FullDecoder full(c, shape(1), single_processor_mesh(), LayoutRules());
    if (encdec) {
      inc.encode(sources());
      full.encode(sources());
    }
    const auto o = options(1);
    const auto greedy = decode::greedy_search(inc.step_function(), 4, c.vocab_size, o);
    const auto naive = decode::greedy_search(full.step_function(), 4, c.vocab_size, o);
    const auto beam1 = decode::beam_search(inc.step_function(), 4, c.vocab_size, o);
    std::int64_t tokens = 0;
    for (size_t b = 0; b < 4; ++b) {
      EXPECT_EQ(greedy[b].tokens, naive[b].tokens) << "row " << b;
      EXPECT_NEAR(greedy[b].log_prob, naive[b].log_prob, 1e-4);
      ASSERT_EQ(beam1[b].size(), 1u);
      EXPECT_EQ(beam1[b][0].tokens, greedy[b].tokens) << "row " << b;
      EXPECT_EQ(beam1[b][0].finished, greedy[b].finished);
      EXPECT_NEAR(beam1[b][0].score, greedy[b].score, 1e-9);
      tokens += static_cast<std::int64_t>(greedy[b].tokens.size());
    }
    EXPECT_GT(tokens, 0) << "something was decoded";
  }
}

// (d) Beam search on every mesh and layout of this rank count equals one processor's.
TEST(IncrementalDecoding, BeamSearchIsLayoutInvariant) {
  for (bool encdec : {false, true}) {
    const auto c = config(encdec);
    IncrementalDecoder one(c, shape(3), single_processor_mesh(), LayoutRules());
    const auto want = search(one, encdec, 3);
    for (const auto& ms : meshes_of_size(world_size())) {
      Mesh mesh(ms, MPI_COMM_WORLD);
      for (const auto& layout : kLayouts) {
        IncrementalDecoder d(c, shape(3), mesh, instantiate(layout, ms));
        expect_same(search(d, encdec, 3), want,
                    std::string(encdec ? "encdec" : "lm") + " on " + ms.to_string() + " " + layout);
      }
    }
  }
}

// Weights by name: trained a few steps (data parallel), copied into decoders of the same and of
// another layout, and written to a checkpoint that an evaluation program of a third layout
// restores; all decode alike, and unlike the untrained model.
TEST(IncrementalDecoding, TrainedWeightsReachTheDecoderByName) {
  const auto c = config(true);
  const std::string n = std::to_string(world_size());
  const MeshShape ms = MeshShape::parse("x:" + n);
  Mesh mesh(ms, MPI_COMM_WORLD);
  const LayoutRules data = LayoutRules::parse("batch:x");
  const LayoutRules model = LayoutRules::parse("heads:x;vocab:x;d_ff:x");
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, c, true);
  optim::Adafactor opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.05;
  optim::minimize(m.loss, opt, lr);
  auto train = lower(g, mesh, data);
  const Shape tok{{"batch", c.batch}, {"length", c.length}};
  std::vector<std::int32_t> src, in, tgt, seg, pos;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      const auto v = static_cast<std::int32_t>(2 + (b * 3 + l * 5) % 14);
      src.push_back(v);
      tgt.push_back(v);
      in.push_back(l == 0 ? 0 : static_cast<std::int32_t>(2 + (b * 3 + (l - 1) * 5) % 14));
      seg.push_back(1);
      pos.push_back(static_cast<std::int32_t>(l));
    }
  std::map<int, HostTensor> feeds{{m.inputs.id(), HostTensor::ints(tok, in)},
                                  {m.targets.id(), HostTensor::ints(tok, tgt)},
                                  {m.segments.id(), HostTensor::ints(tok, seg)},
                                  {m.positions.id(), HostTensor::ints(tok, pos)},
                                  {m.encoder_inputs.id(), HostTensor::ints(tok, src)},
                                  {m.encoder_segments.id(), HostTensor::ints(tok, seg)},
                                  {m.encoder_positions.id(), HostTensor::ints(tok, pos)}};
  for (int s = 0; s < 3; ++s)
    train->run(feeds, {m.loss});

  IncrementalDecoder fresh(c, shape(2), mesh, data);
  const auto untrained = search(fresh, true, 2);
  IncrementalDecoder same(c, shape(2), mesh, data);
  same.load_weights(*train);
  FullDecoder full(c, shape(2), mesh, data);
  full.load_weights(*train);
  expect_steps_match(same, full, true, 2, "trained weights");
  const auto want = search(same, true, 2);
  bool differs = false;
  for (size_t b = 0; b < want.size(); ++b)
    differs = differs || want[b][0].score != untrained[b][0].score;
  EXPECT_TRUE(differs) << "the trained weights were not copied";

  IncrementalDecoder other(c, shape(2), mesh, model);  // gathered from the data-parallel slices
  other.load_weights(*train);
  expect_same(search(other, true, 2), want, "copied across layouts");

  int id = static_cast<int>(getpid());
  MPI_Bcast(&id, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("mtk_decode_test_" + std::to_string(id))).string();
  CheckpointMetadata meta;
  meta.step = 3;
  write_checkpoint_directory(*train, dir, meta);
  Graph eg;
  nn::build_transformer(eg, c, false);
  auto eval = lower(eg, mesh, LayoutRules::parse("d_ff:x;vocab:x"));
  restore_checkpoint(*eval, dir);
  IncrementalDecoder restored(c, shape(2), mesh, model);
  restored.load_weights(*eval);
  expect_same(search(restored, true, 2), want, "restored from a checkpoint");
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0)
    std::filesystem::remove_all(dir);
}

TEST(IncrementalDecoding, ErrorsNameTheProblem) {
  auto c = config(true);
  nn::DecodingShape s = shape(2);
  s.max_length = 9;
  try {
    IncrementalDecoder d(c, s, single_processor_mesh(), LayoutRules());
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("max_length = 9"), std::string::npos) << e.what();
  }
  c.moe_every = 2;
  EXPECT_THROW(IncrementalDecoder(c, shape(2), single_processor_mesh(), LayoutRules()),
               std::exception);
  IncrementalDecoder d(config(true), shape(2), single_processor_mesh(), LayoutRules());
  EXPECT_THROW(d.step(0, std::vector<std::int32_t>(8, 0), std::vector<std::int32_t>(8, 2)),
               std::exception);  // parent 2 with beam 2
  EXPECT_THROW(d.encode({std::vector<std::int32_t>(7, 2)}), std::exception);  // 7 > 6
}
