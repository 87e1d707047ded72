#pragma once
// Element types of tensors. float32 is the working type; int32 carries ids and indices. The type is
// a property of each tensor so that bf16 activations can be added without touching model code.
// bfloat16 is a storage type only: variables and optimizer slots may keep their values as bf16
// bit patterns (std::uint16_t), read as float32 tensors and written back rounded
// (docs/memory.md); no graph tensor and no kernel computes in it.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace mtk {

enum class DType { float32, int32, bfloat16 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::int32:
      return "int32";
    case DType::bfloat16:
      return "bfloat16";
    case DType::float32:
      break;
  }
  return "float32";
}

/// The DType of a C++ element type: dtype_of<float>::value == DType::float32. The element type
/// of bfloat16 storage is its bit pattern, std::uint16_t.
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
template <>
struct dtype_of<std::uint16_t> {
  static constexpr DType value = DType::bfloat16;
};

/// Calls f(T{}) with T the C++ element type of `t`: the one place dtype-generic code (buffers,
/// host tensors, lowered steps) turns a runtime DType into a type. Every call must return the
/// same type. Only the compute types: bfloat16 storage has no arithmetic here, so it fails
/// rather than run a float path on bit patterns (visit_storage_dtype includes it).
template <class F>
auto visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::int32:
      return f(std::int32_t{});
    case DType::bfloat16:
      throw std::logic_error(
          "mtk::visit_dtype: bfloat16 is a storage type of variables; no kernel computes in it");
    case DType::float32:
      break;
  }
  return f(float{});
}

/// visit_dtype for code that only moves elements (buffers, pools, copies): bfloat16 storage
/// visits std::uint16_t.
template <class F>
auto visit_storage_dtype(DType t, F&& f) {
  if (t == DType::bfloat16)
    return f(std::uint16_t{});
  return visit_dtype(t, std::forward<F>(f));
}

/// Bytes per element.
inline std::size_t dtype_bytes(DType t) {
  return visit_storage_dtype(t, [](auto e) { return sizeof(e); });
}

/// The DType named `name` ("float32", "int32", "bfloat16"); false if none.
inline bool dtype_from_name(const std::string& name, DType& out) {
  for (DType t : {DType::float32, DType::int32, DType::bfloat16})
    if (name == dtype_name(t)) {
      out = t;
      return true;
    }
  return false;
}

}  // namespace mtk
