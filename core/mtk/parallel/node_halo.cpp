// Neighbour exchanges through shared memory — see node_halo.hpp.
#include <mtk/base/error.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/node_halo.hpp>
#include <mtk/parallel/shared_block.hpp>

#include <cstring>

namespace mtk::detail {
namespace {

struct Control {
  SharedCounter posted, read;  // the last exchange posted; the last one read from both neighbours
};
constexpr std::size_t kSlots = 64 * ((sizeof(Control) + 63) / 64);
std::atomic<std::uint64_t> g_posted{0};

std::size_t rounded(std::size_t bytes) {
  return (bytes + 63) / 64 * 64;
}

}  // namespace

struct NodeHaloChannel::Impl {
  std::shared_ptr<NodeReducer> node;  // its communicator and shared files' names
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, left = -1, right = -1;
  std::size_t to_left = 0, to_right = 0;  // bytes
  SharedBlock block;
  std::uint64_t next = 1;  // the exchange post() starts

  Control& of(int q) const { return *reinterpret_cast<Control*>(block.at[static_cast<size_t>(q)]); }
  // Rank q's slot for exchange k: [to_left | to_right].
  char* slot(int q, std::uint64_t k) const {
    return block.at[static_cast<size_t>(q)] + kSlots +
           (k % 2) * (rounded(to_left) + rounded(to_right));
  }
  bool posted(int q, std::uint64_t k) const {
    return q < 0 || of(q).posted.value.load(std::memory_order_acquire) >= k;
  }
  bool read(int q, std::uint64_t k) const {
    return q < 0 || of(q).read.value.load(std::memory_order_acquire) >= k;
  }
  template <class Ready>
  void wait_until(const Ready& ready) const {
    for (unsigned spins = 0; !ready(); ++spins) {
      pause_between_polls(spins);
      if (spins % 1024 == 1023) {  // let MPI move what other ranks wait for meanwhile
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
      }
    }
  }
};

std::shared_ptr<NodeHaloChannel> NodeHaloChannel::create(const std::shared_ptr<NodeReducer>& node,
                                                         int left, int right,
                                                         std::size_t to_left_bytes,
                                                         std::size_t to_right_bytes) {
  auto impl = std::make_unique<Impl>();
  impl->node = node;
  impl->comm = node->comm();
  MPI_Comm_rank(impl->comm, &impl->rank);
  impl->left = left;
  impl->right = right;
  impl->to_left = to_left_bytes;
  impl->to_right = to_right_bytes;
  if (!node->make_shared(impl->block,
                         kSlots + 2 * (rounded(to_left_bytes) + rounded(to_right_bytes))))
    return nullptr;
  // A fresh shared file is zeros: every counter 0 (make_shared returns once all ranks mapped
  // all files; each rank writes only its own).
  new (impl->block.at[static_cast<size_t>(impl->rank)]) Control();
  return std::shared_ptr<NodeHaloChannel>(new NodeHaloChannel(std::move(impl)));
}

NodeHaloChannel::NodeHaloChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NodeHaloChannel::~NodeHaloChannel() {
  impl_->block.unmap();
}

void NodeHaloChannel::post(const void* to_left, const void* to_right) {
  const Strips slot = slots();
  std::memcpy(slot.to_left, to_left, impl_->to_left);
  std::memcpy(slot.to_right, to_right, impl_->to_right);
  publish();
}

NodeHaloChannel::Strips NodeHaloChannel::slots() {
  Impl& m = *impl_;
  const std::uint64_t k = m.next;
  // The slot's last reader (exchange k - 2) is done: already so by program order.
  if (k > 2)
    m.wait_until([&] { return m.read(m.left, k - 2) && m.read(m.right, k - 2); });
  char* slot = m.slot(m.rank, k);
  return {slot, slot + rounded(m.to_left)};
}

void NodeHaloChannel::publish() {
  Impl& m = *impl_;
  m.of(m.rank).posted.value.store(m.next++, std::memory_order_release);
  g_posted.fetch_add(1, std::memory_order_relaxed);
}

bool NodeHaloChannel::arrived() const {
  const Impl& m = *impl_;
  return m.posted(m.left, m.next - 1) && m.posted(m.right, m.next - 1);
}

void NodeHaloChannel::receive(void* from_left, void* from_right) {
  const Received r = received();
  if (r.from_left != nullptr)
    std::memcpy(from_left, r.from_left, impl_->to_right);
  if (r.from_right != nullptr)
    std::memcpy(from_right, r.from_right, impl_->to_left);
  release();
}

NodeHaloChannel::Received NodeHaloChannel::received() {
  Impl& m = *impl_;
  const std::uint64_t k = m.next - 1;
  if (k == 0)
    fail("mtk::NodeHaloChannel::received", "no exchange posted");
  m.wait_until([&] { return m.posted(m.left, k) && m.posted(m.right, k); });
  // The left neighbour's to_right (the right one's to_left) is this rank's from_left
  // (from_right): every rank's strips have the same sizes.
  Received r;
  if (m.left >= 0)
    r.from_left = m.slot(m.left, k) + rounded(m.to_left);
  if (m.right >= 0)
    r.from_right = m.slot(m.right, k);
  return r;
}

void NodeHaloChannel::release() {
  Impl& m = *impl_;
  m.of(m.rank).read.value.store(m.next - 1, std::memory_order_release);
}

std::uint64_t NodeHaloChannel::posted_total() {
  return g_posted.load(std::memory_order_relaxed);
}

}  // namespace mtk::detail
