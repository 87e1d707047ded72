#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>

#include <algorithm>

namespace mtk {
namespace {

Graph& graph_of(const std::vector<Tensor>& xs, const char* where) {
  if (xs.empty())
    fail(where, "no input tensors");
  for (const auto& x : xs)
    if (!x.valid())
      fail(where, "an input tensor handle is empty");
  Graph& g = xs.front().graph();
  for (const auto& x : xs)
    if (&x.graph() != &g)
      fail(where, "inputs belong to different graphs");
  return g;
}

std::string describe(const Tensor& t) {
  return "'" + t.name() + "' " + t.shape().to_string();
}

void require_float(const Tensor& x, const char* where) {
  if (x.dtype() != DType::float32)
    fail(where, cat("tensor ", describe(x), " is ", dtype_name(x.dtype()), ", expected float32"));
}

void require_same_dtype(const Tensor& a, const Tensor& b, const char* where) {
  if (a.dtype() != b.dtype())
    fail(where, cat("tensors ", describe(a), " (", dtype_name(a.dtype()), ") and ", describe(b),
                    " (", dtype_name(b.dtype()), ") differ in type"));
}

int dim_index(const Tensor& x, const std::string& dim, const char* where) {
  int i = x.shape().index_of(dim);
  if (i < 0)
    fail(where, cat("tensor ", describe(x), " has no dimension '", dim, "'"));
  return i;
}

// The union of the inputs' dims (first appearance order), checking sizes agree by name.
Shape union_shape(const std::vector<Tensor>& xs, const char* where) {
  std::vector<Dimension> dims;
  for (const auto& x : xs)
    for (const auto& d : x.shape().dims()) {
      auto it = std::find_if(dims.begin(), dims.end(),
                             [&](const Dimension& e) { return e.name == d.name; });
      if (it == dims.end()) {
        dims.push_back(d);
      } else if (it->size != d.size) {
        std::string list;
        for (const auto& y : xs)
          list += " " + describe(y);
        fail(where, cat("dimension '", d.name, "' has sizes ", it->size, " and ", d.size,
                        " in the inputs:", list));
      }
    }
  return Shape(dims);
}

void check_within(const Shape& out, const std::vector<Tensor>& xs, const char* where) {
  Shape all = union_shape(xs, where);
  for (const auto& d : out.dims()) {
    int j = all.index_of(d.name);
    if (j >= 0 && all[j].size != d.size)
      fail(where, cat("output dimension '", d.name, "' has size ", d.size, " but ", all[j].size,
                      " in the inputs"));
  }
}

Shape replace_dim(const Shape& s, int i, const Dimension& d) {
  auto dims = s.dims();
  dims[static_cast<size_t>(i)] = d;
  return Shape(dims);
}

}  // namespace

Tensor variable(Graph& g, const std::string& name, const Shape& shape, const Initializer& init,
                bool trainable, DType dtype) {
  OpAttrs a;
  a.init = init;
  a.trainable = trainable;
  return g.add_op1(OpKind::variable, name, {}, shape, dtype, a);
}

Tensor placeholder(Graph& g, const std::string& name, const Shape& shape, DType dtype) {
  return g.add_op1(OpKind::placeholder, name, {}, shape, dtype);
}

Tensor constant(Graph& g, const Shape& shape, double value, DType dtype) {
  OpAttrs a;
  a.scalar = value;
  return g.add_op1(OpKind::constant, "constant", {}, shape, dtype, a);
}

Tensor range(Graph& g, const Dimension& dim, DType dtype) {
  return g.add_op1(OpKind::range, "range", {}, Shape{dim}, dtype);
}

Tensor random_uniform(Graph& g, const Shape& shape, std::uint64_t seed, double low, double high) {
  OpAttrs a;
  a.seed = seed;
  a.scalar = low;
  a.scalar2 = high;
  return g.add_op1(OpKind::random_uniform, "random_uniform", {}, shape, DType::float32, a);
}

Tensor random_normal(Graph& g, const Shape& shape, std::uint64_t seed, double mean, double stddev) {
  OpAttrs a;
  a.seed = seed;
  a.scalar = mean;
  a.scalar2 = stddev;
  return g.add_op1(OpKind::random_normal, "random_normal", {}, shape, DType::float32, a);
}

Tensor unary(UnaryFn fn, const Tensor& x, double p) {
  graph_of({x}, "mtk::unary");
  OpAttrs a;
  a.unary = fn;
  a.scalar = p;
  return x.graph().add_op1(OpKind::unary, unary_name(fn), {x}, x.shape(), x.dtype(), a);
}

Tensor negative(const Tensor& x) {
  return unary(UnaryFn::negative, x);
}
Tensor abs(const Tensor& x) {
  return unary(UnaryFn::abs, x);
}
Tensor exp(const Tensor& x) {
  return unary(UnaryFn::exp, x);
}
Tensor log(const Tensor& x) {
  return unary(UnaryFn::log, x);
}
Tensor sqrt(const Tensor& x) {
  return unary(UnaryFn::sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return unary(UnaryFn::rsqrt, x);
}
Tensor square(const Tensor& x) {
  return unary(UnaryFn::square, x);
}
Tensor reciprocal(const Tensor& x) {
  return unary(UnaryFn::reciprocal, x);
}
Tensor relu(const Tensor& x) {
  return unary(UnaryFn::relu, x);
}
Tensor gelu(const Tensor& x) {
  return unary(UnaryFn::gelu, x);
}
Tensor tanh(const Tensor& x) {
  return unary(UnaryFn::tanh, x);
}
Tensor sigmoid(const Tensor& x) {
  return unary(UnaryFn::sigmoid, x);
}
Tensor pow(const Tensor& x, double p) {
  return unary(UnaryFn::pow_scalar, x, p);
}
Tensor add(const Tensor& x, double c) {
  return unary(UnaryFn::add_scalar, x, c);
}
Tensor multiply(const Tensor& x, double c) {
  return unary(UnaryFn::mul_scalar, x, c);
}

Tensor binary(BinaryFn fn, const Tensor& a, const Tensor& b, const Shape* out_shape) {
  const char* where = "mtk::binary";
  Graph& g = graph_of({a, b}, where);
  require_same_dtype(a, b, where);
  Shape out = union_shape({a, b}, where);
  if (out_shape) {
    for (const auto& d : out.dims())
      if (!out_shape->contains(d.name))
        fail(where, cat(binary_name(fn), ": output ", out_shape->to_string(), " lacks dimension '",
                        d.name, "' of the inputs ", describe(a), " and ", describe(b)));
    check_within(*out_shape, {a, b}, where);
    out = *out_shape;
  }
  OpAttrs at;
  at.binary = fn;
  return g.add_op1(OpKind::binary, binary_name(fn), {a, b}, out, a.dtype(), at);
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::add, a, b);
}
Tensor subtract(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::subtract, a, b);
}
Tensor multiply(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::multiply, a, b);
}
Tensor divide(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::divide, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(BinaryFn::minimum, a, b);
}
Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return subtract(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return multiply(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return divide(a, b);
}
Tensor operator-(const Tensor& x) {
  return negative(x);
}

Tensor compare(CompareFn fn, const Tensor& a, const Tensor& b) {
  const char* where = "mtk::compare";
  Graph& g = graph_of({a, b}, where);
  require_same_dtype(a, b, where);
  OpAttrs at;
  at.compare = fn;
  return g.add_op1(OpKind::compare, compare_name(fn), {a, b}, union_shape({a, b}, where),
                   DType::float32, at);
}
Tensor less(const Tensor& a, const Tensor& b) {
  return compare(CompareFn::less, a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return compare(CompareFn::greater, a, b);
}
Tensor equal(const Tensor& a, const Tensor& b) {
  return compare(CompareFn::equal, a, b);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const char* where_ = "mtk::where";
  Graph& g = graph_of({cond, a, b}, where_);
  require_float(cond, where_);
  require_float(a, where_);
  require_float(b, where_);
  return g.add_op1(OpKind::where, "where", {cond, a, b}, union_shape({cond, a, b}, where_),
                   DType::float32);
}

Tensor cast(const Tensor& x, DType dtype) {
  graph_of({x}, "mtk::cast");
  if (x.dtype() == dtype)
    return x;
  return x.graph().add_op1(OpKind::cast, "cast", {x}, x.shape(), dtype);
}

Tensor einsum(const std::vector<Tensor>& xs, const Shape& out_shape) {
  const char* where = "mtk::einsum";
  Graph& g = graph_of(xs, where);
  for (const auto& x : xs)
    require_float(x, where);
  Shape all = union_shape(xs, where);
  for (const auto& d : out_shape.dims()) {
    int j = all.index_of(d.name);
    std::string list;
    for (const auto& x : xs)
      list += " " + describe(x);
    if (j < 0)
      fail(where, cat("output dimension '", d.name, "' of ", out_shape.to_string(),
                      " appears in no input:", list, " (use broadcast() to add a dimension)"));
    if (all[j].size != d.size)
      fail(where, cat("output dimension '", d.name, "' has size ", d.size, " but ", all[j].size,
                      " in the inputs:", list));
  }
  if (xs.size() == 1)
    return g.add_op1(OpKind::einsum, "einsum", xs, out_shape, DType::float32);
  if (xs.size() == 2)
    return g.add_op1(OpKind::einsum, "einsum", xs, out_shape, DType::float32);
  // Contract left to right, keeping every dim still needed later or in the output.
  Tensor acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    if (i + 1 == xs.size())
      return einsum({acc, xs[i]}, out_shape);
    std::vector<Dimension> keep;
    Shape both = union_shape({acc, xs[i]}, where);
    for (const auto& d : both.dims()) {
      bool needed = out_shape.contains(d.name);
      for (size_t j = i + 1; j < xs.size() && !needed; ++j)
        needed = xs[j].shape().contains(d.name);
      if (needed)
        keep.push_back(d);
    }
    acc = einsum({acc, xs[i]}, Shape(keep));
  }
  return acc;
}

Tensor einsum(const std::vector<Tensor>& xs, const std::vector<std::string>& out_dims) {
  Shape all = union_shape(xs, "mtk::einsum");
  std::vector<Dimension> dims;
  for (const auto& n : out_dims) {
    int j = all.index_of(n);
    if (j < 0)
      fail("mtk::einsum", cat("output dimension '", n, "' appears in no input ", all.to_string()));
    dims.push_back(all[j]);
  }
  return einsum(xs, Shape(dims));
}

Tensor reduce(ReduceFn fn, const Tensor& x, const std::vector<std::string>& reduced_dims) {
  graph_of({x}, "mtk::reduce");
  std::vector<Dimension> keep;
  for (const auto& n : reduced_dims)
    dim_index(x, n, "mtk::reduce");
  for (const auto& d : x.shape().dims())
    if (std::find(reduced_dims.begin(), reduced_dims.end(), d.name) == reduced_dims.end())
      keep.push_back(d);
  if (reduced_dims.empty())
    return x;
  OpAttrs a;
  a.reduce = fn;
  return x.graph().add_op1(OpKind::reduce, std::string("reduce_") + reduce_name(fn), {x},
                           Shape(keep), x.dtype(), a);
}

Tensor reduce_sum(const Tensor& x, const std::vector<std::string>& dims) {
  return reduce(ReduceFn::sum, x, dims);
}
Tensor reduce_sum(const Tensor& x) {
  return reduce(ReduceFn::sum, x, x.shape().names());
}
Tensor reduce_mean(const Tensor& x, const std::vector<std::string>& dims) {
  std::int64_t n = 1;
  for (const auto& d : dims)
    n *= x.shape().size_of(d);
  return multiply(reduce_sum(x, dims), 1.0 / static_cast<double>(n));
}
Tensor reduce_mean(const Tensor& x) {
  return reduce_mean(x, x.shape().names());
}
Tensor reduce_max(const Tensor& x, const std::vector<std::string>& dims) {
  return reduce(ReduceFn::max, x, dims);
}
Tensor reduce_min(const Tensor& x, const std::vector<std::string>& dims) {
  return reduce(ReduceFn::min, x, dims);
}
Tensor reduce_logsumexp(const Tensor& x, const std::vector<std::string>& dims) {
  Tensor m = stop_gradient(reduce_max(x, dims));
  return add(log(reduce_sum(exp(subtract(x, m)), dims)), m);
}

Tensor softmax(const Tensor& x, const std::string& dim) {
  require_float(x, "mtk::softmax");
  dim_index(x, dim, "mtk::softmax");
  OpAttrs a;
  a.dim = dim;
  return x.graph().add_op1(OpKind::softmax, "softmax", {x}, x.shape(), DType::float32, a);
}

Tensor log_softmax(const Tensor& x, const std::string& dim) {
  require_float(x, "mtk::log_softmax");
  dim_index(x, dim, "mtk::log_softmax");
  OpAttrs a;
  a.dim = dim;
  return x.graph().add_op1(OpKind::log_softmax, "log_softmax", {x}, x.shape(), DType::float32, a);
}

Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive) {
  require_float(x, "mtk::cumsum");
  dim_index(x, dim, "mtk::cumsum");
  OpAttrs a;
  a.dim = dim;
  a.flag = exclusive;
  return x.graph().add_op1(OpKind::cumsum, "cumsum", {x}, x.shape(), DType::float32, a);
}

