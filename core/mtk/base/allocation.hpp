#pragma once
// What an allocation failure says: MTK's own error naming the buffer, its bytes, the rank and what
// the start-up memory check predicted, instead of the allocator's bare message.

#include <mtk/base/error.hpp>

#include <cstdint>
#include <string>

namespace mtk {

/// An allocation that failed; Program::run adds the step (and so the tensor) it was for.
class AllocationError : public Error {
 public:
  explicit AllocationError(const std::string& what) : Error(what) {}
};

/// Recorded by the start-up memory check (check_memory_fits) for later allocation failures:
/// this process's rank, the predicted peak bytes per rank and the bytes it may use (-1: unknown).
void set_memory_context(int rank, std::int64_t predicted_peak_bytes, std::int64_t budget_bytes);

/// Throws AllocationError: "mtk::allocate: cannot allocate <bytes> for '<label>' on rank <r> (the
/// memory check predicted ...); <cause>".
[[noreturn]] void allocation_failed(const std::string& label, std::int64_t bytes,
                                    const std::string& cause);

}  // namespace mtk
