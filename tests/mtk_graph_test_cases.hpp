#pragma once
// Graphs that exercise every op, forward and backward, for the layout-invariance tests.
// A case builds its graph on any Graph; layouts are templates in which "@0", "@1", "@2" stand for
// the mesh's first, second and third dims (rules naming a missing dim are dropped).

#include <mtk/autodiff/gradients.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/runtime/program.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mtk::test {

struct BuiltGraph {
  std::vector<Tensor> outputs;  ///< compared across layouts
  Tensor loss;                  ///< differentiated w.r.t. every trainable variable
  std::map<int, HostTensor> feeds;
};

struct GraphCase {
  std::string name;
  std::function<BuiltGraph(Graph&)> build;
  std::vector<std::string> layouts;
  bool finite_differences = false;
};

/// Sum of (each output * fixed random weights): a scalar whose gradient reaches every input.
inline Tensor weighted_loss(Graph& g, const std::vector<Tensor>& outs) {
  Tensor loss;
  std::uint64_t seed = 1000;
  for (const auto& o : outs) {
    if (o.dtype() != DType::float32)
      continue;
    Tensor w = random_uniform(g, o.shape(), seed++, -1.0, 1.0);
    Tensor term = reduce_sum(o * w);
    loss = loss.valid() ? loss + term : term;
  }
  return loss;
}

inline Tensor var(Graph& g, const std::string& name, const Shape& s, float stddev = 1.0f) {
  return variable(g, name, s, Initializer::normal(stddev));
}

