#pragma once
// Element types of tensors. float32 is the working type; int32 carries ids and indices. The type is
// a property of each tensor so that bf16 activations can be added without touching model code.

#include <cstddef>
#include <cstdint>
#include <string>

namespace mtk {

enum class DType { float32, int32 };

inline const char* dtype_name(DType t) {
  return t == DType::float32 ? "float32" : "int32";
}

/// The DType of a C++ element type: dtype_of<float>::value == DType::float32.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::int32;
};

/// Calls f(T{}) with T the C++ element type of `t`: the one place dtype-generic code (buffers,
/// host tensors, lowered steps) turns a runtime DType into a type. Every call must return the
/// same type.
template <class F>
auto visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::int32:
      return f(std::int32_t{});
    case DType::float32:
      break;
  }
  return f(float{});
}

/// Bytes per element.
inline std::size_t dtype_bytes(DType t) {
  return visit_dtype(t, [](auto e) { return sizeof(e); });
}

}  // namespace mtk
