#include <mtk/base/error.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/mpi_interop.hpp>
#include <mtk/parallel/node_reducer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>
#include <tuple>
#include <utility>

namespace mtk {

struct Communicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;
  int rank = 0, size = 1;
  mutable detail::NodeReducerSlot node;  // shared-memory reductions (node_reducer.hpp)
  Impl(MPI_Comm c, bool own) : comm(c), owned(own) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !finalized && comm != MPI_COMM_NULL)
      MPI_Comm_free(&comm);
  }
};

struct CommunicatorAccess {
  static Communicator make(MPI_Comm comm, bool own) {
    return Communicator(std::make_shared<const Communicator::Impl>(comm, own));
  }
  static MPI_Comm get(const Communicator& c) { return c.impl_->comm; }
  static detail::NodeReducerSlot& node(const Communicator& c) { return c.impl_->node; }
};

std::shared_ptr<detail::NodeReducer> node_reducer_of(const Communicator& comm) {
  return CommunicatorAccess::node(comm).get(CommunicatorAccess::get(comm));
}

namespace {

MPI_Datatype mpi_type(detail::Datatype t) {
  using D = detail::Datatype;
  switch (t) {
    case D::character:
      return MPI_CHAR;
    case D::int8:
      return MPI_INT8_T;
    case D::uint8:
      return MPI_UINT8_T;
    case D::int16:
      return MPI_INT16_T;
    case D::uint16:
      return MPI_UINT16_T;
    case D::int32:
      return MPI_INT32_T;
    case D::uint32:
      return MPI_UINT32_T;
    case D::int64:
      return MPI_INT64_T;
    case D::uint64:
      return MPI_UINT64_T;
    case D::f32:
      return MPI_FLOAT;
    default:
      return MPI_DOUBLE;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

int mpi_count(std::size_t n, const char* where) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    fail(where, cat("message of ", n, " elements exceeds MPI's int count"));
  return static_cast<int>(n);
}

// Completes a non-blocking collective, yielding the core between polls (CollectiveWait::yield).
void wait_yielding(MPI_Request& request) {
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    std::this_thread::yield();
  }
}

// A collective through the MPI library's blocking call `blocking`, or, when ranks yield the core
// (CollectiveWait::yield), through its non-blocking twin `start` completed by wait_yielding.
template <class Blocking, class Start>
void collective(Blocking blocking, Start start) {
  if (collective_wait() != CollectiveWait::yield)
    return blocking();
  MPI_Request request;
  start(&request);
  wait_yielding(request);
}

int type_bytes(MPI_Datatype t) {
  int bytes = 0;
  MPI_Type_size(t, &bytes);
  return bytes;
}

// Reductions go in pieces of at most this many bytes: MPICH 4.0 over UCX shared memory reduced a
// 32 MiB or larger message 4-7x slower than the same bytes in 16 MiB calls (2 ranks, this VM:
// 68 MB in 0.32-0.54 s whole, 0.05 s in 8 MiB pieces). Each element is still summed by one call.
constexpr std::size_t kReducePieceBytes = std::size_t{8} << 20;

// Calls fn(piece address, elements) for consecutive pieces of `count` elements of type t.
template <class Fn>
void for_each_piece(void* data, std::size_t count, MPI_Datatype t, Fn fn) {
  const std::size_t bytes = static_cast<std::size_t>(type_bytes(t));
  const std::size_t piece = std::max<std::size_t>(1, kReducePieceBytes / bytes);
  std::size_t off = 0;
  do {  // one call even for no elements: every rank still takes part
    fn(static_cast<char*>(data) + off * bytes, static_cast<int>(std::min(piece, count - off)));
    off += piece;
  } while (off < count);
}

}  // namespace

Communicator duplicate(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(comm, &dup);
  return adopt(dup);
}

Communicator adopt(MPI_Comm comm) {
  return CommunicatorAccess::make(comm, true);
}

Communicator borrow(MPI_Comm comm) {
  return CommunicatorAccess::make(comm, false);
}

MPI_Comm mpi_comm(const Communicator& comm) {
  return CommunicatorAccess::get(comm);
}

MpiInfo::MpiInfo(const std::vector<std::pair<std::string, std::string>>& hints) {
  MPI_Info_create(&info_);
  for (const auto& [key, value] : hints)
    MPI_Info_set(info_, key.c_str(), value.c_str());
}

MpiInfo::~MpiInfo() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Info_free(&info_);
}

