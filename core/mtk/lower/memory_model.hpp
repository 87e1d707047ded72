#pragma once
// What a run of a lowered program holds per rank, from its steps alone (no allocation): the
// buffers' lifetimes replayed in step order, as Program::run allocates and frees them.
//
// With buffer reuse on (the default, mtk/base/buffer_pool.hpp) a run's temporaries come from a
// pool. Without a plan it keeps every buffer it ever allocated and hands a free one out again only
// for a request of the same element type and size, so it holds, per (type, size), as many buffers
// as were ever alive at once: the sum over sizes of the most live buffers of each size, not the
// most live bytes at once. With a plan (program.buffer_plan, the default) the temporaries that die
// in the run share objects placed by the same planner over these lifetimes
// (mtk/base/buffer_plan.hpp), at step granularity where the pool sees acquires. All are
// deterministic functions of the step list. Scratch buffers a step's kernels allocate and free
// inside the step count when the lowering declares them (Program::Step::scratch); the others are
// not seen (tests/test_memory_prediction.cpp holds the whole within 10% of Kokkos' high-water
// mark).

#include <mtk/base/dtype.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace mtk {

/// The buffers of one tensor slot of a program (graph tensors and the lowering's temporaries).
struct SlotSize {
  DType dtype = DType::float32;
  std::int64_t elements = 0;
  std::int64_t bytes() const { return elements * static_cast<std::int64_t>(dtype_bytes(dtype)); }
};

/// The lifetimes the replay needs: per step the slots whose value dies after it, the slots fed
/// before the first step and those holding variable storage (never allocated by a step).
struct ProgramLifetimes {
  const std::vector<Program::Step>* steps = nullptr;
  const std::vector<std::vector<int>>* deaths = nullptr;
  std::vector<int> placeholders;
  std::vector<int> persistent;
  std::vector<SlotSize> slots;  ///< by slot id
  /// Variable storage outside the slots, held for the whole run: bfloat16 variables, whose slot
  /// is the float32 copy a step of the program reads from it.
  std::vector<SlotSize> stored;
  /// Whether the pool plans shared objects (program.buffer_plan): which pool pool_bytes describes.
  bool planned = true;
};

struct MemoryPrediction {
  /// Variables plus the most bytes of distinct buffers alive at once (a step's output shares
  /// its input's buffer when the step only renames it): what a run without reuse holds.
  std::int64_t live_peak_bytes = 0;
  /// Variables plus what the pool holds after a run: the planned or the per-size pool below,
  /// as ProgramLifetimes::planned says.
  std::int64_t pool_bytes = 0;
  std::int64_t pool_buffers = 0;  ///< buffers the pool holds, variables' storage included
  /// The pool's buffers: how many of each size in bytes (BufferPool::census() after a run).
  std::map<std::int64_t, std::int64_t> pool_census;
  /// Without a plan: per (type, size), the most buffers of that type and size alive at once, the
  /// variables' storage among them.
  std::int64_t per_size_pool_bytes = 0;
  std::int64_t per_size_pool_buffers = 0;
  /// With a plan (computed only then): the planned arenas, the variables' storage and the buffers
  /// held at the end of the run (kept per size); at least live_peak_bytes (the recorded first run
  /// holds that).
  std::int64_t planned_pool_bytes = 0;
  std::int64_t planned_pool_buffers = 0;
};

/// Replays the program's allocations and frees (Program::run's order: a step's outputs are
/// allocated while its inputs are alive, then the values that die after it are released).
MemoryPrediction predict_memory(const ProgramLifetimes& program);

}  // namespace mtk
