#pragma once
// The operations users build models from. Every function appends to the graph of its inputs and
// checks names and sizes at once, raising mtk::Error that names the op, the tensors and the dims.

#include <mtk/graph/graph.hpp>

#include <string>
#include <utility>
#include <vector>

namespace mtk {

// ------------------------------------------------------------------------------------ sources
/// A trainable (or, with trainable = false, state-only) float32 variable.
Tensor variable(Graph& g, const std::string& name, const Shape& shape, const Initializer& init,
                bool trainable = true, DType dtype = DType::float32);
/// A value supplied at every Program::run.
Tensor placeholder(Graph& g, const std::string& name, const Shape& shape,
                   DType dtype = DType::float32);
Tensor constant(Graph& g, const Shape& shape, double value, DType dtype = DType::float32);
/// Position along `dim`, broadcast over nothing else: shape [dim].
Tensor range(Graph& g, const Dimension& dim, DType dtype = DType::int32);
/// Random values that depend only on the seed and the global index (layout-independent).
Tensor random_uniform(Graph& g, const Shape& shape, std::uint64_t seed, double low = 0.0,
                      double high = 1.0);
Tensor random_normal(Graph& g, const Shape& shape, std::uint64_t seed, double mean = 0.0,
                     double stddev = 1.0);

// -------------------------------------------------------------------------------- elementwise
Tensor unary(UnaryFn fn, const Tensor& x, double p = 0.0);
Tensor negative(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor pow(const Tensor& x, double p);
Tensor add(const Tensor& x, double c);
Tensor multiply(const Tensor& x, double c);

/// Broadcasting by name: the result has a's dims followed by b's dims that a lacks (or
/// `out_shape` when given, which must hold every dim of a and b).
Tensor binary(BinaryFn fn, const Tensor& a, const Tensor& b, const Shape* out_shape = nullptr);
Tensor add(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
Tensor divide(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);

/// 1.0 where the comparison holds, else 0.0 (float32).
Tensor compare(CompareFn fn, const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
/// cond != 0 ? a : b, broadcasting by name.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor cast(const Tensor& x, DType dtype);

// ------------------------------------------------------------------ contractions, reductions
/// Einsum by names: dims in the output are kept (batch dims when several inputs have them), the
/// others are summed. One to any number of operands (contracted left to right).
Tensor einsum(const std::vector<Tensor>& xs, const Shape& out_shape);
/// Output dims given by name, sizes taken from the inputs.
Tensor einsum(const std::vector<Tensor>& xs, const std::vector<std::string>& out_dims);
Tensor reduce(ReduceFn fn, const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_sum(const Tensor& x, const std::vector<std::string>& reduced_dims);
/// Sum of every element: a scalar.
Tensor reduce_sum(const Tensor& x);
Tensor reduce_mean(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_mean(const Tensor& x);
Tensor reduce_max(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_min(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_logsumexp(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor softmax(const Tensor& x, const std::string& dim);
Tensor log_softmax(const Tensor& x, const std::string& dim);
Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive = false);
/// Max along `dim` and its (int32) position; `dim` must be whole on every processor.
std::pair<Tensor, Tensor> top_1(const Tensor& x, const std::string& dim);

// -------------------------------------------------------------------------------- indexing
/// ids (int32) -> ids' dims plus `dim`: on where the id equals the position.
Tensor one_hot(const Tensor& ids, const Dimension& dim, double on = 1.0, double off = 0.0);
/// Embedding lookup of ids (int32) along table dim `dim`: ids' dims plus the table's other dims.
Tensor gather(const Tensor& table, const Tensor& ids, const std::string& dim);
/// table_shape-shaped sum of `updates` rows scattered to positions `ids` along `dim`.
Tensor scatter_add(const Tensor& ids, const Tensor& updates, const Shape& table_shape,
                   const std::string& dim);

// -------------------------------------------------------------------------------- losses
/// Fused softmax cross-entropy of logits [..., dim] against int32 targets [...] (the logits' dims
/// without `dim`): lse - (1 - ls) x_target - ls / V sum(x) + z lse^2 per row, where lse is the
/// log-sum-exp of the row. Never materialises probabilities or one-hot targets; `dim` may be split.
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const std::string& dim,
                             double label_smoothing = 0.0, double z_loss = 0.0);

// --------------------------------------------------------------------------- shape, layout
/// Same number of elements, new dims (row-major order kept). Changing which mesh dim splits the
/// data lowers to a slice, an allconcat or an alltoall.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor rename_dimension(const Tensor& x, const std::string& old_name, const std::string& new_name);
/// Replaces dims `old_names` (consecutive) by `new_dims`.
Tensor replace_dimensions(const Tensor& x, const std::vector<std::string>& old_names,
                          const std::vector<Dimension>& new_dims);
/// Repeats x over the dims of `shape` it lacks (and reorders to `shape`).
Tensor broadcast(const Tensor& x, const Shape& shape);
/// Positions [begin, begin + size) of `dim`, renamed `new_name` when given.
Tensor slice(const Tensor& x, const std::string& dim, std::int64_t begin, std::int64_t size,
             const std::string& new_name = "");
Tensor concat(const std::vector<Tensor>& xs, const std::string& dim,
              const std::string& new_name = "");
Tensor pad(const Tensor& x, const std::string& dim, std::int64_t before, std::int64_t after,
           const std::string& new_name = "");
/// out[i] = x[i - offset] along `dim` (zeros shifted in unless `wrap`).
Tensor shift(const Tensor& x, const std::string& dim, std::int64_t offset, bool wrap = false);

// ------------------------------------------------------------------------------- training
Tensor stop_gradient(const Tensor& x);
/// x * mask / (1 - rate) with a layout-independent mask; identity when rate == 0.
Tensor dropout(const Tensor& x, double rate, std::uint64_t seed);
/// One fused Adam step for a parameter: {new parameter, new first moment, new second moment} with
/// m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2, p' = p - step_size m' / (sqrt(v') + eps), in
/// one pass over the four tensors (step_size: a scalar tensor). Assign the results to apply them.
std::vector<Tensor> adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                                const Tensor& grad, const Tensor& step_size, double beta1,
                                double beta2, double epsilon);
/// Variable updates; they take effect at the end of Program::run, after every read.
Tensor assign(const Tensor& variable, const Tensor& value);
Tensor assign_add(const Tensor& variable, const Tensor& value);
Tensor assign_sub(const Tensor& variable, const Tensor& value);

}  // namespace mtk
