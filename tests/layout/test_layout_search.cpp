// The layout search (mtk/cost/layout_search.hpp): complete and valid enumeration against a brute
// force over every ordered mesh and every mapping, the memory filter, determinism, the errors for
// impossible requests; the step-time model's terms (gemm rate by size, memory traffic, per-step
// overhead, collectives and links) and the counters they read; machine files.

#include <mtk/base/error.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/layout_search.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "test_machine.hpp"
#include <cmath>
#include <dirent.h>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace mtk;

namespace {

nn::TransformerConfig tiny(bool moe) {
  // Half the usual model in every dim, so the search stays quick.
  // vocab, d_model, d_ff, heads x d_kv, layers, length, batch
  nn::TransformerConfig c =
      test::sized_transformer({16, 8, 16, 4, 2, 1, 4, 4}, test::tiny_transformer(moe));
  if (moe) {
    c.moe_every = 1;
    c.moe.num_experts = 4;
  }
  return c;
}

void build(Graph& g, const nn::TransformerConfig& c) {
  nn::ModelGraph m = nn::build_transformer(g, c, true);
  optim::Adafactor opt;
  optim::minimize(m.loss, opt, optim::LearningRateSchedule());
}

// A layout up to mesh dim names: ordered mesh sizes and, per splittable dim, its mesh axis.
using Key = std::pair<std::vector<std::int64_t>, std::vector<int>>;
struct Cost {
  std::int64_t peak;
  double flops;
  std::map<Collective, std::int64_t> comm;
  bool operator==(const Cost& o) const {
    return peak == o.peak && flops == o.flops && comm == o.comm;
  }
};

Key key_of(const MeshShape& mesh, const LayoutRules& rules, const std::vector<std::string>& dims) {
  Key k;
  for (int a = 0; a < mesh.ndims(); ++a)
    k.first.push_back(mesh[a].size);
  for (const auto& d : dims)
    k.second.push_back(rules.mesh_axis_for(d, mesh));
  return k;
}

// Every ordered mesh of n processors (sizes >= 2, up to max_dims dims) and every mapping of
// `dims` to {whole, axis 0..k-1} using every axis, analysed; those analyze() accepts.
std::map<Key, Cost> brute_force(Graph& g, std::int64_t n, int max_dims,
                                const std::vector<std::string>& dims) {
  std::vector<std::vector<std::int64_t>> meshes;
  std::vector<std::vector<std::int64_t>> stack{{}};
  while (!stack.empty()) {
    auto cur = stack.back();
    stack.pop_back();
    std::int64_t prod = 1;
    for (auto s : cur)
      prod *= s;
    if (prod == n && !cur.empty())
      meshes.push_back(cur);
    if (static_cast<int>(cur.size()) == max_dims)
      continue;
    for (std::int64_t f = 2; prod * f <= n; ++f) {
      auto next = cur;
      next.push_back(f);
      stack.push_back(next);
    }
  }
  std::map<Key, Cost> out;
  for (const auto& sizes : meshes) {
    const int k = static_cast<int>(sizes.size());
    std::vector<Dimension> md;
    for (int a = 0; a < k; ++a)
      md.push_back({"m" + std::to_string(a), sizes[static_cast<size_t>(a)]});
    const MeshShape mesh(md);
    std::int64_t total = 1;
    for (size_t i = 0; i < dims.size(); ++i)
      total *= k + 1;
    for (std::int64_t code = 0; code < total; ++code) {
      std::vector<std::pair<std::string, std::string>> rules;
      std::set<int> used;
      std::int64_t c = code;
      for (const auto& d : dims) {
        const int digit = static_cast<int>(c % (k + 1));
        c /= k + 1;
        if (digit > 0) {
          rules.emplace_back(d, "m" + std::to_string(digit - 1));
          used.insert(digit - 1);
        }
      }
      if (static_cast<int>(used.size()) != k)
        continue;
      try {
        const LayoutRules lr(rules);
        const Counters cn = analyze(g, mesh, lr)->counters();
        out[key_of(mesh, lr, dims)] = {cn.peak_bytes, cn.total_flops(), cn.comm_bytes};
      } catch (const Error&) {
      }
    }
  }
  return out;
}

std::map<Key, Cost> from_search(const cost::SearchResult& r) {
  std::map<Key, Cost> out;
  for (const auto& c : r.ranked) {
    const Key k = key_of(c.mesh, c.rules, r.dims);
    EXPECT_EQ(out.count(k), 0u) << "listed twice: " << c.mesh.to_string() << " "
                                << c.rules.to_string();
    out[k] = {c.counters.peak_bytes, c.counters.total_flops(), c.counters.comm_bytes};
  }
  return out;
}

void expect_complete(bool moe, std::int64_t n, int max_dims) {
  Graph g;
  build(g, tiny(moe));
  cost::SearchOptions o;
  o.processors = static_cast<int>(n);
  o.max_mesh_dims = max_dims;
  const auto r = cost::search_layouts(g, test::test_machine(), o);
  const auto expected = brute_force(g, n, max_dims, r.dims);
  ASSERT_FALSE(expected.empty());
  const auto found = from_search(r);
  EXPECT_EQ(found.size(), expected.size());
  for (const auto& [k, c] : expected) {
    auto it = found.find(k);
    ASSERT_NE(it, found.end()) << "missing a layout the brute force accepts";
    EXPECT_TRUE(it->second == c) << "counters differ from a direct analyze()";
  }
  for (const auto& [k, c] : found)
    EXPECT_EQ(expected.count(k), 1u) << "listed a layout analyze() refuses";
}

}  // namespace

