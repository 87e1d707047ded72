#pragma once
// Planned sharing of buffers whose lifetimes are known: each buffer is assigned to a shared object
// that no other buffer of that object overlaps in time, so a run holds about the most bytes alive
// at once instead of, per size, the most buffers of that size alive at once (BufferPool's exact-fit
// reuse). Two strategies of Pisarchyk and Lee ("Efficient Memory Management for Deep Neural Net
// Inference", 2020), the smaller total kept: greedy by size (buffers from the largest down, each
// into the smallest existing object free for its whole lifetime, else a new object of its size) and
// greedy by breadth (the events with the most bytes alive first, their buffers largest first; a
// free smaller object may grow). Objects are per element type: no buffer is reinterpreted.

#include <cstdint>
#include <utility>
#include <vector>

namespace mtk {

/// One buffer to place: its element type (any id; buffers of different ids never share), its size
/// (elements or bytes, the same unit for every buffer of one type) and its lifetime [first, last)
/// in some event order (it is alive from event `first` until before event `last`).
struct PlannedBuffer {
  int type = 0;
  std::int64_t size = 0;
  std::int64_t first = 0;
  std::int64_t last = 0;
};

struct BufferPlan {
  std::vector<int> object_of;             ///< per buffer: the index of its object
  std::vector<int> object_type;           ///< per object: the type of its buffers
  std::vector<std::int64_t> object_size;  ///< per object: its largest buffer's size
  /// The sum of the objects' sizes (units of each type's size; callers sum bytes per type).
  std::int64_t total() const;
};

/// Assigns every buffer to an object; buffers of one object never overlap in time. Deterministic.
BufferPlan plan_buffers(const std::vector<PlannedBuffer>& buffers);

/// An offset plan: each buffer at an offset in one arena per type (Pisarchyk and Lee's greedy for
/// offsets: buffers in some order, each into the smallest gap between the buffers already placed
/// that overlap it in time, else above them; the smallest total of three orders: largest first,
/// by breadth, longest lives first). Buffers that overlap in time never overlap in the arena.
struct OffsetPlan {
  std::vector<std::int64_t> offset;                  ///< per buffer: where it starts in its arena
  std::vector<std::pair<int, std::int64_t>> arenas;  ///< (type, size) of each type's arena
  std::int64_t total() const;                        ///< the sum of the arenas' sizes
};
OffsetPlan plan_offsets(const std::vector<PlannedBuffer>& buffers);

/// Where each buffer lives: arena `arena_of[i]` from element `offset[i]`; per arena its type and
/// size. What BufferPool allocates (leased ranges, mtk/base/leased_view.hpp) and the memory
/// prediction counts: the smaller total of plan_offsets (an arena per type) and plan_buffers (an
/// arena per object, each buffer at its start); the object plan where the two tie.
struct Placement {
  std::vector<int> arena_of;
  std::vector<std::int64_t> offset;
  std::vector<std::pair<int, std::int64_t>> arenas;  ///< (type, size)
  std::int64_t total() const;
};
Placement plan_placement(const std::vector<PlannedBuffer>& buffers);

/// The most `size` alive at once: a lower bound of any plan's total (for tests and reports).
std::int64_t most_live(const std::vector<PlannedBuffer>& buffers);

}  // namespace mtk
