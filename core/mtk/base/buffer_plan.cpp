#include <mtk/base/buffer_plan.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

namespace mtk {

std::int64_t BufferPlan::total() const {
  return std::accumulate(object_size.begin(), object_size.end(), std::int64_t(0));
}

namespace {

std::int64_t arena_total(const std::vector<std::pair<int, std::int64_t>>& arenas) {
  std::int64_t t = 0;
  for (const auto& [type, size] : arenas)
    t += size;
  return t;
}

// An object's lifetimes, disjoint, by first event (one per first event, as a map keeps them).
using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

Intervals::const_iterator first_at_or_after(const Intervals& in, std::int64_t event) {
  return std::lower_bound(in.begin(), in.end(), event,
                          [](const auto& life, std::int64_t e) { return life.first < e; });
}

bool overlaps(const Intervals& in, const PlannedBuffer& b) {
  // Disjoint intervals sorted by start end in the same order: only the last one starting before
  // b ends can reach into b.
  auto it = first_at_or_after(in, b.last);
  if (it == in.begin())
    return false;
  return std::prev(it)->second > b.first;
}

void add_life(Intervals& in, std::int64_t first, std::int64_t last) {
  const auto it = first_at_or_after(in, first);
  if (it == in.end() || it->first != first)
    in.insert(it, {first, last});
}

// Places buffers one at a time into per-type objects; an object grows to its largest buffer.
// Per type the objects are kept by (size, index), so a buffer looks only at the objects of its size
// and up that are busy during its life (and at most one size class below), not at every object.
class Placer {
 public:
  explicit Placer(const std::vector<PlannedBuffer>& buffers) : buffers_(buffers) {
    plan_.object_of.assign(buffers.size(), -1);
  }

  // Into the smallest free object at least as large (the first such object on ties), else the
  // largest free one (the first such on ties; grown), else a new one.
  void place(size_t i) {
    const PlannedBuffer& b = buffers_[i];
    auto& objects = by_type_[b.type];  // (size, object)
    auto free = [&](int o) { return !overlaps(lives_[static_cast<size_t>(o)], b); };
    int chosen = -1;
    for (auto it = objects.lower_bound({b.size, -1}); it != objects.end(); ++it)
      if (free(it->second)) {
        chosen = it->second;
        break;
      }
    if (chosen < 0) {
      // The largest size below b's with a free object; of that size the first free object.
      for (auto it = objects.lower_bound({b.size, -1}); it != objects.begin();) {
        --it;
        if (!free(it->second))
          continue;
        for (auto same = objects.lower_bound({it->first, -1}); same != objects.end(); ++same)
          if (free(same->second)) {
            chosen = same->second;
            break;
          }
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int>(plan_.object_size.size());
      plan_.object_size.push_back(0);
      plan_.object_type.push_back(b.type);
      lives_.emplace_back();
    } else {
      objects.erase({plan_.object_size[static_cast<size_t>(chosen)], chosen});
    }
    auto& size = plan_.object_size[static_cast<size_t>(chosen)];
    if (b.size > size) {
      total_ += b.size - size;
      size = b.size;
    }
    objects.insert({size, chosen});
    add_life(lives_[static_cast<size_t>(chosen)], b.first, b.last);
    plan_.object_of[i] = chosen;
  }
  BufferPlan take() { return std::move(plan_); }
  // The plan's total so far; it only grows.
  std::int64_t total() const { return total_; }

 private:
  const std::vector<PlannedBuffer>& buffers_;
  BufferPlan plan_;
  std::int64_t total_ = 0;
  std::vector<Intervals> lives_;
  std::map<int, std::set<std::pair<std::int64_t, int>>> by_type_;
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

// The events (every buffer's first and last, ascending, once each) and each buffer's lifetime as
// indices into them: [lo, hi).
struct Events {
  std::vector<std::int64_t> at;
  std::vector<std::pair<size_t, size_t>> span;
  explicit Events(const std::vector<PlannedBuffer>& buffers) {
    for (const auto& b : buffers) {
      at.push_back(b.first);
      at.push_back(b.last);
    }
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    auto index = [&](std::int64_t e) {
      return static_cast<size_t>(std::lower_bound(at.begin(), at.end(), e) - at.begin());
    };
    for (const auto& b : buffers)
      span.emplace_back(index(b.first), std::max(index(b.first), index(b.last)));
  }
};

// The order greedy by breadth places buffers in: the events with the most bytes alive first, each
// event's buffers not yet placed from the largest down (by_size's order). The bytes alive by
// prefix sums; the buffers alive at an event from a segment tree over the events holding each
// buffer in the nodes that tile its lifetime: every buffer of a node on the path to an event is
// alive there, so a node's buffers are all taken the first time a path passes it. `ev` and `sized`
// are the buffers' Events and by_size order.
std::vector<size_t> by_breadth(const std::vector<PlannedBuffer>& buffers, const Events& ev,
                               const std::vector<size_t>& sized) {
  const size_t E = ev.at.size();
  std::vector<std::int64_t> delta(E + 1, 0);
  for (size_t i = 0; i < buffers.size(); ++i) {
    delta[ev.span[i].first] += buffers[i].size;
    delta[ev.span[i].second] -= buffers[i].size;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (event, bytes alive there)
  events.reserve(E);
  std::int64_t alive = 0;
  for (size_t e = 0; e < E; ++e) {
    alive += delta[e];
    events.emplace_back(ev.at[e], alive);
  }
  std::vector<size_t> order(E);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events[a].second > events[b].second; });
  std::vector<size_t> rank(buffers.size());
  for (size_t r = 0; r < sized.size(); ++r)
    rank[sized[r]] = r;
  size_t leaves = 1;
  while (leaves < std::max<size_t>(E, 1))
    leaves *= 2;
  std::vector<std::vector<size_t>> node(2 * leaves);
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t lo = ev.span[i].first + leaves, hi = ev.span[i].second + leaves; lo < hi;
         lo /= 2, hi /= 2) {
      if (lo & 1)
        node[lo++].push_back(i);
      if (hi & 1)
        node[--hi].push_back(i);
    }
  std::vector<size_t> out;
  out.reserve(buffers.size());
  std::vector<char> taken(buffers.size(), 0);
  std::vector<size_t> here;
  for (size_t e : order) {
    here.clear();
    for (size_t n = e + leaves; n >= 1; n /= 2) {
      for (size_t i : node[n])
        if (!taken[i]) {
          taken[i] = 1;
          here.push_back(i);
        }
      node[n].clear();
      node[n].shrink_to_fit();
    }
    std::sort(here.begin(), here.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
    out.insert(out.end(), here.begin(), here.end());
    if (out.size() == buffers.size())
      break;
  }
  return out;
}

// The longest lives first, each length's buffers from the largest down (`sized`: by_size's order).
std::vector<size_t> by_duration(const std::vector<PlannedBuffer>& buffers,
                                std::vector<size_t> sized) {
  std::vector<size_t> order = std::move(sized);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].last - buffers[a].first > buffers[b].last - buffers[b].first;
  });
  return order;
}

