#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/error.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace mtk::nn {

namespace {

// Rows [begin, begin + rows) of every fed tensor of `whole`.
ModelGraph slice_feeds(const ModelGraph& whole, std::int64_t begin, std::int64_t rows) {
  auto cut = [&](const Tensor& t) { return t.valid() ? slice(t, "batch", begin, rows) : t; };
  ModelGraph m;
  m.inputs = cut(whole.inputs);
  m.targets = cut(whole.targets);
  m.segments = cut(whole.segments);
  m.positions = cut(whole.positions);
  m.encoder_inputs = cut(whole.encoder_inputs);
  m.encoder_segments = cut(whole.encoder_segments);
  m.encoder_positions = cut(whole.encoder_positions);
  return m;
}

Tensor plus(const Tensor& a, const Tensor& b) {
  return a.valid() ? a + b : b;
}

// One gather of an embedding table in a slice: its ids, its output (the rows), the table dim.
struct Gathered {
  Tensor ids, rows;
  std::string dim;
};

// The gathers of `vars[v]` made since op `first`, for each variable that every op of the graph
// reads only as a gather's table (an embedding table not shared with the softmax): its gradient is
// the rows' gradient scattered into the table. A table per slice, and a running sum of them alive
// through every later slice, would hold the table's size; the rows are tokens x d_model.
std::map<size_t, std::vector<Gathered>> gathered_tables(Graph& g, const std::vector<Tensor>& vars,
                                                        int first) {
  std::map<int, size_t> index;  // tensor id -> position in vars
  for (size_t v = 0; v < vars.size(); ++v)
    index[vars[v].id()] = v;
  std::map<size_t, std::vector<Gathered>> out;
  std::vector<bool> other(vars.size(), false);  // read otherwise somewhere
  for (int oi = 0; oi < g.num_ops(); ++oi) {
    const Operation& op = g.op(oi);
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const auto it = index.find(op.inputs[k]);
      if (it == index.end())
        continue;
      // A gather-class op (OpTraits) with the variable as its table and int32 ids: a gather (a
      // scatter_add's first input is its ids).
      const bool gather = op.def->traits.flops == FlopClass::gather && k == 0 &&
                          op.inputs.size() == 2 && op.outputs.size() == 1 &&
                          g.tensor(op.inputs[1]).dtype() == DType::int32;
      const Tensor rows = gather ? g.tensor(op.outputs[0]) : Tensor();
      if (!gather || rows.dtype() != DType::float32) {
        other[it->second] = true;
        continue;
      }
      if (oi < first)
        continue;
      std::vector<std::string> dims = vars[it->second].shape().names();
      const std::vector<std::string> kept = rows.shape().names();
      dims.erase(std::remove_if(dims.begin(), dims.end(),
                                [&](const std::string& d) {
                                  return std::find(kept.begin(), kept.end(), d) != kept.end();
                                }),
                 dims.end());
      if (dims.size() != 1)
        other[it->second] = true;
      else
        out[it->second].push_back({g.tensor(op.inputs[1]), rows, dims.front()});
    }
  }
  for (size_t v = 0; v < vars.size(); ++v)
    if (other[v])
      out.erase(v);
  return out;
}

// One slice's gradients of `vars`, each added to its running sum in `sums` (empty for the first
// slice). The tables in `tables` are differentiated at their gathers' rows instead: the rows'
// gradients go to `deferred`, and their running sums stay unmade (an invalid tensor).
std::vector<Tensor> slice_gradients(
    const Tensor& loss, const std::vector<Tensor>& vars, const std::vector<Tensor>& sums,
    const std::map<size_t, std::vector<Gathered>>& tables,
    std::map<size_t, std::vector<std::pair<Gathered, Tensor>>>& deferred) {
  std::vector<Tensor> xs, initial;
  std::vector<size_t> of;  // per x: the position of its variable (a table's for its rows)
  std::vector<Gathered> gathers;
  for (size_t v = 0; v < vars.size(); ++v) {
    const auto t = tables.find(v);
    if (t == tables.end()) {
      if (!sums.empty() && !sums[v].valid())
        fail("mtk::nn::build_training",
             cat("variable '", vars[v].name(), "' ", vars[v].shape().to_string(),
                 " was read only by gathers in an earlier microbatch slice and otherwise now"));
      xs.push_back(vars[v]);
      of.push_back(v);
      if (!sums.empty())
        initial.push_back(sums[v]);
      continue;
    }
    if (!sums.empty() && sums[v].valid())
      fail(
          "mtk::nn::build_training",
          cat("variable '", vars[v].name(), "' ", vars[v].shape().to_string(),
              " is read only by gathers in this microbatch slice and otherwise in an earlier one"));
    for (const Gathered& gathered : t->second) {
      xs.push_back(gathered.rows);
      of.push_back(v);
      gathers.push_back(gathered);
      if (!sums.empty())  // no running sum: gathers whose rows share a gradient share its buffer
        initial.push_back(Tensor());
    }
  }
  const std::vector<Tensor> d = gradients(loss, xs, initial);
  std::vector<Tensor> out = sums.empty() ? std::vector<Tensor>(vars.size()) : sums;
  size_t k = 0;
  for (size_t x = 0; x < xs.size(); ++x) {
    if (tables.count(of[x]) == 0) {
      out[of[x]] = d[x];
      continue;
    }
    deferred[of[x]].push_back({gathers[k++], d[x]});
    out[of[x]] = Tensor();
  }
  return out;
}

}  // namespace

