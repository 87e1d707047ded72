#include <mtk/base/buffer_plan.hpp>
#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/lower/memory_model.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

namespace mtk {
namespace {

// The replay's state: buffers with their holders, and per (type, size) the live count and the most
// ever live (what the pool ends up holding).
class Replay {
 public:
  explicit Replay(const ProgramLifetimes& p)
      : p_(p), slot_buffer_(p.slots.size(), -1), persistent_(p.slots.size(), false) {
    for (int t : p.persistent)
      persistent_.at(static_cast<size_t>(t)) = true;
  }

  MemoryPrediction run() {
    for (int t : p_.persistent)
      allocate(t, false);
    for (const SlotSize& s : p_.stored)
      allocate({s.dtype, s.bytes()}, false);
    for (int t : p_.placeholders)
      if (!persistent_.at(static_cast<size_t>(t)))
        allocate(t);
    const auto& steps = *p_.steps;
    for (size_t s = 0; s < steps.size(); ++s) {
      event_ = static_cast<std::int64_t>(s) + 1;  // frees after step s end before event s + 2
      std::vector<int> replaced;
      write(steps[s], replaced);
      std::vector<int> scratch;
      for (const auto& [dtype, elements] : steps[s].scratch)
        scratch.push_back(
            allocate({dtype, elements * static_cast<std::int64_t>(dtype_bytes(dtype))}));
      if (live_bytes_ > peak_ && reporting_)
        snapshot_peak();
      peak_ = std::max(peak_, live_bytes_);
      for (int b : scratch)
        unhold(b);
      for (int b : replaced)
        unhold(b);
      for (int t : (*p_.deaths)[s])
        release(t);
    }
    if (reporting_)
      report();
    return summarize();
  }

 private:
  using Key = std::pair<DType, std::int64_t>;  // element type, bytes
  struct Buffer {
    Key key;
    int holders = 0;
    bool planned = true;  // a temporary the plan may place (not variable storage)
    std::int64_t first = 0;
    std::int64_t last = -1;  // the event it is free before; -1: held at the end
    bool live = true;
  };

  // MTK_MEMORY_REPORT=1: the buffers alive at the live peak, by the step that wrote them.
  void snapshot_peak() {
    at_peak_.clear();
    for (size_t b = 0; b < buffers_.size(); ++b)
      if (buffers_[b].live)
        at_peak_.push_back(static_cast<int>(b));
    peak_event_ = event_;
  }
  std::string writer(const Buffer& b) const {
    if (b.first == 0)
      return "(variable, slot or feed)";
    const auto& st = (*p_.steps)[static_cast<size_t>(b.first - 1)];
    return "step " + std::to_string(b.first - 1) + " " + st.what;
  }
  void report_plan(const Placement& plan, const std::vector<int>& of,
                   const std::vector<PlannedBuffer>& lives, std::int64_t kept) const {
    std::fprintf(stderr,
                 "mtk::predict_memory: planned arenas %.1f MiB (temporaries' most live %.1f MiB, "
                 "an object plan %.1f MiB, an offset plan %.1f MiB), kept per size %.1f MiB:\n",
                 static_cast<double>(plan.total()) / 1048576.0,
                 static_cast<double>(most_live(lives)) / 1048576.0,
                 static_cast<double>(plan_buffers(lives).total()) / 1048576.0,
                 static_cast<double>(plan_offsets(lives).total()) / 1048576.0,
                 static_cast<double>(kept) / 1048576.0);
    for (size_t a = 0; a < plan.arenas.size(); ++a) {
      if (plan.arenas[a].second < (1 << 20))
        continue;
      std::fprintf(stderr, "  arena %zu: %.2f MiB\n", a,
                   static_cast<double>(plan.arenas[a].second) / 1048576.0);
      for (size_t i = 0; i < of.size(); ++i)
        if (plan.arena_of[i] == static_cast<int>(a) && lives[i].size >= (1 << 20))
          std::fprintf(stderr, "      %8.2f MiB at %8.2f [%lld..%lld) %s\n",
                       static_cast<double>(lives[i].size) / 1048576.0,
                       static_cast<double>(plan.offset[i]) / 1048576.0,
                       static_cast<long long>(lives[i].first - 1),
                       static_cast<long long>(lives[i].last - 1),
                       writer(buffers_[static_cast<size_t>(of[i])]).substr(0, 60).c_str());
    }
  }
  void report() const {
    const auto& steps = *p_.steps;
    std::fprintf(stderr, "mtk::predict_memory: %.1f MiB alive at once before step %lld (%s):\n",
                 static_cast<double>(peak_) / 1048576.0, static_cast<long long>(peak_event_ - 1),
                 peak_event_ >= 1 ? steps[static_cast<size_t>(peak_event_ - 1)].what.c_str() : "");
    std::map<std::string, std::pair<int, std::int64_t>> groups;  // by writer: count, bytes
    for (int b : at_peak_) {
      const Buffer& buf = buffers_[static_cast<size_t>(b)];
      auto& g = groups[buf.first == 0 ? writer(buf)
                                      : writer(buf) + " [" + std::to_string(buf.first - 1) + ".." +
                                            std::to_string(buf.last - 1) + ")"];
      ++g.first;
      g.second += buf.key.second;
    }
    std::vector<std::pair<std::int64_t, std::string>> rows;
    for (const auto& [what, g] : groups)
      rows.push_back({g.second, std::to_string(g.first) + " x " + what});
    std::sort(rows.rbegin(), rows.rend());
    for (const auto& [bytes, what] : rows)
      std::fprintf(stderr, "  %9.2f MiB  %s\n", static_cast<double>(bytes) / 1048576.0,
                   what.c_str());
  }