Communicator Communicator::world() {
  return duplicate(MPI_COMM_WORLD);
}

int Communicator::world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int Communicator::rank() const {
  return impl_->rank;
}

int Communicator::size() const {
  return impl_->size;
}

void Communicator::barrier() const {
  const MPI_Comm c = impl_->comm;
  collective([&] { MPI_Barrier(c); }, [&](MPI_Request* r) { MPI_Ibarrier(c, r); });
}

void Communicator::abort(int code) const {
  MPI_Abort(impl_->comm, code);
  std::abort();  // MPI_Abort does not return; the compiler does not know
}

void Communicator::idle_barrier() const {
  MPI_Request request;
  MPI_Ibarrier(impl_->comm, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool Communicator::operator==(const Communicator& other) const {
  return impl_->comm == other.impl_->comm;
}

void Communicator::broadcast_raw(void* data, std::size_t count, detail::Datatype type,
                                 int root) const {
  if (root < 0 || root >= size())
    fail("mtk::Communicator::broadcast", cat("root ", root, " outside ", size(), " ranks"));
  // Large messages in pieces: MPI counts are int.
  const MPI_Datatype t = mpi_type(type);
  const std::size_t piece = std::size_t{1} << 30, bytes = static_cast<std::size_t>(type_bytes(t));
  for (std::size_t off = 0; off < count; off += piece) {
    void* at = static_cast<char*>(data) + off * bytes;
    const int n = static_cast<int>(std::min(piece, count - off));
    collective([&] { MPI_Bcast(at, n, t, root, impl_->comm); },
               [&](MPI_Request* r) { MPI_Ibcast(at, n, t, root, impl_->comm, r); });
  }
}

void Communicator::allreduce_raw(void* data, std::size_t count, detail::Datatype type,
                                 ReduceOp op) const {
  mpi_count(count, "mtk::Communicator::allreduce");
  const MPI_Datatype t = mpi_type(type);
  const MPI_Op o = mpi_op(op);
  for_each_piece(data, count, t, [&](void* at, int n) {
    collective([&] { MPI_Allreduce(MPI_IN_PLACE, at, n, t, o, impl_->comm); },
               [&](MPI_Request* r) { MPI_Iallreduce(MPI_IN_PLACE, at, n, t, o, impl_->comm, r); });
  });
}

namespace {

// Receive buffers of two-rank reductions, kept for the next reduction of the same size (a training
// step asks for the same sizes every run).
std::vector<std::vector<char>>& spare_buffers() {
  static std::vector<std::vector<char>> spare;
  return spare;
}

std::vector<char> take_buffer(std::size_t bytes) {
  auto& spare = spare_buffers();
  for (auto it = spare.begin(); it != spare.end(); ++it)
    if (it->size() == bytes) {
      std::vector<char> v = std::move(*it);
      spare.erase(it);
      return v;
    }
  return std::vector<char>(bytes);
}

template <class T>
void combine(T* data, const T* other, std::size_t n, ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i)
    data[i] = op == ReduceOp::sum   ? data[i] + other[i]
              : op == ReduceOp::max ? std::max(data[i], other[i])
                                    : std::min(data[i], other[i]);
}

// Tag of the messages of two-rank reductions (MTK's point-to-point calls use tag 0).
constexpr int kReduceTag = 0x4d54;

}  // namespace

struct Communicator::Request::State {
  std::vector<MPI_Request> requests;  // per piece (for_each_piece): an allreduce, or a send/receive
  // Two ranks: the partner's values, combined into `data` when every transfer completed. Each
  // element is then a + b on one rank and b + a on the other: the same bits.
  std::vector<char> partner;
  void* data = nullptr;
  std::size_t count = 0;
  detail::Datatype type = detail::Datatype::f32;
  ReduceOp op = ReduceOp::sum;
  std::shared_ptr<detail::NodeReducer> node;  // or a shared-memory reduction (ticket >= 0)
  std::int64_t ticket = -1;
  void finish() {
    if (partner.empty())
      return;
    if (type == detail::Datatype::f32)
      combine(static_cast<float*>(data), reinterpret_cast<const float*>(partner.data()), count, op);
    else
      combine(static_cast<double*>(data), reinterpret_cast<const double*>(partner.data()), count,
              op);
    spare_buffers().push_back(std::move(partner));
    partner.clear();
  }
};

Communicator::Request::Request() = default;
Communicator::Request::Request(Request&&) noexcept = default;
Communicator::Request& Communicator::Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (active())
      wait();
    state_ = std::move(other.state_);
  }
  return *this;
}

