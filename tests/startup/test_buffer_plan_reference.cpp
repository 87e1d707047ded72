// The buffer plans against the quadratic implementation they replaced (the reference below is
// that code, unchanged but for its namespace): the same objects, offsets and arenas for random
// lifetimes, for programs' lifetimes, and for empty or reversed lives.
#include <mtk/base/buffer_plan.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

namespace reference {
using namespace mtk;

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

// Places buffers one at a time into per-type objects; an object grows to its largest buffer.
class Placer {
 public:
  explicit Placer(const std::vector<PlannedBuffer>& buffers) : buffers_(buffers) {
    plan_.object_of.assign(buffers.size(), -1);
  }

  // Into the smallest free object at least as large, else the largest free one (grown), else a
  // new one.
  void place(size_t i) {
    const PlannedBuffer& b = buffers_[i];
    auto& objects = by_type_[b.type];
    int fit = -1, grow = -1;
    for (int o : objects) {
      if (overlaps(lives_[static_cast<size_t>(o)], b))
        continue;
      const std::int64_t size = plan_.object_size[static_cast<size_t>(o)];
      if (size >= b.size && (fit < 0 || size < plan_.object_size[static_cast<size_t>(fit)]))
        fit = o;
      if (size < b.size && (grow < 0 || size > plan_.object_size[static_cast<size_t>(grow)]))
        grow = o;
    }
    int chosen = fit >= 0 ? fit : grow;
    if (chosen < 0) {
      chosen = static_cast<int>(plan_.object_size.size());
      plan_.object_size.push_back(0);
      plan_.object_type.push_back(b.type);
      lives_.emplace_back();
      objects.push_back(chosen);
    }
    auto& size = plan_.object_size[static_cast<size_t>(chosen)];
    size = std::max(size, b.size);
    lives_[static_cast<size_t>(chosen)].emplace(b.first, b.last);
    plan_.object_of[i] = chosen;
  }
  BufferPlan take() { return std::move(plan_); }

 private:
  const std::vector<PlannedBuffer>& buffers_;
  BufferPlan plan_;
  std::vector<Intervals> lives_;
  std::map<int, std::vector<int>> by_type_;
};

std::vector<size_t> by_size(const std::vector<PlannedBuffer>& buffers) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].first < buffers[b].first;
  });
  return order;
}

// The order greedy by breadth places buffers in: the events with the most bytes alive first, each
// event's buffers not yet placed from the largest down.
std::vector<size_t> by_breadth(const std::vector<PlannedBuffer>& buffers) {
  std::map<std::int64_t, std::int64_t> breadth;  // by event: the bytes alive there
  for (const auto& b : buffers) {
    breadth[b.first] += 0;
    breadth[b.last] += 0;
  }
  for (const auto& b : buffers)
    for (auto it = breadth.lower_bound(b.first); it != breadth.end() && it->first < b.last; ++it)
      it->second += b.size;
  std::vector<std::pair<std::int64_t, std::int64_t>> events(breadth.begin(), breadth.end());
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const std::vector<size_t> sized = by_size(buffers);
  std::vector<size_t> out;
  std::vector<char> taken(buffers.size(), 0);
  for (const auto& [event, bytes] : events) {
    for (size_t i : sized)
      if (!taken[i] && buffers[i].first <= event && event < buffers[i].last) {
        taken[i] = 1;
        out.push_back(i);
      }
    if (out.size() == buffers.size())
      break;
  }
  return out;
}

// The longest lives first, each length's buffers from the largest down.
std::vector<size_t> by_duration(const std::vector<PlannedBuffer>& buffers) {
  std::vector<size_t> order = by_size(buffers);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].last - buffers[a].first > buffers[b].last - buffers[b].first;
  });
  return order;
}

// Objects for the buffers in `order` (Placer::place). Largest first, no object grows (every
// object is at least as large as the buffer placed); by breadth, a free smaller one may.
BufferPlan objects_in_order(const std::vector<PlannedBuffer>& buffers,
                            const std::vector<size_t>& order) {
  Placer placer(buffers);
  for (size_t i : order)
    placer.place(i);
  return placer.take();
}

// Offsets for the buffers in `order`: each into the smallest gap between the buffers of its type
// already placed that are alive with it, else above them all.
OffsetPlan offsets_in_order(const std::vector<PlannedBuffer>& buffers,
                            const std::vector<size_t>& order) {
  OffsetPlan plan;
  plan.offset.assign(buffers.size(), 0);
  std::map<int, std::int64_t> arena;       // by type: its size so far
  std::map<int, std::vector<size_t>> put;  // by type: the buffers placed, by offset
  for (size_t i : order) {
    const PlannedBuffer& b = buffers[i];
    auto& placed = put[b.type];
    std::int64_t end = 0, best = -1, best_gap = 0;
    for (size_t j : placed) {
      const PlannedBuffer& o = buffers[j];
      if (o.last <= b.first || b.last <= o.first)
        continue;
      const std::int64_t gap = plan.offset[j] - end;
      if (gap >= b.size && (best < 0 || gap < best_gap))
        std::tie(best, best_gap) = std::make_pair(end, gap);
      end = std::max(end, plan.offset[j] + o.size);
    }
    plan.offset[i] = best >= 0 ? best : end;
    arena[b.type] = std::max(arena[b.type], plan.offset[i] + b.size);
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), i,
                         [&](size_t x, size_t y) { return plan.offset[x] < plan.offset[y]; }),
        i);
  }
  for (const auto& [type, size] : arena)
    plan.arenas.push_back({type, size});
  return plan;
}

}  // namespace

