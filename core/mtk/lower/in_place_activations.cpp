#include <mtk/lower/in_place_activations.hpp>

#include <algorithm>
#include <numeric>

namespace mtk {
namespace {

// Tensors that may share one buffer, with what the plan needs of each group: the last step
// reading any of them, the last step writing one, whether one is excluded. A name that takes a
// value more than once (a recomputed activation) may be written over after its last write and
// read: each write gets a fresh buffer, so only the value written last is still held then.
class Groups {
 public:
  Groups(const std::vector<Program::Step>& steps, int tensors, const std::set<int>& excluded)
      : parent_(static_cast<size_t>(tensors)),
        last_read_(static_cast<size_t>(tensors), -1),
        last_write_(static_cast<size_t>(tensors), -1),
        blocked_(static_cast<size_t>(tensors), false) {
    std::iota(parent_.begin(), parent_.end(), 0);
    for (size_t s = 0; s < steps.size(); ++s) {
      for (int r : steps[s].reads)
        last_read_[static_cast<size_t>(r)] = static_cast<int>(s);
      for (int w : steps[s].writes)
        last_write_[static_cast<size_t>(w)] = static_cast<int>(s);
    }
    for (int t : excluded)
      if (t >= 0 && t < tensors)
        blocked_[static_cast<size_t>(t)] = true;
  }

  int find(int t) {
    while (parent_[static_cast<size_t>(t)] != t)
      t = parent_[static_cast<size_t>(t)] =
          parent_[static_cast<size_t>(parent_[static_cast<size_t>(t)])];
    return t;
  }
  void join(int a, int b) {
    a = find(a);
    b = find(b);
    if (a == b)
      return;
    parent_[static_cast<size_t>(b)] = a;
    last_read_[static_cast<size_t>(a)] =
        std::max(last_read_[static_cast<size_t>(a)], last_read_[static_cast<size_t>(b)]);
    last_write_[static_cast<size_t>(a)] =
        std::max(last_write_[static_cast<size_t>(a)], last_write_[static_cast<size_t>(b)]);
    blocked_[static_cast<size_t>(a)] =
        blocked_[static_cast<size_t>(a)] || blocked_[static_cast<size_t>(b)];
  }
  // Whether the group of t may be written over at step s: nothing reads or writes it after s.
  bool free_after(int t, int s) {
    const int g = find(t);
    return !blocked_[static_cast<size_t>(g)] && last_read_[static_cast<size_t>(g)] <= s &&
           last_write_[static_cast<size_t>(g)] <= s;
  }

 private:
  std::vector<int> parent_;
  std::vector<int> last_read_;
  std::vector<int> last_write_;
  std::vector<bool> blocked_;
};

}  // namespace

InPlaceActivationsPlan plan_in_place_activations(
    const std::vector<Program::Step>& steps, int tensors, const std::set<int>& excluded,
    const std::function<bool(const Program::Step&)>& renames,
    const std::function<std::int64_t(int)>& bytes) {
  Groups groups(steps, tensors, excluded);
  for (const auto& st : steps) {
    if (renames(st) && !st.reads.empty())
      for (int w : st.writes)
        groups.join(st.reads.front(), w);
    for (const auto& [out, in] : st.in_place)  // the variables' updates
      groups.join(in, out);
  }
  InPlaceActivationsPlan plan;
  plan.in_place.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto& st = steps[s];
    for (const auto& pair : st.may_overwrite) {
      const int out = pair.first, in = pair.second;  // named: lambdas capture no bindings (C++17)
      const bool taken = std::any_of(st.in_place.begin(), st.in_place.end(),
                                     [&](const auto& p) { return p.first == out; }) ||
                         std::any_of(plan.in_place[s].begin(), plan.in_place[s].end(),
                                     [&](const auto& p) { return p.first == out; });
      if (taken || excluded.count(out) || bytes(out) != bytes(in) ||
          !groups.free_after(in, static_cast<int>(s)))
        continue;
      plan.in_place[s].emplace_back(out, in);
      groups.join(in, out);
    }
  }
  plan.group.resize(static_cast<size_t>(tensors));
  for (int t = 0; t < tensors; ++t)
    plan.group[static_cast<size_t>(t)] = groups.find(t);
  return plan;
}

}  // namespace mtk
