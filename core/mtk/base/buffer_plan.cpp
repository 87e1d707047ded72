#include <mtk/base/buffer_plan.hpp>

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>

namespace mtk {

std::int64_t BufferPlan::total() const {
  return std::accumulate(object_size.begin(), object_size.end(), std::int64_t(0));
}

namespace {

// An object's lifetimes, disjoint, by first event.
using Intervals = std::map<std::int64_t, std::int64_t>;

bool overlaps(const Intervals& in, const PlannedBuffer& b) {
  // Disjoint intervals sorted by start end in the same order: only the last one starting before
  // b ends can reach into b.
  auto it = in.lower_bound(b.last);
  if (it == in.begin())
    return false;
  return std::prev(it)->second > b.first;
}

}  // namespace

BufferPlan plan_buffers(const std::vector<PlannedBuffer>& buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].first < buffers[b].first;
  });
  BufferPlan plan;
  plan.object_of.assign(buffers.size(), -1);
  std::vector<Intervals> lives;
  std::map<int, std::vector<int>> by_type;  // objects of each type, largest first
  for (size_t i : order) {
    const PlannedBuffer& b = buffers[i];
    auto& objects = by_type[b.type];
    // The smallest object free for b's whole lifetime: every object is at least as large as b
    // (larger buffers came first), so the best fit is the last one created that is free.
    int chosen = -1;
    for (auto it = objects.rbegin(); it != objects.rend() && chosen < 0; ++it)
      if (!overlaps(lives[static_cast<size_t>(*it)], b))
        chosen = *it;
    if (chosen < 0) {
      chosen = static_cast<int>(plan.object_size.size());
      plan.object_size.push_back(b.size);
      plan.object_type.push_back(b.type);
      lives.emplace_back();
      objects.push_back(chosen);
    }
    lives[static_cast<size_t>(chosen)].emplace(b.first, b.last);
    plan.object_of[i] = chosen;
  }
  return plan;
}

std::int64_t most_live(const std::vector<PlannedBuffer>& buffers) {
  std::map<std::int64_t, std::int64_t> delta;  // by event: size starting minus size ending
  for (const auto& b : buffers) {
    delta[b.first] += b.size;
    delta[b.last] -= b.size;
  }
  std::int64_t live = 0, most = 0;
  for (const auto& [event, d] : delta) {
    live += d;
    most = std::max(most, live);
  }
  return most;
}

}  // namespace mtk