BufferPlan plan_buffers(const std::vector<PlannedBuffer>& buffers) {
  // Neither strategy is best on every program (Pisarchyk and Lee): the smaller total.
  BufferPlan size = objects_in_order(buffers, by_size(buffers));
  BufferPlan breadth = objects_in_order(buffers, by_breadth(buffers));
  return breadth.total() < size.total() ? breadth : size;
}

OffsetPlan plan_offsets(const std::vector<PlannedBuffer>& buffers) {
  // Greedy by size is Pisarchyk and Lee's; by breadth or by lifetime packs tighter on some
  // programs (microbatches, chunked loss heads): the smallest of the three.
  OffsetPlan best = offsets_in_order(buffers, by_size(buffers));
  for (const auto& order : {by_breadth(buffers), by_duration(buffers)}) {
    OffsetPlan plan = offsets_in_order(buffers, order);
    if (plan.total() < best.total())
      best = std::move(plan);
  }
  return best;
}

Placement plan_placement(const std::vector<PlannedBuffer>& buffers) {
  Placement out;
  const BufferPlan objects = reference::plan_buffers(buffers);
  OffsetPlan offsets = reference::plan_offsets(buffers);
  if (offsets.total() < objects.total()) {
    // Arenas in type order, as plan_offsets lists them.
    std::map<int, int> arena_of_type;
    for (const auto& [type, size] : offsets.arenas) {
      arena_of_type[type] = static_cast<int>(out.arenas.size());
      out.arenas.push_back({type, size});
    }
    for (const auto& b : buffers)
      out.arena_of.push_back(arena_of_type.at(b.type));
    out.offset = std::move(offsets.offset);
    return out;
  }
  out.arena_of = objects.object_of;
  out.offset.assign(buffers.size(), 0);
  for (size_t o = 0; o < objects.object_size.size(); ++o)
    out.arenas.push_back({objects.object_type[o], objects.object_size[o]});
  return out;
}

}  // namespace reference

namespace {

using mtk::PlannedBuffer;

std::vector<PlannedBuffer> random_lives(std::mt19937& rng, int n, int types, int events, int sizes,
                                        bool improper) {
  std::vector<PlannedBuffer> out;
  for (int i = 0; i < n; ++i) {
    PlannedBuffer b;
    b.type = static_cast<int>(rng() % static_cast<unsigned>(types));
    b.size =
        static_cast<std::int64_t>(rng() % static_cast<unsigned>(sizes) + (improper ? 0 : 1)) * 64;
    b.first = static_cast<std::int64_t>(rng() % static_cast<unsigned>(events));
    const int len =
        static_cast<int>(rng() % 4 == 0 ? rng() % static_cast<unsigned>(events) : 1 + rng() % 6);
    b.last = b.first + len + (improper ? 0 : 1);
    if (improper && rng() % 5 == 0)
      b.last = b.first - static_cast<std::int64_t>(rng() % 3);
    out.push_back(b);
  }
  return out;
}

// Forward activations kept for the backward of L layers, and short-lived temporaries between.
std::vector<PlannedBuffer> layered_lives(int layers) {
  std::vector<PlannedBuffer> out;
  const std::int64_t steps = 20 * layers;
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < 10; ++k) {
      const std::int64_t first = 10 * l + k + 1;
      out.push_back({0, 64 * (1 + k % 4), first, first + 2});  // a temporary
      if (k % 3 == 0)
        out.push_back({k % 2, 64 * (2 + k % 3), first, steps - first + 1});  // kept
    }
  return out;
}

void expect_same(const std::vector<PlannedBuffer>& in) {
  const mtk::BufferPlan objects = mtk::plan_buffers(in);
  const mtk::BufferPlan objects_ref = reference::plan_buffers(in);
  EXPECT_EQ(objects.object_of, objects_ref.object_of);
  EXPECT_EQ(objects.object_size, objects_ref.object_size);
  EXPECT_EQ(objects.object_type, objects_ref.object_type);
  const mtk::OffsetPlan offsets = mtk::plan_offsets(in);
  const mtk::OffsetPlan offsets_ref = reference::plan_offsets(in);
  EXPECT_EQ(offsets.offset, offsets_ref.offset);
  EXPECT_EQ(offsets.arenas, offsets_ref.arenas);
  const mtk::Placement placed = mtk::plan_placement(in);
  const mtk::Placement placed_ref = reference::plan_placement(in);
  EXPECT_EQ(placed.arena_of, placed_ref.arena_of);
  EXPECT_EQ(placed.offset, placed_ref.offset);
  EXPECT_EQ(placed.arenas, placed_ref.arenas);
}

TEST(BufferPlanReference, RandomLivesPlanAsBefore) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    const int n = 1 + trial % 60;
    expect_same(random_lives(rng, n, 1 + trial % 3, 2 + trial % 40, 1 + trial % 9, false));
  }
}

TEST(BufferPlanReference, EmptyAndReversedLivesPlanAsBefore) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    expect_same(
        random_lives(rng, 1 + trial % 40, 1 + trial % 2, 2 + trial % 20, 1 + trial % 5, true));
  }
  expect_same({});
}

TEST(BufferPlanReference, LayeredLivesPlanAsBefore) {
  for (int layers : {1, 2, 5, 16, 40})
    expect_same(layered_lives(layers));
}

// Larger programs, where the plans that stop early (once larger than a finished one) stop after
// many buffers: still the reference's choice.
TEST(BufferPlanReference, LargeProgramsPlanAsBefore) {
  std::mt19937 rng(5);
  expect_same(layered_lives(300));
  for (int types : {1, 3})
    expect_same(random_lives(rng, 2000, types, 3000, 9, false));
}

}  // namespace
