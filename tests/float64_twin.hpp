#pragma once
// A float64 twin of a graph: every op, the gradient ops autodiff added included, evaluated on the
// host in double, each value with a bound on how far a float32 evaluation of the same op may be
// from it in any summation order and on any CPU (running error analysis, Higham ch. 3; the rule
// of each op kind in tests/float64_twin_rules.hpp and float64_twin_row_rules.hpp). The sources
// (variables, placeholders, constants, ranges, random tensors) are taken from a float32 run, so the
// twin and MTK start from the same numbers. A test compares MTK's float32 results against the
// twin's values within the twin's bounds: a tolerance from each value's sums and functions, not a
// constant.
//
// twin_unsupported_op() names the first op of a graph the twin cannot evaluate (an optimizer
// update, a halo exchange, a bf16 contraction); a test then keeps its float32 comparison.

#include <mtk/graph/graph.hpp>
#include <mtk/runtime/host_tensor.hpp>

#include <gtest/gtest.h>

#include "float64_twin_row_rules.hpp"
#include "float64_twin_rules.hpp"
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mtk::test {

namespace twin_impl {

inline bool is_source(const std::string& kind) {
  return kind == "variable" || kind == "placeholder" || kind == "constant" || kind == "range" ||
         kind == "random_uniform" || kind == "random_normal";
}

/// Evaluates `op` into `out` (its outputs, zero-filled); false where the kind has no rule.
inline bool evaluate(const Operation& op, const Ins& in, Outs& out, bool integer) {
  const std::string kind = op.kind();
  if (kind == "unary") {
    unary(op, in, out);
  } else if (kind == "binary") {
    binary(op, in, out, integer);
  } else if (kind == "compare") {
    compare(op, in, out);
  } else if (kind == "where") {
    where(in, out);
  } else if (kind == "cast") {
    cast(in, out, integer);
  } else if (kind == "reshape" || kind == "stop_gradient") {
    copy(in, out);
  } else if (kind == "broadcast") {
    broadcast(in, out);
  } else if (kind == "slice") {
    slice(op, in, out);
  } else if (kind == "pad") {
    pad(op, in, out);
  } else if (kind == "shift") {
    shift(op, in, out);
  } else if (kind == "concat") {
    concat(op, in, out);
  } else if (kind == "one_hot") {
    one_hot(op, in, out);
  } else if (kind == "gather") {
    gather(op, in, out);
  } else if (kind == "scatter_add" || kind == "scatter_add_into") {
    scatter_add(op, in, out, kind == "scatter_add_into");
  } else if (kind == "reduce") {
    reduce(op, in, out);
  } else if (kind == "top_1") {
    top_1(op, in, out);
  } else if (kind == "cumsum") {
    cumsum(op, in, out);
  } else if (kind == "einsum" || kind == "einsum_accumulate") {
    einsum(op, in, out, kind == "einsum_accumulate");
  } else if (kind == "softmax" || kind == "log_softmax") {
    softmax(op, in, out, kind == "log_softmax");
  } else if (kind == "softmax_grad") {
    softmax_grad(op, in, out);
  } else if (kind == "softmax_cross_entropy") {
    cross_entropy(op, in, out);
  } else if (kind == "softmax_cross_entropy_grad") {
    cross_entropy_grad(op, in, out);
  } else if (kind == "layer_norm") {
    layer_norm(op, in, out);
  } else if (kind == "layer_norm_grad") {
    layer_norm_grad(op, in, out);
  } else {
    return false;
  }
  return true;
}

/// The kinds with a rule (those evaluate() knows), for twin_unsupported_op.
inline bool has_rule(const std::string& kind) {
  static const char* const kinds[] = {"unary",
                                      "binary",
                                      "compare",
                                      "where",
                                      "cast",
                                      "reshape",
                                      "stop_gradient",
                                      "broadcast",
                                      "slice",
                                      "pad",
                                      "shift",
                                      "concat",
                                      "one_hot",
                                      "gather",
                                      "scatter_add",
                                      "scatter_add_into",
                                      "reduce",
                                      "top_1",
                                      "cumsum",
                                      "einsum",
                                      "einsum_accumulate",
                                      "softmax",
                                      "log_softmax",
                                      "softmax_grad",
                                      "softmax_cross_entropy",
                                      "softmax_cross_entropy_grad",
                                      "layer_norm",
                                      "layer_norm_grad"};
  for (const char* k : kinds)
    if (kind == k)
      return true;
  return false;
}

}  // namespace twin_impl

/// The first op of `g` the twin cannot evaluate ("kind 'name'"), or nothing.
inline std::optional<std::string> twin_unsupported_op(const Graph& g) {
  for (int i = 0; i < g.num_ops(); ++i) {
    const Operation& op = g.op(i);
    const std::string kind = op.kind();
    if (twin_impl::is_source(kind))
      continue;
    if (!twin_impl::has_rule(kind))
      return kind + " '" + op.name + "'";
    for (int t : op.outputs)
      if (g.tensor_info(t).dtype == DType::bfloat16)
        return kind + " '" + op.name + "' (a bfloat16 output)";
    if (op.precision != Precision::float32)
      return kind + " '" + op.name + "' (contracting in reduced precision)";
  }
  return std::nullopt;
}

/// Every tensor of `g` in float64 with its float32 rounding bound; `sources` holds the values of
/// the source ops' outputs (by tensor id) as a float32 run made them.
inline std::map<int, TwinTensor> evaluate_float64_twin(const Graph& g,
                                                       const std::map<int, HostTensor>& sources) {
  std::map<int, TwinTensor> t;
  for (int i = 0; i < g.num_ops(); ++i) {
    const Operation& op = g.op(i);
    twin_impl::Outs out;
    for (int y : op.outputs)
      out.push_back(twin_impl::zeros(g.tensor_info(y).shape));
    if (twin_impl::is_source(op.kind())) {
      const int y = op.outputs.at(0);
      const auto s = sources.find(y);
      if (s == sources.end())
        twin_impl::fail("no value for source " + op.name);
      if (s->second.size() != static_cast<std::int64_t>(out[0].value.size()))
        twin_impl::fail("the value of " + op.name + " has " + std::to_string(s->second.size()) +
                        " elements, not " + std::to_string(out[0].value.size()));
      for (std::int64_t k = 0; k < s->second.size(); ++k)
        out[0].value[static_cast<size_t>(k)] = s->second.at(k);
    } else {
      twin_impl::Ins in;
      for (int x : op.inputs)
        in.push_back(&t.at(x));
      const bool integer = g.tensor_info(op.outputs.at(0)).dtype == DType::int32;
      if (!twin_impl::evaluate(op, in, out, integer))
        twin_impl::fail("op kind " + std::string(op.kind()) + " ('" + op.name + "') has no rule");
    }
    for (size_t k = 0; k < op.outputs.size(); ++k)
      t[op.outputs[k]] = std::move(out[k]);
  }
  return t;
}

/// Every element of `got` within its bound of the twin's value (a non-finite bound fails: the
/// twin could not bound it). Returns the largest |got - twin| / bound, for reports.
inline double expect_within_twin(const HostTensor& got, const TwinTensor& want,
                                 const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape) << what;
  if (got.shape() != want.shape)
    return 0;
  double worst = 0;
  for (std::int64_t k = 0; k < got.size(); ++k) {
    const size_t i = static_cast<size_t>(k);
    // The bound, and the twin's own double rounding (1 in 2^50 of the value: below a float32
    // rounding by 2^26, and what keeps a result a float32 rounding from its exact value inside).
    const double d = std::fabs(got.at(k) - want.value[i]),
                 b = want.bound[i] + 0x1p-50 * std::fabs(want.value[i]);
    if (!std::isfinite(b)) {
      ADD_FAILURE() << what << " at " << k << ": the twin has no finite bound";
      return 0;
    }
    if (d > b) {
      ADD_FAILURE() << what << " at " << k << ": " << got.at(k) << " against float64 "
                    << want.value[i] << ", off by " << d << ", more than float32 rounding may ("
                    << b << ")";
      return d / b;
    }
    if (b > 0)
      worst = std::max(worst, d / b);
  }
  return worst;
}

}  // namespace mtk::test
