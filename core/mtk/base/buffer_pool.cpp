#include <mtk/base/buffer_plan.hpp>
#include <mtk/base/buffer_pool.hpp>

#include <algorithm>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mtk {

namespace {
thread_local BufferPool* active_pool = nullptr;
}  // namespace

void BufferPool::release(int runs) {
  for (auto& [type, by_size] : buffers_) {
    for (auto it = by_size.begin(); it != by_size.end();) {
      Entry& e = it->second;
      const bool held = e.use_count(e.view) > 1;
      e.idle_runs = held || e.used ? 0 : e.idle_runs + 1;
      e.used = false;
      if (!held && e.idle_runs >= runs) {
        bytes_ -= e.bytes;
        it = by_size.erase(it);
      } else {
        ++it;
      }
    }
  }
}

std::map<std::int64_t, std::int64_t> BufferPool::census() const {
  std::map<std::int64_t, std::int64_t> out;
  for (const auto& [type, by_size] : buffers_)
    for (const auto& [n, e] : by_size)
      ++out[e.bytes];
  for (const auto& e : arenas_)
    ++out[e.bytes];
  for (const auto& [k, e] : recorded_)
    ++out[e.bytes];
  return out;
}

const BufferPool::Entry* BufferPool::planned_lease(std::type_index type, std::int64_t n,
                                                   const std::string& label) {
  if (phase_ != Phase::planned)
    return nullptr;
  // The record's next request, or one a few further on (requests this run did not make).
  const size_t end = std::min(trace_.size(), cursor_ + lookahead());
  size_t j = cursor_;
  while (j < end && (trace_[j].type != type || trace_[j].n != n))
    ++j;
  if (j == end) {
    ++misses_;  // a request the record lacks (e.g. a fetched value's own copy): the cursor stays
    return nullptr;
  }
  cursor_ = j + 1;
  const Traced& t = trace_[j];
  if (t.arena < 0)
    return nullptr;  // held past the recorded run's end: the per-size path, as recorded
  if (!range_free(j)) {
    ++misses_;  // a range over it is still held (a value kept longer than in the recorded run)
    return nullptr;
  }
  Entry& lease = leases_[j];
  if (!lease.view.has_value())
    lease = t.lease(arenas_[static_cast<size_t>(t.arena)].view, t.offset, t.n, label);
  out_.push_back(j);
  ++hits_;
  return &lease;
}

bool BufferPool::range_free(size_t j) {
  const Traced& t = trace_[j];
  bool free = true;
  for (size_t i = 0; i < out_.size();) {
    const Entry& held = leases_[out_[i]];
    if (held.use_count(held.view) == 1) {
      out_[i] = out_.back();  // let go since it was handed out
      out_.pop_back();
      continue;
    }
    const Traced& o = trace_[out_[i]];
    if (o.arena == t.arena && o.offset < t.offset + t.span && t.offset < o.offset + o.span)
      free = false;
    ++i;
  }
  return free;
}

void BufferPool::observe_frees(std::int64_t k) {
  for (size_t i = 0; i < recorded_.size();) {
    Entry& e = recorded_[i].second;
    if (e.use_count(e.view) != 1) {
      ++i;
      continue;
    }
    trace_[recorded_[i].first].last = k;
    bytes_ -= e.bytes;
    recorded_[i] = std::move(recorded_.back());  // the pool's copy was the last: freed
    recorded_.pop_back();
  }
}