std::pair<Tensor, Tensor> top_1(const Tensor& x, const std::string& dim) {
  require_float(x, "mtk::top_1");
  int i = dim_index(x, dim, "mtk::top_1");
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + i);
  OpAttrs a;
  a.dim = dim;
  auto out = x.graph().add_op(OpKind::top_1, "top_1", {x},
                              {{Shape(dims), DType::float32}, {Shape(dims), DType::int32}}, a);
  return {out[0], out[1]};
}

Tensor one_hot(const Tensor& ids, const Dimension& dim, double on, double off) {
  graph_of({ids}, "mtk::one_hot");
  if (ids.dtype() != DType::int32)
    fail("mtk::one_hot", cat("ids ", describe(ids), " must be int32"));
  if (ids.shape().contains(dim.name))
    fail("mtk::one_hot", cat("ids ", describe(ids), " already have dimension '", dim.name, "'"));
  auto dims = ids.shape().dims();
  dims.push_back(dim);
  OpAttrs a;
  a.dim = dim.name;
  a.scalar = on;
  a.scalar2 = off;
  return ids.graph().add_op1(OpKind::one_hot, "one_hot", {ids}, Shape(dims), DType::float32, a);
}

Tensor gather(const Tensor& table, const Tensor& ids, const std::string& dim) {
  const char* where = "mtk::gather";
  Graph& g = graph_of({table, ids}, where);
  require_float(table, where);
  if (ids.dtype() != DType::int32)
    fail(where, cat("ids ", describe(ids), " must be int32"));
  int i = dim_index(table, dim, where);
  if (ids.shape().contains(dim))
    fail(where, cat("ids ", describe(ids), " must not have the gathered dimension '", dim, "'"));
  auto dims = ids.shape().dims();
  for (int j = 0; j < table.shape().rank(); ++j)
    if (j != i)
      dims.push_back(table.shape()[j]);
  Shape out(dims);
  union_shape({table, ids}, where);
  OpAttrs a;
  a.dim = dim;
  return g.add_op1(OpKind::gather, "gather", {table, ids}, out, DType::float32, a);
}

