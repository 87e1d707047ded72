#pragma once
// The values a program is fed and returns (Program::run, Program::variable_value).

#include <mtk/base/dtype.hpp>
#include <mtk/base/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace mtk {

/// Host-side tensor values for feeds and fetches (row-major): a shape, an element type and the
/// bytes of its values, read with the typed accessors (data<float>(), values<std::int32_t>()).
class HostTensor {
 public:
  HostTensor() = default;
  template <class T>
  HostTensor(const Shape& shape, const std::vector<T>& values)
      : shape_(shape), dtype_(dtype_of<T>::value), bytes_(values.size() * sizeof(T)) {
    if (!values.empty())
      std::memcpy(bytes_.data(), values.data(), bytes_.size());
  }
  static HostTensor floats(const Shape& s, const std::vector<float>& v) { return {s, v}; }
  static HostTensor ints(const Shape& s, const std::vector<std::int32_t>& v) { return {s, v}; }

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  /// Number of values.
  std::int64_t size() const {
    return static_cast<std::int64_t>(bytes_.size() / dtype_bytes(dtype_));
  }
  /// The values as T, which must be the element type.
  template <class T>
  const T* data() const {
    check<T>();
    return reinterpret_cast<const T*>(bytes_.data());
  }
  template <class T>
  T* data() {
    check<T>();
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <class T>
  std::vector<T> values() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + size());
  }
  /// Value k as a double, whatever the element type.
  double at(std::int64_t k) const {
    if (k < 0 || k >= size())
      fail_index(k);
    return visit_dtype(dtype_, [&](auto t) {
      return static_cast<double>(data<decltype(t)>()[static_cast<size_t>(k)]);
    });
  }

 private:
  template <class T>
  void check() const {
    if (dtype_of<T>::value != dtype_)
      fail_dtype(dtype_of<T>::value);
  }
  [[noreturn]] void fail_dtype(DType asked) const;
  [[noreturn]] void fail_index(std::int64_t k) const;

  Shape shape_;
  DType dtype_ = DType::float32;
  std::vector<std::byte> bytes_;
};

}  // namespace mtk
