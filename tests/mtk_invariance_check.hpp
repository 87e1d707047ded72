#pragma once
// Running one graph on one processor and on a mesh under a layout, and comparing the results.

#include <mtk/lower/lowering.hpp>

#include <gtest/gtest.h>

#include "float64_twin.hpp"
#include "mtk_graph_test_cases.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mtk::test {

// "b:@0;k:@1" on mesh (a, b) -> "b:a;k:b"; rules naming a missing mesh dim are dropped.
inline LayoutRules instantiate(const std::string& text, const MeshShape& mesh) {
  std::string t = text;
  for (char& c : t)
    if (c == '@')
      c = 'm';
  const LayoutRules templ = LayoutRules::parse(t);
  std::vector<std::pair<std::string, std::string>> rules;
  for (const auto& [tensor_dim, axis] : templ.rules()) {
    int a = axis[1] - '0';
    if (a < mesh.ndims())
      rules.emplace_back(tensor_dim, mesh[a].name);
  }
  return LayoutRules(rules);
}

struct Result {
  std::vector<HostTensor> values;  // outputs, loss, gradients
  std::vector<std::string> labels;
};

// Built and lowered with `options` (program.*).
inline Result run_case(const GraphCase& c, const Mesh& mesh, const LayoutRules& rules,
                       const ProgramOptions& options, int runs = 1,
                       std::string* explain = nullptr) {
  Graph g(options);
  BuiltGraph built = c.build(g);
  auto vars = g.trainable_variables();
  auto grads = gradients(built.loss, vars);
  std::vector<Tensor> fetch = built.outputs;
  Result r;
  for (const auto& t : built.outputs)
    r.labels.push_back("output " + t.name());
  fetch.push_back(built.loss);
  r.labels.push_back("loss");
  for (size_t k = 0; k < grads.size(); ++k) {
    fetch.push_back(grads[k]);
    r.labels.push_back("d loss / d " + vars[k].name());
  }
  auto program = lower(g, mesh, rules);
  for (int k = 0; k < runs; ++k)
    r.values = program->run(built.feeds, fetch);
  if (explain)
    *explain = program->explain();
  return r;
}

inline Result run_case(const GraphCase& c, const Mesh& mesh, const LayoutRules& rules, int runs = 1,
                       std::string* explain = nullptr) {
  return run_case(c, mesh, rules, ProgramOptions(), runs, explain);
}

// The default program options with program.overlap_halo set to `on`.
inline ProgramOptions overlap_halo(bool on) {
  ProgramOptions o;
  o.overlap_halo = on;
  return o;
}

inline void expect_close(const Result& got, const Result& want, const std::string& where) {
  ASSERT_EQ(got.values.size(), want.values.size()) << where;
  for (size_t t = 0; t < got.values.size(); ++t) {
    const auto& a = got.values[t];
    const auto& b = want.values[t];
    ASSERT_EQ(a.shape(), b.shape()) << where << " " << want.labels[t];
    double scale = 0, diff = 0;
    for (std::int64_t e = 0; e < b.shape().num_elements(); ++e) {
      scale = std::max(scale, std::fabs(b.at(e)));
      diff = std::max(diff, std::fabs(a.at(e) - b.at(e)));
    }
    EXPECT_LE(diff, 1e-5 * std::max(scale, 1e-6))
        << where << ": " << want.labels[t] << " differs by " << diff << " (scale " << scale << ")";
  }
}

inline const Mesh& single_processor_mesh() {
  static Mesh mesh(MeshShape::parse("x:1"), MPI_COMM_SELF);
  return mesh;
}