// Step kinds for hand-made counters, with the traits of the ops they stand for.
constexpr auto binary_kind = make_op_kind<NoAttrs>("binary", {FlopClass::elementwise}, nullptr);
constexpr auto reduce_kind = make_op_kind<NoAttrs>("reduce", {FlopClass::reduce}, nullptr);
constexpr auto gather_kind = make_op_kind<NoAttrs>("gather", {FlopClass::gather}, nullptr);
constexpr auto einsum_kind = make_op_kind<NoAttrs>("einsum", {FlopClass::einsum}, nullptr);
constexpr auto reshape_kind = make_op_kind<NoAttrs>("reshape", {FlopClass::none, true}, nullptr);
constexpr auto alias_kind = make_op_kind<NoAttrs>("alias", {FlopClass::none, true}, nullptr);
constexpr auto allreduce_kind =
    make_op_kind<NoAttrs>("allreduce", {FlopClass::none, true}, nullptr);

// A counter of analysed steps by their kind's name (the test reads names; the library does not).
std::int64_t by_name(const std::map<StepKind, std::int64_t>& m, const std::string& name) {
  for (const auto& [k, v] : m)
    if (name == k.name())
      return v;
  ADD_FAILURE() << "no steps of kind " << name;
  return -1;
}

TEST(LayoutSearch, FactorizationsAreEveryOrderedProduct) {
  EXPECT_EQ(cost::mesh_factorizations(1, 3), (std::vector<std::vector<std::int64_t>>{{1}}));
  EXPECT_EQ(cost::mesh_factorizations(7, 3), (std::vector<std::vector<std::int64_t>>{{7}}));
  const auto f12 = cost::mesh_factorizations(12, 3);
  std::set<std::vector<std::int64_t>> s(f12.begin(), f12.end());
  EXPECT_EQ(s.size(), f12.size());
  // 12; 2x6 6x2 3x4 4x3; 2x2x3 2x3x2 3x2x2
  EXPECT_EQ(f12.size(), 8u);
  EXPECT_TRUE(s.count({2, 3, 2}));
  EXPECT_EQ(cost::mesh_factorizations(512, 3).size(), 1u + 8u + 28u);
  EXPECT_THROW(cost::mesh_factorizations(0, 3), Error);
}

TEST(LayoutSearch, DenseEnumerationMatchesBruteForceOn4) {
  expect_complete(false, 4, 3);
}

TEST(LayoutSearch, DenseEnumerationMatchesBruteForceOn8) {
  expect_complete(false, 8, 3);
}

TEST(LayoutSearch, MoeEnumerationMatchesBruteForceOn4) {
  expect_complete(true, 4, 2);
}

TEST(LayoutSearch, RespectsOneTensorOneDimPerMeshDim) {
  Graph g;
  build(g, tiny(true));
  cost::SearchOptions o;
  o.processors = 4;
  const auto r = cost::search_layouts(g, test::test_machine(), o);
  EXPECT_GT(r.tensor_conflicts, 0);
  for (const auto& c : r.ranked) {
    const std::string e = c.rules.mesh_dim_for("experts"), f = c.rules.mesh_dim_for("d_ff");
    EXPECT_FALSE(!e.empty() && e == f) << c.rules.to_string();  // wi is [experts, d_model, d_ff]
  }
}

TEST(LayoutSearch, MemoryFilterDropsExactlyTheLayoutsOverTheLimit) {
  Graph g;
  build(g, tiny(false));
  cost::SearchOptions o;
  o.processors = 4;
  const auto all = cost::search_layouts(g, test::test_machine(), o);
  std::vector<std::int64_t> peaks;
  for (const auto& c : all.ranked)
    peaks.push_back(c.counters.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  o.memory_bytes = peaks[peaks.size() / 2];
  const auto some = cost::search_layouts(g, test::test_machine(), o);
  EXPECT_GT(some.over_memory, 0);
  std::size_t expected = 0;
  for (auto p : peaks)
    expected += p <= o.memory_bytes;
  EXPECT_EQ(some.ranked.size(), expected);
  for (const auto& c : some.ranked)
    EXPECT_LE(c.counters.peak_bytes, o.memory_bytes);
}

TEST(LayoutSearch, IsDeterministicAndRankedByPredictedTime) {
  Graph g1, g2;
  build(g1, tiny(true));
  build(g2, tiny(true));
  cost::SearchOptions o;
  o.processors = 8;
  const auto a = cost::search_layouts(g1, test::test_machine(), o);
  const auto b = cost::search_layouts(g2, test::test_machine(), o);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(a.ranked[i].mesh, b.ranked[i].mesh);
    EXPECT_EQ(a.ranked[i].rules.to_string(), b.ranked[i].rules.to_string());
    EXPECT_EQ(a.ranked[i].time.total_s, b.ranked[i].time.total_s);
    if (i > 0) {
      EXPECT_LE(a.ranked[i - 1].time.total_s, a.ranked[i].time.total_s);
    }
  }
}