  // The per-size pool (per type and size the most buffers ever alive at once) and, when the pool
  // plans, the planned one.
  MemoryPrediction summarize() const {
    MemoryPrediction m;
    m.live_peak_bytes = peak_;
    for (const auto& [key, counts] : by_size_) {
      m.per_size_pool_bytes = checked_add(m.per_size_pool_bytes, counts.second * key.second,
                                          "mtk::predict_memory", "the bytes of the buffer pool");
      m.per_size_pool_buffers += counts.second;
    }
    if (p_.planned) {
      plan_pool(m);
      m.pool_bytes = m.planned_pool_bytes;
      m.pool_buffers = m.planned_pool_buffers;
    } else {
      m.pool_bytes = m.per_size_pool_bytes;
      m.pool_buffers = m.per_size_pool_buffers;
      for (const auto& [key, counts] : by_size_)
        m.pool_census[key.second] += counts.second;
    }
    return m;
  }

  // The planned pool (buffer_plan.hpp over the temporaries that die in the run; variable storage
  // and what is held at the end kept per size).
  void plan_pool(MemoryPrediction& m) const {
    const char* where = "mtk::predict_memory";
    std::vector<PlannedBuffer> lives;
    std::vector<int> of;  // per planned buffer: its id
    std::int64_t kept = 0;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const Buffer& b = buffers_[i];
      if (b.planned && b.last >= 0 && b.key.second > 0) {
        // Whole 64-byte lines, as BufferPool places them
        const std::int64_t span = (b.key.second + 63) / 64 * 64;
        lives.push_back({static_cast<int>(b.key.first), span, b.first, b.last});
        of.push_back(static_cast<int>(i));
        continue;
      }
      kept = checked_add(kept, b.key.second, where, "the bytes of the buffer pool");
      ++m.pool_census[b.key.second];
    }
    const Placement plan = plan_placement(lives);
    if (reporting_)
      report_plan(plan, of, lives, kept);
    for (const auto& [type, bytes] : plan.arenas)
      ++m.pool_census[bytes];
    // The recorded run holds the live buffers only; the planned runs the arenas and the rest.
    m.planned_pool_bytes =
        std::max(checked_add(kept, plan.total(), where, "the planned pool"), peak_);
    for (const auto& [bytes, n] : m.pool_census)
      m.planned_pool_buffers += n;
  }

