// Shared-memory allreduces among the ranks of one node — see node_reducer.hpp.
//
// Each rank owns shared files (shared_block.hpp) that every rank of the node maps: a control
// block of three counters and data regions. Reductions carry a sequence number (the same on every
// rank); each rank moves each reduction through three phases, in sequence order, publishing the
// last sequence number done in each phase:
//   posted:   this rank copied the parts the other ranks sum into its region;
//   summed:   this rank summed its own part (its values and the others' regions, in rank order)
//             into its values and into its region;
//   consumed: this rank copied the others' sums from their regions: the reduction is complete.
// A region is given to a later reduction once the reductions that used it were waited for here
// (the same decision on every rank), and written once every rank consumed them.

#include <mtk/base/error.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/node_reducer.hpp>
#include <mtk/parallel/shared_block.hpp>
#include <mtk/version.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace mtk {
namespace {

std::atomic<bool> g_node_allreduce{true};  // program.node_allreduce (set_node_allreduce)

// Smaller reductions go through MPI: their copies cost less than the phases' checks.
constexpr std::size_t kMinBytes = std::size_t{16} << 10;
constexpr std::size_t kAlign = 4096;
std::atomic<std::uint64_t> g_started{0};

using Counter = detail::SharedCounter;
struct Control {
  Counter posted, summed, consumed;
};

}  // namespace

bool node_allreduce() {
  return g_node_allreduce.load(std::memory_order_relaxed);
}

void set_node_allreduce(bool on) {
  g_node_allreduce.store(on, std::memory_order_relaxed);
}

namespace detail {

struct NodeReducer::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::unique_ptr<SharedNames> names;
  bool broken = false;  // a shared region could not be made: MPI from then on (every rank)
  SharedBlock control;
  struct Window {
    SharedBlock block;
    struct Live {
      std::size_t off, bytes;
      std::int64_t ticket;
    };
    std::vector<Live> live;  // regions of reductions not yet waited for here, by offset
    struct Retired {
      std::size_t off, bytes;
      std::uint64_t seq;
    };
    std::vector<Retired> retired;  // regions waited for here, maybe still read by other ranks
  };
  std::deque<Window> windows;
  struct Op {
    std::int64_t ticket = 0;
    std::uint64_t seq = 0;
    char* data = nullptr;
    std::size_t count = 0, esize = 4;
    Datatype type = Datatype::f32;
    ReduceOp op = ReduceOp::sum;
    Kind kind = Kind::allreduce;
    int window = 0;
    std::size_t off = 0;
    std::uint64_t after = 0;  // its region is written once every rank consumed this sequence
    int phase = 0;            // 0 to post, 1 to sum, 2 to consume, 3 complete
  };
  std::deque<Op> ops;  // in sequence order; popped when complete and waited for
  std::uint64_t next_seq = 1;

  Control& mine() { return *reinterpret_cast<Control*>(control.at[static_cast<size_t>(rank)]); }
  const Control& of(int q) const {
    return *reinterpret_cast<const Control*>(control.at[static_cast<size_t>(q)]);
  }
  std::uint64_t least(Counter Control::*c) const {
    std::uint64_t m = ~std::uint64_t{0};
    for (int q = 0; q < size; ++q)
      m = std::min(m, (of(q).*c).value.load(std::memory_order_acquire));
    return m;
  }
  // The part of an op's elements rank q sums: [first, last).
  std::pair<std::size_t, std::size_t> part(const Op& o, int q) const {
    const std::size_t n = static_cast<std::size_t>(size);
    const std::size_t chunk =
        o.kind == Kind::allreduce ? ((o.count + n - 1) / n + 15) / 16 * 16 : o.count / n;
    const std::size_t first = std::min(o.count, chunk * static_cast<std::size_t>(q));
    return {first, std::min(o.count, first + chunk)};
  }
  char* region(const Op& o, int q) {
    return windows[static_cast<size_t>(o.window)].block.at[static_cast<size_t>(q)] + o.off;
  }
  bool make_block(SharedBlock& b, std::size_t bytes) { return names->make(b, bytes); }
  bool place(Op& o);
  void post(Op& o);
  void sum(Op& o);
  void consume(Op& o);
  bool advance();
  Op* find(std::int64_t ticket);
};

namespace {

template <class T>
T combine(T a, T b, ReduceOp op) {
  return op == ReduceOp::sum ? a + b : op == ReduceOp::max ? std::max(a, b) : std::min(a, b);
}

// dst_values[i] = dst_region[i] (unless null) = src[0][i] (op) src[1][i] (op) ... in rank order,
// in blocks that stay in L1.
template <class T>
void reduce_part(const std::vector<const T*>& src, T* dst_values, T* dst_region, std::size_t n,
                 ReduceOp op) {
  constexpr std::size_t kBlock = 1024;
  T acc[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t m = std::min(kBlock, n - b);
    std::memcpy(acc, src[0] + b, m * sizeof(T));
    for (size_t q = 1; q < src.size(); ++q) {
      const T* s = src[q] + b;
      if (op == ReduceOp::sum)
        for (std::size_t i = 0; i < m; ++i)
          acc[i] += s[i];
      else
        for (std::size_t i = 0; i < m; ++i)
          acc[i] = combine(acc[i], s[i], op);
    }
    std::memcpy(dst_values + b, acc, m * sizeof(T));
    if (dst_region != nullptr)
      std::memcpy(dst_region + b, acc, m * sizeof(T));
  }
}

}  // namespace