// After a recorded run: buffers still held go to the per-size pool; the others are placed in
// arenas.
void BufferPool::make_plan() {
  observe_frees(acquires_in_run_);
  for (auto& [k, e] : recorded_)
    buffers_[trace_[k].type].emplace(trace_[k].n, std::move(e));
  recorded_.clear();
  std::map<std::type_index, int> type_ids;
  std::vector<PlannedBuffer> lives;
  std::vector<size_t> traced;  // per planned buffer: its acquire
  for (size_t k = 0; k < trace_.size(); ++k) {
    const Traced& t = trace_[k];
    if (t.last < 0 || t.n == 0)
      continue;
    const int id = type_ids.emplace(t.type, static_cast<int>(type_ids.size())).first->second;
    lives.push_back({id, t.span, t.first, t.last});
    traced.push_back(k);
  }
  const Placement plan = plan_placement(lives);
  // Per-size buffers nothing asked for lately go before the arenas come, so the two never stack.
  release(2);
#if defined(__GLIBC__)
  // The recorded run's buffers below the C library's mmap threshold were freed into its heap,
  // where they stay resident; returned now, the arenas do not come on top of them (VmHWM).
  malloc_trim(0);
#endif
  std::vector<size_t> maker(plan.arenas.size());  // per arena: an acquire of its type
  for (size_t i = 0; i < traced.size(); ++i) {
    trace_[traced[i]].arena = plan.arena_of[i];
    trace_[traced[i]].offset = plan.offset[i];
    maker[static_cast<size_t>(plan.arena_of[i])] = traced[i];
  }
  for (size_t a = 0; a < plan.arenas.size(); ++a) {
    arenas_.push_back(trace_[maker[a]].make(plan.arenas[a].second));
    ++allocations_;
    grow(arenas_.back().bytes);
  }
  leases_.assign(trace_.size(), Entry{});
  phase_ = Phase::planned;
}

// Forgets the plan and its arenas (each freed when no range of it is held) and records the next
// run.
void BufferPool::drop_plan() {
  for (const auto& e : arenas_)
    bytes_ -= e.bytes;
  for (const auto& [k, e] : recorded_)
    bytes_ -= e.bytes;
  arenas_.clear();
  leases_.clear();
  out_.clear();
  recorded_.clear();
  trace_.clear();
  phase_ = Phase::recording;
}

void BufferPool::set_planning(bool on) {
  if (on == planning_)
    return;
  planning_ = on;
  drop_plan();
}

void BufferPool::begin_run() {
  if (planning_ && phase_ == Phase::recording && !trace_.empty()) {
    // A recording a failed run left: its live buffers join the per-size pool, and it starts again.
    for (auto& [k, e] : recorded_)
      buffers_[trace_[k].type].emplace(trace_[k].n, std::move(e));
    recorded_.clear();
    trace_.clear();
  }
  acquires_in_run_ = 0;
  cursor_ = 0;
  hits_ = misses_ = 0;
}

// After a planned run: most requests did not match, so another sequence (e.g. other fetches) may
// be the usual one now: recorded again, at most max_replans() times. A plan no run has matched for
// stale_runs() runs after that (every run different, e.g. a growing decode) is dropped for good.
void BufferPool::judge_plan() {
  if (misses_ * 2 <= acquires_in_run_) {
    runs_unmatched_ = 0;
    return;
  }
  ++runs_unmatched_;
  if (replans_ < max_replans()) {
    ++replans_;
    drop_plan();
  } else if (runs_unmatched_ >= stale_runs()) {
    drop_plan();
    planning_ = false;
  }
}

void BufferPool::end_run() {
  last_hits_ = hits_;
  if (planning_ && phase_ == Phase::recording && !trace_.empty()) {
    make_plan();  // frees idle per-size buffers first
  } else {
    if (planning_ && phase_ == Phase::planned)
      judge_plan();
    release(2);
  }
  acquires_in_run_ = 0;
  cursor_ = 0;
  hits_ = misses_ = 0;
}

void BufferPool::clear() {
  buffers_.clear();
  drop_plan();
  bytes_ = 0;
}

BufferPool* BufferPool::active() {
  return active_pool;
}

BufferPoolScope::BufferPoolScope(BufferPool* pool) : previous_(active_pool) {
  active_pool = pool;
}

BufferPoolScope::~BufferPoolScope() {
  active_pool = previous_;
}

}  // namespace mtk