Communicator::Request::~Request() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (active() && !finalized)
    wait();
}

bool Communicator::Request::active() const {
  if (!state_)
    return false;
  for (MPI_Request r : state_->requests)
    if (r != MPI_REQUEST_NULL)
      return true;
  return !state_->partner.empty() || state_->ticket >= 0;
}

bool Communicator::Request::test() {
  if (!active())
    return true;
  if (state_->ticket >= 0)
    return state_->node->test(state_->ticket);
  int done = 0;
  auto& q = state_->requests;
  MPI_Testall(static_cast<int>(q.size()), q.data(), &done, MPI_STATUSES_IGNORE);
  if (done)
    state_->finish();
  return done != 0;
}

void Communicator::Request::wait() {
  if (!active())
    return;
  if (state_->ticket >= 0)
    return state_->node->wait(std::exchange(state_->ticket, -1));
  auto& q = state_->requests;
  if (collective_wait() != CollectiveWait::yield)
    MPI_Waitall(static_cast<int>(q.size()), q.data(), MPI_STATUSES_IGNORE);
  else
    for (MPI_Request& r : q)
      if (r != MPI_REQUEST_NULL)
        wait_yielding(r);
  state_->finish();
}

Communicator::Request Communicator::start_allreduce_raw(void* data, std::size_t count,
                                                        detail::Datatype type, ReduceOp op) const {
  mpi_count(count, "mtk::Communicator::start_allreduce_in_place");
  const MPI_Datatype t = mpi_type(type);
  Request r;
  r.state_ = std::make_unique<Request::State>();
  auto& st = *r.state_;
  using Kind = detail::NodeReducer::Kind;
  if ((st.ticket = impl_->node.start(impl_->comm, Kind::allreduce, data, count, type, op)) >= 0) {
    st.node = impl_->node.reducer;
    return r;
  }
  const std::size_t bytes = static_cast<std::size_t>(type_bytes(t));
  // Two ranks exchange their values and combine them: MPICH's non-blocking allreduce cost 2-3x
  // the CPU time of the blocking one in its progress calls (2 ranks, this VM); a send and a receive
  // per piece cost one copy.
  if (size() == 2 && count > 0 &&
      (type == detail::Datatype::f32 || type == detail::Datatype::f64)) {
    st.partner = take_buffer(count * bytes);
    std::tie(st.data, st.count, st.type, st.op) = std::make_tuple(data, count, type, op);
    const int other = 1 - rank();
    for_each_piece(data, count, t, [&](void* at, int n) {
      const std::size_t off =
          static_cast<std::size_t>(static_cast<char*>(at) - static_cast<char*>(data));
      st.requests.emplace_back(MPI_REQUEST_NULL);
      MPI_Irecv(st.partner.data() + off, n, t, other, kReduceTag, impl_->comm, &st.requests.back());
      st.requests.emplace_back(MPI_REQUEST_NULL);
      MPI_Isend(at, n, t, other, kReduceTag, impl_->comm, &st.requests.back());
    });
    return r;
  }
  for_each_piece(data, count, t, [&](void* at, int n) {
    st.requests.emplace_back(MPI_REQUEST_NULL);
    MPI_Iallreduce(MPI_IN_PLACE, at, n, t, mpi_op(op), impl_->comm, &st.requests.back());
  });
  return r;
}

