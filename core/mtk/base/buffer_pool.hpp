#pragma once
// Reuse of a program's tensor buffers from one run to the next: a step of training allocates the
// same buffers in the same order every time, so after the first run every allocation is answered by
// a buffer that nothing holds any more. Large fresh allocations are mmapped by the C library and
// page-faulted on first write; reusing them removes that per step.
//
// Without a plan a buffer is reused only for a request of the same type and size, so the pool holds
// per size the most buffers of that size ever alive at once. With a plan (set_planning,
// program.buffer_plan) the first run is recorded: each acquire's type, size and the acquire before
// which its buffer was seen free (the pool drops its copy then, so the run holds the live bytes
// only). Its end places every buffer at an offset in an arena (mtk/base/buffer_plan.hpp,
// plan_placement: one arena per element type, or one per shared object where that is smaller),
// holding about the most bytes alive at once, and later runs answer each acquire with its range
// of its arena when the request matches the record's next one (or one a few further on: requests
// a run skips). Buffers still held at the end of the recorded run (variables' new values, fetched
// results) and any request that does not match take the per-size path.
//
// A buffer is free when the pool's copy of its View is the only reference (use_count() == 1; a
// subview shares that count), so a buffer anyone still holds (a variable, a fetched value, a
// kernel's other operand) is never handed out twice. A planned range is a leased view
// (mtk/base/leased_view.hpp) with a count of its own: it is handed out only when no range of its
// arena that overlaps it is held, and a range held past the plan keeps its arena allocated. On GPUs
// the kernels of a program run in order on one execution space instance, so a buffer released by
// one kernel and reused by the next is ordered by that instance.

#include <mtk/base/leased_view.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <any>
#include <cstdint>
#include <map>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

namespace mtk {

class BufferPool {
 public:
  BufferPool() = default;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  /// An uninitialised View of `n` elements: with a plan (set_planning), this acquire's planned
  /// range of its arena when it matches the recorded run and no one holds a range overlapping it;
  /// else a pooled buffer of that type and size that no one else holds, else a new one (labelled
  /// `label`) that the pool keeps.
  template <class T>
  Kokkos::View<T*> acquire(const std::string& label, std::int64_t n) {
    if (planning_) {
      const std::int64_t k = acquires_in_run_++;
      if (phase_ == Phase::recording)
        return record<T>(label, n, k);
      if (const Entry* lease = planned_lease(std::type_index(typeid(T)), n, label)) {
        ++reuses_;
        return std::any_cast<const Kokkos::View<T*>&>(lease->view);
      }
    }
    return pooled<T>(label, n);
  }

  /// Takes `v` (a whole allocation, e.g. a variable's initial storage) into the pool: once nothing
  /// else holds it, acquire() may hand it out. Already pooled buffers are not added twice.
  template <class T>
  void adopt(const Kokkos::View<T*>& v) {
    const auto n = static_cast<std::int64_t>(v.extent(0));
    auto& by_size = buffers_[std::type_index(typeid(T))];
    for (auto [it, end] = by_size.equal_range(n); it != end; ++it)
      if (std::any_cast<const Kokkos::View<T*>&>(it->second.view).data() == v.data())
        return;
    by_size.emplace(n, make_entry(v, false));
    grow(static_cast<std::int64_t>(sizeof(T)) * n);
  }

  /// How much larger than asked a reused buffer may be (1, the default: exact sizes only).
  void set_fit_ratio(double r) { fit_ratio_ = r < 1 ? 1 : r; }
  double fit_ratio() const { return fit_ratio_; }
  /// Planned sharing (off by default; Program turns it on with program.buffer_plan): the next run
  /// is recorded and planned. Turning it off drops the plan; its arenas are freed once no range of
  /// them is held.
  void set_planning(bool on);
  bool planning() const { return planning_; }
  /// Whether runs are answered from a plan (false while none is made or one is being recorded).
  bool planned() const { return planning_ && phase_ == Phase::planned; }
  /// Acquires of the last finished run answered by their planned range.
  std::int64_t planned_hits() const { return last_hits_; }
  /// Times a plan was dropped because most of a run's acquires did not match it.
  int replans() const { return replans_; }

