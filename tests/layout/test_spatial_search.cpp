// The cost model and the layout search know spatial partitioning (docs/spatial.md): halo traffic
// is a collective kind in the counters (exact bytes, only where the blocks are split), the
// step-time model prices it, convolution layers offer their blocks and channel dims, and the
// search proposes spatial splits where batch parallelism cannot use the processors.

#include <mtk/base/error.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/layout_search.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/lower/overlap.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "program_fixtures.hpp"
#include "test_machine.hpp"
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace mtk;

namespace {

const std::vector<nn::SpatialDim> kDims{{"h", "kh", 1, 1, "hb", 0}, {"w", "kw", 1, 1, "wb", 0}};

// Two SAME 3x3 convolutions over a 16 x 16 image in 4 x 4 blocks, trained (so the backward has
// the halo exchange's adjoint too).
void build_cnn(Graph& g, std::int64_t batch) {
  Tensor x =
      placeholder(g, "image", {{"b", batch}, {"hb", 4}, {"h", 4}, {"wb", 4}, {"w", 4}, {"c", 2}});
  Tensor f1 =
      variable(g, "conv1", {{"kh", 3}, {"kw", 3}, {"c", 2}, {"co", 8}}, Initializer::normal(0.1f));
  Tensor f2 =
      variable(g, "conv2", {{"kh", 3}, {"kw", 3}, {"co", 8}, {"c2", 8}}, Initializer::normal(0.1f));
  Tensor y = nn::conv(relu(nn::conv(x, f1, kDims, "c", "co")), f2, kDims, "co", "c2");
  optim::Adafactor opt;
  optim::minimize(reduce_mean(square(y)), opt, optim::LearningRateSchedule());
}

std::int64_t halo_bytes(const Counters& c) {
  const auto it = c.comm_bytes.find(Collective::halo);
  return it == c.comm_bytes.end() ? 0 : it->second;
}

TEST(SpatialCost, HaloBytesAreTheStripsSentWhereTheBlocksAreSplit) {
  Graph g;
  // 4 blocks of 5 along h; left 1, right 2: each rank sends 1 + 2 positions of [b=2, c=3].
  Tensor x = variable(g, "x", {{"b", 2}, {"hb", 4}, {"h", 5}, {"c", 3}}, Initializer::normal(1));
  Tensor y = halo_exchange(x, "hb", "h", 1, 2);
  reduce_sum(y);
  const auto split = analyze(g, MeshShape::parse("rows:2"), LayoutRules::parse("hb:rows"));
  EXPECT_EQ(halo_bytes(split->counters()), 2 * 3 * (1 + 2) * 4) << split->explain();
  EXPECT_EQ(split->counters().comm_calls.at(Collective::halo), 1);
  // Unsplit (or split over a mesh dim of one processor), the exchange is a local copy.
  for (const char* rules : {"", "b:rows"}) {
    const auto local = analyze(g, MeshShape::parse("rows:2"), LayoutRules::parse(rules));
    EXPECT_EQ(halo_bytes(local->counters()), 0) << rules;
  }
  const auto one = analyze(g, MeshShape::parse("rows:1"), LayoutRules::parse("hb:rows"));
  EXPECT_EQ(halo_bytes(one->counters()), 0);
}

TEST(SpatialCost, TheStepTimeModelPricesHaloExchanges) {
  cost::LinkLevel link{0, 1e9, 1e-5};
  // Both strips at once: one latency and the bytes at the link's bandwidth, whatever the group.
  EXPECT_DOUBLE_EQ(cost::collective_seconds(Collective::halo, 4000, 2, 4, link),
                   2 * (1e-5 + 2000 / 1e9));
  EXPECT_DOUBLE_EQ(cost::collective_seconds(Collective::halo, 4000, 2, 8, link),
                   cost::collective_seconds(Collective::halo, 4000, 2, 2, link));
  EXPECT_EQ(cost::collective_seconds(Collective::halo, 4000, 2, 1, link), 0);

  Graph g;
  build_cnn(g, 2);
  const auto p =
      analyze(g, MeshShape::parse("rows:2;cols:2"), LayoutRules::parse("hb:rows;wb:cols"));
  const Counters& c = p->counters();
  // Forward: both layers exchange along h and w; backward: the second layer's input gradient
  // sends its halo back (the first layer's input is a placeholder: no gradient).
  EXPECT_EQ(c.comm_calls.at(Collective::halo), 2 * 2 + 2) << p->explain();
  const cost::StepTime t = cost::predict_step_time(c, MeshShape::parse("rows:2;cols:2"),
                                                   test::test_machine(), cost::StepTimeOptions());
  ASSERT_TRUE(t.comm_s.count(Collective::halo));
  EXPECT_GT(t.comm_s.at(Collective::halo), 0);
}

// The halo steps' time as a profile measures it (StepTime::halo_steps_s): the split exchanges'
// kernels (their bytes at the elementwise rate, their calls' overhead) and the exposed transfer;
// the local copies (along unsplit dims, and a split exchange's interior) are steps of their own
// kind (halo_copy), not in it.
TEST(SpatialCost, HaloStepsAreTheSplitExchangesKernelsAndTheirExposedTransfer) {
  Graph g;
  Tensor x = variable(g, "x", {{"b", 2}, {"hb", 4}, {"h", 5}, {"c", 3}}, Initializer::normal(1));
  reduce_sum(halo_exchange(x, "hb", "h", 1, 2));
  const MeshShape mesh = MeshShape::parse("rows:2");
  const cost::Machine m = test::test_machine();
  auto kinds = [](const Counters& c) {
    std::map<std::string, std::int64_t> calls;
    for (const auto& [kind, n] : c.op_calls)
      calls[kind.name()] = n;
    return calls;
  };
  const auto split = analyze(g, mesh, LayoutRules::parse("hb:rows"));
  const Counters& c = split->counters();
  EXPECT_EQ(kinds(c).at("halo_copy"), 1) << split->explain();  // the block's interior
  const cost::StepTime t = cost::predict_step_time(c, mesh, m, cost::StepTimeOptions());
  double kernels = 0;
  for (const auto& [kind, calls] : c.op_calls)
    if (kind.traits().halo && !kind.traits().free)
      kernels += static_cast<double>(calls) * m.op_overhead_s +
                 static_cast<double>(c.op_bytes.at(kind)) / m.elementwise_rate(kind);
  EXPECT_GT(kernels, 0);
  EXPECT_GT(t.halo_exposed_s, 0);
  EXPECT_DOUBLE_EQ(t.halo_steps_s, kernels + t.halo_exposed_s);
  // The exchange's kernels move its strips: 2 x 3 x (1 + 2) floats, packed and placed.
  std::int64_t moved = 0;
  for (const auto& [kind, bytes] : c.op_bytes)
    if (kind.traits().halo)
      moved += bytes;
  EXPECT_EQ(moved, 2 * (2 * 3 * (1 + 2)) * 2 * 4);
  EXPECT_LT(t.halo_steps_s, t.total_s);
  // Unsplit: one local copy, no halo steps.
  const auto local = analyze(g, mesh, LayoutRules::parse(""));
  EXPECT_EQ(kinds(local->counters()).at("halo_copy"), 1) << local->explain();
  EXPECT_EQ(
      cost::predict_step_time(local->counters(), mesh, m, cost::StepTimeOptions()).halo_steps_s, 0);
}

// program.overlap_halo: each exchange runs behind the products between its start and its finish
// (Counters::halo_exchanges), so the model hides min(exchange, those products) per exchange and
// counts the rest; without the overlap all of it.
TEST(SpatialCost, OverlapHidesEachExchangeBehindItsProducts) {
  ProgramOptions overlap;
  overlap.overlap_halo = true;
  Graph g(overlap);  // read by nn::conv and by analyze()
  build_cnn(g, 2);
  const MeshShape mesh = MeshShape::parse("rows:2;cols:2");
  const auto p = analyze(g, mesh, LayoutRules::parse("hb:rows;wb:cols"));
  const Counters& c = p->counters();
  ASSERT_EQ(static_cast<std::int64_t>(c.halo_exchanges.size()), c.comm_calls.at(Collective::halo));
  cost::Machine fast = test::test_machine(), slow = fast;
  for (auto& link : slow.links)
    link.latency *= 1e4;  // halo time far above the products'
  for (const cost::Machine& m : {fast, slow}) {
    cost::StepTimeOptions on, off;
    on.overlap_halo = true;
    const cost::StepTime a = cost::predict_step_time(c, mesh, m, off);
    const cost::StepTime b = cost::predict_step_time(c, mesh, m, on);
    const double halo = a.comm_s.at(Collective::halo);
    EXPECT_EQ(a.halo_exposed_s, halo);
    EXPECT_EQ(a.halo_hidden_s, 0);
    EXPECT_DOUBLE_EQ(a.total_s, a.compute_s + a.comm_total_s);
    EXPECT_FALSE(b.halo_whole_step_bound);
    ASSERT_EQ(b.halo_exchanges.size(), c.halo_exchanges.size());
    double hidden = 0, exchanges = 0;
    for (const auto& e : b.halo_exchanges) {
      EXPECT_DOUBLE_EQ(e.hidden_s, std::min(e.halo_s, e.between_s));
      EXPECT_DOUBLE_EQ(e.exposed_s, e.halo_s - e.hidden_s);
      hidden += e.hidden_s;
      exchanges += e.halo_s;
    }
    EXPECT_NEAR(exchanges, halo, 1e-12 * halo);
    EXPECT_DOUBLE_EQ(b.halo_hidden_s, hidden);
    EXPECT_GT(b.halo_hidden_s, 0);
    EXPECT_LE(b.halo_hidden_s, b.matmul_s);
    EXPECT_DOUBLE_EQ(b.halo_hidden_s + b.halo_exposed_s, halo);
    EXPECT_DOUBLE_EQ(b.total_s, a.total_s - b.halo_hidden_s);
  }
  // Every exchange, along either split dim, has products between (the nested interior/border
  // split); on the slow link each is still partly exposed, bounded by those products.
  const cost::StepTimeOptions on{false, true};
  const cost::StepTime s = cost::predict_step_time(c, mesh, slow, on);
  EXPECT_LT(s.halo_hidden_s, s.matmul_s);
  EXPECT_TRUE(std::all_of(s.halo_exchanges.begin(), s.halo_exchanges.end(),
                          [](const auto& e) { return e.between_s > 0 && e.exposed_s > 0; }));
}

// One SAME 3-wide convolution over blocks of 8 split in 2, forward only: the one exchange is
// posted before the interior's product (outputs 1 to 6 of each block, one gemm of
// [b, lb, l] x [kl, c] x [co]) and waited for after it.
TEST(SpatialCost, TheProductsBetweenAnExchangesStartAndFinish) {
  auto lowered = [](bool overlap) {
    ProgramOptions options;
    options.overlap_halo = overlap;
    Graph g(options);
    Tensor x = placeholder(g, "x", {{"b", 2}, {"lb", 2}, {"l", 8}, {"c", 4}});
    Tensor f = variable(g, "f", {{"kl", 3}, {"c", 4}, {"co", 4}}, Initializer::normal(0.1f));
    reduce_sum(nn::conv(x, f, {{"l", "kl", 1, 1, "lb", 0}}, "c", "co"));
    return analyze(g, MeshShape::parse("rows:2"), LayoutRules::parse("lb:rows"));
  };
  const auto on = lowered(true), off = lowered(false);
  ASSERT_EQ(on->counters().halo_exchanges.size(), 1u);
  const Counters::Exchange& e = on->counters().halo_exchanges.front();
  EXPECT_EQ(e.group, (Counters::CommGroup{Collective::halo, {0}}));
  EXPECT_EQ(e.bytes, 2 * 4 * (1 + 1) * 4);  // [b, c] strips, one each side, float32
  const double each = 2.0 * (2 * 1 * 6) * 4 * (3 * 4);
  ASSERT_EQ(e.gemm_between.size(), 1u);
  EXPECT_EQ(e.gemm_between.at(GemmClass::of(2 * 1 * 6, 4, 3 * 4)),
            (std::pair<double, std::int64_t>{each, 1}));
  EXPECT_GT(e.finish, e.start + 1);
  // Plain layer, exchange blocking: nothing between, fully exposed.
  ASSERT_EQ(off->counters().halo_exchanges.size(), 1u);
  EXPECT_TRUE(off->counters().halo_exchanges.front().gemm_between.empty());
  const MeshShape mesh = MeshShape::parse("rows:2");
  const cost::Machine m = test::test_machine();
  const cost::StepTimeOptions overlap{false, true};
  const cost::StepTime t = cost::predict_step_time(on->counters(), mesh, m, overlap);
  ASSERT_EQ(t.halo_exchanges.size(), 1u);
  EXPECT_DOUBLE_EQ(t.halo_exchanges[0].between_s, each / m.matmul_rate(each));
  const cost::StepTime plain = cost::predict_step_time(off->counters(), mesh, m, overlap);
  EXPECT_EQ(plain.halo_hidden_s, 0);
  EXPECT_EQ(plain.halo_exposed_s, plain.comm_s.at(Collective::halo));
}

// Hand-built steps: the record of each exchange sums the gemm calls of the steps between its start
// and its finish (the next step reading its token), not those outside.
Program::Step step(StepKind kind, std::vector<int> reads, std::vector<int> writes,
                   std::vector<std::pair<double, std::int64_t>> gemms = {}) {
  Program::Step s = test::synthetic_step(kind, std::move(reads), std::move(writes));
  for (const auto& [each, calls] : gemms)
    s.gemms.push_back({GemmClass::of_flops(each), each, calls});
  return s;
}

TEST(SpatialCost, RecordsTheProductsBetweenEachStartAndFinish) {
  const StepKind other = reduction_wait_kind();
  const Counters::CommGroup halo{Collective::halo, {1}};
  std::vector<Program::Step> steps{step(halo_start_kind(), {1}, {10, 11}),
                                   step(other, {2}, {3}, {{1e6, 2}}),
                                   step(other, {3}, {4}, {{1e6, 1}, {1e3, 3}}),
                                   step(other, {10, 11}, {11}),  // the finish
                                   step(halo_start_kind(), {4}, {12}),
                                   step(other, {12, 4}, {5}),
                                   step(other, {5}, {6}, {{1e6, 4}})};
  steps[0].comm = {{halo, 64}};
  steps[4].comm = {{halo, 32}};
  const auto records = record_halo_exchanges(steps);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].group, halo);
  EXPECT_EQ(records[0].bytes, 64);
  EXPECT_EQ(records[0].start, 0);
  EXPECT_EQ(records[0].finish, 3);
  const std::map<GemmClass, std::pair<double, std::int64_t>> between{
      {GemmClass::of_flops(1e6), {3e6, 3}}, {GemmClass::of_flops(1e3), {3e3, 3}}};
  EXPECT_EQ(records[0].gemm_between, between);
  EXPECT_EQ(records[1].bytes, 32);
  EXPECT_EQ(records[1].finish, 5);
  EXPECT_TRUE(records[1].gemm_between.empty());
  steps.pop_back();
  steps.pop_back();  // a start without its finish
  EXPECT_THROW(record_halo_exchanges(steps), std::exception);
}