Tensor scatter_add(const Tensor& ids, const Tensor& updates, const Shape& table_shape,
                   const std::string& dim) {
  const char* where = "mtk::scatter_add";
  Graph& g = graph_of({ids, updates}, where);
  require_float(updates, where);
  if (!table_shape.contains(dim))
    fail(where, cat("table ", table_shape.to_string(), " lacks '", dim, "'"));
  for (const auto& d : updates.shape().dims())
    if (!ids.shape().contains(d.name) && !table_shape.contains(d.name))
      fail(where, cat("updates dimension '", d.name, "' is in neither ids ", describe(ids),
                      " nor table ", table_shape.to_string()));
  OpAttrs a;
  a.dim = dim;
  return g.add_op1(OpKind::scatter_add, "scatter_add", {ids, updates}, table_shape, DType::float32,
                   a);
}

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const std::string& dim,
                             double label_smoothing, double z_loss) {
  const char* where = "mtk::softmax_cross_entropy";
  Graph& g = graph_of({logits, targets}, where);
  require_float(logits, where);
  if (targets.dtype() != DType::int32)
    fail(where, cat("targets ", describe(targets), " must be int32"));
  const int d = dim_index(logits, dim, where);
  auto dims = logits.shape().dims();
  dims.erase(dims.begin() + d);
  if (Shape(dims) != targets.shape())
    fail(where, cat("targets ", describe(targets), " must have the shape of logits ",
                    describe(logits), " without '", dim, "': ", Shape(dims).to_string()));
  if (label_smoothing < 0 || label_smoothing >= 1)
    fail(where, cat("label smoothing ", label_smoothing, " not in [0, 1)"));
  OpAttrs a;
  a.dim = dim;
  a.scalar = label_smoothing;
  a.scalar2 = z_loss;
  auto out = g.add_op(OpKind::softmax_cross_entropy, "softmax_cross_entropy", {logits, targets},
                      {{targets.shape(), DType::float32}, {targets.shape(), DType::float32}}, a);
  return out[0];
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  graph_of({x}, "mtk::reshape");
  if (shape.num_elements() != x.shape().num_elements())
    fail("mtk::reshape", cat("cannot reshape ", describe(x), " (", x.shape().num_elements(),
                             " elements) to ", shape.to_string(), " (", shape.num_elements(), ")"));
  if (shape == x.shape())
    return x;
  return x.graph().add_op1(OpKind::reshape, "reshape", {x}, shape, x.dtype());
}

