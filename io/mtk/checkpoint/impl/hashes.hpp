#pragma once
// slices.sha256: the SHA-256 of every saved slice, and the hashing of slices in memory and on
// disk (docs/checkpoint-format.md). Internal.

#include <mtk/checkpoint/checkpoint.hpp>

#include <hdf5.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mtk::ckpt {

/// One line of slices.sha256.
struct SliceRecord {
  std::string name;
  std::vector<std::int64_t> origin, shape;
  std::string sha;
};

/// "slice <sha256> <origin> <shape> <variable>\n"
std::string slice_line(const SliceRecord& r);

/// slices.sha256 parsed.
struct SliceTable {
  std::int64_t file_bytes = -1;
  std::vector<SliceRecord> slices;
};

SliceTable parse_slices(const std::string& text, const std::string& origin,
                        const std::string& where);

/// "" when `h5path` has the size slices.sha256 recorded, else the problem (verify and restore
/// both refuse a file of another size: bytes nobody hashed are never loaded silently).
std::string file_size_problem(const std::string& h5path, const SliceTable& t);

/// The recorded slices of `var` must tile its dataset exactly (same shape, aligned, distinct,
/// complete); otherwise some bytes would go unchecked. Appends the first problem to `errors`.
void check_tiling(const CheckpointVariable& var, const std::vector<const SliceRecord*>& recs,
                  std::vector<std::string>* errors);
/// Indexes into t.slices by variable name.
std::map<std::string, std::vector<size_t>> records_by_name(const SliceTable& t);

/// SHA-256 of the block [origin, origin + shape) of a dataset, read in pieces along dim 0 as the
/// values it stores (float32 or bfloat16 bit patterns); adds the bytes read to `*bytes`.
std::string hash_dataset_block(hid_t dset, const std::vector<std::int64_t>& origin,
                               const std::vector<std::int64_t>& shape, std::int64_t* bytes,
                               const std::string& where, const std::string& what);
/// Whether the block (origin, shape) lies inside the block (outer_origin, outer_shape).
bool contains(const std::vector<std::int64_t>& outer_origin,
              const std::vector<std::int64_t>& outer_shape, const std::vector<std::int64_t>& origin,
              const std::vector<std::int64_t>& shape);
/// SHA-256 of the block (origin, shape) of the row-major region (region_origin, region_shape)
/// held in `data`, hashed run by run without a copy.
/// `data` holds values of `value_bytes` bytes each (4: float32, 2: bfloat16).
std::string hash_sub_block(const void* data, std::size_t value_bytes,
                           const std::vector<std::int64_t>& region_origin,
                           const std::vector<std::int64_t>& region_shape,
                           const std::vector<std::int64_t>& origin,
                           const std::vector<std::int64_t>& shape);

// Checks slices held in memory against their recorded SHA-256 on a second thread, so that a
// restore hashes one variable while it reads the next. The tasks' memory must stay alive until
// finish(); the thread makes no MPI or HDF5 call.
class HashWorker {
 public:
  struct Task {
    const void* data;
    std::vector<std::int64_t> region_origin, region_shape, origin, shape;
    std::string expected;
    std::string what;  // "variable 'w' [...]: the slice at origin [..] shape [..] in FILE"
    std::size_t value_bytes = 4;  // per value of `data`
  };
  HashWorker() : thread_([this] { run(); }) {}
  ~HashWorker() { finish(); }
  HashWorker(const HashWorker&) = delete;
  HashWorker& operator=(const HashWorker&) = delete;
  void push(Task task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  /// Waits for every task; returns the mismatches.
  std::vector<std::string> finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable())
      thread_.join();
    return errors_;
  }

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool done_ = false;
  std::vector<std::string> errors_;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace mtk::ckpt