  /// Starts a run: acquires are counted from 0 again (a recording left by a failed run is dropped).
  void begin_run();
  /// Ends a run: makes the plan after a recorded run, or drops one most of whose acquires did not
  /// match (at most max_replans() times; after that, planning stops when no run matched it for
  /// stale_runs() runs); frees the per-size buffers that nothing holds and no
  /// acquire() asked for in this run or the one before (sizes that changed, e.g. a longer decode).
  /// Two runs, because a variable's new value is held until the next run's assignment replaces it.
  void end_run();
  /// Drops every buffer: those nothing else holds are freed, the others live on with their holders.
  void clear();
  static constexpr int max_replans() { return 2; }
  static constexpr int stale_runs() { return 4; }
  /// How far past the expected recorded request a planned run looks for one of the same type and
  /// size (requests a run skips, e.g. with other fetches, then cost no more than themselves).
  static constexpr size_t lookahead() { return 16; }

  std::int64_t allocations() const { return allocations_; }  ///< new buffers, ever
  std::int64_t reuses() const { return reuses_; }            ///< acquires answered from the pool
  std::int64_t bytes() const { return bytes_; }              ///< bytes the pool holds now
  std::int64_t peak_bytes() const { return peak_bytes_; }    ///< the most it ever held
  /// The buffers it holds now (planned arenas included): how many of each size in bytes.
  std::map<std::int64_t, std::int64_t> census() const;

  /// The pool uninitialized_view() draws from on this thread (nullptr: plain allocations).
  static BufferPool* active();

 private:
  friend class BufferPoolScope;
  struct Entry {
    std::any view;  // Kokkos::View<T*>
    std::int64_t bytes = 0;
    bool used = false;  // acquired since the last end_run()
    long (*use_count)(const std::any&) = nullptr;
    int idle_runs = 0;  // end_run()s since it was last acquired or held
  };
  // One acquire of the recorded run: alive from acquire `first` until before acquire `last`
  // (-1: still held at the end, not planned); planned at `offset` of arenas_[arena] (-1: not
  // planned), where it takes `span` elements (n rounded up to whole cache lines).
  struct Traced {
    std::type_index type;
    std::int64_t n = 0;
    std::int64_t first = 0, last = -1;
    int arena = -1;
    std::int64_t offset = 0, span = 0;
    Entry (*make)(std::int64_t n) = nullptr;  // a new buffer of this type
    // A leased range of an arena of this type
    Entry (*lease)(const std::any& arena, std::int64_t offset, std::int64_t n,
                   const std::string& label) = nullptr;
  };
  enum class Phase { recording, planned };

