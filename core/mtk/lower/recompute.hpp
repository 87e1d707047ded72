#pragma once
// Recomputation (TransformerConfig::recompute, docs/memory.md): the steps of a segment's forward
// ops run a second time, right before the first step of the segment's gradient ops, writing the
// same buffers; the forward's values of those buffers die after their last forward reader, so a
// recomputed layer holds nothing between the forward and its backward but the tensors that other
// steps read (its output, the next layer's input). The same steps run on the same inputs, so the
// values are bitwise those the forward computed.
//
// And the buffers' lifetimes: with a buffer written more than once (a recomputed one), a buffer's
// value dies after the last step that reads it before the next step writes it afresh.

#include <mtk/graph/op_def.hpp>
#include <mtk/runtime/program.hpp>

#include <vector>

namespace mtk {

/// The copies of forward steps to run again, and where.
struct RecomputePlan {
  /// For each step of the new list, the index in the old list of the step it is (an original
  /// step) or copies (a recomputed one); `copy[i]` tells which.
  std::vector<int> source;
  std::vector<bool> copy;
};

/// Inserts, before the first backward step of each segment (`tags[s]`: the tag of the op step s
/// was lowered for), copies of the segment's replayable forward steps (RecomputeTag::replay) that
/// compute the buffers its backward reads and that nothing outside the segment reads. A forward
/// step whose copy would read a buffer that some step changes before the copy runs is not copied
/// (its outputs are kept). The copies of in-place allreduces keep their Step::sum_axes.
/// `num_buffers`: the buffer ids in use.
RecomputePlan plan_recomputation(const std::vector<Program::Step>& steps,
                                 const std::vector<RecomputeTag>& tags, int num_buffers);

/// The steps of the new list `plan` describes (each step moved to its last place in it, copied to
/// the others).
std::vector<Program::Step> apply_recomputation(std::vector<Program::Step>&& steps,
                                               const RecomputePlan& plan);

/// Per step, the buffers whose value dies after it: the last step that reads or updates a value
/// before a step writes the buffer afresh (or the end). A value that is never read dies after the
/// step that wrote it; `initial` buffers (fed before the first step) count as written before it;
/// the last values of `keep_to_end` never die.
std::vector<std::vector<int>> buffer_deaths(const std::vector<Program::Step>& steps,
                                            int num_buffers, const std::vector<int>& initial,
                                            const std::vector<int>& keep_to_end);

}  // namespace mtk