Tensor rename_dimension(const Tensor& x, const std::string& old_name, const std::string& new_name) {
  int i = dim_index(x, old_name, "mtk::rename_dimension");
  return reshape(x, replace_dim(x.shape(), i, {new_name, x.shape()[i].size}));
}

Tensor replace_dimensions(const Tensor& x, const std::vector<std::string>& old_names,
                          const std::vector<Dimension>& new_dims) {
  if (old_names.empty())
    fail("mtk::replace_dimensions", "no dimensions to replace");
  int first = dim_index(x, old_names.front(), "mtk::replace_dimensions");
  for (size_t k = 0; k < old_names.size(); ++k)
    if (dim_index(x, old_names[k], "mtk::replace_dimensions") != first + static_cast<int>(k))
      fail("mtk::replace_dimensions",
           cat("dimensions to replace must be consecutive in ", describe(x)));
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + first, dims.begin() + first + static_cast<long>(old_names.size()));
  dims.insert(dims.begin() + first, new_dims.begin(), new_dims.end());
  return reshape(x, Shape(dims));
}

Tensor broadcast(const Tensor& x, const Shape& shape) {
  graph_of({x}, "mtk::broadcast");
  for (const auto& d : x.shape().dims()) {
    int j = shape.index_of(d.name);
    if (j < 0 || shape[j].size != d.size)
      fail("mtk::broadcast", cat("cannot broadcast ", describe(x), " to ", shape.to_string()));
  }
  if (shape == x.shape())
    return x;
  return x.graph().add_op1(OpKind::broadcast, "broadcast", {x}, shape, x.dtype());
}