Communicator::Request Communicator::start_reduce_scatter_raw(void* data, std::size_t count,
                                                             detail::Datatype type, ReduceOp op,
                                                             std::size_t* at) const {
  const int n = mpi_count(count, "mtk::Communicator::start_reduce_scatter_in_place");
  const MPI_Datatype t = mpi_type(type);
  Request r;
  r.state_ = std::make_unique<Request::State>();
  auto& st = *r.state_;
  const std::size_t bytes = static_cast<std::size_t>(type_bytes(t));
  *at = static_cast<std::size_t>(rank()) * count;  // MPI_Ireduce_scatter_block's: 0 (below)
  const auto all = count * static_cast<std::size_t>(size());
  using Kind = detail::NodeReducer::Kind;
  if ((st.ticket = impl_->node.start(impl_->comm, Kind::reduce_scatter, data, all, type, op)) >=
      0) {
    st.node = impl_->node.reducer;
    return r;
  }
  if (size() == 2 && count > 0 &&
      (type == detail::Datatype::f32 || type == detail::Datatype::f64)) {
    const int me = rank(), other = 1 - me;  // as start_allreduce_raw: one copy, cheap progress
    char* mine = static_cast<char*>(data) + *at * bytes;
    st.partner = take_buffer(count * bytes);
    std::tie(st.data, st.count, st.type, st.op) = std::make_tuple(mine, count, type, op);
    for_each_piece(mine, count, t, [&](void* p, int k) {
      const std::size_t off = static_cast<std::size_t>(static_cast<char*>(p) - mine);
      MPI_Irecv(st.partner.data() + off, k, t, other, kReduceTag, impl_->comm,
                &st.requests.emplace_back(MPI_REQUEST_NULL));
      MPI_Isend(mine + (other - me) * static_cast<std::ptrdiff_t>(count * bytes) + off, k, t, other,
                kReduceTag, impl_->comm, &st.requests.emplace_back(MPI_REQUEST_NULL));
    });
    return r;
  }
  *at = 0;  // MPI_IN_PLACE: the result at the start of the buffer
  MPI_Ireduce_scatter_block(MPI_IN_PLACE, data, n, t, mpi_op(op), impl_->comm,
                            &st.requests.emplace_back(MPI_REQUEST_NULL));
  return r;
}

Communicator::Request Communicator::start_allgather_raw(void* data, std::size_t count,
                                                        detail::Datatype type) const {
  const int n = mpi_count(count, "mtk::Communicator::start_allgather_in_place");
  const MPI_Datatype t = mpi_type(type);
  Request r;
  r.state_ = std::make_unique<Request::State>();
  auto& q = r.state_->requests;
  const auto all = count * static_cast<std::size_t>(size());
  using Kind = detail::NodeReducer::Kind;
  auto& st = *r.state_;
  if ((st.ticket = impl_->node.start(impl_->comm, Kind::allgather, data, all, type, {})) >= 0) {
    st.node = impl_->node.reducer;
    return r;
  }
  if (size() == 2 && count > 0) {  // as the two-rank reductions: a send and a receive per piece
    const std::size_t bytes = static_cast<std::size_t>(type_bytes(t));
    const int me = rank(), other = 1 - me;
    char* base = static_cast<char*>(data);
    char *mine = base + me * count * bytes, *theirs = base + other * count * bytes;
    for_each_piece(mine, count, t, [&](void* p, int k) {
      const std::ptrdiff_t off = static_cast<char*>(p) - mine;
      MPI_Irecv(theirs + off, k, t, other, kReduceTag, impl_->comm,
                &q.emplace_back(MPI_REQUEST_NULL));
      MPI_Isend(p, k, t, other, kReduceTag, impl_->comm, &q.emplace_back(MPI_REQUEST_NULL));
    });
    return r;
  }
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, n, t, impl_->comm,
                 &q.emplace_back(MPI_REQUEST_NULL));
  return r;
}

void Communicator::allgather_raw(const void* send, void* recv, std::size_t count,
                                 detail::Datatype type) const {
  const int n = mpi_count(count, "mtk::Communicator::allgather");
  const MPI_Datatype t = mpi_type(type);
  collective([&] { MPI_Allgather(send, n, t, recv, n, t, impl_->comm); },
             [&](MPI_Request* r) { MPI_Iallgather(send, n, t, recv, n, t, impl_->comm, r); });
}

void Communicator::alltoall_raw(const void* send, void* recv, std::size_t count,
                                detail::Datatype type) const {
  const int n = mpi_count(count, "mtk::Communicator::alltoall");
  const MPI_Datatype t = mpi_type(type);
  collective([&] { MPI_Alltoall(send, n, t, recv, n, t, impl_->comm); },
             [&](MPI_Request* r) { MPI_Ialltoall(send, n, t, recv, n, t, impl_->comm, r); });
}

void Communicator::reduce_scatter_raw(const void* send, void* recv, std::size_t count,
                                      detail::Datatype type, ReduceOp op) const {
  const int n = mpi_count(count, "mtk::Communicator::reduce_scatter");
  const MPI_Datatype t = mpi_type(type);
  const MPI_Op o = mpi_op(op);
  collective(
      [&] { MPI_Reduce_scatter_block(send, recv, n, t, o, impl_->comm); },
      [&](MPI_Request* r) { MPI_Ireduce_scatter_block(send, recv, n, t, o, impl_->comm, r); });
}

