#include <mtk/base/error.hpp>
#include <mtk/nn/attention.hpp>
#include <mtk/nn/impl/weights.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/ops/sources.hpp>

#include <cmath>

namespace mtk::nn {

Tensor attention_bias(Graph& g, const Dimension& length, const Dimension& memory_length,
                      bool causal, const Tensor& query_segment, const Tensor& memory_segment) {
  Tensor bias;
  if (causal) {
    Tensor q = cast(range(g, length), DType::float32);
    Tensor m = cast(range(g, memory_length), DType::float32);
    bias = multiply(less(q, m), -1e9);  // [length, memory_length]: the future is masked
  }
  if (query_segment.valid() && memory_segment.valid()) {
    Tensor qs = cast(query_segment, DType::float32);
    Tensor ms = cast(memory_segment, DType::float32);
    if (!ms.shape().contains(memory_length.name))
      fail("mtk::nn::attention_bias", cat("memory segment ids ", ms.shape().to_string(),
                                          " lack dimension '", memory_length.name, "'"));
    Tensor other = multiply(add(negative(equal(qs, ms)), 1.0), -1e9);
    bias = bias.valid() ? other + bias : other;
  }
  if (!bias.valid())
    bias = constant(g, Shape(), 0.0);
  return bias;
}

Tensor multihead_attention(const LayerContext& ctx, const std::string& name, const Tensor& x,
                           const Tensor& memory, const Tensor& bias, const Dimension& d_model,
                           const Dimension& heads, const Dimension& d_kv,
                           const std::string& length_dim, const std::string& memory_length_dim) {
  using impl::replace_dims;
  using impl::weight;
  Graph& g = *ctx.graph;
  g.offer_split(heads.name);  // heads are independent: split them over processors
  Tensor mem = memory.shape().contains(memory_length_dim)
                   ? memory
                   : rename_dimension(memory, length_dim, memory_length_dim);
  const std::int64_t dm = d_model.size;
  Tensor wq = weight(g, name + "/q", Shape{d_model, heads, d_kv}, dm);
  Tensor wk = weight(g, name + "/k", Shape{d_model, heads, d_kv}, dm);
  Tensor wv = weight(g, name + "/v", Shape{d_model, heads, d_kv}, dm);
  Tensor wo = weight(g, name + "/o", Shape{heads, d_kv, d_model}, heads.size * d_kv.size);
  Tensor q = einsum({x, wq}, replace_dims(x.shape(), {d_model.name}, {heads, d_kv}));
  q = multiply(q, 1.0 / std::sqrt(static_cast<double>(d_kv.size)));
  Tensor k = einsum({mem, wk}, replace_dims(mem.shape(), {d_model.name}, {heads, d_kv}));
  Tensor v = einsum({mem, wv}, replace_dims(mem.shape(), {d_model.name}, {heads, d_kv}));
  // logits [batch..., heads, length, memory_length]
  std::vector<Dimension> ld;
  for (const auto& d : x.shape().dims())
    if (d.name != d_model.name && d.name != length_dim)
      ld.push_back(d);
  ld.push_back(heads);
  ld.push_back(x.shape().dim(length_dim));
  ld.push_back(mem.shape().dim(memory_length_dim));
  Tensor logits = einsum({q, k}, Shape(ld));
  logits = binary(BinaryFn::add, logits, bias, nullptr);
  if (logits.shape() != Shape(ld))
    logits = einsum({logits}, Shape(ld));
  Tensor weights = ctx.dropout(softmax(logits, memory_length_dim), name + "/dropout");
  Tensor o = einsum({weights, v}, replace_dims(x.shape(), {d_model.name}, {heads, d_kv}));
  return einsum({o, wo}, x.shape());
}

Tensor attention_projection(const LayerContext& ctx, const std::string& name,
                            const std::string& which, const Tensor& x, const Dimension& d_model,
                            const Dimension& heads, const Dimension& d_kv) {
  using impl::replace_dims;
  if (which != "q" && which != "k" && which != "v")
    fail("mtk::nn::attention_projection",
         cat("projection '", which, "' of '", name, "' is not one of q, k, v"));
  Tensor w =
      impl::weight(*ctx.graph, name + "/" + which, Shape{d_model, heads, d_kv}, d_model.size);
  Tensor y = einsum({x, w}, replace_dims(x.shape(), {d_model.name}, {heads, d_kv}));
  // The same scaling, in the same place, as multihead_attention.
  return which == "q" ? multiply(y, 1.0 / std::sqrt(static_cast<double>(d_kv.size))) : y;
}

Tensor attention_over_memory(const LayerContext& ctx, const std::string& name, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& bias,
                             const std::string& memory_length_dim, const Dimension& d_model,
                             const Dimension& heads, const Dimension& d_kv) {
  const char* where = "mtk::nn::attention_over_memory";
  if (!q.shape().contains(heads.name) || !q.shape().contains(d_kv.name))
    fail(where, cat("queries ", q.shape().to_string(), " of '", name, "' lack '", heads.name,
                    "' or '", d_kv.name, "'"));
  if (!k.shape().contains(memory_length_dim) || !v.shape().contains(memory_length_dim))
    fail(where, cat("keys ", k.shape().to_string(), " or values ", v.shape().to_string(), " of '",
                    name, "' lack '", memory_length_dim, "'"));
  Tensor wo =
      impl::weight(*ctx.graph, name + "/o", Shape{heads, d_kv, d_model}, heads.size * d_kv.size);
  std::vector<Dimension> outer;  // q's dims but heads and d_kv
  for (const auto& d : q.shape().dims())
    if (d.name != heads.name && d.name != d_kv.name)
      outer.push_back(d);
  std::vector<Dimension> ld = outer;
  ld.push_back(heads);
  ld.push_back(k.shape().dim(memory_length_dim));
  Tensor logits = einsum({q, k}, Shape(ld));
  logits = binary(BinaryFn::add, logits, bias, nullptr);
  if (logits.shape() != Shape(ld))
    logits = einsum({logits}, Shape(ld));
  Tensor weights = ctx.dropout(softmax(logits, memory_length_dim), name + "/dropout");
  Tensor o = einsum({weights, v}, q.shape());
  std::vector<Dimension> od = outer;
  od.push_back(d_model);
  return einsum({o, wo}, Shape(od));
}

}  // namespace mtk::nn