inline HostTensor int_pattern(const Shape& s, int modulo) {
  std::vector<std::int32_t> v(static_cast<size_t>(s.num_elements()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<std::int32_t>((k * 7 + 3) % static_cast<size_t>(modulo));
  return HostTensor::ints(s, v);
}

// The dims the cases use (sizes divisible by every mesh dim of the tests).
struct CaseDims {
  Dimension b{"b", 8}, i{"i", 8}, j{"j", 16}, k{"k", 8}, h{"h", 8}, q{"q", 8}, kk{"kk", 8},
      d{"d", 8}, v{"v", 16}, l{"l", 8}, l16{"l", 16};
};

/// Contractions, elementwise ops, reductions and softmax.
inline void add_compute_cases(std::vector<GraphCase>& cases) {
  const CaseDims n;
  const Dimension b = n.b, i = n.i, j = n.j, k = n.k, h = n.h, q = n.q, kk = n.kk, d = n.d, v = n.v;

  cases.push_back(
      {"einsum_matmul",
       [=](Graph& g) {
         Tensor x = var(g, "x", {b, i, k}), w = var(g, "w", {k, j}, 0.3f);
         Tensor y = einsum({x, w}, Shape{b, i, j});
         Tensor yt = einsum({w, x}, Shape{j, b, i});  // output in another order
         Tensor outer = einsum({reduce_sum(x, {"i"}), reduce_sum(w, {"k"})}, Shape{b, k, j});
         return BuiltGraph{{y, yt, outer}, weighted_loss(g, {y, yt, outer}), {}};
       },
       {"b:@0", "k:@0", "b:@0;k:@1", "i:@0;j:@1", "j:@0;k:@1;b:@2", "b:@0;i:@1;j:@2"},
       true});

  cases.push_back({"einsum_attention",
                   [=](Graph& g) {
                     Tensor qv = var(g, "q", {b, h, q, d}), kv = var(g, "k", {b, h, kk, d}),
                            vv = var(g, "v", {b, h, kk, d});
                     Tensor s = einsum({qv, kv}, Shape{b, h, q, kk});
                     Tensor p = softmax(s, "kk");
                     Tensor o = einsum({p, vv}, Shape{b, q, h, d});
                     return BuiltGraph{{s, o}, weighted_loss(g, {o}), {}};
                   },
                   {"b:@0;h:@1", "h:@0", "d:@0;b:@1", "q:@0;kk:@1", "kk:@0", "b:@0;h:@1;d:@2"}});

  cases.push_back({"elementwise",
                   [=](Graph& g) {
                     Tensor a = var(g, "a", {b, i}), bv = var(g, "bias", {i});
                     Tensor pos = add(square(a), 1.0), bpos = add(square(bv), 0.5);
                     std::vector<Tensor> outs = {a + bv,
                                                 a - bv,
                                                 a * bv,
                                                 a / bpos,
                                                 maximum(a, bv),
                                                 minimum(a, bv),
                                                 relu(a),
                                                 gelu(a),
                                                 tanh(a),
                                                 sigmoid(a),
                                                 exp(multiply(a, 0.5)),
                                                 log(pos),
                                                 sqrt(pos),
                                                 rsqrt(pos),
                                                 square(a),
                                                 abs(a),
                                                 -a,
                                                 reciprocal(pos),
                                                 pow(pos, 1.5),
                                                 add(a, 2.0),
                                                 where(greater(a, bv), a, multiply(bv, 3.0)),
                                                 binary(BinaryFn::pow, pos, bpos)};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"b:@0", "i:@0", "b:@0;i:@1", "i:@0;b:@1"},
                   true});

  cases.push_back({"reductions",
                   [=](Graph& g) {
                     Tensor x = var(g, "x", {b, i, j});
                     std::vector<Tensor> outs = {
                         reduce_sum(x, {"i"}), reduce_mean(x, {"b", "j"}), reduce_max(x, {"j"}),
                         reduce_min(x, {"i"}), reduce_logsumexp(x, {"j"}), reduce_sum(x)};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"j:@0", "b:@0;j:@1", "i:@0;j:@1;b:@2", "i:@0"}});

  cases.push_back({"softmax",
                   [=](Graph& g) {
                     Tensor x = var(g, "x", {b, v});
                     std::vector<Tensor> outs = {softmax(x, "v"), log_softmax(x, "v")};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"b:@0", "v:@0", "b:@0;v:@1", "v:@0;b:@1"},
                   true});
}

/// Indexing, reshapes and relayouts, ops along one dim, randomness and the fused loss.
inline void add_data_movement_cases(std::vector<GraphCase>& cases) {
  const CaseDims n;
  const Dimension b = n.b, i = n.i, j = n.j, d = n.d, v = n.v, l = n.l, l16 = n.l16;
  cases.push_back({"embedding",
                   [=](Graph& g) {
                     Tensor table = var(g, "table", {v, d}), proj = var(g, "proj", {v, d}, 0.2f);
                     Tensor ids = placeholder(g, "ids", {b, l}, DType::int32);
                     Tensor emb = gather(table, ids, "v");
                     Tensor hot = one_hot(ids, v);
                     Tensor logits = einsum({hot, proj}, Shape{b, l, d});
                     Tensor pos = cast(range(g, l, DType::int32), DType::float32);
                     Tensor outs = emb + logits * pos;
                     BuiltGraph r{{emb, hot, outs}, weighted_loss(g, {outs}), {}};
                     r.feeds[ids.id()] = int_pattern(ids.shape(), 16);
                     return r;
                   },
                   {"v:@0", "b:@0", "b:@0;v:@1", "d:@0;b:@1", "l:@0;v:@1"},
                   true});

  cases.push_back({"reshape_relayout",
                   [=](Graph& g) {
                     Tensor x = var(g, "x", {b, i, j});
                     Tensor flat = reshape(x, Shape{b, {"ij", 128}});
                     Tensor renamed = reshape(x, Shape{{"b2", 8}, {"i2", 8}, j});
                     Tensor split = replace_dimensions(x, {"j"}, {{"j1", 4}, {"j2", 4}});
                     // A split dim whose size changes in place stays split (a local reshape).
                     Tensor regroup = reshape(x, Shape{{"b", 16}, {"ih", 4}, j});
                     Tensor merged = reshape(x, Shape{{"bi", 64}, j});
                     std::vector<Tensor> outs = {flat, renamed, split, regroup, merged};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"i:@0;b2:@0", "b:@0;ij:@1", "i:@0;i2:@1", "b:@0;b2:@1", "j:@0;j1:@1",
                    "b:@0;i:@1;b2:@1;i2:@0", "b:@0;j:@1"}});

  cases.push_back({"along_dim",
                   [=](Graph& g) {
                     Tensor x = var(g, "x", {b, l16}), x2 = var(g, "x2", {b, l16});
                     std::vector<Tensor> outs = {
                         slice(x, "l", 2, 8, "ls"), pad(x, "l", 2, 6, "lp"),    shift(x, "l", 1),
                         shift(x, "l", -2, true),   concat({x, x2}, "l", "lc"), cumsum(x, "l"),
                         cumsum(x, "l", true),      top_1(x, "l").first};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"b:@0", "b:@0;lp:@1", "lc:@0;b:@1", "ls:@0"}});

  // cumsum along a split dim: each part starts from the parts before it.
  cases.push_back({"cumsum_split",
                   [=](Graph& g) {
                     Tensor x = var(g, "x", {b, l16});
                     Tensor counts = greater(x, constant(g, Shape(), 0.0));  // 0 or 1
                     std::vector<Tensor> outs = {cumsum(x, "l"), cumsum(x, "l", true),
                                                 cumsum(counts, "l", true) * x};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"l:@0", "l:@0;b:@1", "b:@0;l:@1"},
                   true});

  cases.push_back({"broadcast_random_dropout",
                   [=](Graph& g) {
                     Tensor x = var(g, "x", {b, i});
                     Tensor wide = broadcast(x, Shape{j, b, i});
                     Tensor noise = random_normal(g, Shape{b, j}, 7);
                     Tensor dropped = dropout(wide, 0.5, 11);
                     Tensor stopped = stop_gradient(x) * x;
                     std::vector<Tensor> outs = {wide, noise, dropped, stopped};
                     return BuiltGraph{outs, weighted_loss(g, outs), {}};
                   },
                   {"b:@0", "j:@0;b:@1", "i:@0;j:@1"}});

  cases.push_back(
      {"layer_norm",
       [=](Graph& g) {
         Tensor x = var(g, "x", {b, l, i});
         Tensor scale = var(g, "scale", {i}), bias = var(g, "bias", {i});
         Tensor fused = layer_norm(x, scale, bias, "i", 1e-5);
         Tensor scale_l = var(g, "scale_l", {l}), bias_l = var(g, "bias_l", {l});
         Tensor strided = layer_norm(x, scale_l, bias_l, "l", 1e-3);  // not the last dim
         // The same normalisation from primitives.
         Tensor centered = x - reduce_mean(x, {"i"});
         Tensor composite =
             centered * rsqrt(add(reduce_mean(square(centered), {"i"}), 1e-5)) * scale + bias;
         return BuiltGraph{
             {fused, strided, composite}, weighted_loss(g, {fused, strided, composite}), {}};
       },
       {"i:@0", "b:@0;i:@1", "l:@0;b:@1", "i:@0;l:@1;b:@2"},
       true});

  cases.push_back(
      {"cross_entropy",
       [=](Graph& g) {
         Tensor x = var(g, "x", {b, l, v});
         Tensor targets = placeholder(g, "targets", {b, l}, DType::int32);
         Tensor plain = softmax_cross_entropy(x, targets, "v");
         Tensor smoothed = softmax_cross_entropy(multiply(x, 0.9), targets, "v", 0.1, 1e-2);
         // The same loss from primitives: -sum(one_hot * log_softmax).
         Tensor composite =
             negative(einsum({one_hot(targets, v), log_softmax(x, "v")}, Shape{b, l}));
         BuiltGraph r{{plain, smoothed, composite}, weighted_loss(g, {plain, smoothed}), {}};
         r.feeds[targets.id()] = int_pattern(targets.shape(), 16);
         return r;
       },
       {"v:@0", "b:@0;v:@1", "l:@0;b:@1", "v:@0;l:@1;b:@2"},
       true});
}

inline std::vector<GraphCase> graph_cases() {
  std::vector<GraphCase> cases;
  add_compute_cases(cases);
  add_data_movement_cases(cases);
  return cases;
}

}  // namespace mtk::test
