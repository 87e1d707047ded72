#pragma once
// What a collective moves and how it combines: the element types a Communicator sends and the
// reduction operators, shared by the Communicator and the shared-memory reducer.

#include <type_traits>

namespace mtk {

enum class ReduceOp { sum, max, min };

namespace detail {

/// The element types a Communicator sends; each maps to one MPI datatype (communicator.cpp).
enum class Datatype {
  character,
  int8,
  uint8,
  int16,
  uint16,
  int32,
  uint32,
  int64,
  uint64,
  f32,
  f64
};

template <class T>
constexpr Datatype datatype_of() {
  static_assert(
      std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, long double>,
      "mtk::Communicator sends arithmetic types other than bool and long double");
  if constexpr (std::is_same_v<T, char>) {
    return Datatype::character;
  } else if constexpr (std::is_floating_point_v<T>) {
    return sizeof(T) == 4 ? Datatype::f32 : Datatype::f64;
  } else if constexpr (std::is_signed_v<T>) {
    return sizeof(T) == 1   ? Datatype::int8
           : sizeof(T) == 2 ? Datatype::int16
           : sizeof(T) == 4 ? Datatype::int32
                            : Datatype::int64;
  } else {
    return sizeof(T) == 1   ? Datatype::uint8
           : sizeof(T) == 2 ? Datatype::uint16
           : sizeof(T) == 4 ? Datatype::uint32
                            : Datatype::uint64;
  }
}

}  // namespace detail

}  // namespace mtk
