#pragma once
// Reuse of a program's tensor buffers from one run to the next: a step of training allocates the
// same buffers in the same order every time, so after the first run every allocation is answered by
// a buffer of the same type and size that nothing holds any more. Large fresh allocations are
// mmapped by the C library and page-faulted on first write; reusing them removes that per step.
//
// A buffer is free when the pool's copy of its View is the only reference (use_count() == 1), so a
// buffer anyone still holds (a variable, a fetched value, a kernel's other operand) is never handed
// out twice. On GPUs the kernels of a program run in order on one execution space instance, so a
// buffer released by one kernel and reused by the next is ordered by that instance.

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

  /// An uninitialised View of `n` elements: a pooled one of that type and size that no one else
  /// holds, else a new one (labelled `label`) that the pool keeps.
  template <class T>
  Kokkos::View<T*> acquire(const std::string& label, std::int64_t n) {
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

  /// Ends a run: frees the buffers that nothing holds and no acquire() asked for in this run or
  /// the one before (sizes that changed, e.g. a longer decode). Two runs, because a variable's new
  /// value is held until the next run's assignment replaces it.
  void end_run();
  /// Drops every buffer: those nothing else holds are freed, the others live on with their holders.
  void clear();

  std::int64_t allocations() const { return allocations_; }  ///< new buffers, ever
  std::int64_t reuses() const { return reuses_; }            ///< acquires answered from the pool
  std::int64_t bytes() const { return bytes_; }              ///< bytes the pool holds now
  std::int64_t peak_bytes() const { return peak_bytes_; }    ///< the most it ever held
  /// The buffers it holds now: how many of each size in bytes.
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
  template <class T>
  static Entry make_entry(const Kokkos::View<T*>& v, bool used) {
    return {std::any(v), static_cast<std::int64_t>(sizeof(T) * v.extent(0)), used,
            [](const std::any& a) -> long {
              return std::any_cast<const Kokkos::View<T*>&>(a).use_count();
            }};
  }
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
