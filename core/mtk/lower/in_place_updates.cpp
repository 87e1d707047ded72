#include <mtk/lower/in_place_updates.hpp>

#include <algorithm>
#include <map>

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

// Per stored variable v, the tensors that may hold its buffer: v, and what renaming steps make of
// them (in the order found). One pass over the renaming steps for every variable at once: each
// variable's names grow in step order as a pass of its own would find them.
std::map<int, std::vector<int>> aliases_of(const std::vector<Program::Step>& steps, int tensors,
                                           const InPlaceInputs& in, const StepIndex& index) {
  std::vector<std::vector<int>> roots(static_cast<size_t>(tensors));  // per tensor: its variables
  std::map<int, std::vector<int>> names;
  for (int v : in.stored_variables) {
    roots[static_cast<size_t>(v)].push_back(v);
    names[v] = {v};
  }
  std::vector<int> found;
  for (size_t s : index.renaming) {
    const auto& st = steps[s];
    found.clear();
    for (int r : st.reads)
      for (int v : roots[static_cast<size_t>(r)])
        if (std::find(found.begin(), found.end(), v) == found.end())
          found.push_back(v);
    for (int v : found)
      for (int w : st.writes) {
        auto& of = roots[static_cast<size_t>(w)];
        if (std::find(of.begin(), of.end(), v) == of.end()) {
          of.push_back(v);
          names[v].push_back(w);
        }
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
  const std::map<int, std::vector<int>> names = aliases_of(steps, tensors, in, index);
  InPlacePlan plan;
  plan.in_place.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s)
    for (const auto& [out, var] : steps[s].may_overwrite) {
      if (plan.aliases.count(var) || !in.stored_variables.count(var))
        continue;  // one update per variable
      std::vector<int> aliases = names.at(var);
      if (!may_update(s, out, var, aliases, in, index))
        continue;
      plan.in_place[s].emplace_back(out, var);
      std::sort(aliases.begin(), aliases.end());
      plan.aliases[var] = std::move(aliases);
    }
  return plan;
}

}  // namespace mtk
