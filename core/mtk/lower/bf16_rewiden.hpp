#pragma once
// bfloat16 variables widened at each distant reader: a bfloat16 variable's tensor is a float32
// copy that a read step makes of its storage (ops/sources.cpp). Made once, that copy lives from
// the forward's first reader to the optimizer's update, so bf16 variables held more than float32
// ones updated in place. Instead, a reader more than `gap` steps after the copy's last use gets a
// fresh copy right before it (the read step again): each copy lives a few steps, the widening is
// exact, and results are bitwise unchanged. Readers after the step that rounds the variable's new
// value into its storage keep the old copy.

#include <mtk/runtime/program.hpp>

#include <map>
#include <vector>

namespace mtk {

/// `read_steps`: per bfloat16 variable tensor, its read step's index in `steps`; `stores`: per
/// such tensor, the index of the first step that writes its storage (steps.size() when none).
/// Returns the new step list.
std::vector<Program::Step> rewiden_bf16_variables(const std::vector<Program::Step>& steps,
                                                  const std::map<int, int>& read_steps,
                                                  const std::map<int, int>& stores, int gap);

}  // namespace mtk
