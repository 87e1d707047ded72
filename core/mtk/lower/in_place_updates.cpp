#include <mtk/lower/in_place_updates.hpp>

#include <algorithm>

namespace mtk {
namespace {

// What the plan asks of the steps, computed once: the renaming steps in order, and per tensor
// the steps writing it and the last step reading it.
struct StepIndex {
  std::vector<size_t> renaming;
  std::vector<std::vector<size_t>> writers;
  std::vector<long> last_read;
  StepIndex(const std::vector<Program::Step>& steps, int tensors, const InPlaceInputs& in)
      : writers(static_cast<size_t>(tensors)), last_read(static_cast<size_t>(tensors), -1) {
    for (size_t s = 0; s < steps.size(); ++s) {
      if (in.renames(steps[s]))
        renaming.push_back(s);
      for (int w : steps[s].writes)
        writers[static_cast<size_t>(w)].push_back(s);
      for (int r : steps[s].reads)
        last_read[static_cast<size_t>(r)] = static_cast<long>(s);
    }
  }
};

// The tensors that may hold variable v's buffer: v, and what renaming steps make of them.
std::vector<int> aliases_of(const std::vector<Program::Step>& steps, int tensors, int v,
                            const StepIndex& index) {
  std::vector<bool> alias(static_cast<size_t>(tensors), false);
  std::vector<int> names{v};
  alias[static_cast<size_t>(v)] = true;
  for (size_t s : index.renaming) {
    const auto& st = steps[s];
    bool reads_alias = false;
    for (int r : st.reads)
      reads_alias = reads_alias || alias[static_cast<size_t>(r)];
    if (reads_alias)
      for (int w : st.writes)
        if (!alias[static_cast<size_t>(w)]) {
          alias[static_cast<size_t>(w)] = true;
          names.push_back(w);
        }
  }
  return names;
}

// Whether step s may write `out` over variable `var`'s storage.
bool may_update(size_t s, int out, int var, const std::vector<int>& aliases,
                const InPlaceInputs& in, const StepIndex& index) {
  if (!in.stored_variables.count(var) || in.bytes(out) != in.bytes(var))
    return false;
  auto it = in.set_to.find(var);
  if (it == in.set_to.end() || it->second != out)
    return false;
  for (size_t k : index.writers[static_cast<size_t>(var)])
    if (k >= s)
      return false;  // the variable written again (a bfloat16 variable's float32 copy is written
                     // by its read step, before)
  for (size_t k : index.writers[static_cast<size_t>(out)])
    if (k != s)
      return false;  // the new value written elsewhere
  for (int t : aliases)
    if (index.last_read[static_cast<size_t>(t)] > static_cast<long>(s))
      return false;  // the old value read after the update
  return true;
}

}  // namespace

InPlacePlan plan_in_place_updates(const std::vector<Program::Step>& steps, int tensors,
                                  const InPlaceInputs& in) {
  const StepIndex index(steps, tensors, in);
  InPlacePlan plan;
  plan.in_place.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s)
    for (const auto& [out, var] : steps[s].may_overwrite) {
      if (plan.aliases.count(var) || !in.stored_variables.count(var))
        continue;  // one update per variable
      std::vector<int> aliases = aliases_of(steps, tensors, var, index);
      if (!may_update(s, out, var, aliases, in, index))
        continue;
      plan.in_place[s].emplace_back(out, var);
      std::sort(aliases.begin(), aliases.end());
      plan.aliases[var] = std::move(aliases);
    }
  return plan;
}

}  // namespace mtk