void Communicator::sendrecv_raw(const void* send, int dest, void* recv, int source,
                                std::size_t count, detail::Datatype type) const {
  const int n = mpi_count(count, "mtk::Communicator::sendrecv");
  if (collective_wait() == CollectiveWait::yield) {  // two requests: not collective()
    MPI_Request requests[2];
    MPI_Irecv(recv, n, mpi_type(type), source < 0 ? MPI_PROC_NULL : source, 0, impl_->comm,
              &requests[0]);
    MPI_Isend(send, n, mpi_type(type), dest < 0 ? MPI_PROC_NULL : dest, 0, impl_->comm,
              &requests[1]);
    wait_yielding(requests[0]);
    return wait_yielding(requests[1]);
  }
  MPI_Sendrecv(send, n, mpi_type(type), dest < 0 ? MPI_PROC_NULL : dest, 0, recv, n, mpi_type(type),
               source < 0 ? MPI_PROC_NULL : source, 0, impl_->comm, MPI_STATUS_IGNORE);
}

Communicator::Request Communicator::start_sendrecv_raw(const void* send, int dest, void* recv,
                                                       int source, std::size_t count,
                                                       detail::Datatype type, int tag) const {
  const int n = mpi_count(count, "mtk::Communicator::start_sendrecv");
  Request r;
  r.state_ = std::make_unique<Request::State>();
  auto& q = r.state_->requests;
  q.assign(2, MPI_REQUEST_NULL);
  MPI_Irecv(recv, n, mpi_type(type), source < 0 ? MPI_PROC_NULL : source, tag, impl_->comm, &q[0]);
  // MPI_Isend takes a non-const buffer in MPI-2 headers.
  MPI_Isend(const_cast<void*>(send), n, mpi_type(type), dest < 0 ? MPI_PROC_NULL : dest, tag,
            impl_->comm, &q[1]);
  return r;
}

namespace {

// Splits `all` at the lengths `lens` (one per rank).
std::vector<std::string> cut(const std::string& all, const std::vector<int>& lens) {
  std::vector<std::string> out;
  std::size_t off = 0;
  for (int len : lens) {
    out.push_back(all.substr(off, static_cast<std::size_t>(len)));
    off += static_cast<std::size_t>(len);
  }
  return out;
}

std::vector<int> displacements(const std::vector<int>& lens, const char* where) {
  std::vector<int> displs;
  std::size_t total = 0;
  for (int len : lens) {
    displs.push_back(static_cast<int>(total));
    total += static_cast<std::size_t>(len);
  }
  mpi_count(total, where);
  return displs;
}

}  // namespace

std::vector<std::string> Communicator::allgather_strings(const std::string& value) const {
  const char* where = "mtk::Communicator::allgather";
  const int len = mpi_count(value.size(), where);
  const std::vector<int> lens = allgather(len), displs = displacements(lens, where);
  std::string all(static_cast<std::size_t>(displs.back() + lens.back()), '\0');
  const MPI_Comm c = impl_->comm;
  collective(
      [&] {
        MPI_Allgatherv(value.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                       MPI_CHAR, c);
      },
      [&](MPI_Request* r) {
        MPI_Iallgatherv(value.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                        MPI_CHAR, c, r);
      });
  return cut(all, lens);
}

std::vector<std::string> Communicator::gather(const std::string& value, int root) const {
  const char* where = "mtk::Communicator::gather";
  if (root < 0 || root >= size())
    fail(where, cat("root ", root, " outside ", size(), " ranks"));
  const int len = mpi_count(value.size(), where);
  std::vector<int> lens(static_cast<std::size_t>(size()));
  const MPI_Comm c = impl_->comm;
  collective(
      [&] { MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, c); },
      [&](MPI_Request* r) { MPI_Igather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, c, r); });
  std::vector<int> displs(lens.size());
  std::string all;
  if (rank() == root) {
    displs = displacements(lens, where);
    all.resize(static_cast<std::size_t>(displs.back() + lens.back()));
  }
  collective(
      [&] {
        MPI_Gatherv(value.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                    root, c);
      },
      [&](MPI_Request* r) {
        MPI_Igatherv(value.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                     root, c, r);
      });
  return rank() == root ? cut(all, lens) : std::vector<std::string>();
}

}  // namespace mtk