// No bound: a plan placed to the end.
constexpr std::int64_t kNoBound = std::numeric_limits<std::int64_t>::max();

// Objects for the buffers in `order` (Placer::place). Largest first, no object grows (every
// object is at least as large as the buffer placed); by breadth, a free smaller one may. Nothing
// once the total passes `bound` (a plan's total only grows as buffers are placed).
std::optional<BufferPlan> objects_in_order(const std::vector<PlannedBuffer>& buffers,
                                           const std::vector<size_t>& order,
                                           std::int64_t bound = kNoBound) {
  Placer placer(buffers);
  for (size_t i : order) {
    placer.place(i);
    if (placer.total() > bound)
      return std::nullopt;
  }
  return placer.take();
}

// Offsets for the buffers in `order`: each into the smallest gap between the buffers of its type
// already placed that are alive with it, else above them all. The direct form, every placed
// buffer looked at for each buffer placed: for lives that are empty or reversed, and sizes of 0.
OffsetPlan offsets_by_scan(const std::vector<PlannedBuffer>& buffers,
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

// Disjoint address ranges [start, end), touching ones merged, by start (a sorted vector: the
// sets are small and read far more often than written).
class Ranges {
 public:
  using List = std::vector<std::pair<std::int64_t, std::int64_t>>;
  void add(std::int64_t start, std::int64_t end) {
    auto it = std::upper_bound(r_.begin(), r_.end(), start,
                               [](std::int64_t x, const auto& range) { return x < range.first; });
    if (it != r_.begin() && std::prev(it)->second >= start) {
      const auto before = std::prev(it);
      if (before->second >= end)
        return;  // covered already
      auto last = it;
      while (last != r_.end() && last->first <= end)
        end = std::max(end, (last++)->second);
      before->second = end;
      r_.erase(it, last);
      return;
    }
    auto last = it;
    while (last != r_.end() && last->first <= end)
      end = std::max(end, (last++)->second);
    if (last == it) {
      r_.insert(it, {start, end});
    } else {
      *it = {start, end};
      r_.erase(it + 1, last);
    }
  }
  const List& ranges() const { return r_; }

 private:
  List r_;
};

// The address ranges the placed buffers of one type take, by time: a segment tree over the events
// in which each placed buffer is held by the nodes that tile its life (own) and by those nodes'
// ancestors (sub: the node's subtree). The buffers alive during a life [a, b) are those of the
// own sets of the ancestors of the nodes tiling [a, b) and of the sub sets of those nodes; the
// union of their ranges is what a buffer living then must stay clear of. With sizes > 0 the gaps
// of that union are the gaps the direct form finds between the buffers alive in offset order
// (gaps of 0 and less fit nothing), so both choose the same offset.
class PlacedRanges {
 public:
  explicit PlacedRanges(size_t events) {
    while (leaves_ < std::max<size_t>(events, 1))
      leaves_ *= 2;
    own_.resize(2 * leaves_);
    sub_.resize(2 * leaves_);
    seen_.assign(2 * leaves_, 0);
  }
  void add(std::pair<size_t, size_t> life, std::int64_t offset, std::int64_t size) {
    ++stamp_;
    for (size_t lo = life.first + leaves_, hi = life.second + leaves_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1)
        hold(lo++, offset, size);
      if (hi & 1)
        hold(--hi, offset, size);
    }
  }
  // The offset the direct form gives a buffer of `size` living `life`.
  std::int64_t offset_for(std::pair<size_t, size_t> life, std::int64_t size) {
    sets_.clear();
    ++stamp_;
    for (size_t lo = life.first + leaves_, hi = life.second + leaves_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1)
        tile(lo++);
      if (hi & 1)
        tile(--hi);
    }
    // The union of the sets' ranges in address order: its gaps, and its top. The sets are few
    // (about 11 not empty), so the next range is found by looking at every set's next.
    heads_.clear();
    for (const Ranges* set : sets_)
      if (!set->ranges().empty())
        heads_.push_back({set->ranges().data(), set->ranges().data() + set->ranges().size()});
    std::int64_t end = 0, best = -1, best_gap = 0;
    while (!heads_.empty()) {
      size_t k = 0;
      for (size_t j = 1; j < heads_.size(); ++j)
        if (heads_[j].first->first < heads_[k].first->first)
          k = j;
      const auto& range = *heads_[k].first;
      const std::int64_t gap = range.first - end;
      if (gap >= size && (best < 0 || gap < best_gap)) {
        std::tie(best, best_gap) = std::make_pair(end, gap);
        if (gap == size)
          return best;  // no smaller gap fits; later ones are higher
      }
      end = std::max(end, range.second);
      if (++heads_[k].first == heads_[k].second) {
        heads_[k] = heads_.back();
        heads_.pop_back();
      }
    }
    return best >= 0 ? best : end;
  }

 private:
  // Node and its ancestors (each once per buffer added) hold [offset, offset + size).
  void hold(size_t node, std::int64_t offset, std::int64_t size) {
    own_[node].add(offset, offset + size);
    for (size_t n = node; n >= 1 && seen_[n] != stamp_; n /= 2) {
      seen_[n] = stamp_;
      sub_[n].add(offset, offset + size);
    }
  }
  // The sets a life tiled by `node` meets: the node's subtree, and its ancestors' own sets (each
  // once per query).
  void tile(size_t node) {
    sets_.push_back(&sub_[node]);
    for (size_t n = node / 2; n >= 1 && seen_[n] != stamp_; n /= 2) {
      seen_[n] = stamp_;
      sets_.push_back(&own_[n]);
    }
  }
  size_t leaves_ = 1;
  std::vector<Ranges> own_, sub_;
  std::vector<const Ranges*> sets_;
  std::vector<std::uint64_t> seen_;  // per node: the last add or query that met it
  std::uint64_t stamp_ = 0;
  using Range = Ranges::List::value_type;
  std::vector<std::pair<const Range*, const Range*>> heads_;  // (next, end) of each set left
};