TEST(LayoutSearch, MeshOrderDecidesTheLinkButNotTheCounters) {
  Graph g;
  build(g, tiny(false));
  cost::SearchOptions o;
  o.processors = 4;
  o.max_mesh_dims = 2;
  const auto r = cost::search_layouts(g, test::test_machine(), o);
  // batch:2;model:2 and model:2;batch:2 with the same rules: same counters, different times
  // (the last mesh dim is on the fast span-2 link).
  std::map<std::string, std::vector<const cost::Candidate*>> by_rules;
  for (const auto& c : r.ranked)
    if (c.mesh.ndims() == 2)
      by_rules[c.rules.to_string()].push_back(&c);
  bool some_differ = false;
  for (const auto& [rules, cs] : by_rules) {
    ASSERT_EQ(cs.size(), 2u) << rules;
    EXPECT_EQ(cs[0]->counters.total_comm_bytes(), cs[1]->counters.total_comm_bytes());
    some_differ = some_differ || cs[0]->time.total_s != cs[1]->time.total_s;
  }
  EXPECT_TRUE(some_differ);
  // Every candidate's calls by size add up to its calls and bytes per group, each call in the
  // bucket of its size.
  for (const auto& c : r.ranked) {
    ASSERT_EQ(c.counters.group_sizes.size(), c.counters.group_bytes.size());
    for (const auto& [group, sizes] : c.counters.group_sizes) {
      std::int64_t bytes = 0, calls = 0;
      for (const auto& [key, bc] : sizes) {
        bytes += bc.first;
        calls += bc.second;
        const double each = static_cast<double>(bc.first) / static_cast<double>(bc.second);
        if (key < 0) {
          EXPECT_EQ(bc.first, 0);
        } else {
          EXPECT_GE(each, std::ldexp(1.0, key));
          EXPECT_LT(each, std::ldexp(1.0, key + 1));
        }
      }
      EXPECT_EQ(bytes, c.counters.group_bytes.at(group));
      EXPECT_EQ(calls, c.counters.group_calls.at(group));
    }
  }
}