  template <class T>
  static Entry make_entry(const Kokkos::View<T*>& v, bool used) {
    return {std::any(v), static_cast<std::int64_t>(sizeof(T) * v.extent(0)), used,
            [](const std::any& a) -> long {
              return std::any_cast<const Kokkos::View<T*>&>(a).use_count();
            }};
  }
  // Zeroed: its pages are touched at the end of the recorded run, not in the next run's steps.
  template <class T>
  static Entry make_arena(std::int64_t n) {
    return make_entry(Kokkos::View<T*>("mtk::BufferPool arena", static_cast<size_t>(n)), true);
  }
  template <class T>
  static Entry make_lease(const std::any& arena, std::int64_t offset, std::int64_t n,
                          const std::string& label) {
    return make_entry(leased_view(std::any_cast<const Kokkos::View<T*>&>(arena), offset, n, label),
                      true);
  }
  // n elements of T rounded up to whole 64-byte lines, so every planned range starts on one.
  template <class T>
  static std::int64_t span_of(std::int64_t n) {
    constexpr std::int64_t line = 64, size = static_cast<std::int64_t>(sizeof(T));
    if (line % size != 0)
      return n;
    return (n * size + line - 1) / line * line / size;
  }
  // The exact-fit path: a free pooled buffer of n elements (within the fit ratio), else a new one.
  template <class T>
  Kokkos::View<T*> pooled(const std::string& label, std::int64_t n) {
    auto& by_size = buffers_[std::type_index(typeid(T))];
    // The smallest free buffer of at least n elements and at most fit_ratio() times that (a
    // larger one is handed out as its first n elements; by default sizes must match exactly, so
    // a run that repeats the previous one's allocations allocates nothing).
    const auto limit = static_cast<std::int64_t>(static_cast<double>(n) * fit_ratio_);
    for (auto it = by_size.lower_bound(n); it != by_size.end() && it->first <= limit; ++it) {
      Entry& e = it->second;
      if (e.use_count(e.view) != 1)
        continue;
      e.used = true;
      ++reuses_;
      const auto& v = std::any_cast<const Kokkos::View<T*>&>(e.view);
      if (it->first == n)
        return v;
      return Kokkos::subview(v, std::make_pair(std::int64_t(0), n));
    }
    Kokkos::View<T*> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, label),
                       static_cast<size_t>(n));
    by_size.emplace(n, make_entry(v, true));
    ++allocations_;
    grow(static_cast<std::int64_t>(sizeof(T)) * n);
    return v;
  }
  // The recorded run's acquire k: a new buffer, tracked until it is seen free.
  template <class T>
  Kokkos::View<T*> record(const std::string& label, std::int64_t n, std::int64_t k) {
    observe_frees(k);
    Kokkos::View<T*> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, label),
                       static_cast<size_t>(n));
    trace_.push_back({std::type_index(typeid(T)), n, k, -1, -1, 0, span_of<T>(n), &make_arena<T>,
                      &make_lease<T>});
    recorded_.emplace_back(trace_.size() - 1, make_entry(v, true));
    ++allocations_;
    grow(static_cast<std::int64_t>(sizeof(T)) * n);
    return v;
  }
  // The lease planned for the recorded request this one matches, when no range overlapping it is
  // held (made on its first use, labelled `label`).
  const Entry* planned_lease(std::type_index type, std::int64_t n, const std::string& label);
  // Whether no range overlapping the recorded request j's is held; forgets the ranges let go.
  bool range_free(size_t j);
  // The recorded buffers no one holds any more died before acquire k: noted, and dropped.
  void observe_frees(std::int64_t k);
  void make_plan();
  void drop_plan();
  void judge_plan();
  void grow(std::int64_t b) {
    bytes_ += b;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
  }
  // Releases the entries nothing else references: all of them, or those idle for `runs` runs.
  void release(int runs);

  // by element type, then by number of elements
  std::map<std::type_index, std::multimap<std::int64_t, Entry>> buffers_;
  double fit_ratio_ = 1;
  std::int64_t allocations_ = 0;
  std::int64_t reuses_ = 0;
  std::int64_t bytes_ = 0;
  std::int64_t peak_bytes_ = 0;
  // The plan
  bool planning_ = false;
  Phase phase_ = Phase::recording;
  std::vector<Traced> trace_;
  std::vector<std::pair<size_t, Entry>> recorded_;  // live buffers of the recording: trace index
  std::vector<Entry> arenas_;
  std::vector<Entry> leases_;  // per recorded request: its leased range (made on first use)
  std::vector<size_t> out_;    // recorded requests whose ranges were handed out and may be held
  std::int64_t acquires_in_run_ = 0;
  size_t cursor_ = 0;  // in a planned run: the recorded request the next one should match
  std::int64_t hits_ = 0, misses_ = 0, last_hits_ = 0;
  int replans_ = 0;
  int runs_unmatched_ = 0;  // planned runs in a row most of whose acquires did not match
};

/// Makes `pool` the active pool of this thread for the scope's lifetime (nullptr: none).
class BufferPoolScope {
 public:
  explicit BufferPoolScope(BufferPool* pool);
  ~BufferPoolScope();
  BufferPoolScope(const BufferPoolScope&) = delete;
  BufferPoolScope& operator=(const BufferPoolScope&) = delete;

 private:
  BufferPool* previous_;
};

}  // namespace mtk
