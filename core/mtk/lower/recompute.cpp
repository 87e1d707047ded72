#include <mtk/lower/recompute.hpp>

#include <algorithm>
#include <map>

namespace mtk {

namespace {

// The steps of one segment: its forward steps, those of them that may run again, and its backward
// steps.
struct Segment {
  int id = -1;
  std::vector<int> forward;
  std::vector<int> replayable;
  std::vector<int> backward;
  int replay_at = -1;
};

bool has(const std::vector<int>& v, int t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

constexpr int kUnowned = -3;  // no step touches the buffer
constexpr int kShared = -2;   // steps of several segments (or of none) touch it

// Per buffer: the one segment whose steps (forward or backward) are all that touch it.
std::vector<int> owners(const std::vector<Program::Step>& steps,
                        const std::vector<RecomputeTag>& tags, int num_buffers) {
  std::vector<int> owner(static_cast<size_t>(num_buffers), kUnowned);
  for (size_t s = 0; s < steps.size(); ++s) {
    const int seg = tags[s].segment >= 0 ? tags[s].segment : kShared;
    auto touch = [&](int t) {
      int& o = owner[static_cast<size_t>(t)];
      o = o == kUnowned || o == seg ? seg : kShared;
    };
    for (int t : steps[s].reads)
      touch(t);
    for (int t : steps[s].writes)
      touch(t);
  }
  return owner;
}

// Whether buffer t is written by a step after `after` and before `before`.
bool written_between(const std::vector<std::vector<int>>& writers, int t, int after, int before) {
  for (int w : writers[static_cast<size_t>(t)])
    if (w > after && w < before)
      return true;
  return false;
}

// The forward steps of `g` to run again before its backward, ascending. Droppable buffers are
// written by g's replayable forward steps and touched by g's steps only; the copies compute those
// g's backward reads. A step whose copy would see another value than the original (a kept buffer it
// reads or writes changes before the backward) is not copied: its outputs become kept.
std::vector<int> choose_copies(const std::vector<Program::Step>& steps, const Segment& g,
                               const std::vector<int>& owner,
                               const std::vector<std::vector<int>>& writers) {
  std::vector<char> droppable(owner.size(), 0);
  for (int s : g.replayable)
    for (int t : steps[static_cast<size_t>(s)].writes)
      droppable[static_cast<size_t>(t)] = owner[static_cast<size_t>(t)] == g.id;
  for (;;) {
    std::vector<char> need(owner.size(), 0);
    for (int s : g.backward)
      for (int t : steps[static_cast<size_t>(s)].reads)
        need[static_cast<size_t>(t)] = droppable[static_cast<size_t>(t)];
    std::vector<int> chosen;
    for (auto it = g.replayable.rbegin(); it != g.replayable.rend(); ++it) {
      const auto& st = steps[static_cast<size_t>(*it)];
      if (std::none_of(st.writes.begin(), st.writes.end(),
                       [&](int t) { return need[static_cast<size_t>(t)] != 0; }))
        continue;
      chosen.push_back(*it);
      for (int t : st.reads)
        if (droppable[static_cast<size_t>(t)])
          need[static_cast<size_t>(t)] = 1;
    }
    bool changed = false;
    for (int s : chosen) {
      const auto& st = steps[static_cast<size_t>(s)];
      auto hazard = [&](int t) {
        return !droppable[static_cast<size_t>(t)] && written_between(writers, t, s, g.replay_at);
      };
      const bool in_place_on_kept = std::any_of(st.writes.begin(), st.writes.end(), [&](int t) {
        return !droppable[static_cast<size_t>(t)] && has(st.reads, t);
      });
      if (in_place_on_kept || std::any_of(st.reads.begin(), st.reads.end(), hazard) ||
          std::any_of(st.writes.begin(), st.writes.end(), hazard)) {
        for (int t : st.writes)
          if (droppable[static_cast<size_t>(t)]) {
            droppable[static_cast<size_t>(t)] = 0;
            changed = true;
          }
      }
    }
    if (!changed) {
      std::reverse(chosen.begin(), chosen.end());
      return chosen;
    }
  }
}

}  // namespace

RecomputePlan plan_recomputation(const std::vector<Program::Step>& steps,
                                 const std::vector<RecomputeTag>& tags, int num_buffers) {
  const int n = static_cast<int>(steps.size());
  std::map<int, Segment> segments;
  for (int s = 0; s < n; ++s) {
    const RecomputeTag& tag = tags[static_cast<size_t>(s)];
    if (tag.segment < 0)
      continue;
    Segment& g = segments[tag.segment];
    g.id = tag.segment;
    if (!tag.backward) {
      g.forward.push_back(s);
      // A rename runs no kernel: a renamed replayed output (attention's keys read the norm's
      // output as memory_length) is replayed with it.
      if (tag.replay || steps[static_cast<size_t>(s)].kind.traits().rename)
        g.replayable.push_back(s);
    } else {
      if (g.replay_at < 0)
        g.replay_at = s;
      g.backward.push_back(s);
    }
  }
  std::vector<std::vector<int>> inserts(static_cast<size_t>(n));
  const std::vector<int> owner = owners(steps, tags, num_buffers);
  std::vector<std::vector<int>> writers(static_cast<size_t>(num_buffers));
  for (int s = 0; s < n; ++s)
    for (int t : steps[static_cast<size_t>(s)].writes)
      writers[static_cast<size_t>(t)].push_back(s);
  for (const auto& [id, g] : segments) {
    // A segment without backward steps (no gradient flows), or whose forward steps do not all
    // come before them, runs as it is.
    if (g.replay_at < 0 || g.forward.empty() || g.forward.back() > g.replay_at)
      continue;
    inserts[static_cast<size_t>(g.replay_at)] = choose_copies(steps, g, owner, writers);
  }
  RecomputePlan plan;
  for (int s = 0; s < n; ++s) {
    for (int c : inserts[static_cast<size_t>(s)]) {
      plan.source.push_back(c);
      plan.copy.push_back(true);
    }
    plan.source.push_back(s);
    plan.copy.push_back(false);
  }
  return plan;
}

std::vector<Program::Step> apply_recomputation(std::vector<Program::Step>&& steps,
                                               const RecomputePlan& plan) {
  // Copying every step doubled the lowering's largest allocation at start-up; only the
  // recomputed ones are needed twice.
  std::vector<size_t> last_use(steps.size(), plan.source.size());
  for (size_t i = 0; i < plan.source.size(); ++i)
    last_use[static_cast<size_t>(plan.source[i])] = i;
  std::vector<Program::Step> out;
  out.reserve(plan.source.size());
  for (size_t i = 0; i < plan.source.size(); ++i) {
    auto& from = steps[static_cast<size_t>(plan.source[i])];
    if (last_use[static_cast<size_t>(plan.source[i])] == i)
      out.push_back(std::move(from));
    else
      out.push_back(from);
    if (plan.copy[i])
      out.back().what = "recompute " + out.back().what;
  }
  return out;
}

std::vector<std::vector<int>> buffer_deaths(const std::vector<Program::Step>& steps,
                                            int num_buffers, const std::vector<int>& initial,
                                            const std::vector<int>& keep_to_end) {
  const int n = static_cast<int>(steps.size());
  std::vector<std::vector<int>> deaths(static_cast<size_t>(std::max(n, 1)));
  // Per buffer: the last step that wrote afresh, read or updated its current value (-1: fed
  // before the first step, -2: no value).
  std::vector<int> last(static_cast<size_t>(num_buffers), -2);
  for (int t : initial)
    last[static_cast<size_t>(t)] = -1;
  auto die = [&](int t) {
    const int at = last[static_cast<size_t>(t)];
    if (at > -2)
      deaths[static_cast<size_t>(std::max(at, 0))].push_back(t);
  };
  for (int s = 0; s < n; ++s) {
    const auto& st = steps[static_cast<size_t>(s)];
    for (int t : st.writes)
      if (!has(st.reads, t))
        die(t);  // the previous value dies where it was last used
    for (int t : st.reads)
      last[static_cast<size_t>(t)] = s;
    for (int t : st.writes)
      last[static_cast<size_t>(t)] = s;
  }
  std::vector<char> kept(static_cast<size_t>(num_buffers), 0);
  for (int t : keep_to_end)
    kept[static_cast<size_t>(t)] = 1;
  for (int t = 0; t < num_buffers; ++t)
    if (!kept[static_cast<size_t>(t)])
      die(t);
  return deaths;
}

}  // namespace mtk
