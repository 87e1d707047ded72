// mtk/lower/bf16_reuse.hpp
#include <mtk/kernels/einsum.hpp>
#include <mtk/lower/bf16_reuse.hpp>
#include <mtk/lower/lowering_context.hpp>

#include <algorithm>

namespace mtk {
namespace {

bool has(const std::vector<int>& v, int t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// A copy of t per run of its bf16 readers (from `first` to `last`) each within the window of the
// one before: made by the run's first, dropped after its last, scratch of the steps between.
// Returns the number of copies.
int hold_in_windows(std::vector<Program::Step>& steps, Bf16ReusePlan& plan, int t, int first,
                    int last, std::int64_t elements) {
  int start = first, prev = first, copies = 0;
  auto hold = [&](int from, int to) {
    plan.drop_after[static_cast<size_t>(to)].push_back(t);
    for (int s = from; s <= to; ++s)
      steps[static_cast<size_t>(s)].scratch.emplace_back(DType::float32, (elements + 1) / 2);
    ++copies;
  };
  for (int s = first + 1; s <= last; ++s) {
    if (!has(steps[static_cast<size_t>(s)].bf16_reads, t))
      continue;
    if (s - prev > bf16_copy_window) {
      hold(start, prev);
      start = s;
    }
    prev = s;
  }
  hold(start, prev);
  return copies;
}

}  // namespace

Bf16ReusePlan plan_bf16_reuse(std::vector<Program::Step>& steps, std::size_t tensors,
                              const std::set<int>& variables,
                              const std::vector<std::int64_t>& elements,
                              const std::vector<std::pair<std::vector<int>, int>>& stored,
                              const std::set<int>* fixed, bool variable_windows) {
  Bf16ReusePlan plan;
  plan.keep.assign(tensors, false);
  plan.bits_only.assign(tensors, false);
  plan.drop_after.assign(steps.size(), {});
  std::vector<int> first(tensors, -1), last(tensors, -1), reads(tensors, 0), writers(tensors, 0);
  std::vector<bool> rounded_only(tensors, true);  // every reader reads only its bf16 rounding
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int t : steps[s].bf16_reads) {
      const auto k = static_cast<size_t>(t);
      if (first[k] < 0)
        first[k] = static_cast<int>(s);
      last[k] = static_cast<int>(s);
      ++reads[k];
    }
    for (int t : steps[s].reads)
      if (!has(steps[s].bf16_exact_reads, t))
        rounded_only[static_cast<size_t>(t)] = false;
    for (int t : steps[s].writes)
      ++writers[static_cast<size_t>(t)];
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
    if (variable && !variable_windows) {
      plan.variable_copy_bytes += 2 * elements[k];
      plan.variable_conversions = std::max(plan.variable_conversions, 1);
      continue;
    }
    if (variable) {
      plan.variable_conversions =
          std::max(plan.variable_conversions,
                   hold_in_windows(steps, plan, t, first[k], last[k], elements[k]));
      continue;
    }
    plan.drop_after[static_cast<size_t>(last[k])].push_back(t);
    const std::int64_t words = (elements[k] + 1) / 2;  // bf16 pairs as float32 words
    int from = first[k];  // a producer that writes the copy holds it from its own step
    for (int s = first[k] - 1; s >= 0; --s)
      if (has(steps[static_cast<size_t>(s)].bf16_writes, t)) {
        from = s;
        break;
      }
    // Read only through its rounding: the producer may write the bits alone, in its own buffer.
    if (from < first[k] && has(steps[static_cast<size_t>(from)].bf16_bits_only, t) &&
        rounded_only[k] && writers[k] == 1 && fixed && !fixed->count(t)) {
      plan.bits_only[k] = true;
      continue;
    }
    for (int s = from; s <= last[k]; ++s)
      steps[static_cast<size_t>(s)].scratch.emplace_back(DType::float32, words);
  }
  // An operand without a kept copy is converted into a buffer held for its product only.
  for (auto& st : steps)
    for (int t : st.bf16_reads)
      if (!plan.keep[static_cast<size_t>(t)])
        st.scratch.emplace_back(DType::float32, (elements[static_cast<size_t>(t)] + 1) / 2);
  return plan;
}

// bf16 operand copies (mtk/lower/bf16_reuse.hpp), where bf16 contractions run on oneDNN's bf16
// matmul (the path that converts operands to bf16 storage).
void Lowering::plan_bf16_copies() {
  bool any = false;
  for (const auto& st : p_->steps_)
    any = any || !st.bf16_reads.empty();
  if (!any || !options_.bf16_copies || !kernels::bf16_copies_used())
    return;
  std::set<int> variables;
  for (const auto& [t, storage] : p_->variables_)
    variables.insert(t);
  std::vector<std::int64_t> elements(p_->layouts_.size());
  for (size_t t = 0; t < elements.size(); ++t)
    elements[t] = local(static_cast<int>(t)).num_elements();
  // A gradient held as its bits alone is a bf16 activation too: bf16_activations off keeps it
  // float32, its copy beside it. Only oneDNN's body reads such an operand from its copy (others
  // would widen it back, kernels/impl/einsum_spec.hpp).
  const bool bits_only = options_.bf16_activations != Bf16Activations::off &&
                         kernels::bf16_gemm() == kernels::Bf16Gemm::onednn;
  std::set<int> fixed(keep_to_end_.begin(), keep_to_end_.end());
  fixed.insert(p_->placeholders_.begin(), p_->placeholders_.end());
  fixed.insert(p_->persistent_.begin(), p_->persistent_.end());
  Bf16ReusePlan plan =
      plan_bf16_reuse(p_->steps_, elements.size(), variables, elements, bf16_stored_,
                      bits_only ? &fixed : nullptr, bf16_variable_windows_);
  p_->bf16_keep_ = std::move(plan.keep);
  p_->bf16_bits_only_ = std::move(plan.bits_only);
  p_->bf16_drop_after_ = std::move(plan.drop_after);
  p_->bf16_kept_tensors_ = plan.kept_tensors;
  bf16_variable_copy_bytes_ = plan.variable_copy_bytes;
  p_->bf16_variable_conversions_ = plan.variable_conversions;
}

}  // namespace mtk
