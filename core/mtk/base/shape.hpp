#pragma once
// Named dimensions and ordered shapes: the vocabulary every other part of MTK speaks.

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {

/// A named tensor (or mesh) dimension.
struct Dimension {
  std::string name;
  std::int64_t size = 0;

  friend bool operator==(const Dimension& a, const Dimension& b) {
    return a.name == b.name && a.size == b.size;
  }
  friend bool operator!=(const Dimension& a, const Dimension& b) { return !(a == b); }
};

/// An ordered list of dimensions with unique, non-empty names and non-negative sizes.
/// Storage order is row-major: the last dimension varies fastest.
class Shape {
 public:
  Shape() = default;
  /// Throws mtk::Error on an empty or repeated name, a negative size, or more than kMaxElements
  /// elements (base/checked.hpp), naming the dims.
  Shape(std::vector<Dimension> dims);  // NOLINT(google-explicit-constructor): shapes read as lists
  Shape(std::initializer_list<Dimension> dims) : Shape(std::vector<Dimension>(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  /// Number of elements (1 for a scalar).
  std::int64_t num_elements() const { return num_elements_; }
  const std::vector<Dimension>& dims() const { return dims_; }
  const Dimension& operator[](int i) const { return dims_.at(static_cast<size_t>(i)); }

  /// Position of `name`, or -1.
  int index_of(const std::string& name) const;
  bool contains(const std::string& name) const { return index_of(name) >= 0; }
  /// The dimension called `name`; throws naming the shape when absent.
  const Dimension& dim(const std::string& name) const;
  std::int64_t size_of(const std::string& name) const { return dim(name).size; }
  std::vector<std::string> names() const;
  /// Row-major strides, in elements.
  std::vector<std::int64_t> strides() const;

  /// "[batch=8, d_model=512]".
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::vector<Dimension> dims_;
  std::int64_t num_elements_ = 1;
};

/// A row-major tensor factored as [outer][n][inner] around one dim: how kernels and collectives
/// walk the slices of a dim.
struct Around {
  std::int64_t outer = 1, n = 1, inner = 1;
  Around(const Shape& s, int dim) {
    for (int i = 0; i < s.rank(); ++i) {
      if (i < dim)
        outer *= s[i].size;
      if (i > dim)
        inner *= s[i].size;
    }
    n = s[dim].size;
  }
};

}  // namespace mtk