// Hand-built steps: a halo start moves up past an in-place update (a blocking allreduce of a
// pending sum) whose tensor is a product's own storage, and its finish down past one; neither
// moves past an in-place update of storage its buffers may share (an alias of its input).
TEST(SpatialOverlap, MovesPastInPlaceUpdatesOfOtherStorage) {
  const StepKind other = reduction_wait_kind();
  std::vector<Program::Step> steps{step(other, {1}, {2}),                 // the exchange's input
                                   step(other, {3, 4}, {5}, {{1e6, 1}}),  // a product
                                   step(other, {5}, {5}),                 // its allreduce, in place
                                   step(halo_start_kind(), {2}, {10, 11}),
                                   step(other, {10, 11}, {11}),  // the finish
                                   step(other, {3, 4}, {6}, {{1e6, 1}}),
                                   step(other, {6}, {6}),
                                   step(other, {11}, {7})};
  for (size_t k = 0; k < steps.size(); ++k)
    steps[k].what = std::to_string(k);
  EXPECT_EQ(overlap_halos(steps), 1);
  std::vector<std::string> order;
  for (const auto& s : steps)
    order.push_back(s.what);
  EXPECT_EQ(order, (std::vector<std::string>{"0", "3", "1", "2", "5", "6", "4", "7"}));

  // The updated tensor may be the input's storage (step 1 forwards it): nothing moves.
  std::vector<Program::Step> shared{step(other, {1}, {2}),
                                    step(other, {2}, {5}),  // an alias of the input
                                    step(other, {5}, {5}),  // updated in place
                                    step(halo_start_kind(), {2}, {10, 11}),
                                    step(other, {10, 11}, {11}),
                                    step(other, {11}, {7})};
  EXPECT_EQ(overlap_halos(shared), 0);
  EXPECT_EQ(shared[3].kind, halo_start_kind());
}

