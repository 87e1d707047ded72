#pragma once
// Neighbour exchanges among ranks that share one node's memory, through shared memory instead of
// MPI's messages (halo.hpp's HaloExchange takes it where it can; docs/spatial.md). A strip above
// MPI's eager limit moves only while both ranks are inside MPI, so an exchange started before a
// block's interior is computed still waits at its finish for the transfer; here the sender copies
// its strips into its shared slot at the start and the receiver copies them out at the finish,
// whatever either rank does in between.
//
// One channel per exchange site (a lowered halo op): each rank's shared file holds two slots of
// [to_left | to_right] used in turn and two counters, the last exchange it posted and the last one
// it read from both neighbours. A rank posts exchange k into slot k % 2 once its neighbours read
// exchange k - 2 (program order already ensures that: a rank starts exchange k after it finished
// k - 1, which needed the neighbours' posts of k - 1, which they made after finishing k - 2).

#include <mtk/parallel/node_reducer.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mtk::detail {

class NodeHaloChannel {
 public:
  /// Collective over the ranks of `node` (the exchange axis's node_reducer_of): a channel for
  /// exchanges sending `to_left_bytes` to rank `left` and `to_right_bytes` to rank `right` of it
  /// (-1: none) each time, in shared files of `node`'s; null on every rank where they could not
  /// be made (use MPI).
  static std::shared_ptr<NodeHaloChannel> create(const std::shared_ptr<NodeReducer>& node, int left,
                                                 int right, std::size_t to_left_bytes,
                                                 std::size_t to_right_bytes);
  ~NodeHaloChannel();
  NodeHaloChannel(const NodeHaloChannel&) = delete;
  NodeHaloChannel& operator=(const NodeHaloChannel&) = delete;

  /// This rank's strips in shared memory: where the next exchange's are written (slots()), or
  /// where the neighbours' strips of the last one are read (received(); null: no neighbour).
  struct Strips {
    void* to_left = nullptr;
    void* to_right = nullptr;
  };
  struct Received {
    const void* from_left = nullptr;
    const void* from_right = nullptr;
  };

  /// Starts the next exchange: copies the strips (of the sizes given at creation) into this
  /// rank's slot and publishes them (slots(), the copies, publish()).
  void post(const void* to_left, const void* to_right);
  /// The slot of the next exchange, for a caller that packs its strips there in place; publish()
  /// then starts the exchange. Until then the slot is this rank's alone.
  Strips slots();
  void publish();
  /// Whether both neighbours posted the exchange this rank posted last.
  bool arrived() const;
  /// Waits for arrival (spinning or yielding as collective_wait() says), then copies the left
  /// neighbour's to_right into `from_left` and the right one's to_left into `from_right` (a
  /// missing neighbour's buffer is left as it is): the exchange is complete (received(), the
  /// copies, release()).
  void receive(void* from_left, void* from_right);
  /// Waits for arrival, then where the neighbours' strips are, to be read in place until
  /// release(), which hands their slots back to them.
  Received received();
  void release();
  /// How many exchanges this process has posted through shared memory (for tests and reports).
  static std::uint64_t posted_total();

  struct Impl;

 private:
  explicit NodeHaloChannel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtk::detail
