#include <mtk/base/error.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/impl/builder_checks.hpp>
#include <mtk/ops/shape.hpp>

#include <algorithm>

namespace mtk::ops_impl {

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

Tensor einsum_to(const std::vector<Tensor>& xs, const Shape& shape) {
  return einsum_to(xs, shape, graph_of(xs, "mtk::einsum").contraction_precision());
}

Tensor einsum_to(const std::vector<Tensor>& xs, const Shape& shape, Precision precision) {
  std::vector<Dimension> have;
  for (const auto& d : shape.dims()) {
    bool found = false;
    for (const auto& x : xs)
      found = found || x.shape().contains(d.name);
    if (found)
      have.push_back(d);
  }
  Tensor t = einsum(xs, Shape(have), precision);
  return static_cast<int>(have.size()) == shape.rank() ? t : broadcast(t, shape);
}

}  // namespace mtk::ops_impl