TrainingGraph build_training(Graph& g, const TransformerConfig& config, int microbatches,
                             optim::Optimizer& optimizer,
                             const optim::LearningRateSchedule& schedule, std::uint64_t seed) {
  const char* where = "mtk::nn::build_training";
  TrainingGraph t;
  if (microbatches < 1 || config.batch % microbatches != 0)
    fail(where, cat("train.microbatches = ", microbatches,
                    " must be >= 1 and divide model.batch = ", config.batch, " (dim 'batch')"));
  if (microbatches == 1) {
    t.model = build_transformer(g, config, /*training=*/true, seed);
    t.lr = optim::minimize(t.model.loss, optimizer, schedule, &t.gradient_norm);
    return t;
  }
  const std::int64_t rows = config.batch / microbatches;
  ModelGraph& whole = t.model;
  whole = transformer_placeholders(g, config);
  // The batch's token count, as build_transformer counts it.
  whole.token_count = reduce_sum(
      compare(CompareFn::not_equal, whole.targets, constant(g, Shape(), 0.0, DType::int32)));
  const Tensor denominator = maximum(whole.token_count, constant(g, Shape(), 1.0));
  const double share = 1.0 / microbatches;
  TransformerConfig slice_config = config;
  slice_config.batch = rows;
  std::vector<Tensor> vars, grads;  // vars: made by the first slice
  // Per embedding table read only by gathers: each slice's gathers and their rows' gradients,
  // scattered into the table once, after the last slice.
  std::map<size_t, std::vector<std::pair<Gathered, Tensor>>> deferred;
  Tensor loss_sum, cross_entropy_sum, z_loss_sum, aux_loss;
  // Slices after the first share its variables.
  struct ReuseScope {
    Graph& g;
    ~ReuseScope() { g.set_reuse_variables(false); }
  } reuse{g};
  for (int i = 0; i < microbatches; ++i) {
    g.set_reuse_variables(i > 0);
    const int first_op = g.num_ops();
    const ModelGraph m =
        build_transformer_on(g, slice_config, /*training=*/true, slice_feeds(whole, i * rows, rows),
                             i == 0 ? seed : seed ^ (0x9E3779B97F4A7C15ull * (i + 1)));
    // This slice's share of the batch's loss, differentiated now: its activations die before
    // the next slice runs.
    const Tensor loss = m.loss_sum / denominator + multiply(m.aux_loss, share);
    if (i == 0)
      vars = g.trainable_variables();
    // Each part of this slice's gradients is added to the earlier slices' sum as it is made.
    grads = slice_gradients(loss, vars, grads, gathered_tables(g, vars, first_op), deferred);
    loss_sum = plus(loss_sum, m.loss_sum);
    cross_entropy_sum = plus(cross_entropy_sum, m.cross_entropy_sum);
    z_loss_sum = plus(z_loss_sum, m.z_loss_sum);
    aux_loss = plus(aux_loss, multiply(m.aux_loss, share));
  }
  g.set_reuse_variables(false);
  for (const auto& [v, parts] : deferred)
    for (const auto& [gathered, d_rows] : parts)
      grads[v] =
          grads[v].valid() && fused_gradient_sums()  // into the running sum
              ? scatter_add_into(grads[v], gathered.ids, d_rows, gathered.dim)
              : plus(grads[v], scatter_add(gathered.ids, d_rows, vars[v].shape(), gathered.dim));
  whole.loss_sum = loss_sum;
  whole.cross_entropy_sum = cross_entropy_sum;
  whole.z_loss_sum = z_loss_sum;
  whole.aux_loss = aux_loss;
  whole.loss = loss_sum / denominator + aux_loss;
  t.gradient_norm = optim::global_norm(grads);
  Tensor step = optim::global_step(g);
  t.lr = schedule.build(step);
  optimizer.apply(g.trainable_variables(), grads, step, t.lr);
  assign_add(step, constant(g, Shape(), 1.0));
  return t;
}

}  // namespace mtk::nn
