// (e) A tiny encoder-decoder trained with Adafactor on a synthetic copy task (random tokens
// 3..V-1, target = source + EOS) decodes held-out sources exactly by beam search.

#include <mtk/decode/decode.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <random>

namespace {

using namespace mtk;

constexpr std::int32_t kEos = 1;

std::vector<std::int32_t> random_sequence(std::mt19937& rng, std::int64_t vocab) {
  std::vector<std::int32_t> s(3 + rng() % 4);  // 3..6 tokens
  for (auto& t : s)
    t = static_cast<std::int32_t>(3 + rng() % static_cast<std::uint32_t>(vocab - 3));
  return s;
}

}  // namespace

TEST(CopyTask, TrainedModelCopiesHeldOutSequencesByBeamSearch) {
  // Twice the usual width and a small vocabulary: enough to learn to copy.
  // vocab, d_model, d_ff, heads x d_kv, layers and length (tiny_transformer's 2 and 8), batch
  nn::TransformerConfig c =
      test::sized_transformer({12, 32, 64, 4, 8, 2, 8, 32}, test::tiny_transformer(false, true));
  c.num_encoder_layers = 2;
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, c, true);
  optim::Adafactor opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.03;
  optim::minimize(m.loss, opt, lr);
  auto train = lower(g, test::single_processor_mesh(), LayoutRules());

  std::mt19937 rng(5);
  const Shape tok{{"batch", c.batch}, {"length", c.length}};
  const auto n = static_cast<size_t>(c.batch * c.length);
  double loss = 0;
  for (int step = 0; step < 700; ++step) {
    std::vector<std::int32_t> src(n, 0), sseg(n, 0), spos(n, 0), in(n, 0), tgt(n, 0), seg(n, 0),
        pos(n, 0);
    for (size_t b = 0; b < static_cast<size_t>(c.batch); ++b) {
      auto s = random_sequence(rng, c.vocab_size);
      s.push_back(kEos);
      for (size_t i = 0; i < s.size(); ++i) {
        const size_t k = b * static_cast<size_t>(c.length) + i;
        src[k] = tgt[k] = s[i];
        in[k] = i == 0 ? 0 : s[i - 1];
        sseg[k] = seg[k] = 1;
        spos[k] = pos[k] = static_cast<std::int32_t>(i);
      }
    }
    auto out = train->run({{m.inputs.id(), HostTensor::ints(tok, in)},
                           {m.targets.id(), HostTensor::ints(tok, tgt)},
                           {m.segments.id(), HostTensor::ints(tok, seg)},
                           {m.positions.id(), HostTensor::ints(tok, pos)},
                           {m.encoder_inputs.id(), HostTensor::ints(tok, src)},
                           {m.encoder_segments.id(), HostTensor::ints(tok, sseg)},
                           {m.encoder_positions.id(), HostTensor::ints(tok, spos)}},
                          {m.loss});
    loss = out[0].at(0);
  }
  EXPECT_LT(loss, 0.1) << "training did not converge";

  nn::DecodingShape shape;
  shape.batch = 16;
  shape.beam = 4;
  decode::IncrementalDecoder decoder(c, shape, test::single_processor_mesh(), LayoutRules());
  decoder.load_weights(*train);
  std::mt19937 held_out(99);
  std::vector<std::vector<std::int32_t>> sources, inputs;
  for (int b = 0; b < 16; ++b) {
    sources.push_back(random_sequence(held_out, c.vocab_size));
    inputs.push_back(sources.back());
    inputs.back().push_back(kEos);
  }
  decoder.encode(inputs);
  decode::BeamSearchOptions o;  // beam 4, alpha 0.6, EOS 1
  o.max_length = c.length;
  auto result = decoder.beam_search(o);
  int exact = 0;
  for (size_t b = 0; b < sources.size(); ++b) {
    ASSERT_FALSE(result[b].empty());
    EXPECT_TRUE(result[b][0].finished) << "row " << b;
    if (result[b][0].tokens == sources[b])
      ++exact;
  }
  EXPECT_EQ(exact, 16) << "exact matches of 16 held-out sequences (final loss " << loss << ")";
}