// Offsets for the buffers in `order`: each into the smallest gap between the buffers of its type
// already placed that are alive with it (the lowest such gap on ties), else above them all.
// Nothing once the total passes `bound` (the arenas only grow as buffers are placed).
std::optional<OffsetPlan> offsets_in_order(const std::vector<PlannedBuffer>& buffers,
                                           const Events& ev, const std::vector<size_t>& order,
                                           std::int64_t bound = kNoBound) {
  for (const auto& b : buffers)
    if (b.size <= 0 || b.first >= b.last)
      return offsets_by_scan(buffers, order);
  OffsetPlan plan;
  plan.offset.assign(buffers.size(), 0);
  std::map<int, std::int64_t> arena;  // by type: its size so far
  std::map<int, PlacedRanges> put;    // by type: the buffers placed
  std::int64_t total = 0;
  for (size_t i : order) {
    const PlannedBuffer& b = buffers[i];
    PlacedRanges& placed = put.try_emplace(b.type, ev.at.size()).first->second;
    plan.offset[i] = placed.offset_for(ev.span[i], b.size);
    std::int64_t& top = arena[b.type];
    if (plan.offset[i] + b.size > top) {
      total += plan.offset[i] + b.size - top;
      top = plan.offset[i] + b.size;
      if (total > bound)
        return std::nullopt;
    }
    placed.add(ev.span[i], plan.offset[i], b.size);
  }
  for (const auto& [type, size] : arena)
    plan.arenas.push_back({type, size});
  return plan;
}

}  // namespace