// A region for `o` in the first window with room (first fit), or in a new window. The choice
// depends only on the reductions started and waited for here, the same on every rank.
bool NodeReducer::Impl::place(Op& o) {
  const std::size_t need = (o.count * o.esize + kAlign - 1) / kAlign * kAlign;
  for (size_t w = 0; w <= windows.size(); ++w) {
    if (w == windows.size()) {
      std::size_t total = 0;
      for (const Window& x : windows)
        total += x.block.bytes;
      Window fresh;
      if (!make_block(fresh.block, std::max(need, total))) {
        broken = true;
        return false;
      }
      windows.push_back(std::move(fresh));
    }
    Window& win = windows[w];
    std::size_t at = 0;
    auto it = win.live.begin();
    for (; it != win.live.end() && it->off < at + need; ++it)
      at = std::max(at, it->off + it->bytes);
    if (at + need > win.block.bytes)
      continue;
    win.live.insert(it, {at, need, o.ticket});
    o.window = static_cast<int>(w);
    o.off = at;
    for (const Window::Retired& r : win.retired)
      if (r.off < at + need && at < r.off + r.bytes)
        o.after = std::max(o.after, r.seq);
    return true;
  }
  return false;
}

// Phase 0: the parts the other ranks sum (an allgather: this rank's block), into its region.
void NodeReducer::Impl::post(Op& o) {
  char* mine = region(o, rank);
  for (int q = 0; q < size; ++q)
    if ((q != rank) == (o.kind != Kind::allgather)) {
      const auto [first, last] = part(o, q);
      std::memcpy(mine + first * o.esize, o.data + first * o.esize, (last - first) * o.esize);
    }
}

// Phase 1: this rank's part over every rank (its own values from `data`), into `data` and, where
// the others copy it from there (allreduce), its region.
void NodeReducer::Impl::sum(Op& o) {
  if (o.kind == Kind::allgather)
    return;
  // Plain names, not a structured binding: C++17 lambdas cannot capture those.
  const std::pair<std::size_t, std::size_t> mine = part(o, rank);
  const std::size_t first = mine.first, last = mine.second;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> src(static_cast<size_t>(size));
    for (int q = 0; q < size; ++q)
      src[static_cast<size_t>(q)] =
          reinterpret_cast<const T*>(q == rank ? o.data : region(o, q)) + first;
    reduce_part<T>(
        src, reinterpret_cast<T*>(o.data) + first,
        o.kind == Kind::allreduce ? reinterpret_cast<T*>(region(o, rank)) + first : nullptr,
        last - first, o.op);
  };
  if (o.type == Datatype::f32)
    run(float{});
  else
    run(double{});
}

// Phase 2: the other ranks' sums (blocks) from their regions.
void NodeReducer::Impl::consume(Op& o) {
  if (o.kind == Kind::reduce_scatter)
    return;
  for (int q = 0; q < size; ++q)
    if (q != rank) {
      const auto [first, last] = part(o, q);
      std::memcpy(o.data + first * o.esize, region(o, q) + first * o.esize,
                  (last - first) * o.esize);
    }
}

// Every op as far as it can go, phase by phase in sequence order. Whether anything moved.
bool NodeReducer::Impl::advance() {
  bool moved = false;
  Control& me = mine();
  // The ops in phase `from` whose gate every rank passed (each gate read after the phase before
  // moved): `work`, then `done` published and the next phase.
  const auto phase = [&](int from, std::uint64_t gate, void (Impl::*work)(Op&),
                         Counter Control::*done) {
    for (Op& o : ops) {
      if (o.phase != from)
        continue;
      if ((from == 0 ? o.after : o.seq) > gate)
        break;
      (this->*work)(o);
      (me.*done).value.store(o.seq, std::memory_order_release);
      o.phase = from + 1;
      moved = true;
    }
  };
  phase(0, least(&Control::consumed), &Impl::post, &Control::posted);
  phase(1, least(&Control::posted), &Impl::sum, &Control::summed);
  phase(2, least(&Control::summed), &Impl::consume, &Control::consumed);
  return moved;
}

NodeReducer::Impl::Op* NodeReducer::Impl::find(std::int64_t ticket) {
  for (Op& o : ops)
    if (o.ticket == ticket)
      return &o;
  return nullptr;
}

NodeReducer::NodeReducer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NodeReducer::~NodeReducer() {
  impl_->control.unmap();
  for (Impl::Window& w : impl_->windows)
    w.block.unmap();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Comm_free(&impl_->comm);
}

