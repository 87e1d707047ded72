#pragma once
// In-place optimizer updates (program.in_place_updates): which update steps write a variable's new
// value into its storage instead of a new buffer. Without it the new values of every variable and
// optimizer slot live next to the old ones until the run's assignments swap them in: the
// optimizer's second copy of its state is the floor of every step's peak. A step may overwrite an
// input (Program::Step::may_overwrite) when
//   - the input is a variable read from its own storage (float32), or the float32 copy of a
//     bfloat16 variable (its new value is rounded into the storage by a step of its own),
//   - the run's one assignment to that variable sets it to the step's output, and
//   - no later step reads the old value under any name (reshapes, aliases and relayouts may hand
//     a tensor the variable's buffer).
// Program::run keeps the old value for a run that fetches the variable (under any name).

#include <mtk/runtime/program.hpp>

#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace mtk {

struct InPlacePlan {
  /// By step: the (output, input) pairs it overwrites.
  std::vector<std::vector<std::pair<int, int>>> in_place;
  /// By variable tensor updated in place: the tensors that may hold its buffer, itself included.
  std::map<int, std::vector<int>> aliases;
};

/// What the plan needs besides the steps.
struct InPlaceInputs {
  /// Variable tensors whose slot is their storage (their own element type).
  std::set<int> stored_variables;
  /// Variable -> the tensor the run's assignment sets it to; variables assigned more than once or
  /// by an accumulation (assign_add) are absent.
  std::map<int, int> set_to;
  /// Whether a step's output may be its input's buffer under another name.
  std::function<bool(const Program::Step&)> renames;
  /// Bytes of a tensor's slice (both sides of a pair must match).
  std::function<std::int64_t(int)> bytes;
};

/// The plan for `steps` (in run order) over `tensors` tensors.
InPlacePlan plan_in_place_updates(const std::vector<Program::Step>& steps, int tensors,
                                  const InPlaceInputs& in);

}  // namespace mtk