BufferPlan plan_buffers(const std::vector<PlannedBuffer>& buffers) {
  // Neither strategy is best on every program (Pisarchyk and Lee): the smaller total.
  const std::vector<size_t> sized = by_size(buffers);
  BufferPlan size = *objects_in_order(buffers, sized);
  std::optional<BufferPlan> breadth =
      objects_in_order(buffers, by_breadth(buffers, Events(buffers), sized), size.total());
  return breadth && breadth->total() < size.total() ? std::move(*breadth) : size;
}

std::int64_t OffsetPlan::total() const {
  return arena_total(arenas);
}

namespace {

// The plans of both kinds, each stopped as soon as it is larger than the smallest plan finished
// before it: such a plan cannot be chosen, and the plans that can (the smallest) always finish.
// On the lowering's programs by breadth is mostly the smallest offset plan and the others stop
// after a tenth to a half of their buffers: placed first, it saves most of the placement's time.
// Each kind's plan is then chosen as if all had finished (a stopped plan counts as infinite).
struct Plans {
  std::optional<OffsetPlan> offsets;  // the smallest of by size, by breadth, by duration
  std::optional<BufferPlan> objects;  // the smaller of by size, by breadth
};

template <class Plan>
void keep_smaller(std::optional<Plan>& best, std::optional<Plan>&& plan) {
  if (plan && (!best || plan->total() < best->total()))
    best = std::move(plan);
}

Plans smallest_plans(const std::vector<PlannedBuffer>& buffers, bool objects_too) {
  const Events ev(buffers);
  const std::vector<size_t> sized = by_size(buffers), broad = by_breadth(buffers, ev, sized);
  std::optional<OffsetPlan> breadth = offsets_in_order(buffers, ev, broad);
  std::int64_t bound = breadth->total();
  auto lower = [&](std::int64_t total) { bound = std::min(bound, total); };
  Plans out;
  // Preference on ties as placed in this order: by size, then by breadth, then by duration.
  out.offsets = offsets_in_order(buffers, ev, sized, bound);
  if (out.offsets)
    lower(out.offsets->total());
  keep_smaller(out.offsets, std::move(breadth));
  std::optional<OffsetPlan> duration =
      offsets_in_order(buffers, ev, by_duration(buffers, sized), bound);
  if (duration)
    lower(duration->total());
  keep_smaller(out.offsets, std::move(duration));
  if (!objects_too)
    return out;
  out.objects = objects_in_order(buffers, sized, bound);
  if (out.objects)
    lower(out.objects->total());
  keep_smaller(out.objects, objects_in_order(buffers, broad, bound));
  return out;
}

}  // namespace

OffsetPlan plan_offsets(const std::vector<PlannedBuffer>& buffers) {
  // Greedy by size is Pisarchyk and Lee's; by breadth or by lifetime packs tighter on some
  // programs (microbatches, chunked loss heads): the smallest of the three.
  return std::move(*smallest_plans(buffers, false).offsets);
}

std::int64_t Placement::total() const {
  return arena_total(arenas);
}

Placement plan_placement(const std::vector<PlannedBuffer>& buffers) {
  Placement out;
  Plans plans = smallest_plans(buffers, true);
  // The offset plan when strictly smaller, else the object plan; a kind stopped early lost.
  if (plans.offsets && (!plans.objects || plans.offsets->total() < plans.objects->total())) {
    OffsetPlan& offsets = *plans.offsets;
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
  const BufferPlan& objects = *plans.objects;
  out.arena_of = objects.object_of;
  out.offset.assign(buffers.size(), 0);
  for (size_t o = 0; o < objects.object_size.size(); ++o)
    out.arenas.push_back({objects.object_type[o], objects.object_size[o]});
  return out;
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