std::vector<std::string> order_of(const std::vector<Program::Step>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps)
    out.push_back(s.what);
  return out;
}

std::vector<Program::Step> numbered(std::vector<Program::Step> steps) {
  for (size_t k = 0; k < steps.size(); ++k)
    steps[k].what = std::to_string(k);
  return steps;
}

// Hand-built steps: an exchange with nothing between its start and its finish (its input made
// right before, its output read right after) takes a product from before its start, with its
// allreduce, where the start does not depend on it and no other exchange loses its only product.
TEST(SpatialOverlap, SinksAnIndependentProductBetweenAChainedExchange) {
  const StepKind other = reduction_wait_kind();
  auto steps =
      numbered({step(other, {3, 4}, {5}, {{1e6, 1}}),  // a filter gradient
                step(other, {5}, {5}),                 // its allreduce
                step(other, {1}, {2}),                 // the exchange's input
                step(halo_start_kind(), {2}, {10, 11}), step(other, {10, 11}, {11}),  // the finish
                step(other, {11}, {7})});
  EXPECT_EQ(overlap_halos(steps), 1);
  EXPECT_EQ(order_of(steps), (std::vector<std::string>{"2", "3", "0", "1", "4", "5"}));

  // The input depends on the product: nothing moves.
  auto chained = numbered({step(other, {3, 4}, {5}, {{1e6, 1}}), step(other, {5}, {2}),
                           step(halo_start_kind(), {2}, {10, 11}), step(other, {10, 11}, {11}),
                           step(other, {11}, {7})});
  EXPECT_EQ(overlap_halos(chained), 0);
  EXPECT_EQ(order_of(chained), (std::vector<std::string>{"0", "1", "2", "3", "4"}));

  // The only product hides another exchange: it stays there.
  auto taken = numbered({step(halo_start_kind(), {1}, {20, 21}),
                         step(other, {3, 4}, {5}, {{1e6, 1}}), step(other, {20, 21}, {21}),
                         step(other, {21}, {2}), step(halo_start_kind(), {2}, {10, 11}),
                         step(other, {10, 11}, {11}), step(other, {11}, {7})});
  EXPECT_EQ(overlap_halos(taken), 1);
  EXPECT_EQ(order_of(taken), (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6"}));
}

// Counters made by hand: two exchanges, one with products between its start and its finish that
// hide only part of it, one with none; and the whole-step bound where no record exists.
TEST(SpatialCost, HiddenIsTheLesserOfEachExchangeAndItsProducts) {
  const cost::Machine m = test::test_machine();
  const MeshShape mesh = MeshShape::parse("rows:2");
  const cost::LinkLevel& link = m.link_for(mesh, {0});
  Counters c;
  const Counters::CommGroup halo{Collective::halo, {0}};
  c.group_bytes[halo] = 2 * 1000000;
  c.group_calls[halo] = 2;
  c.comm_bytes[Collective::halo] = 2 * 1000000;
  c.comm_calls[Collective::halo] = 2;
  const double each = 1e5;  // 2e5 FLOPs between the first start and finish
  c.gemm_by_size[GemmClass::of_flops(each)] = {10 * each, 10};
  c.halo_exchanges.push_back({halo, 1000000, 0, 3, {{GemmClass::of_flops(each), {2 * each, 2}}}});
  c.halo_exchanges.push_back({halo, 1000000, 4, 5, {}});
  const double exchange = cost::collective_seconds(Collective::halo, 1000000, 1, 2, link);
  const double between = 2 * each / m.matmul_rate(each);
  ASSERT_LT(between, exchange);
  const cost::StepTimeOptions on{false, true}, off;
  const cost::StepTime t = cost::predict_step_time(c, mesh, m, on);
  ASSERT_EQ(t.halo_exchanges.size(), 2u);
  EXPECT_DOUBLE_EQ(t.halo_exchanges[0].hidden_s, between);
  EXPECT_DOUBLE_EQ(t.halo_exchanges[0].exposed_s, exchange - between);
  EXPECT_EQ(t.halo_exchanges[1].hidden_s, 0);  // nothing between: fully exposed
  EXPECT_DOUBLE_EQ(t.halo_exchanges[1].exposed_s, exchange);
  EXPECT_DOUBLE_EQ(t.halo_hidden_s, between);
  EXPECT_DOUBLE_EQ(t.halo_exposed_s, 2 * exchange - between);
  const cost::StepTime blocking = cost::predict_step_time(c, mesh, m, off);
  EXPECT_EQ(blocking.halo_hidden_s, 0);
  EXPECT_DOUBLE_EQ(blocking.halo_exposed_s, 2 * exchange);
  // Products between that outlast the exchange hide all of it.
  c.halo_exchanges[0].gemm_between.begin()->second = {1e4 * each, 10000};
  EXPECT_DOUBLE_EQ(cost::predict_step_time(c, mesh, m, on).halo_exchanges[0].exposed_s, 0);
  // Unless the link's exchanges are the cores' own copies (shared memory): nothing hidden.
  cost::Machine copies = m;
  for (cost::LinkLevel& l : copies.links)
    l.halo_by_copies = true;
  const cost::StepTime by_copies = cost::predict_step_time(c, mesh, copies, on);
  EXPECT_EQ(by_copies.halo_hidden_s, 0);
  EXPECT_DOUBLE_EQ(by_copies.halo_exposed_s, 2 * exchange);
  EXPECT_DOUBLE_EQ(by_copies.total_s, cost::predict_step_time(c, mesh, copies, off).total_s);
  // No records: the fallback bound by all of the step's products.
  c.halo_exchanges.clear();
  const cost::StepTime fallback = cost::predict_step_time(c, mesh, m, on);
  EXPECT_TRUE(fallback.halo_whole_step_bound);
  EXPECT_DOUBLE_EQ(fallback.halo_exposed_s, std::max(0.0, 2 * exchange - fallback.matmul_s));
}

TEST(SpatialSearch, ConvolutionsOfferBlocksAndChannels) {
  Graph g;
  build_cnn(g, 2);
  const auto& offered = g.offered_splits();
  for (const char* dim : {"hb", "wb", "co", "c2"})
    EXPECT_NE(std::find(offered.begin(), offered.end(), dim), offered.end()) << dim;
}

TEST(SpatialSearch, ProposesSpatialSplitsWhenTheBatchCannotUseTheProcessors) {
  Graph g;
  build_cnn(g, 1);  // one image: only its blocks (or channels) can use 4 processors
  cost::SearchOptions o;
  o.processors = 4;
  o.dims = {"b", "hb", "wb", "co", "c2"};
  const cost::SearchResult r = cost::search_layouts(g, test::test_machine(), o);
  ASSERT_FALSE(r.ranked.empty());
  bool spatial = false;
  for (const auto& c : r.ranked) {
    const std::string rules = c.rules.to_string();
    const bool splits_blocks =
        rules.find("hb:") != std::string::npos || rules.find("wb:") != std::string::npos;
    EXPECT_EQ(splits_blocks, halo_bytes(c.counters) > 0) << rules;
    spatial = spatial || splits_blocks;
  }
  EXPECT_TRUE(spatial);
}

TEST(SpatialSearch, LocalAttentionOffersTheLengthAndASplitLengthIsPriced) {
  // Sequence parallelism: a model with local attention offers `length` (its halo is the window),
  // full attention does not; with one sequence the search proposes length splits, with halos.
  for (const std::int64_t window : {0, 4}) {
    nn::TransformerConfig c = mtk::test::tiny_transformer();
    c.length = 32;
    c.batch = 1;
    c.attention_window = window;
    Graph g;
    optim::Adafactor opt;
    nn::build_training(g, c, 1, opt, optim::LearningRateSchedule(), 1);
    const auto& offered = g.offered_splits();
    const bool offers = std::find(offered.begin(), offered.end(), "length") != offered.end();
    EXPECT_EQ(offers, window > 0) << "window " << window;
    if (window == 0)
      continue;
    cost::SearchOptions o;
    o.processors = 4;
    const cost::SearchResult r = cost::search_layouts(g, test::test_machine(), o);
    bool proposed = false;
    for (const auto& cand : r.ranked) {
      const bool splits_length = cand.rules.to_string().find("length:") != std::string::npos;
      if (splits_length) {
        EXPECT_GT(halo_bytes(cand.counters), 0) << cand.rules.to_string();
      }
      proposed = proposed || splits_length;
    }
    EXPECT_TRUE(proposed);
  }
}

// With the overlap, every candidate (each order of the mesh dims, whose links differ) prices its
// exchanges over the links of their renumbered mesh dims: the records add up to the halo time.
TEST(SpatialSearch, RanksWithThePerExchangeBound) {
  ProgramOptions overlap;
  overlap.overlap_halo = true;
  Graph g(overlap);
  build_cnn(g, 1);
  cost::SearchOptions so;
  so.processors = 4;
  so.dims = {"b", "hb", "wb", "co", "c2"};
  so.time.overlap_halo = true;
  cost::Machine m = test::test_machine();
  m.links[1].latency = 1e-3;  // the slow link's exchanges far longer than the fast one's
  const cost::SearchResult r = cost::search_layouts(g, m, so);
  int spatial = 0;
  for (const auto& c : r.ranked) {
    const auto it = c.time.comm_s.find(Collective::halo);
    if (it == c.time.comm_s.end())
      continue;
    ++spatial;
    ASSERT_EQ(c.time.halo_exchanges.size(), c.counters.halo_exchanges.size());
    double sum = 0;
    for (const auto& e : c.time.halo_exchanges)
      sum += e.halo_s;
    EXPECT_NEAR(sum, it->second, 1e-9 * it->second)
        << c.mesh.to_string() << " " << c.rules.to_string();
    EXPECT_FALSE(c.time.halo_whole_step_bound);
    EXPECT_DOUBLE_EQ(c.time.halo_hidden_s + c.time.halo_exposed_s, it->second);
  }
  EXPECT_GT(spatial, 0);
}

// Skinny products (a convolution's few channels) at the rate measured for their narrowest dim:
// the lower of their size's rate and the narrow points' (log-log interpolated), a result dim
// (outer) and the summed dim (inner) apart, no bound past the last point; the file keeps them.
TEST(SpatialCost, SkinnyProductsAtTheirNarrowRate) {
  cost::Machine m = test::test_machine();  // 1e10 FLOP/s at every size
  m.matmul_narrow_outer = {{2, 1e9}, {128, 8e9}};
  m.matmul_narrow_inner = {{2, 1e8}, {128, 1e9}};
  EXPECT_DOUBLE_EQ(m.matmul_rate(1e6, 0, false), 1e10);
  EXPECT_DOUBLE_EQ(m.matmul_rate(1e6, 1, true), 1e8);  // held below the first point
  EXPECT_NEAR(m.matmul_rate(1e6, 16, true), std::sqrt(1e8 * 1e9), 1e-3);  // 16: log midpoint
  EXPECT_NEAR(m.matmul_rate(1e6, 16, false), std::sqrt(1e9 * 8e9), 1e-3);
  EXPECT_DOUBLE_EQ(m.matmul_rate(1e6, 200, true), 1e10);  // past the last point: no bound
  cost::Machine slow = m;
  slow.matmul_sizes = {{1e3, 1e7}, {1e9, 1e7}};
  EXPECT_DOUBLE_EQ(slow.matmul_rate(1e6, 2, false), 1e7);  // the size's rate where lower
  // A 3x3x3 convolution of 8 channels over 4096 positions: forward [4096, 216] x [216, 8]
  // (a result dim narrow), its input gradient [4096, 8] x [8, 216] (the summed dim narrow).
  const GemmClass forward = GemmClass::of(4096, 8, 216), input_grad = GemmClass::of(4096, 216, 8);
  EXPECT_EQ(forward.narrow, 8);
  EXPECT_FALSE(forward.inner);
  EXPECT_EQ(input_grad.narrow, 8);
  EXPECT_TRUE(input_grad.inner);
  EXPECT_EQ(GemmClass::of(512, 512, 512).narrow, 0);
  const double each = 2.0 * 4096 * 216 * 8;
  Counters c;
  c.gemm_by_size[forward] = {each, 1};
  c.gemm_by_size[input_grad] = {3 * each, 3};
  const cost::StepTime t = cost::predict_step_time(c, MeshShape::parse("rows:1"), m);
  EXPECT_NEAR(t.matmul_s,
              each / m.matmul_rate(each, 8, false) + 3 * each / m.matmul_rate(each, 8, true),
              1e-12);
  const cost::Machine back = machine_from_config(Config::from_string(machine_to_yaml(m)));
  ASSERT_EQ(back.matmul_narrow_outer.size(), 2u);
  ASSERT_EQ(back.matmul_narrow_inner.size(), 2u);
  EXPECT_EQ(back.matmul_narrow_outer[1].flops, 8e9);
  EXPECT_EQ(back.matmul_narrow_inner[0].narrow, 2);
  m.matmul_narrow_inner = {{128, 1e9}, {2, 1e8}};
  EXPECT_THROW(m.validate(), Error);
}

}  // namespace
