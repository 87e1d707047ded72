#pragma once
// bf16 operand copies kept between contractions (program.bf16_copies, kernels/bf16_copies.hpp):
// which tensors of a lowered program keep the bf16 copy their first bf16 contraction makes, and
// when the copy goes. A tensor keeps it when several bf16 contractions read it and either it is a
// variable (constant within a run: one conversion per weight and step instead of one per use) or
// its readers lie within a few steps (an output gradient read by both of its gradient products, the
// logits' gradient), so the copy costs memory only briefly. An activation read in the forward and
// again far later in the backward keeps no copy beside its float32 buffer (half of its bytes more
// at the peak); where only bf16 contractions read it there, mtk/lower/bf16_activations.hpp keeps
// the bits instead of the float32 buffer.

#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace mtk {

struct Bf16ReusePlan {
  std::vector<bool> keep;                    ///< by tensor: its first bf16 reader keeps a copy
  std::vector<std::vector<int>> drop_after;  ///< by step: tensors whose copies go after it
  /// by tensor: its producer writes the copy alone, into the tensor's buffer (Step::bf16_bits_only;
  /// every reader reads it only through its bf16 rounding, Step::bf16_exact_reads): no float32
  /// values and no bytes of its own (Program::bf16_bits_only)
  std::vector<bool> bits_only;
  int kept_tensors = 0;
  std::int64_t variable_copy_bytes = 0;  ///< the variables' copies, held through a run
  /// The most copies one variable's readers make per run (1: held through it).
  int variable_conversions = 0;
};

/// The steps' bf16 readers (Step::bf16_reads) apart at most this many steps share one copy.
constexpr int bf16_copy_window = 8;

/// The plan for `steps` over `tensors` tensors; `variables`: the variable tensors; `elements[t]`:
/// elements of t's slice. Adds each kept copy of a non-variable (2 bytes per element) to the
/// scratch of every step it is held across, so the memory prediction counts it; the variables'
/// copies are in variable_copy_bytes; an operand converted without a kept copy is scratch of its
/// step. `stored`: activations kept as bf16
/// (mtk/lower/bf16_activations.hpp), each the names of one buffer with the index of the step that
/// makes its bits: they keep their copies (the forward's first bf16 reader of any name makes it,
/// and that step takes it; each value made again from the bits carries them as its copy), one
/// copy per buffer held as scratch from that reader to the step before. `fixed`: tensors whose
/// float32 values must stay (fetched at the end, feeds), never bits_only; null: none is.
/// `variable_windows`: a variable's copy, too, is kept only across readers each within the window
/// of the one before, and made again by the next reader after a longer gap (the forward's and
/// the backward's reads of a weight: two conversions per run, no copy held between them).
Bf16ReusePlan plan_bf16_reuse(std::vector<Program::Step>& steps, std::size_t tensors,
                              const std::set<int>& variables,
                              const std::vector<std::int64_t>& elements,
                              const std::vector<std::pair<std::vector<int>, int>>& stored = {},
                              const std::set<int>* fixed = nullptr, bool variable_windows = false);

}  // namespace mtk
