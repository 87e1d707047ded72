#pragma once
// Element types of tensors. float32 is the working type; int32 carries ids and indices. The type is
// a property of each tensor so that bf16 activations can be added without touching model code.

#include <cstdint>
#include <string>

namespace mtk {

enum class DType { float32, int32 };

inline const char* dtype_name(DType t) {
  return t == DType::float32 ? "float32" : "int32";
}
inline std::size_t dtype_bytes(DType) {
  return 4;
}

}  // namespace mtk
