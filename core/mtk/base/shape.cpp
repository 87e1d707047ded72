#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/shape.hpp>

namespace mtk {

Shape::Shape(std::vector<Dimension> dims) : dims_(std::move(dims)) {
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name.empty())
      fail("mtk::Shape", cat("dimension ", i, " of ", to_string(), " has an empty name"));
    if (dims_[i].size < 0)
      fail("mtk::Shape", cat("dimension '", dims_[i].name, "' of ", to_string(),
                             " has negative size ", dims_[i].size));
    for (size_t j = 0; j < i; ++j)
      if (dims_[j].name == dims_[i].name)
        fail("mtk::Shape", cat("dimension name '", dims_[i].name, "' appears twice in ",
                               to_string(), " (at positions ", j, " and ", i, ")"));
  }
  // Checked in full (a 0-size dim makes the count 0, but the other dims' product must not wrap).
  std::int64_t all = 1;
  for (const auto& d : dims_) {
    const std::int64_t size = d.size == 0 ? 1 : d.size;
    if (__builtin_mul_overflow(all, size, &all) || all > kMaxElements)
      fail("mtk::Shape", cat(to_string(),
                             " has more than 2^56 elements: its sizes overflow the "
                             "64-bit element, byte and FLOP counts (a dimension too large?)"));
  }
  for (const auto& d : dims_)
    num_elements_ *= d.size;
}

int Shape::index_of(const std::string& name) const {
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == name)
      return static_cast<int>(i);
  return -1;
}

const Dimension& Shape::dim(const std::string& name) const {
  int i = index_of(name);
  if (i < 0)
    fail("mtk::Shape::dim", cat("no dimension '", name, "' in ", to_string()));
  return dims_[static_cast<size_t>(i)];
}

std::vector<std::string> Shape::names() const {
  std::vector<std::string> out;
  for (const auto& d : dims_)
    out.push_back(d.name);
  return out;
}

std::vector<std::int64_t> Shape::strides() const {
  std::vector<std::int64_t> s(dims_.size(), 1);
  for (int i = rank() - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] =
        s[static_cast<size_t>(i) + 1] * dims_[static_cast<size_t>(i) + 1].size;
  return s;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i)
      s += ", ";
    s += dims_[i].name + "=" + std::to_string(dims_[i].size);
  }
  return s + "]";
}

}  // namespace mtk