// The case's outputs, loss and gradients (run_case's order) in its float64 twin, from the sources
// of a one-processor float32 run; nothing where the twin does not evaluate an op of the case
// (named in *why).
inline std::optional<std::vector<TwinTensor>> float64_reference(const GraphCase& c,
                                                                std::string* why) {
  Graph g;
  BuiltGraph built = c.build(g);
  auto vars = g.trainable_variables();
  auto grads = gradients(built.loss, vars);
  if (auto op = twin_unsupported_op(g)) {
    *why = *op;
    return std::nullopt;
  }
  std::map<int, HostTensor> sources;
  std::vector<Tensor> fetch;
  for (int i = 0; i < g.num_ops(); ++i) {
    const Operation& op = g.op(i);
    if (!twin_impl::is_source(op.kind()))
      continue;
    const int t = op.outputs.at(0);
    if (built.feeds.count(t))
      sources.emplace(t, built.feeds.at(t));
    else
      fetch.push_back(g.tensor(t));
  }
  auto program = lower(g, single_processor_mesh(), LayoutRules());
  const auto values = program->run(built.feeds, fetch);
  for (size_t k = 0; k < fetch.size(); ++k)
    sources.emplace(fetch[k].id(), values[k]);
  auto twin = evaluate_float64_twin(g, sources);
  std::vector<TwinTensor> r;
  for (const auto& t : built.outputs)
    r.push_back(twin.at(t.id()));
  r.push_back(twin.at(built.loss.id()));
  for (const auto& t : grads)
    r.push_back(twin.at(t.id()));
  return r;
}

// Every value of `got` within its bound of the twin's.
inline void expect_result_within_twin(const Result& got, const std::vector<TwinTensor>& twin,
                                      const std::string& where) {
  ASSERT_EQ(got.values.size(), twin.size()) << where;
  for (size_t t = 0; t < twin.size(); ++t)
    expect_within_twin(got.values[t], twin[t], where + ": " + got.labels[t]);
}

// On one processor, every op of case c (its gradient ops included) against the float64 twin of
// that op alone: the op's rule applied to the float32 values its inputs had in the same run, the
// output within the rounding that op makes (no bound carried from the ops before, so the bound is
// as tight for the last op of a deep model as for the first). Every kernel of the program, on this
// CPU and its matmul backend, checked against float64. Ops without a rule are named in *skipped.
inline void expect_every_op_within_rounding(const GraphCase& c, const std::string& where,
                                            std::vector<std::string>* skipped = nullptr) {
  Graph g;
  BuiltGraph built = c.build(g);
  auto vars = g.trainable_variables();
  gradients(built.loss, vars);
  std::vector<Tensor> all;
  for (int t = 0; t < g.num_tensors(); ++t)
    all.push_back(g.tensor(t));
  auto program = lower(g, single_processor_mesh(), LayoutRules());
  const auto values = program->run(built.feeds, all);
  const auto as_twin = [&](int t) {
    TwinTensor x = twin_impl::zeros(g.tensor_info(t).shape);
    for (std::int64_t k = 0; k < values[static_cast<size_t>(t)].size(); ++k)
      x.value[static_cast<size_t>(k)] = values[static_cast<size_t>(t)].at(k);
    return x;
  };
  for (int i = 0; i < g.num_ops(); ++i) {
    const Operation& op = g.op(i);
    if (twin_impl::is_source(op.kind()))
      continue;
    if (!twin_impl::has_rule(op.kind()) || op.precision != Precision::float32) {
      if (skipped)
        skipped->push_back(std::string(op.kind()) + " '" + op.name + "'");
      continue;
    }
    std::vector<TwinTensor> inputs;
    for (int x : op.inputs)
      inputs.push_back(as_twin(x));
    twin_impl::Ins in;
    for (const auto& x : inputs)
      in.push_back(&x);
    twin_impl::Outs out;
    for (int y : op.outputs)
      out.push_back(twin_impl::zeros(g.tensor_info(y).shape));
    const bool integer = g.tensor_info(op.outputs.at(0)).dtype == DType::int32;
    ASSERT_TRUE(twin_impl::evaluate(op, in, out, integer)) << op.name;
    for (size_t k = 0; k < op.outputs.size(); ++k)
      expect_within_twin(
          values[static_cast<size_t>(op.outputs[k])], out[k],
          where + ": op " + op.name + " (" + op.kind() + ") output " + std::to_string(k));
  }
}

}  // namespace mtk::test