Tensor slice(const Tensor& x, const std::string& dim, std::int64_t begin, std::int64_t size,
             const std::string& new_name) {
  int i = dim_index(x, dim, "mtk::slice");
  if (begin < 0 || size < 0 || begin + size > x.shape()[i].size)
    fail("mtk::slice", cat("range [", begin, ", ", begin + size, ") outside dimension '", dim,
                           "' of ", describe(x)));
  OpAttrs a;
  a.dim = dim;
  a.begin = begin;
  a.size = size;
  Shape out = replace_dim(x.shape(), i, {new_name.empty() ? dim : new_name, size});
  return x.graph().add_op1(OpKind::slice, "slice", {x}, out, x.dtype(), a);
}

Tensor concat(const std::vector<Tensor>& xs, const std::string& dim, const std::string& new_name) {
  Graph& g = graph_of(xs, "mtk::concat");
  int i = dim_index(xs[0], dim, "mtk::concat");
  std::int64_t total = 0;
  for (const auto& x : xs) {
    require_same_dtype(xs[0], x, "mtk::concat");
    if (x.shape().rank() != xs[0].shape().rank() || dim_index(x, dim, "mtk::concat") != i)
      fail("mtk::concat", cat("inputs ", describe(xs[0]), " and ", describe(x), " do not match"));
    for (int j = 0; j < x.shape().rank(); ++j)
      if (j != i && x.shape()[j] != xs[0].shape()[j])
        fail("mtk::concat", cat("inputs ", describe(xs[0]), " and ", describe(x),
                                " differ outside dimension '", dim, "'"));
    total += x.shape()[i].size;
  }
  OpAttrs a;
  a.dim = dim;
  Shape out = replace_dim(xs[0].shape(), i, {new_name.empty() ? dim : new_name, total});
  return g.add_op1(OpKind::concat, "concat", xs, out, xs[0].dtype(), a);
}