std::shared_ptr<NodeReducer> NodeReducer::create(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  // Every rank alike: one node and asked for everywhere.
  if (size < 2 || !all_ranks(comm, node_allreduce()))
    return nullptr;
  MPI_Comm node = node_comm_of(comm);
  if (node == MPI_COMM_NULL)
    return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->comm = node;
  MPI_Comm_rank(node, &impl->rank);
  impl->size = size;
  impl->names = std::make_unique<SharedNames>(node);
  if (!impl->make_block(impl->control, sizeof(Control))) {
    MPI_Comm_free(&impl->comm);
    return nullptr;
  }
  new (impl->control.at[static_cast<size_t>(impl->rank)]) Control();
  MPI_Barrier(node);  // every control block zeroed before any rank reads one
  return std::shared_ptr<NodeReducer>(new NodeReducer(std::move(impl)));
}

std::uint64_t NodeReducer::started_total() {
  return g_started.load(std::memory_order_relaxed);
}

std::size_t NodeReducer::min_bytes() {
  return kMinBytes;
}

bool NodeReducer::takes(Datatype type, std::size_t bytes) const {
  return !impl_->broken && node_allreduce() && bytes >= kMinBytes &&
         (type == Datatype::f32 || type == Datatype::f64);
}

std::int64_t NodeReducer::start(Kind kind, void* data, std::size_t count, Datatype type,
                                ReduceOp op) {
  Impl& m = *impl_;
  if (kind != Kind::allreduce && count % static_cast<std::size_t>(m.size) != 0)
    fail("mtk::NodeReducer::start", cat(count, " elements are not ", m.size,
                                        " blocks of one size (reduce-scatter, allgather)"));
  Impl::Op o;
  o.kind = kind;
  o.ticket = static_cast<std::int64_t>(m.next_seq);
  o.seq = m.next_seq;
  o.data = static_cast<char*>(data);
  o.count = count;
  o.esize = type == Datatype::f32 ? sizeof(float) : sizeof(double);
  o.type = type;
  o.op = op;
  if (m.broken || !m.place(o))
    return -1;
  ++m.next_seq;
  g_started.fetch_add(1, std::memory_order_relaxed);
  m.ops.push_back(o);
  m.advance();
  return o.ticket;
}

bool NodeReducer::test(std::int64_t ticket) {
  impl_->advance();
  const Impl::Op* o = impl_->find(ticket);
  return o == nullptr || o->phase == 3;
}

void NodeReducer::wait(std::int64_t ticket) {
  Impl& m = *impl_;
  Impl::Op* o = m.find(ticket);
  if (o == nullptr)
    fail("mtk::NodeReducer::wait", cat("no reduction in flight with ticket ", ticket));
  for (unsigned spins = 0; o->phase != 3; ++spins) {
    if (!m.advance()) {
      pause_between_polls(spins);
      if (spins % 1024 == 1023) {  // let MPI move what other ranks wait for meanwhile
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, m.comm, &flag, MPI_STATUS_IGNORE);
      }
    }
    o = m.find(ticket);
  }
  // Its region may go to a later reduction, written once every rank consumed this one.
  Impl::Window& w = m.windows[static_cast<size_t>(o->window)];
  const auto it = std::find_if(w.live.begin(), w.live.end(),
                               [&](const Impl::Window::Live& l) { return l.ticket == ticket; });
  w.retired.push_back({it->off, it->bytes, o->seq});
  w.live.erase(it);
  const std::uint64_t consumed = m.least(&Control::consumed);
  w.retired.erase(std::remove_if(w.retired.begin(), w.retired.end(),
                                 [&](const Impl::Window::Retired& r) { return r.seq <= consumed; }),
                  w.retired.end());
  o->phase = 4;  // waited for
  while (!m.ops.empty() && m.ops.front().phase == 4)
    m.ops.pop_front();
}

bool NodeReducer::make_shared(SharedBlock& block, std::size_t bytes) {
  return impl_->make_block(block, bytes);
}

MPI_Comm NodeReducer::comm() const {
  return impl_->comm;
}

std::shared_ptr<NodeReducer> NodeReducerSlot::get(MPI_Comm comm) {
  if (!checked) {  // every rank comes here at the same call
    reducer = NodeReducer::create(comm);
    checked = true;
  }
  return reducer;
}

std::int64_t NodeReducerSlot::start(MPI_Comm comm, NodeReducer::Kind kind, void* data,
                                    std::size_t count, Datatype type, ReduceOp op) {
  const std::size_t esize = type == Datatype::f32 ? 4 : 8;
  // A CUDA-aware MPI is handed device memory, which these copies cannot read.
  if ((type != Datatype::f32 && type != Datatype::f64) || count * esize < kMinBytes ||
      !node_allreduce() || MTK_CUDA_AWARE_MPI != 0)
    return -1;
  get(comm);
  return reducer && reducer->takes(type, count * esize)
             ? reducer->start(kind, data, count, type, op)
             : -1;
}

}  // namespace detail
}  // namespace mtk
