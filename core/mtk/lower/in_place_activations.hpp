#pragma once
// In-place elementwise steps (program.in_place_updates): an elementwise step whose input dies there
// writes its output into that input's buffer instead of a new one, so the two are never alive
// together (the logits and their gradient, a gradient and its running sum over microbatches, the
// residual stream). A step may overwrite an input (Program::Step::may_overwrite, declared where
// its kernel reads each value before writing the same position) when
//   - the input's buffer is no variable's storage, feed or value assigned at the run's end,
//   - and no later step reads or writes the value under any name it has (renames, earlier
//     in-place outputs). A recomputed activation takes a value twice, each in a fresh buffer: its
//     last reader may write over the value written last (the logits' gradient over recomputed
//     logits with model.loss_chunks).
// Program::run writes out of place in a run that fetches any of those names.

#include <mtk/runtime/program.hpp>

#include <functional>
#include <set>
#include <utility>
#include <vector>

namespace mtk {

struct InPlaceActivationsPlan {
  /// By step: the (output, input) pairs it overwrites.
  std::vector<std::vector<std::pair<int, int>>> in_place;
  /// By tensor: the group of tensors that may share its buffer (a representative tensor id), so
  /// a run that fetches one of them keeps the group out of place.
  std::vector<int> group;
};

/// The plan for `steps` (in run order, the variables' in-place pairs already decided) over
/// `tensors` tensors. `excluded`: tensors whose buffer must not be written over (variables,
/// feeds, assigned values); `renames`: whether a step's output may be its first input's buffer
/// under another name; `bytes`: a tensor's slice in bytes (both sides of a pair must match).
InPlaceActivationsPlan plan_in_place_activations(
    const std::vector<Program::Step>& steps, int tensors, const std::set<int>& excluded,
    const std::function<bool(const Program::Step&)>& renames,
    const std::function<std::int64_t(int)>& bytes);

}  // namespace mtk
