// mtk/lower/bf16_reuse.hpp
#include <mtk/lower/bf16_reuse.hpp>

#include <algorithm>

namespace mtk {

Bf16ReusePlan plan_bf16_reuse(std::vector<Program::Step>& steps, std::size_t tensors,
                              const std::set<int>& variables,
                              const std::vector<std::int64_t>& elements,
                              const std::vector<std::pair<std::vector<int>, int>>& stored) {
  Bf16ReusePlan plan;
  plan.keep.assign(tensors, false);
  plan.drop_after.assign(steps.size(), {});
  std::vector<int> first(tensors, -1), last(tensors, -1), reads(tensors, 0);
  for (size_t s = 0; s < steps.size(); ++s)
    for (int t : steps[s].bf16_reads) {
      const auto k = static_cast<size_t>(t);
      if (first[k] < 0)
        first[k] = static_cast<int>(s);
      last[k] = static_cast<int>(s);
      ++reads[k];
    }
  std::vector<bool> is_stored(tensors, false);
  for (const auto& [names, narrow] : stored) {
    int from = narrow;  // the first bf16 reader of any name before the bits are made
    for (int t : names) {
      const auto k = static_cast<size_t>(t);
      is_stored[k] = plan.keep[k] = true;
      ++plan.kept_tensors;
      if (first[k] >= 0)
        from = std::min(from, first[k]);
    }
    const std::int64_t words = (elements[static_cast<size_t>(names.front())] + 1) / 2;
    for (int s = from; s < narrow; ++s)
      steps[static_cast<size_t>(s)].scratch.emplace_back(DType::float32, words);
  }
  for (size_t k = 0; k < tensors; ++k) {
    const int t = static_cast<int>(k);
    if (reads[k] < 2 || is_stored[k])
      continue;
    const bool variable = variables.count(t) > 0;
    // A tensor rewritten in place between its readers (an allreduce of a pending sum) is not kept.
    bool rewritten = false;
    for (int s = first[k] + 1; s < last[k] && !rewritten; ++s)
      rewritten = std::find(steps[static_cast<size_t>(s)].writes.begin(),
                            steps[static_cast<size_t>(s)].writes.end(),
                            t) != steps[static_cast<size_t>(s)].writes.end();
    if (rewritten || (!variable && last[k] - first[k] > bf16_copy_window))
      continue;
    plan.keep[k] = true;
    ++plan.kept_tensors;
    // A variable's copy is held through the run's end (its readers in the backward follow long
    // after; the copy goes with the run): counted as held throughout. Another's from its first
    // reader through its last: scratch of those steps.
    if (variable) {
      plan.variable_copy_bytes += 2 * elements[k];
      continue;
    }
    plan.drop_after[static_cast<size_t>(last[k])].push_back(t);
    const std::int64_t words = (elements[k] + 1) / 2;  // bf16 pairs as float32 words
    int from = first[k];  // a producer that writes the copy holds it from its own step
    for (int s = first[k] - 1; s >= 0; --s) {
      const auto& w = steps[static_cast<size_t>(s)].bf16_writes;
      if (std::find(w.begin(), w.end(), t) != w.end()) {
        from = s;
        break;
      }
    }
    for (int s = from; s <= last[k]; ++s)
      steps[static_cast<size_t>(s)].scratch.emplace_back(DType::float32, words);
  }
  return plan;
}

}  // namespace mtk
