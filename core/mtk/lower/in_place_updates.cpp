#include <mtk/lower/in_place_updates.hpp>

#include <algorithm>

namespace mtk {
namespace {

bool contains(const std::vector<int>& v, int t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

// The tensors that may hold variable v's buffer: v, and what renaming steps make of them.
std::vector<bool> aliases_of(const std::vector<Program::Step>& steps, int tensors, int v,
                             const InPlaceInputs& in) {
  std::vector<bool> alias(static_cast<size_t>(tensors), false);
  alias[static_cast<size_t>(v)] = true;
  for (const auto& st : steps) {
    if (!in.renames(st))
      continue;
    bool reads_alias = false;
    for (int r : st.reads)
      reads_alias = reads_alias || alias[static_cast<size_t>(r)];
    if (reads_alias)
      for (int w : st.writes)
        alias[static_cast<size_t>(w)] = true;
  }
  return alias;
}

// Whether step s may write `out` over variable `var`'s storage.
bool may_update(const std::vector<Program::Step>& steps, size_t s, int out, int var,
                const std::vector<bool>& alias, const InPlaceInputs& in) {
  if (!in.stored_variables.count(var) || in.bytes(out) != in.bytes(var))
    return false;
  auto it = in.set_to.find(var);
  if (it == in.set_to.end() || it->second != out)
    return false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto& st = steps[k];
    if ((k >= s && contains(st.writes, var)) || (k != s && contains(st.writes, out)))
      return false;  // the variable or the new value written elsewhere (a bfloat16 variable's
                     // float32 copy is written by its read step, before)
    if (k > s)
      for (int r : st.reads)
        if (alias[static_cast<size_t>(r)])
          return false;  // the old value read after the update
  }
  return true;
}

}  // namespace

InPlacePlan plan_in_place_updates(const std::vector<Program::Step>& steps, int tensors,
                                  const InPlaceInputs& in) {
  InPlacePlan plan;
  plan.in_place.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s)
    for (const auto& [out, var] : steps[s].may_overwrite) {
      if (plan.aliases.count(var))
        continue;  // one update per variable
      const std::vector<bool> alias = aliases_of(steps, tensors, var, in);
      if (!may_update(steps, s, out, var, alias, in))
        continue;
      plan.in_place[s].emplace_back(out, var);
      auto& names = plan.aliases[var];
      for (int t = 0; t < tensors; ++t)
        if (alias[static_cast<size_t>(t)])
          names.push_back(t);
    }
  return plan;
}

}  // namespace mtk