  // The step's outputs: a new buffer each, the input's buffer for a step that only renames one or
  // writes over it (Step::in_place), nothing for a slot it updates in place. Buffers a fresh write
  // replaces go to `replaced`.
  void write(const Program::Step& st, std::vector<int>& replaced) {
    const bool renames = st.kind.traits().free;
    for (int w : st.writes) {
      if (persistent_.at(static_cast<size_t>(w)))
        continue;
      if (share_overwritten(st, w))
        continue;
      const bool reads_w = std::find(st.reads.begin(), st.reads.end(), w) != st.reads.end();
      int& b = slot_buffer_.at(static_cast<size_t>(w));
      if (b >= 0 && reads_w)
        continue;  // updated in place (an allreduce, an accumulation)
      if (b >= 0)
        replaced.push_back(b);
      b = -1;
      if (renames && !st.reads.empty()) {
        const int from = slot_buffer_.at(static_cast<size_t>(st.reads.front()));
        if (from >= 0) {
          b = from;
          ++buffers_[static_cast<size_t>(from)].holders;
          continue;
        }
      }
      allocate(w);
    }
  }

  // Output w written over an input's buffer: it holds that buffer.
  bool share_overwritten(const Program::Step& st, int w) {
    for (const auto& [out, in] : st.in_place) {
      const int from = slot_buffer_.at(static_cast<size_t>(in));
      if (out != w || from < 0)
        continue;
      slot_buffer_.at(static_cast<size_t>(w)) = from;
      ++buffers_[static_cast<size_t>(from)].holders;
      return true;
    }
    return false;
  }

  void allocate(int t, bool planned = true) {
    const SlotSize& size = p_.slots.at(static_cast<size_t>(t));
    slot_buffer_[static_cast<size_t>(t)] = allocate({size.dtype, size.bytes()}, planned);
  }

  // A new live buffer of `key`; its id.
  int allocate(const std::pair<DType, std::int64_t>& key, bool planned = true) {
    buffers_.push_back({key, 1, planned, event_});
    auto& [live, most] = by_size_[key];
    most = std::max(most, ++live);
    live_bytes_ = checked_add(live_bytes_, key.second, "mtk::predict_memory",
                              "the bytes of the live buffers");
    return static_cast<int>(buffers_.size()) - 1;
  }

  void release(int t) {
    if (persistent_.at(static_cast<size_t>(t)))
      return;
    int& b = slot_buffer_.at(static_cast<size_t>(t));
    if (b < 0)
      return;
    unhold(b);
    b = -1;
  }

  void unhold(int b) {
    Buffer& buf = buffers_[static_cast<size_t>(b)];
    if (--buf.holders > 0)
      return;
    buf.last = event_ + 1;
    buf.live = false;
    --by_size_[buf.key].first;
    live_bytes_ -= buf.key.second;
  }

  const ProgramLifetimes& p_;
  std::vector<int> slot_buffer_;  // per slot: the buffer holding its value, -1 when none
  std::vector<bool> persistent_;
  std::vector<Buffer> buffers_;
  std::map<Key, std::pair<std::int64_t, std::int64_t>> by_size_;  // live now, most ever live
  std::int64_t live_bytes_ = 0;
  std::int64_t peak_ = 0;
  std::int64_t event_ = 0;  // 0: before the first step; s + 1: step s
  bool reporting_ = runtime_options().text("MTK_MEMORY_REPORT") == "1";
  std::vector<int> at_peak_;
  std::int64_t peak_event_ = 0;
};

}  // namespace

MemoryPrediction predict_memory(const ProgramLifetimes& program) {
  if (!program.steps || !program.deaths || program.deaths->size() != program.steps->size())
    fail("mtk::predict_memory", cat("needs the steps and one list of deaths per step (",
                                    program.steps ? program.steps->size() : 0, " steps, ",
                                    program.deaths ? program.deaths->size() : 0, " lists)"));
  return Replay(program).run();
}

}  // namespace mtk
