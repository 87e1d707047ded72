#pragma once
// The CPUs the ranks of one node share: for choices that depend on whether a rank has a core of its
// own (collective waits) or one to spare (start-up planning on a second thread).

#include <mtk/parallel/communicator.hpp>

#include <cstdint>

namespace mtk {

/// The CPUs the ranks of `node` (ranks of one node, Communicator::split_node) may run on: the
/// union of their affinity masks (elsewhere than Linux, the hardware's thread count). Collective
/// over `node`.
std::int64_t node_cpus(const Communicator& node);

}  // namespace mtk
