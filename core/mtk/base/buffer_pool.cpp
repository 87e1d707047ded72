#include <mtk/base/buffer_pool.hpp>

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
  return out;
}

void BufferPool::end_run() {
  release(2);
}

void BufferPool::clear() {
  buffers_.clear();
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