TEST(LayoutSearch, NoMeshFitsNamesTheSizes) {
  Graph g;
  build(g, tiny(false));
  cost::SearchOptions o;
  o.processors = 7;  // every splittable dim is a power of two
  try {
    cost::search_layouts(g, test::test_machine(), o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no mesh of 7 processors"), std::string::npos) << m;
    EXPECT_NE(m.find("batch=4"), std::string::npos) << m;
    EXPECT_NE(m.find("not divisible"), std::string::npos) << m;
  }
}

TEST(LayoutSearch, NothingFitsTheMemoryNamesTheSmallestPeak) {
  Graph g;
  build(g, tiny(false));
  cost::SearchOptions o;
  o.processors = 2;
  o.memory_bytes = 1000;
  try {
    cost::search_layouts(g, test::test_machine(), o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("memory limit of 1000 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("smallest peak is"), std::string::npos) << m;
  }
}

TEST(LayoutSearch, UnknownDimIsAnError) {
  Graph g;
  build(g, tiny(false));
  cost::SearchOptions o;
  o.processors = 2;
  o.dims = {"batch", "experts"};
  EXPECT_THROW(cost::search_layouts(g, test::test_machine(), o), Error);
  o.dims = {"batch"};
  const auto r = cost::search_layouts(g, test::test_machine(), o);
  ASSERT_EQ(r.ranked.size(), 1u);
  EXPECT_EQ(r.ranked[0].rules.to_string(), "batch:batch");
}

TEST(StepTime, CollectiveCosts) {
  const cost::LinkLevel l{0, 1e9, 1e-6};
  EXPECT_EQ(cost::collective_seconds(Collective::allreduce, 1 << 20, 3, 1, l), 0.0);
  // 8 processors, 80 MB in one call: ring 2*7*(1e-6 + 1e7/1e9) beats tree 6*(1e-6 + 0.08).
  EXPECT_NEAR(cost::collective_seconds(Collective::allreduce, 80000000, 1, 8, l),
              14 * (1e-6 + 0.01), 1e-12);
  // tiny messages: tree 2*3 latencies beat ring 2*7.
  EXPECT_NEAR(cost::collective_seconds(Collective::allreduce, 8, 1, 8, l), 6 * (1e-6 + 8e-9),
              1e-12);
  EXPECT_NEAR(cost::collective_seconds(Collective::allconcat, 1000, 2, 4, l),
              2 * 3 * (1e-6 + 500e-9), 1e-15);
  EXPECT_NEAR(cost::collective_seconds(Collective::alltoall, 4000, 1, 4, l), 3 * (1e-6 + 1e-6),
              1e-15);
}

TEST(StepTime, GroupsOfTheLastMeshDimAreNeighbours) {
  const MeshShape m = MeshShape::parse("batch:4;model:2");
  EXPECT_EQ(cost::group_span(m, {1}), 2);
  EXPECT_EQ(cost::group_span(m, {0}), 7);
  EXPECT_EQ(cost::group_span(m, {0, 1}), 8);
  const cost::Machine mc = test::test_machine();
  EXPECT_EQ(mc.link_for(m, {1}).bandwidth, 1e10);
  EXPECT_EQ(mc.link_for(m, {0}).bandwidth, 1e9);
}

TEST(StepTime, StridedLinksTakeTheirGroups) {
  // 4 ranks round-robin over 2 cores: {0, 2} and {1, 3} share a core. A strided level describes
  // the first dim of a 2 x 2 mesh (ranks 2 apart); the last dim and groups over both dims keep the
  // span levels; a stride the file lacks falls back to them.
  cost::Machine mc = test::test_machine();
  mc.links = {{2, 1e10, 1e-6}, {0, 1e9, 1e-5}, {3, 5e8, 2e-3, 2}};
  const MeshShape m = MeshShape::parse("batch:2;model:2");
  EXPECT_EQ(cost::group_stride(m, {0}), 2);
  EXPECT_EQ(cost::group_stride(m, {1}), 1);
  EXPECT_EQ(cost::group_stride(m, {0, 1}), 0);
  EXPECT_EQ(mc.link_for(m, {0}).bandwidth, 5e8);
  EXPECT_EQ(mc.link_for(m, {1}).bandwidth, 1e10);
  EXPECT_EQ(mc.link_for(m, {0, 1}).bandwidth, 1e9);
  const MeshShape wide = MeshShape::parse("batch:4;model:2");  // stride 2 but span 7 > 3
  EXPECT_EQ(mc.link_for(wide, {0}).bandwidth, 1e9);
  const MeshShape three = MeshShape::parse("a:2;b:2;c:2");  // stride 4: no such level
  EXPECT_EQ(mc.link_for(three, {0}).bandwidth, 1e9);
  EXPECT_EQ(mc.link_for(three, {1}).bandwidth, 5e8);
  mc.validate();
  // Round trip, and a strided level needs stride >= 2 and a span level beside it.
  const cost::Machine back = machine_from_config(Config::from_string(machine_to_yaml(mc)));
  ASSERT_EQ(back.links.size(), 3u);
  EXPECT_EQ(back.links[2].stride, 2);
  EXPECT_EQ(back.links[2].span, 3);
  EXPECT_EQ(back.links[0].stride, 0);
  const std::string base = "matmul_flops: 1e9\nelementwise_bytes: 1e9\n";
  EXPECT_THROW(machine_from_config(Config::from_string(
                   base + "links: {a: {bandwidth: 1e9}, b: {span: 3, stride: 1, bandwidth: 1e9}}")),
               Error);
  EXPECT_THROW(machine_from_config(
                   Config::from_string(base + "links: {b: {span: 3, stride: 2, bandwidth: 1e9}}")),
               Error);
}

TEST(StepTime, AllreducesMeasuredBySizeTakeTheirPoints) {
  // A link whose allreduce time was measured by size on groups of 2: a step function that
  // latency + size / bandwidth cannot follow (here 1 ms up to 128 B, 5 ms from 512 B).
  cost::LinkLevel l{0, 1e9, 1e-6};
  l.sizes_group = 2;
  l.allreduce_sizes = {{32, 1e-3}, {128, 1e-3}, {512, 5e-3}};
  EXPECT_DOUBLE_EQ(l.measured_allreduce_seconds(8, 2), 1e-3);  // below: the first point
  EXPECT_DOUBLE_EQ(l.measured_allreduce_seconds(64, 2), 1e-3);
  EXPECT_NEAR(l.measured_allreduce_seconds(256, 2), 3e-3, 1e-15);  // halfway in log(bytes)
  // beyond the last: its time plus the ring's bandwidth term for the extra bytes
  EXPECT_NEAR(l.measured_allreduce_seconds(2048, 2), 5e-3 + (2048 - 512) / 1e9, 1e-15);
  EXPECT_LT(l.measured_allreduce_seconds(256, 4), 0);  // other group sizes: not measured
  EXPECT_NEAR(cost::collective_seconds(Collective::allreduce, 3 * 256, 3, 2, l), 9e-3, 1e-15);
  EXPECT_NEAR(cost::collective_seconds(Collective::allreduce, 256, 1, 4, l), 4 * (1e-6 + 256 / 1e9),
              1e-15);  // 4 processors: the formula (tree)
  EXPECT_NEAR(cost::collective_seconds(Collective::allconcat, 256, 1, 2, l), 1e-6 + 256 / 1e9,
              1e-15);
  // Calls by size are costed each at their size, not at the mean size.
  cost::Machine mc = test::test_machine();
  mc.links = {l};
  Counters c;
  c.flops[FlopClass::einsum] = 1;
  const Counters::CommGroup g{Collective::allreduce, {0}};
  c.group_bytes[g] = 10 * 32 + 2048;
  c.group_calls[g] = 11;
  c.group_sizes[g][5] = {10 * 32, 10};
  c.group_sizes[g][11] = {2048, 1};
  const MeshShape m = MeshShape::parse("batch:2");
  EXPECT_NEAR(cost::predict_step_time(c, m, mc).comm_total_s, 10e-3 + 5e-3 + 1536 / 1e9, 1e-15);
  c.group_sizes.clear();  // without sizes: every call at the mean (216 B)
  EXPECT_NEAR(cost::predict_step_time(c, m, mc).comm_total_s,
              11 * l.measured_allreduce_seconds(2368.0 / 11, 2), 1e-15);
  // Machine files: round trip, validation.
  mc.validate();
  const cost::Machine back = machine_from_config(Config::from_string(machine_to_yaml(mc)));
  ASSERT_EQ(back.links.size(), 1u);
  EXPECT_EQ(back.links[0].sizes_group, 2);
  ASSERT_EQ(back.links[0].allreduce_sizes.size(), 3u);
  EXPECT_DOUBLE_EQ(back.links[0].allreduce_sizes[2].bytes, 512);
  EXPECT_DOUBLE_EQ(back.links[0].allreduce_sizes[2].seconds, 5e-3);
  const std::string base = "matmul_flops: 1e9\nelementwise_bytes: 1e9\n";
  const cost::Machine sorted =
      machine_from_config(Config::from_string(
          base + "links: {a: {bandwidth: 1e9, group: 2, allreduce_sizes: {x: {bytes: 64, seconds: "
                 "2e-3}, y: {bytes: 8, seconds: 1e-3}}}}"));
  EXPECT_DOUBLE_EQ(sorted.links[0].allreduce_sizes[0].bytes, 8);
  for (const std::string bad :
       {"links: {a: {bandwidth: 1e9, allreduce_sizes: {x: {bytes: 8, seconds: 1}}}}",  // no group
        "links: {a: {bandwidth: 1e9, group: 2, allreduce_sizes: {x: {bytes: 0, seconds: 1}}}}",
        "links: {a: {bandwidth: 1e9, group: 2, allreduce_sizes: {x: {bytes: 8, seconds: -1}}}}",
        "links: {a: {bandwidth: 1e9, group: 2, allreduce_sizes: {x: {bytes: 8, second: 1}}}}",
        "links: {a: {bandwidth: 1e9, group: 2, allreduce_sizes: {x: {bytes: 8, seconds: 1}, "
        "y: {bytes: 8, seconds: 2}}}}"})
    EXPECT_THROW(machine_from_config(Config::from_string(base + bad)), Error) << bad;
}

TEST(StepTime, HaloExchangesMeasuredBySizeTakeTheirPoints) {
  // A link whose neighbour exchanges were measured by size: 20 us up to 1 KiB, 100 us at 64 KiB
  // (the calls into MPI, not latency + bytes / bandwidth's 1 us).
  cost::LinkLevel l{0, 1e9, 1e-6};
  EXPECT_LT(l.measured_halo_seconds(1024), 0);  // none measured
  EXPECT_NEAR(cost::collective_seconds(Collective::halo, 1024, 1, 2, l), 1e-6 + 1024 / 1e9, 1e-15);
  l.halo_sizes = {{1024, 20e-6}, {65536, 100e-6}};
  EXPECT_DOUBLE_EQ(l.measured_halo_seconds(64), 20e-6);      // below: the first point
  EXPECT_NEAR(l.measured_halo_seconds(8192), 60e-6, 1e-15);  // halfway in log(bytes)
  EXPECT_NEAR(l.measured_halo_seconds(65536 + 1e6), 100e-6 + 1e6 / 1e9, 1e-15);  // + bandwidth
  // Any group size (two partners each); allreduces keep the formula (no allreduce_sizes).
  for (std::int64_t p : {2, 4, 8})
    EXPECT_NEAR(cost::collective_seconds(Collective::halo, 2 * 8192, 2, p, l), 120e-6, 1e-15);
  EXPECT_NEAR(cost::collective_seconds(Collective::allreduce, 1024, 1, 2, l),
              2 * (1e-6 + 512 / 1e9), 1e-15);
  // The step model's exchanges take them.
  cost::Machine mc = test::test_machine();
  mc.links = {l};
  Counters c;
  c.flops[FlopClass::einsum] = 1;
  const Counters::CommGroup g{Collective::halo, {0}};
  c.group_bytes[g] = 3 * 8192;
  c.group_calls[g] = 3;
  const MeshShape m = MeshShape::parse("d:4");
  EXPECT_NEAR(cost::predict_step_time(c, m, mc).comm_s.at(Collective::halo), 180e-6, 1e-15);
  // Machine files: round trip (also a level with halo points only), validation.
  mc.validate();
  const cost::Machine back = machine_from_config(Config::from_string(machine_to_yaml(mc)));
  ASSERT_EQ(back.links[0].halo_sizes.size(), 2u);
  EXPECT_DOUBLE_EQ(back.links[0].halo_sizes[1].bytes, 65536);
  EXPECT_DOUBLE_EQ(back.links[0].halo_sizes[1].seconds, 100e-6);
  EXPECT_TRUE(back.links[0].allreduce_sizes.empty());
  EXPECT_FALSE(back.links[0].halo_by_copies);
  mc.links[0].halo_by_copies = true;
  EXPECT_TRUE(
      machine_from_config(Config::from_string(machine_to_yaml(mc))).links[0].halo_by_copies);
  const std::string base = "matmul_flops: 1e9\nelementwise_bytes: 1e9\n";
  for (const std::string bad :
       {"links: {a: {bandwidth: 1e9, halo_sizes: {x: {bytes: 0, seconds: 1}}}}",
        "links: {a: {bandwidth: 1e9, halo_sizes: {x: {bytes: 8, seconds: -1}}}}",
        "links: {a: {bandwidth: 1e9, halo_sizes: {x: {bytes: 8, second: 1}}}}",
        "links: {a: {bandwidth: 1e9, halo_sizes: {x: {bytes: 8, seconds: 1}, "
        "y: {bytes: 8, seconds: 2}}}}",
        "links: {a: {bandwidth: 1e9, halo_by_copies: maybe}}"})
    EXPECT_THROW(machine_from_config(Config::from_string(base + bad)), Error) << bad;
}

TEST(StepTime, ElementwiseRatesByStepKind) {
  // Steps of a kind with its own rate use it; other kinds the general elementwise rate.
  cost::Machine mc = test::test_machine();  // elementwise_bytes 1e10
  mc.elementwise_by_kind = {{cost::KindKey::named("binary"), 4e10},
                            {cost::KindKey::named("reduce"), 2e9}};
  EXPECT_EQ(mc.elementwise_rate(cost::KindKey::named("binary")), 4e10);
  EXPECT_EQ(mc.elementwise_rate(cost::KindKey::named("unary")), 1e10);
  Counters c;
  c.flops[FlopClass::einsum] = 1;
  c.op_bytes = {{binary_kind.def, 4000000000},
                {reduce_kind.def, 2000000000},
                {gather_kind.def, 1000000000},
                {reshape_kind.def, 1000000000}};  // reshape: free
  c.op_calls = {
      {binary_kind.def, 1}, {reduce_kind.def, 1}, {gather_kind.def, 1}, {reshape_kind.def, 1}};
  EXPECT_NEAR(cost::predict_step_time(c, MeshShape::parse("batch:1"), mc).elementwise_s,
              0.1 + 1.0 + 0.1, 1e-12);
  // Machine files: round trip; a non-positive rate is an error naming the kind.
  const cost::Machine back = machine_from_config(Config::from_string(machine_to_yaml(mc)));
  EXPECT_EQ(back.elementwise_by_kind, mc.elementwise_by_kind);
  const std::string base =
      "matmul_flops: 1e9\nelementwise_bytes: 1e9\nlinks: {a: {bandwidth: 1e9}}\n";
  EXPECT_TRUE(machine_from_config(Config::from_string(base)).elementwise_by_kind.empty());
  try {
    machine_from_config(Config::from_string(base + "elementwise_by_kind: {unary: 0}\n"));
    ADD_FAILURE() << "a zero rate was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("elementwise_by_kind.unary"), std::string::npos)
        << e.what();
  }
}

TEST(StepTime, SumsComputeAndCommunication) {
  Counters c;
  c.flops[FlopClass::einsum] = 2e10;
  c.flops[FlopClass::elementwise] = 1e9;
  c.group_bytes[{Collective::allreduce, {0}}] = 4000000;
  c.group_calls[{Collective::allreduce, {0}}] = 1;
  const auto t = cost::predict_step_time(c, MeshShape::parse("batch:2"), test::test_machine());
  EXPECT_DOUBLE_EQ(t.matmul_s, 2.0);
  EXPECT_DOUBLE_EQ(t.elementwise_s, 1e9 * cost::kElementwiseBytesPerFlop / 1e10);
  EXPECT_NEAR(t.comm_s.at(Collective::allreduce), 2 * (1e-6 + 2e6 / 1e10), 1e-12);
  EXPECT_DOUBLE_EQ(t.total_s, t.compute_s + t.comm_total_s);
  EXPECT_DOUBLE_EQ(t.overlapped_s, t.compute_s);
}

TEST(StepTime, MatmulRateDependsOnGemmSize) {
  cost::Machine m = test::test_machine();
  EXPECT_EQ(m.matmul_rate(1e3), 1e10);  // no sizes: one rate
  m.matmul_sizes = {{1e4, 1e9}, {1e6, 1e11}};
  EXPECT_DOUBLE_EQ(m.matmul_rate(1e2), 1e9);    // held below the smallest size
  EXPECT_DOUBLE_EQ(m.matmul_rate(1e8), 1e11);   // and above the largest
  EXPECT_NEAR(m.matmul_rate(1e5), 1e10, 1e-3);  // linear in log(size), log(rate)
  m.matmul_sizes = {{1e6, 1e11}, {1e4, 1e9}};
  EXPECT_THROW(m.validate(), Error);  // sizes must increase
  m.matmul_sizes = {{1e4, 0}};
  EXPECT_THROW(m.validate(), Error);
  m.matmul_sizes = {};
  m.op_overhead_s = -1;
  EXPECT_THROW(m.validate(), Error);
}

TEST(StepTime, GemmsByTheirSizeTrafficAndOverheadPerKernelStep) {
  cost::Machine m = test::test_machine();
  m.matmul_sizes = {{1e4, 1e9}, {1e8, 1e10}};
  m.op_overhead_s = 1e-5;
  Counters c;
  c.flops[FlopClass::einsum] = 3e10;                         // ignored once gemm_by_size is there
  c.gemm_by_size[GemmClass::of_flops(1e4)] = {1e9, 100000};  // 1e4 FLOPs per gemm: 1e9 FLOP/s
  c.gemm_by_size[GemmClass::of_flops(1e9)] = {2e10, 20};     // 1e9 each: held at 1e10
  c.op_calls = {{binary_kind.def, 10},
                {einsum_kind.def, 3},
                {alias_kind.def, 5},
                {reshape_kind.def, 2},
                {allreduce_kind.def, 4}};
  c.op_bytes = {{binary_kind.def, 3000000000},
                {einsum_kind.def, 1000000000},
                {alias_kind.def, 1000000000},
                {reshape_kind.def, 1000000000},
                {allreduce_kind.def, 1000000000}};
  const auto t = cost::predict_step_time(c, MeshShape::parse("batch:2"), m);
  EXPECT_DOUBLE_EQ(t.matmul_s, 1.0 + 2.0);
  EXPECT_DOUBLE_EQ(t.elementwise_s, 0.4);  // binary + einsum operands; renames and allreduces free
  EXPECT_EQ(t.kernel_steps, 13);
  EXPECT_DOUBLE_EQ(t.overhead_s, 13 * 1e-5);
  EXPECT_DOUBLE_EQ(t.compute_s, t.matmul_s + t.elementwise_s + t.overhead_s);
  // bf16 scales the size curve by the large-gemm ratio.
  m.matmul_bf16_flops = 4e10;
  cost::StepTimeOptions bf16;
  bf16.bf16 = true;
  EXPECT_DOUBLE_EQ(cost::predict_step_time(c, MeshShape::parse("batch:2"), m, bf16).matmul_s,
                   3.0 / 4);
}

TEST(StepTime, CountersGiveGemmSizesBytesAndSteps) {
  Graph g;
  const Dimension b{"b", 4}, i{"i", 8}, k{"k", 16}, j{"j", 32};
  Tensor x = placeholder(g, "x", Shape({b, i, k}));
  Tensor y = placeholder(g, "y", Shape({b, k, j}));
  Tensor z = einsum({x, y}, Shape({b, i, j}));  // 4 gemms of 2*8*16*32 FLOPs
  Tensor w = einsum({x, x}, Shape({b, i}));     // batched dot products: no gemm
  Tensor s = z + z;                             // a binary step: 3 x 4 KiB
  Tensor v = einsum({w, placeholder(g, "u", Shape({i, j}))}, Shape({b, j}));  // one 4x8x32 gemm
  (void)s;
  (void)v;
  const Counters c = analyze(g, MeshShape::parse("all:2"), LayoutRules::parse("b:all"))->counters();
  ASSERT_EQ(c.gemm_by_size.size(), 2u);
  // per rank b is 2: 2 gemms [8, 16] x [16, 32] of 8192 FLOPs (2^13, narrowest M = 8), and v's
  // single gemm [2, 8] x [8, 32] of 1024 (2^10, narrowest M = 2)
  const GemmClass zc = GemmClass::of(8, 32, 16), vc = GemmClass::of(2, 32, 8);
  EXPECT_EQ(zc.log2_flops, 13);
  EXPECT_EQ(zc.narrow, 8);
  EXPECT_FALSE(zc.inner);
  EXPECT_EQ(vc.log2_flops, 10);
  EXPECT_EQ(vc.narrow, 2);
  EXPECT_DOUBLE_EQ(c.gemm_by_size.at(zc).first, 2 * 8192.0);
  EXPECT_EQ(c.gemm_by_size.at(zc).second, 2);
  EXPECT_DOUBLE_EQ(c.gemm_by_size.at(vc).first, 1024.0);
  EXPECT_EQ(c.gemm_by_size.at(vc).second, 1);
  EXPECT_EQ(by_name(c.op_calls, "einsum"), 3);
  EXPECT_EQ(by_name(c.op_calls, "binary"), 1);
  EXPECT_EQ(by_name(c.op_bytes, "binary"), 3 * 2 * 8 * 32 * 4);
  // An einsum's bytes are those it moves besides its gemm (kernels::einsum_moved_bytes): z and v
  // read and write their operands in place where a BLAS or oneDNN runs them; w (batched dot
  // products, elementwise work) reads x twice and writes [2,8].
  const Shape xl({{"b", 2}, i, k}), yl({{"b", 2}, k, j}), zl({{"b", 2}, i, j}), wl({{"b", 2}, i});
  EXPECT_EQ(kernels::einsum_moved_bytes(xl, xl, wl), 4 * (256 + 256 + 16));
  EXPECT_EQ(by_name(c.op_bytes, "einsum"),
            kernels::einsum_moved_bytes(xl, yl, zl) + 4 * (256 + 256 + 16) +
                kernels::einsum_moved_bytes(wl, Shape({i, j}), Shape({{"b", 2}, j})));
  if (kernels::host_blas_name().find("no BLAS") == std::string::npos) {
    EXPECT_EQ(kernels::einsum_moved_bytes(xl, yl, zl), 0);
  }
}

TEST(MachineFile, RoundTripsAndRejectsBadValues) {
  cost::Machine m = test::test_machine();
  m.memory_bytes = 4000000000;
  m.matmul_bf16_flops = 2e10;
  const cost::Machine back =
      machine_from_config(Config::from_string(machine_to_yaml(m, "a comment\nover two lines")));
  EXPECT_EQ(back.name, m.name);
  EXPECT_DOUBLE_EQ(back.matmul_flops, m.matmul_flops);
  EXPECT_DOUBLE_EQ(back.matmul_bf16_flops, m.matmul_bf16_flops);
  EXPECT_EQ(back.memory_bytes, m.memory_bytes);
  ASSERT_EQ(back.links.size(), 2u);
  EXPECT_EQ(back.links[0].span, 2);
  EXPECT_DOUBLE_EQ(back.links[1].latency, 1e-5);
  EXPECT_TRUE(back.matmul_sizes.empty());
  EXPECT_EQ(back.op_overhead_s, 0.0);
  m.matmul_sizes = {{8192, 2e9}, {2e9, 8e10}};
  m.op_overhead_s = 2.5e-6;
  const cost::Machine back2 = machine_from_config(Config::from_string(machine_to_yaml(m)));
  ASSERT_EQ(back2.matmul_sizes.size(), 2u);
  EXPECT_DOUBLE_EQ(back2.matmul_sizes[1].gemm_flops, 2e9);
  EXPECT_DOUBLE_EQ(back2.matmul_sizes[0].flops, 2e9);
  EXPECT_DOUBLE_EQ(back2.op_overhead_s, 2.5e-6);
  // sizes in any order are sorted; an unknown key in a point is an error
  const std::string base =
      "matmul_flops: 1e9\nelementwise_bytes: 1e9\nlinks: {a: {bandwidth: 1e9}}\n";
  const cost::Machine sorted =
      machine_from_config(Config::from_string(
          base + "matmul_sizes:\n  big: {gemm_flops: 1e9, flops: 5e9}\n  small: {gemm_flops: 1e3, "
                 "flops: 1e8}\n"));
  ASSERT_EQ(sorted.matmul_sizes.size(), 2u);
  EXPECT_DOUBLE_EQ(sorted.matmul_sizes[0].gemm_flops, 1e3);
  EXPECT_THROW(machine_from_config(Config::from_string(
                   base + "matmul_sizes:\n  a: {gemm_flop: 1e9, flops: 5e9}\n")),
               Error);
  EXPECT_THROW(machine_from_config(Config::from_string(base + "op_overhead_s: -1\n")), Error);
  EXPECT_THROW(
      machine_from_config(Config::from_string("matmul_flops: 1e9\nelementwise_bytes: 1e9")),
      Error);  // no links
  EXPECT_THROW(machine_from_config(Config::from_string(
                   "matmul_flops: 0\nelementwise_bytes: 1e9\nlinks: {a: {bandwidth: 1e9}}")),
               Error);
  EXPECT_THROW(machine_from_config(Config::from_string(
                   "matmul_flop: 1e9\nelementwise_bytes: 1e9\nlinks: {a: {bandwidth: 1e9}}")),
               Error);  // misspelt key
}

TEST(MachineFile, ShippedMachinesLoad) {
  const std::string dir = std::string(MTK_SOURCE_DIR) + "/layouts/machines";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int n = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.substr(name.size() - 5) == ".yaml") {
      EXPECT_NO_THROW(machine_from_file(dir + "/" + name)) << name;
      ++n;
    }
  }
  closedir(d);
  EXPECT_GE(n, 3);
}
