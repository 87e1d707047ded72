#pragma once
// bfloat16 storage of activations (program.bf16_activations): a float32 activation that only bf16
// contractions read from some step on, the next of them more than a few steps later (the
// backward's weight-gradient products reading the forward's layer-norm outputs, queries, keys,
// values and attention contexts), is kept across that distance as its bf16 values: a step after
// its last other reader converts it (or takes the bf16 copy its forward readers made,
// mtk/lower/bf16_reuse.hpp) and the float32 buffer dies; before each distant reader a step makes
// the float32 values again from the bits and leaves the bits as the kept copy, so the reader
// converts nothing. Those readers round their operand to bf16 anyway (Step::bf16_exact_reads), so
// results are bitwise unchanged, and the activation holds half its bytes in between (and half
// more at those readers, where the values and the bits are both held: under `auto` the lowering
// keeps the storage only where the predicted peak falls, Lowering::plan_buffers).

#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <functional>
#include <set>
#include <utility>
#include <vector>

namespace mtk {

/// One activation kept as bf16 across a distance.
struct Bf16StoredActivation {
  /// The tensor, written by a kernel, then the names renames gave its buffer.
  std::vector<int> names;
  int narrow_after = -1;  ///< the step after which its bits are made (index in the input)
  /// (step, name): before the step, that name's float32 values are made again.
  std::vector<std::pair<int, int>> widen_before;
  std::vector<int> readers;  ///< its readers after narrow_after (bf16 contractions only)
};

struct Bf16ActivationInputs {
  /// Tensors never stored so: variables and their copies, feeds, values kept to the end,
  /// non-float32 tensors. (An elementwise step that may write over a stored tensor's buffer does
  /// not: the in-place passes, which run later, see it read or written again.)
  std::set<int> excluded;
  /// Steps whose output may share the input's buffer (reshapes, aliases, relayouts that move
  /// nothing): the names of one buffer are stored together, after the last rename.
  std::function<bool(const Program::Step&)> renames;
  /// The least distance (in steps) between a reader and the previous use worth the conversions.
  int gap = 8;
};

/// The activations of `steps` (over `slots` tensors) to keep as bf16: each a tensor written by
/// one step that does not read it, with the names renames give its buffer (each written once),
/// that after its last use other than an exact bf16 read of one of them (a rename is such a use)
/// is read only by exact bf16 reads, at least one of them more than `gap` steps after the
/// previous use. The bits are made after the use before the first such gap, and a name's float32
/// values again before each of its readers more than `gap` steps after the last reader of the
/// values made before (or the first).
std::vector<Bf16StoredActivation> plan_bf16_activations(const std::vector<Program::Step>& steps,
                                                        std::size_t slots,
                                                        const Bf16ActivationInputs& in);

/// The stored activations' steps placed: for plan[k], narrow(k) right after its narrow_after and
/// widen(k, name) right before each (step, name) of widen_before. `bits[k]`, the slot narrow(k)
/// writes and widen(k) reads, is added to the reads of plan[k]'s readers, so the slot lives while a
/// widened value's readers may take it as their kept copy. `narrow_at[k]` receives narrow(k)'s
/// index in the returned steps.
std::vector<Program::Step> apply_bf16_activations(
    const std::vector<Program::Step>& steps, const std::vector<Bf16StoredActivation>& plan,
    const std::vector<int>& bits, const std::function<Program::Step(std::size_t)>& narrow,
    const std::function<Program::Step(std::size_t, int)>& widen, std::vector<int>& narrow_at);

}  // namespace mtk