Tensor pad(const Tensor& x, const std::string& dim, std::int64_t before, std::int64_t after,
           const std::string& new_name) {
  int i = dim_index(x, dim, "mtk::pad");
  if (before < 0 || after < 0)
    fail("mtk::pad", cat("negative padding of '", dim, "' in ", describe(x)));
  OpAttrs a;
  a.dim = dim;
  a.begin = before;
  a.after = after;
  Shape out = replace_dim(x.shape(), i,
                          {new_name.empty() ? dim : new_name, x.shape()[i].size + before + after});
  return x.graph().add_op1(OpKind::pad, "pad", {x}, out, x.dtype(), a);
}

Tensor shift(const Tensor& x, const std::string& dim, std::int64_t offset, bool wrap) {
  dim_index(x, dim, "mtk::shift");
  OpAttrs a;
  a.dim = dim;
  a.begin = offset;
  a.flag = wrap;
  return x.graph().add_op1(OpKind::shift, "shift", {x}, x.shape(), x.dtype(), a);
}

Tensor stop_gradient(const Tensor& x) {
  graph_of({x}, "mtk::stop_gradient");
  return x.graph().add_op1(OpKind::stop_gradient, "stop_gradient", {x}, x.shape(), x.dtype());
}

Tensor dropout(const Tensor& x, double rate, std::uint64_t seed) {
  if (rate <= 0.0)
    return x;
  if (rate >= 1.0)
    fail("mtk::dropout", cat("rate ", rate, " must be below 1 for ", describe(x)));
  Tensor u = random_uniform(x.graph(), x.shape(), seed);
  Tensor keep = compare(CompareFn::greater_equal, u, constant(x.graph(), Shape(), rate));
  return multiply(multiply(x, keep), 1.0 / (1.0 - rate));
}

std::vector<Tensor> adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                                const Tensor& grad, const Tensor& step_size, double beta1,
                                double beta2, double epsilon) {
  const char* where = "mtk::adam_update";
  Graph& g = graph_of({param, m, v, grad, step_size}, where);
  for (const Tensor* t : {&param, &m, &v, &grad}) {
    require_float(*t, where);
    if (t->shape() != param.shape())
      fail(where, cat("tensor ", describe(*t), " does not match parameter ", describe(param)));
  }
  if (step_size.shape().rank() != 0)
    fail(where, cat("step size ", describe(step_size), " must be a scalar"));
  OpAttrs a;
  a.scalar = beta1;
  a.scalar2 = beta2;
  a.scalar3 = epsilon;
  const std::pair<Shape, DType> out{param.shape(), DType::float32};
  return g.add_op(OpKind::adam_update, "adam_update", {param, m, v, grad, step_size},
                  {out, out, out}, a);
}

namespace {
Tensor assign_op(const Tensor& var, const Tensor& value, AssignMode mode, const char* where) {
  Graph& g = graph_of({var, value}, where);
  if (g.op(var.producer()).kind != OpKind::variable)
    fail(where, cat("target ", describe(var), " is not a variable"));
  if (value.shape() != var.shape() || value.dtype() != var.dtype())
    fail(where, cat("value ", describe(value), " does not match variable ", describe(var)));
  OpAttrs a;
  a.assign = mode;
  return g.add_op1(OpKind::assign, std::string("assign_") + var.name(), {var, value}, Shape(),
                   var.dtype(), a);
}
}  // namespace

Tensor assign(const Tensor& v, const Tensor& x) {
  return assign_op(v, x, AssignMode::set, "mtk::assign");
}
Tensor assign_add(const Tensor& v, const Tensor& x) {
  return assign_op(v, x, AssignMode::add, "mtk::assign_add");
}
Tensor assign_sub(const Tensor& v, const Tensor& x) {
  return assign_op(v, x, AssignMode::subtract, "mtk::assign_sub");
}

}  // namespace mtk
